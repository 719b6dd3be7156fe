//! flexd: the Flex controller. `sched` is the pure scheduler core that flexd and flexsim share.

pub mod sched;
pub mod sim;

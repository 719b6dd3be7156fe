//! flexd: the Flex controller. `sched` is the pure scheduler core that flexd and flexsim share.

#[doc(hidden)]
pub mod bench;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod exec;
pub mod fairshare;
pub(crate) mod mail;
pub mod metrics;
pub mod paths;
pub mod server;
pub mod state;
pub mod store;
pub(crate) mod telemetry;

//! The people-facing side of Flex: the commands (flexsub, flexq, flexcancel, flexrun), job-script
//! parsing, model-memory estimation, and the protocol they speak with flexd ([`proto`]), which
//! needs neither tokio nor rusqlite.

pub mod estimate;
pub mod proto;

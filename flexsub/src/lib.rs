//! The people-facing side of Flex: the commands (flexsub, flexq, flexcancel, flexrun), job-script
//! parsing and model-memory estimation. They speak with flexd through the `flex-proto` crate,
//! which flexd shares; the commands never depend on the daemon, nor the daemon on them.
//!
//! Each command is a thin binary over one module of [`commands`]; [`client`] finds flexd's
//! socket and talks to it, and [`error`] maps every failure to one documented exit code.

pub mod client;
pub mod commands;
pub mod error;
pub mod estimate;
pub mod format;
pub mod options;
pub mod script;
pub mod slurm_names;
pub mod table;
pub mod units;
pub mod usage;
pub mod when;

//! flexd's command line, in the library so that the man page and shell completions are
//! generated from it (`tests/tests/docs.rs`).

use clap::{ArgAction, Parser, Subcommand};
use std::path::PathBuf;

/// The Flex batch controller for MIG GPU hosts: queues jobs, places them on MIG leaves and
/// runs each under a supervisor that outlives flexd.
///
/// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 I/O error, 2 bad configuration, 3 another flexd
/// is running, 4 the host model could not be built, 5 the database cannot be used.
#[derive(Parser, Debug)]
#[command(name = "flexd", version)]
pub struct Cli {
    /// Config file over the compiled-in defaults (etc/flexd.toml documents every key).
    #[arg(long, env = "FLEX_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Unix socket to listen on (overrides `socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Directory of the database and the supervisors' files (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Simulated topology used when NVML finds no GPU (overrides `topology`).
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// Use the topology file even when NVML finds GPUs.
    #[arg(long)]
    pub force_topology: bool,
    /// More log output (-v debug, -vv trace); FLEX_LOG (an env filter) overrides.
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Internal: fork a supervisor for each job flexd sends on stdin (started once by flexd).
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        run_dir: PathBuf,
    },
}

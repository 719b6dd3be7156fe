//! flexd, the Flex controller daemon (foreground). The work is in the library.

use clap::{ArgAction, Parser, Subcommand};
use flexd::config::Overrides;
use flexd::daemon::{self, Options};
use std::path::PathBuf;

/// The Flex batch controller for MIG GPU hosts: queues jobs, places them on MIG leaves and
/// runs each under a supervisor that outlives flexd.
///
/// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 I/O error, 2 bad configuration, 3 another flexd
/// is running, 4 the host model could not be built, 5 the database cannot be used.
#[derive(Parser, Debug)]
#[command(name = "flexd", version)]
struct Cli {
    /// Config file over the compiled-in defaults (etc/flexd.toml documents every key).
    #[arg(long, env = "FLEX_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Unix socket to listen on (overrides `socket`).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Directory of the database and the supervisors' files (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Simulated topology used when NVML finds no GPU (overrides `topology`).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Use the topology file even when NVML finds GPUs.
    #[arg(long)]
    force_topology: bool,
    /// More log output (-v debug, -vv trace); FLEX_LOG (an env filter) overrides.
    #[arg(short, long, action = ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Internal: supervise one job (started by flexd with the job on stdin).
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        job: u64,
        #[arg(long)]
        run_dir: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Some(Command::Supervise { job, run_dir }) = cli.command {
        // Before anything starts a thread: the supervisor forks.
        std::process::exit(flexd::exec::supervisor::main(job, &run_dir));
    }
    let level = match cli.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLEX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{level},rusqlite=warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let opts = Options {
        config: cli.config,
        overrides: Overrides {
            socket: cli.socket,
            state_dir: cli.state_dir,
            topology: cli.topology,
        },
        force_topology: cli.force_topology,
    };
    if let Err(e) = daemon::run(opts) {
        tracing::error!("{e}");
        eprintln!("flexd: {e}");
        std::process::exit(e.exit_code());
    }
}

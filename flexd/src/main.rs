//! flexd, the Flex controller daemon (foreground). The work is in the library.

use clap::Parser;
use flexd::cli::{Cli, Command};
use flexd::config::Overrides;
use flexd::daemon::{self, Options};

fn main() {
    let cli = Cli::parse();
    if let Some(Command::Supervise { run_dir }) = cli.command {
        // Before anything starts a thread: it forks.
        std::process::exit(flexd::exec::supervisor::main(&run_dir));
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

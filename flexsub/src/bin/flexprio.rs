//! flexprio: see [`flexsub::commands::prio`].

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::prio::Args::parse();
    let code = match flexsub::commands::prio::run(&args, &mut std::io::stdout()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexprio", &e),
    };
    std::process::exit(code);
}

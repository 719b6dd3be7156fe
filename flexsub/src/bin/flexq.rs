//! flexq: show the queue (like squeue) or the host's leaf map.

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::queue::Args::parse();
    let code = match flexsub::commands::queue::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexq", &e),
    };
    std::process::exit(code);
}

//! flexeff: a finished job's efficiency and right-size advice (like seff).

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::eff::Args::parse();
    let code = match flexsub::commands::eff::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexeff", &e),
    };
    std::process::exit(code);
}

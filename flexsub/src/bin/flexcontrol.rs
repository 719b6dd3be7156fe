//! flexcontrol: hold, release, requeue, update and show jobs (like scontrol).

use clap::Parser;

fn main() {
    flexsub::error::default_sigpipe();
    let args = flexsub::commands::control::Args::parse();
    let code = match flexsub::commands::control::run(&args, &mut std::io::stdout().lock()) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexcontrol", &e),
    };
    std::process::exit(code);
}

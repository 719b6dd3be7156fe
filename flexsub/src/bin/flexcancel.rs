//! flexcancel: cancel jobs or signal them (like scancel).

use clap::Parser;

fn main() {
    let args = flexsub::commands::cancel::Args::parse();
    let code = match flexsub::commands::cancel::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexcancel", &e),
    };
    std::process::exit(code);
}

//! flexrun: start one rank per leaf of the current job (like srun or torchrun).

use clap::Parser;

fn main() {
    let args = flexsub::commands::run::Args::parse();
    let code = match flexsub::commands::run::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexrun", &e),
    };
    std::process::exit(code);
}

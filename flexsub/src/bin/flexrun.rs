//! flexrun: start one rank per leaf of the current job (like srun or torchrun).

use clap::Parser;

fn main() {
    // `flexrun --srun ...`: the srun a job script calls where no Slurm is installed.
    let words: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = match words.first() {
        Some(w) if w == "--srun" => match flexsub::commands::run::srun_args(&words[1..]) {
            Ok(a) => a,
            Err(e) => std::process::exit(flexsub::error::report("srun", &e)),
        },
        _ => flexsub::commands::run::Args::parse(),
    };
    let code = match flexsub::commands::run::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexrun", &e),
    };
    std::process::exit(code);
}

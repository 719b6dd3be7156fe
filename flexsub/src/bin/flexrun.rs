//! flexrun: start one rank per leaf of the current job (like srun or torchrun).

use clap::Parser;

fn main() {
    // `flexrun --srun ...` and `flexrun --torchrun ...`: the srun and torchrun a job script
    // calls (flexd's shell functions, see srun_in_jobs and torchrun_in_jobs in flexd.toml).
    let words: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = match words.first() {
        Some(w) if w == "--srun" => match flexsub::commands::run::srun_args(&words[1..]) {
            // An srun line without -n starts the job's own task count (sbatch -n), if any.
            Ok(mut a) => {
                if a.ntasks.is_none() {
                    a.ntasks = std::env::var("FLEX_NTASKS")
                        .ok()
                        .and_then(|n| n.parse().ok());
                }
                a
            }
            Err(e) => std::process::exit(flexsub::error::report("srun", &e)),
        },
        Some(w) if w == "--torchrun" => match flexsub::commands::run::torchrun_args(&words[1..]) {
            Ok(a) => a,
            Err(e) => std::process::exit(flexsub::error::report("torchrun", &e)),
        },
        _ => flexsub::commands::run::Args::parse(),
    };
    let code = match flexsub::commands::run::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexrun", &e),
    };
    std::process::exit(code);
}

//! flexrun: start one rank per leaf of the current job. Called `srun`, `torchrun` or
//! `scontrol` (the links in a job's temporary directory, first on its PATH), or with `--srun`
//! or `--torchrun` first (the shell functions flexd gives bash scripts), it is that command as
//! a job on one Flex host needs it.

use clap::Parser;
use std::ffi::OsString;

fn main() {
    let mut words: Vec<OsString> = std::env::args_os().collect();
    let called = std::path::Path::new(words.first().map_or("flexrun".as_ref(), |w| w.as_os_str()))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let personality = match (called.as_str(), words.get(1).and_then(|w| w.to_str())) {
        ("srun" | "torchrun" | "scontrol", _) => called.clone(),
        (_, Some("--srun")) => "srun".to_string(),
        (_, Some("--torchrun")) => "torchrun".to_string(),
        (_, Some("--scontrol")) => "scontrol".to_string(),
        (_, Some("--torch-launch")) => "torch.distributed.launch".to_string(),
        _ => String::new(),
    };
    let rest = if personality.is_empty() || personality == called {
        words.split_off(1.min(words.len()))
    } else {
        words.split_off(2)
    };
    let args = match personality.as_str() {
        "srun" => match flexsub::commands::run::srun_args(&rest) {
            // An srun line without -n, -c or --gpus-per-task starts the job's own tasks, as
            // sbatch's options shaped them (Slurm's default: one task).
            Ok(mut a) => {
                let job = |k: &str| std::env::var(k).ok().and_then(|n| n.parse().ok());
                a.ntasks = a.ntasks.or_else(|| job("FLEX_NTASKS"));
                if let Some(t) = a.tasks.as_mut() {
                    t.cpus_per_task = t.cpus_per_task.or_else(|| job("FLEX_CPUS_PER_TASK"));
                    t.gpus_per_task = t.gpus_per_task.or_else(|| job("FLEX_GPUS_PER_TASK"));
                }
                a
            }
            Err(e) => std::process::exit(flexsub::error::report("srun", &e)),
        },
        "torchrun" => match flexsub::commands::run::torchrun_args(&rest) {
            Ok(a) => a,
            Err(e) => std::process::exit(flexsub::error::report("torchrun", &e)),
        },
        "torch.distributed.launch" => match flexsub::commands::run::launch_args(&rest) {
            Ok(a) => a,
            Err(e) => std::process::exit(flexsub::error::report("torch.distributed.launch", &e)),
        },
        "scontrol" => {
            flexsub::error::default_sigpipe();
            let out = &mut std::io::stdout().lock();
            let code = flexsub::commands::run::scontrol(&rest, out)
                .unwrap_or_else(|e| flexsub::error::report("scontrol", &e));
            std::process::exit(code);
        }
        _ => flexsub::commands::run::Args::parse(),
    };
    let code = match flexsub::commands::run::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexrun", &e),
    };
    std::process::exit(code);
}

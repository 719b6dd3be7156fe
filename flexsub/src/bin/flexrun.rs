//! flexrun: start one rank per leaf of the current job. Called `srun`, `torchrun` or
//! `scontrol` (the links in a job's temporary directory, first on its PATH), or with `--srun`,
//! `--torchrun`, `--torch-launch` or `--scontrol` first (the shell functions flexd gives bash
//! scripts), it is that command as a job on one Flex host needs it.

use clap::Parser;
use flexsub::commands::run;
use std::ffi::OsString;

fn main() {
    let words: Vec<OsString> = std::env::args_os().collect();
    let called = std::path::Path::new(words.first().map_or("flexrun".as_ref(), |w| w.as_os_str()))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let flag = words.get(1).and_then(|w| w.to_str());
    let (name, rest) = match (called.as_str(), flag) {
        ("srun" | "torchrun" | "scontrol", _) => (called.as_str(), &words[1..]),
        (_, Some("--srun")) => ("srun", &words[2..]),
        (_, Some("--torchrun")) => ("torchrun", &words[2..]),
        (_, Some("--torch-launch")) => ("torch.distributed.launch", &words[2..]),
        (_, Some("--scontrol")) => ("scontrol", &words[2..]),
        _ => ("", &words[..0]),
    };
    if let Some(code) = run::personality(name, rest) {
        std::process::exit(code);
    }
    let args = run::Args::parse();
    let code = match run::run(&args) {
        Ok(code) => code,
        Err(e) => flexsub::error::report("flexrun", &e),
    };
    std::process::exit(code);
}

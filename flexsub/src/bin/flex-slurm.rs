//! flex-slurm: Slurm's commands (sbatch, squeue, scancel, sacct, scontrol, sinfo, srun, and
//! the read-only sacctmgr and sshare) for the tools that drive Slurm, called through links of
//! those names; `flex-slurm links DIR` makes the links in DIR (a directory to put first on
//! PATH), and `flex-slurm NAME ARGS` runs one.

use std::ffi::OsString;

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let called = std::path::Path::new(
        args.first()
            .map_or("flex-slurm".as_ref(), |a| a.as_os_str()),
    )
    .file_name()
    .map(|n| n.to_string_lossy().into_owned())
    .unwrap_or_default();
    if flexsub::slurm_names::NAMES.contains(&called.as_str()) {
        std::process::exit(flexsub::slurm_names::main(&called, args));
    }
    match args.get(1).and_then(|a| a.to_str()) {
        // `links DIR [TARGET]`: TARGET is where flex-slurm will be (a staged install's final
        // path), else this binary.
        Some("links") if args.len() == 3 || args.len() == 4 => {
            let me = match args.get(3) {
                Some(t) => std::path::PathBuf::from(t),
                None => std::env::current_exe().unwrap_or_else(|_| "flex-slurm".into()),
            };
            match flexsub::slurm_names::links(std::path::Path::new(&args[2]), &me) {
                Ok(refused) => {
                    for r in &refused {
                        eprintln!("flex-slurm: left alone: {r}");
                    }
                    std::process::exit(i32::from(!refused.is_empty()));
                }
                Err(e) => std::process::exit(flexsub::error::report("flex-slurm", &e)),
            }
        }
        Some(name) if flexsub::slurm_names::NAMES.contains(&name) => {
            let name = name.to_string();
            std::process::exit(flexsub::slurm_names::main(&name, args[1..].to_vec()));
        }
        _ => {
            eprintln!(
                "usage: flex-slurm links DIR [TARGET] | flex-slurm {{{}}} ARGS...\n\
                 (or call it through a link named after one of those commands)",
                flexsub::slurm_names::NAMES.join(",")
            );
            std::process::exit(2);
        }
    }
}

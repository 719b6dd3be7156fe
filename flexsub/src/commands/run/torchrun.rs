//! flexrun's torchrun personality, `flexrun --torchrun ARGS...`: what a job script's `torchrun`
//! line runs where flexd gives scripts its `torchrun` (see `srun_in_jobs` in flexd.toml).
//!
//! torchrun would start its workers with every leaf visible and `LOCAL_RANK` = 0, 1, ...; CUDA
//! shows a process only the first MIG instance it is given, so worker 1 would find no device 1.
//! Here each worker is a rank of its own, on its own leaf, and is told it is alone on its node
//! (`LOCAL_RANK=0`, `LOCAL_WORLD_SIZE=1`, the global `RANK` as usual), as Flex-MIG's one pod
//! per rank is: training code that calls `torch.cuda.set_device(LOCAL_RANK)` runs unchanged.

use super::Args;
use crate::error::Error;
use std::ffi::OsString;

/// torchrun options that take a value and change nothing here: the rendezvous is the job's own
/// (MASTER_ADDR, MASTER_PORT), and restarts, logs and start methods are torchrun's machinery.
const IGNORED_WITH_VALUE: &[&str] = &[
    "rdzv-backend",
    "rdzv-endpoint",
    "rdzv-id",
    "rdzv-conf",
    "rdzv-timeout",
    "master-addr",
    "master-port",
    "max-restarts",
    "monitor-interval",
    "start-method",
    "role",
    "log-dir",
    "redirects",
    "tee",
    "local-addr",
    "local-ranks-filter",
    "run-path",
    "node-rank",
];

/// Where the workers' Python comes from: `python` when the PATH has one, else `python3`.
fn python() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let has = |name: &str| std::env::split_paths(&path).any(|d| d.join(name).is_file());
    OsString::from(if has("python") { "python" } else { "python3" })
}

/// flexrun's arguments from torchrun's (`-` and `_` are the same in option names, as in
/// torchrun).
pub fn torchrun_args(words: &[OsString]) -> Result<Args, Error> {
    parse(words, false)
}

/// flexrun's arguments from `python -m torch.distributed.launch`'s: torchrun's, and unless
/// `--use-env` the script gets `--local-rank=0` before its own arguments, as the launcher
/// passes each worker its local rank (here every worker is alone on its node).
pub fn launch_args(words: &[OsString]) -> Result<Args, Error> {
    parse(words, true)
}

fn parse(words: &[OsString], launch: bool) -> Result<Args, Error> {
    let me = if launch {
        "torch.distributed.launch"
    } else {
        "torchrun"
    };
    let mut a = Args {
        label: false,
        ntasks: None,
        grace: 5,
        ranks_as_nodes: true,
        tasks: None,
        command: Vec::new(),
    };
    let (mut module, mut no_python, mut use_env) = (false, false, !launch);
    let mut i = 0;
    while i < words.len() {
        let w = words[i].to_string_lossy().into_owned();
        if !w.starts_with('-') {
            break;
        }
        let body = w.trim_start_matches('-').replace('_', "-");
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body, None),
        };
        let mut value = || -> Result<String, Error> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            i += 1;
            words
                .get(i)
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| Error::Input(format!("{me} {w}: needs a value")))
        };
        match name.as_str() {
            "nproc-per-node" => {
                let v = value()?;
                a.ntasks = match v.as_str() {
                    "gpu" | "auto" => None,
                    n => Some(n.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        Error::Input(format!(
                            "torchrun --nproc-per-node {n:?}: expected a count, gpu or auto"
                        ))
                    })?),
                };
            }
            "nnodes" => {
                let v = value()?;
                if !matches!(v.as_str(), "1" | "1:1") {
                    return Err(Error::Input(format!(
                        "torchrun --nnodes {v}: a Flex job runs on one host (--nnodes 1)"
                    )));
                }
            }
            "m" | "module" => module = true,
            "no-python" => no_python = true,
            "standalone" => {}
            "use-env" if launch => use_env = true,
            n if IGNORED_WITH_VALUE.contains(&n) => {
                value()?;
            }
            _ => {
                return Err(Error::Input(format!(
                    "{me} {w}: not an option Flex's torchrun knows"
                )))
            }
        }
        i += 1;
    }
    a.command = worker_command(&words[i..], module, no_python)?;
    if !use_env {
        // After the script (or module), before its own arguments.
        let at = a.command.len() - (words.len() - i) + 1;
        a.command.insert(at, "--local-rank=0".into());
    }
    Ok(a)
}

/// What each worker runs: the script under Python (`-m`: a module), or with `--no-python` the
/// command itself.
fn worker_command(
    rest: &[OsString],
    module: bool,
    no_python: bool,
) -> Result<Vec<OsString>, Error> {
    if rest.is_empty() {
        return Err(Error::Input("torchrun: no training script given".into()));
    }
    let head: Vec<OsString> = match (module, no_python) {
        (_, true) => Vec::new(),
        (true, false) => vec![python(), "-u".into(), "-m".into()],
        (false, false) => vec![python(), "-u".into()],
    };
    Ok(head.into_iter().chain(rest.iter().cloned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, Error> {
        let w: Vec<OsString> = s.split_whitespace().map(OsString::from).collect();
        torchrun_args(&w)
    }

    fn tail(a: &Args) -> Vec<String> {
        a.command[1..]
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_common_torchrun_lines() {
        let a = parse("--standalone --nproc_per_node=4 train.py --lr 3").unwrap();
        assert_eq!((a.ntasks, a.ranks_as_nodes), (Some(4), true));
        assert_eq!(tail(&a), ["-u", "train.py", "--lr", "3"]);
        let a = parse(
            "--nnodes 1 --nproc-per-node gpu --rdzv_backend c10d --rdzv_endpoint \
                       localhost:0 -m pkg.train",
        )
        .unwrap();
        assert_eq!(a.ntasks, None);
        assert_eq!(tail(&a), ["-u", "-m", "pkg.train"]);
        let a = parse("--nproc_per_node 2 --no-python ./run.sh x").unwrap();
        let cmd: Vec<String> = a
            .command
            .iter()
            .map(|c| c.to_string_lossy().into())
            .collect();
        assert_eq!(cmd, ["./run.sh", "x"]);
    }

    #[test]
    fn the_older_launcher_passes_the_local_rank_unless_told_to_use_the_environment() {
        let w = |s: &str| -> Vec<OsString> { s.split_whitespace().map(OsString::from).collect() };
        let a = launch_args(&w("--nproc_per_node=2 train.py --lr 3")).unwrap();
        assert_eq!(tail(&a), ["-u", "train.py", "--local-rank=0", "--lr", "3"]);
        assert_eq!(a.ntasks, Some(2));
        let a = launch_args(&w("--use_env --nproc_per_node 2 -m pkg.train")).unwrap();
        assert_eq!(tail(&a), ["-u", "-m", "pkg.train"]);
        // torchrun itself knows no --use-env.
        assert!(torchrun_args(&w("--use-env t.py")).is_err());
    }

    #[test]
    fn more_than_one_host_is_refused() {
        let e = parse("--nnodes 2 --nproc_per_node 4 t.py")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--nnodes 2") && e.contains("one host"), "{e}");
        assert!(parse("--nproc_per_node 0 t.py").is_err());
        assert!(parse("--nproc_per_node 2").is_err());
        assert!(parse("--bogus t.py")
            .unwrap_err()
            .to_string()
            .contains("--bogus"));
    }
}

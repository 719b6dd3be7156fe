//! flexrun's Slurm personality, `flexrun --srun ARGS...`: what a job script's `srun` line runs
//! where no Slurm is installed (flexd gives bash scripts an `srun` function that calls it). It
//! reads srun's options: the ones that shape the ranks on one host are honoured (`-n`,
//! `--ntasks-per-node`, `-l`), the ones Slurm uses to pick resources the job already holds are
//! accepted and left alone, and the ones that cannot hold on one host are refused by name.

use super::Args;
use crate::error::Error;
use std::ffi::OsString;

/// srun options that take a value and do nothing here: the job's allocation already decided
/// what they choose (GPUs, cores, memory, partition, time), or they tune Slurm's own launch.
const IGNORED_WITH_VALUE: &[&str] = &[
    "gpus-per-node",
    "gpu-bind",
    "cpus-per-gpu",
    "cpu-bind",
    "cpu_bind",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "mpi",
    "export",
    "distribution",
    "job-name",
    "partition",
    "time",
    "account",
    "qos",
    "hint",
    "accel-bind",
    "threads-per-core",
    "wait",
    "kill-on-bad-exit",
    "signal",
    "chdir",
    // What the job decided already, or what one host has no use for.
    "acctg-freq",
    "begin",
    "bcast",
    "bcast-exclude",
    "cluster-constraint",
    "clusters",
    "comment",
    "compress",
    "constraint",
    "core-spec",
    "cores-per-socket",
    "cpu-freq",
    "ctrl-comm-ifhn",
    "delay-boot",
    "dependency",
    "extra-node-info",
    "gpu-freq",
    "gres-flags",
    "immediate",
    "jobid",
    "licenses",
    "mail-type",
    "mail-user",
    "mcs-label",
    "mem-bind",
    "mincpus",
    "network",
    "nice",
    "ntasks-per-core",
    "ntasks-per-socket",
    "power",
    "priority",
    "profile",
    "propagate",
    "reservation",
    "resv-ports",
    "slurmd-debug",
    "slurmd_debug",
    "sockets-per-node",
    "switches",
    "thread-spec",
    "threads",
    "time-min",
    "tmp",
    "wckey",
    "deadline",
    "send-libs",
];
const IGNORED_SHORT_WITH_VALUE: &[char] = &['J', 'p', 't', 'A', 'm', 'W', 'K', 'D'];

/// srun flags that do nothing here.
const IGNORED_FLAGS: &[&str] = &[
    "unbuffered",
    "exclusive",
    "overlap",
    "overcommit",
    "kill-on-bad-exit",
    "quiet",
    "verbose",
    "exact",
    "whole",
    "contiguous",
    "disable-status",
    "hold",
    "no-allocate",
    "no-kill",
    "oversubscribe",
    "preserve-env",
    "quit-on-interrupt",
    "reboot",
    "send-libs",
    "spread-job",
    "use-min-nodes",
    "immediate",
    "resv-ports",
    "mpi-combine",
];
const IGNORED_SHORT_FLAGS: &[char] = &['u', 'Q', 'v', 'K', 'O'];

/// srun options that would need more than this host, or a terminal Flex does not give.
const REFUSED: &[(&str, &str)] = &[
    (
        "pty",
        "interactive steps need a terminal; run the command directly",
    ),
    ("nodelist", "a Flex job runs on one host"),
    ("exclude", "a Flex job runs on one host"),
    ("relative", "a Flex job runs on one host"),
    ("het-group", "a Flex job has no heterogeneous components"),
    (
        "multi-prog",
        "each task runs the same command here; start different ones from a script that reads \
         SLURM_PROCID",
    ),
    (
        "input",
        "the tasks' standard input is not redirected here; redirect within the command",
    ),
    (
        "prolog",
        "Flex's srun runs no prolog or epilog; run it in the script",
    ),
    (
        "epilog",
        "Flex's srun runs no prolog or epilog; run it in the script",
    ),
    (
        "task-prolog",
        "Flex's srun runs no prolog or epilog; run it in the script",
    ),
    (
        "task-epilog",
        "Flex's srun runs no prolog or epilog; run it in the script",
    ),
    (
        "container",
        "Flex runs no OCI containers; start one from the command",
    ),
    (
        "gpus-per-socket",
        "Flex places leaves by NUMA node, not socket; ask --gpus or --gpus-per-task",
    ),
    ("bb", "Flex has no burst buffers"),
    ("bbf", "Flex has no burst buffers"),
];

/// An output pattern srun takes (Slurm's `%` escapes).
fn check_pattern(opt: &str, v: &str) -> Result<(), Error> {
    flex_proto::fname::check(v).map_err(|e| Error::Input(format!("srun {opt} {v:?}: {e}")))
}

fn count(opt: &str, v: &str) -> Result<u32, Error> {
    v.parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::Input(format!("srun {opt} {v:?}: expected a count of at least 1")))
}

/// Whether srun option `name` (without its dashes) takes a value.
fn takes_value(name: &str) -> bool {
    let short = |list: &[char]| {
        name.chars().count() == 1 && list.contains(&name.chars().next().unwrap_or('-'))
    };
    matches!(
        name,
        "n" | "ntasks"
            | "ntasks-per-node"
            | "N"
            | "nodes"
            | "c"
            | "cpus-per-task"
            | "gpus-per-task"
            | "o"
            | "output"
            | "e"
            | "error"
            | "open-mode"
            | "gres"
            | "gpus"
            | "G"
    ) || IGNORED_WITH_VALUE.contains(&name) && !IGNORED_FLAGS.contains(&name)
        || short(IGNORED_SHORT_WITH_VALUE) && !short(IGNORED_SHORT_FLAGS)
}

/// Apply one srun option (as `shown` on the command line) to flexrun's arguments.
fn apply(a: &mut Args, name: &str, value: Option<&str>, shown: &str) -> Result<(), Error> {
    let short = |list: &[char]| {
        name.chars().count() == 1 && list.contains(&name.chars().next().unwrap_or('-'))
    };
    match (name, value) {
        ("n" | "ntasks", Some(v)) => a.ntasks = Some(count(shown, v)?),
        // Tasks per node: the step's count only when neither it nor the job gives one.
        ("ntasks-per-node", Some(v)) => {
            a.tasks.get_or_insert_with(Default::default).per_node = Some(count(shown, v)?)
        }
        ("c" | "cpus-per-task", Some(v)) => {
            a.tasks.get_or_insert_with(Default::default).cpus_per_task = Some(count(shown, v)?)
        }
        ("gres", Some(v)) => {
            // `gpu[:TYPE]:N`: N of the job's leaves (their type is the job's already).
            let n = match v.strip_prefix("gpu") {
                Some("") => "1",
                Some(rest) => rest
                    .rsplit(':')
                    .next()
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    .unwrap_or("1"),
                None => {
                    return Err(Error::Input(format!(
                        "srun {shown} {v:?}: Flex knows only gpu[:TYPE]:N"
                    )))
                }
            };
            a.tasks.get_or_insert_with(Default::default).gpus = Some(count(shown, n)?)
        }
        ("gpus" | "G", Some(v)) => {
            let n = v.rsplit_once(':').map_or(v, |(_, n)| n);
            a.tasks.get_or_insert_with(Default::default).gpus = Some(count(shown, n)?)
        }
        ("o" | "output", Some(v)) => {
            check_pattern(shown, v)?;
            a.tasks.get_or_insert_with(Default::default).output = Some(v.to_string())
        }
        ("e" | "error", Some(v)) => {
            check_pattern(shown, v)?;
            a.tasks.get_or_insert_with(Default::default).error = Some(v.to_string())
        }
        ("open-mode", Some(v)) => {
            a.tasks.get_or_insert_with(Default::default).append = match v {
                "append" | "a" => true,
                "truncate" | "t" => false,
                _ => {
                    return Err(Error::Input(format!(
                        "srun {shown} {v:?}: append or truncate"
                    )))
                }
            }
        }
        ("gpus-per-task", Some(v)) => {
            // `[TYPE:]N`: the type is the job's already.
            let n = v.rsplit_once(':').map_or(v, |(_, n)| n);
            a.tasks.get_or_insert_with(Default::default).gpus_per_task = Some(count(shown, n)?)
        }
        ("N" | "nodes", Some(v)) => {
            if v != "1" && v != "1-1" {
                return Err(Error::Input(format!(
                    "srun {shown} {v}: a Flex job runs on one host (-N 1)"
                )));
            }
        }
        ("l" | "label", None) => a.label = true,
        (n, _) if REFUSED.iter().any(|(r, _)| *r == n) => {
            let why = REFUSED.iter().find(|(r, _)| *r == n).map_or("", |r| r.1);
            return Err(Error::Input(format!("srun {shown}: {why}")));
        }
        (n, _)
            if IGNORED_WITH_VALUE.contains(&n)
                || IGNORED_FLAGS.contains(&n)
                || short(IGNORED_SHORT_WITH_VALUE)
                || short(IGNORED_SHORT_FLAGS) => {}
        _ => {
            return Err(Error::Input(format!(
                "srun {shown}: not an option Flex's srun knows (it starts the job's tasks, or \
                 -n of them)"
            )))
        }
    }
    Ok(())
}

/// flexrun's arguments from srun's: options up to the first word that is not one, then the
/// command and its arguments.
pub fn srun_args(words: &[OsString]) -> Result<Args, Error> {
    let mut a = Args {
        label: false,
        ntasks: None,
        grace: 5,
        ranks_as_nodes: false,
        tasks: Some(super::Tasks::default()),
        command: Vec::new(),
    };
    let mut i = 0;
    while i < words.len() {
        let w = words[i].to_string_lossy().into_owned();
        if w == "--" {
            i += 1;
            break;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        // The option's name and, if written into it, its value (`--ntasks=4`, `-n4`).
        let (name, inline): (String, Option<String>) = match w.strip_prefix("--") {
            Some(long) => match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            },
            None => {
                let mut cs = w[1..].chars();
                let c = cs.next().unwrap_or('-');
                let rest: String = cs.collect();
                (c.to_string(), (!rest.is_empty()).then_some(rest))
            }
        };
        let takes_value = takes_value(&name);
        let value = if takes_value && inline.is_none() {
            i += 1;
            match words.get(i) {
                Some(v) => Some(v.to_string_lossy().into_owned()),
                None => return Err(Error::Input(format!("srun {w}: needs a value"))),
            }
        } else {
            inline
        };
        apply(&mut a, &name, value.as_deref(), &w)?;
        i += 1;
    }
    a.command = words[i..].to_vec();
    if a.command.is_empty() {
        return Err(Error::Input("srun: no command given".into()));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, Error> {
        let w: Vec<OsString> = s.split_whitespace().map(OsString::from).collect();
        srun_args(&w)
    }

    fn cmd(a: &Args) -> Vec<String> {
        a.command
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_common_srun_lines_of_job_scripts() {
        let a = parse("python train.py --lr 3").unwrap();
        assert_eq!((a.ntasks, a.label), (None, false));
        assert_eq!(cmd(&a), ["python", "train.py", "--lr", "3"]);
        let a = parse("-n 2 --gres=gpu:2 -c 4 --mpi=pmix -l python -u x.py").unwrap();
        assert_eq!((a.ntasks, a.label), (Some(2), true));
        assert_eq!(cmd(&a), ["python", "-u", "x.py"]);
        let a = parse("--ntasks=4 --kill-on-bad-exit=1 --cpu-bind=cores -u -- bash -c x").unwrap();
        assert_eq!(a.ntasks, Some(4));
        assert_eq!(cmd(&a), ["bash", "-c", "x"]);
        // Tasks per node counts only where neither -n nor the job's own -n does (flexrun's
        // srun personality decides).
        let a = parse("-N1 --ntasks-per-node 3 --export=ALL hostname").unwrap();
        assert_eq!((a.ntasks, a.tasks.unwrap().per_node), (None, Some(3)));
        let a = parse("-n4 -K --unbuffered echo hi").unwrap();
        assert_eq!(
            (a.ntasks, cmd(&a)),
            (Some(4), vec!["echo".into(), "hi".into()])
        );
    }

    #[test]
    fn what_cannot_hold_on_one_host_is_refused_by_name() {
        let e = parse("-N 2 python x.py").unwrap_err().to_string();
        assert!(e.contains("-N 2") && e.contains("one host"), "{e}");
        let e = parse("--pty bash").unwrap_err().to_string();
        assert!(e.contains("--pty"), "{e}");
        let e = parse("--frobnicate python").unwrap_err().to_string();
        assert!(e.contains("--frobnicate"), "{e}");
        let e = parse("-n 0 x").unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
        assert!(parse("-n 2").is_err());
    }
}

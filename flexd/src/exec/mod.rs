//! Running jobs. Each job runs under its own supervisor: flexd re-executes its own binary as
//! `flexd supervise --job N --run-dir DIR`, which detaches (setsid, then a fork whose parent
//! exits), so the supervisor is neither flexd's child nor in its process group or session and
//! outlives it. The supervisor drops to the submitting user in the job's process only, binds
//! its cores, enforces its time limit, and records the end in a status file before telling
//! flexd.
//!
//! - [`launch`]: flexd's side (a thread that starts supervisors).
//! - [`supervisor`]: the supervisor process.
//! - [`files`]: the run and status files between them.
//! - [`affinity`]: model cores to real CPUs.
//! - [`cgroup`]: cgroups per job where the host allows it, so nothing the job forks escapes
//!   and it keeps to its memory, process count and cores.

pub(crate) mod affinity;
pub(crate) mod array;
pub(crate) mod cgroup;
pub mod files;
pub(crate) mod launch;
pub(crate) mod spawn;
pub mod supervisor;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a supervisor needs, sent on its stdin (never on its command line or in a file:
/// it holds the job's script and environment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LaunchSpec {
    pub job: u64,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub workdir: PathBuf,
    pub script: String,
    pub args: Vec<String>,
    /// The complete environment of the job's first process.
    pub env: Vec<(String, String)>,
    /// Output paths after pattern expansion, relative to the working directory unless absolute.
    pub stdout: String,
    /// None: stderr goes to the stdout file.
    pub stderr: Option<String>,
    /// CPUs to bind the job to; empty: leave the affinity alone.
    pub cpus: Vec<u32>,
    pub time_limit_s: u64,
    pub kill_grace_ms: u64,
    /// flexd's socket, to say the job ended.
    pub socket: PathBuf,
    /// The umask the job runs with (the submitter's; 022 when the submission had none).
    #[serde(default = "default_umask")]
    pub umask: u32,
    /// `--signal`: what to send before the time limit, and to whom.
    #[serde(default)]
    pub warn: Option<flex_proto::WarnSignal>,
    /// The user's groups, looked up by flexd (running as root) so that each supervisor does not
    /// load the system's name-service modules anew; None: the supervisor looks them up.
    #[serde(default)]
    pub groups: Option<Vec<u32>>,
    /// `--open-mode=append`: the output files are appended to, not truncated.
    #[serde(default)]
    pub append: bool,
    /// The job's host memory, its cgroup's memory limit; 0: no limit.
    #[serde(default)]
    pub mem_bytes: u64,
    /// The most processes and threads of the job (flexd.toml's `job_pids_max`); 0: no limit.
    #[serde(default)]
    pub pids_max: u32,
}

fn default_umask() -> u32 {
    0o022
}

/// Expand `%j` (job id), `%x` (job name), `%u` (user), `%A` (array job id; the job id outside
/// an array), `%a` (array task index; 4294967294 outside an array, as Slurm) and `%%` in an
/// output path pattern.
pub(crate) fn expand_pattern(
    pattern: &str,
    job: u64,
    name: &str,
    user: &str,
    array: Option<flex_proto::ArrayTask>,
) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('j') => out.push_str(&job.to_string()),
            Some('x') => out.push_str(name),
            Some('u') => out.push_str(user),
            Some('A') => out.push_str(&array.map_or(job, |a| a.job.0).to_string()),
            Some('a') => out.push_str(&array.map_or(u32::MAX - 1, |a| a.index).to_string()),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The interpreter line of a script: the program and its optional single argument, as the
/// kernel reads `#!`; `/bin/sh` when the script has none.
pub(crate) fn interpreter(script: &str) -> (String, Option<String>) {
    let Some(line) = script.strip_prefix("#!") else {
        return ("/bin/sh".into(), None);
    };
    let line = line.lines().next().unwrap_or("").trim();
    match line.split_once([' ', '\t']) {
        _ if line.is_empty() => ("/bin/sh".into(), None),
        Some((prog, arg)) => (prog.to_string(), Some(arg.trim().to_string())),
        None => (line.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand() {
        assert_eq!(
            expand_pattern("out/%x-%j.%u.log", 7, "train", "ana", None),
            "out/train-7.ana.log"
        );
        assert_eq!(expand_pattern("100%%-%q%", 1, "", "", None), "100%-%q%");
        let task = flex_proto::ArrayTask {
            job: gres_plugin::JobId(12),
            index: 3,
        };
        assert_eq!(
            expand_pattern("%A_%a-%j", 15, "", "", Some(task)),
            "12_3-15"
        );
    }

    #[test]
    fn interpreters_read_like_the_kernel() {
        assert_eq!(interpreter("echo hi\n"), ("/bin/sh".into(), None));
        assert_eq!(interpreter("#!/bin/bash\nx"), ("/bin/bash".into(), None));
        assert_eq!(
            interpreter("#! /usr/bin/env  python3 -u\n"),
            ("/usr/bin/env".into(), Some("python3 -u".into()))
        );
        assert_eq!(interpreter("#!\n"), ("/bin/sh".into(), None));
    }
}

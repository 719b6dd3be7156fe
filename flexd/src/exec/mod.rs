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
//! - [`tmpdir`]: each job's private temporary directory and in-job commands.

pub(crate) mod affinity;
pub(crate) mod array;
pub(crate) mod cgroup;
pub mod files;
pub(crate) mod launch;
pub(crate) mod spawn;
pub mod supervisor;
pub(crate) mod tmpdir;

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
    /// How long the job's first process may take to reach the script (`batch_start_timeout`).
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
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
    /// Where to make the job's private temporary directory (flexd.toml's `job_tmpdir`).
    #[serde(default)]
    pub tmpdir: Option<PathBuf>,
    /// Commands to put first on the job's PATH, in its temporary directory: (name, target of
    /// the link).
    #[serde(default)]
    pub job_commands: Vec<(String, PathBuf)>,
    /// The submitter's soft resource limits the job gets (Slurm's names; None: unlimited).
    #[serde(default)]
    pub rlimits: Vec<(String, Option<u64>)>,
    /// The GPU device nodes the job may not open (`constrain_devices`): the host's GPUs and
    /// MIG instances that are not its own.
    #[serde(default)]
    pub devices: Vec<cgroup::devices::Dev>,
}

fn default_umask() -> u32 {
    0o022
}

/// Specs written before `batch_start_timeout`: its default.
fn default_start_timeout_ms() -> u64 {
    10_000
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

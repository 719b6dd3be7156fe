//! The files a supervisor leaves in the state directory, and how flexd finds a supervisor that
//! outlived it.
//!
//! - `run/<job>.run` (JSON [`RunFile`]): the supervisor's pid and the job's process group,
//!   written when the job starts. flexd reads it to re-adopt the job after a restart and to
//!   forward signals.
//! - `run/<job>.status` (JSON [`StatusFile`]): how the job ended, written durably (temp file,
//!   fsync, rename, fsync of the directory) before the supervisor tells flexd. flexd removes
//!   both files once the end is committed to the database.

use crate::paths::{run_file, status_file};
use flex_proto::JobState;
use gres_plugin::JobId;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Written by the supervisor when the job starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    pub job: u64,
    pub supervisor_pid: u32,
    /// The job's process group (the pid of its first process); None until it is started.
    pub job_pgid: Option<i32>,
    pub uid: u32,
    /// The job's own cgroup (see [`super::cgroup`]); None when it is held by its process group
    /// only. Older run files have no such field.
    #[serde(default)]
    pub cgroup: Option<std::path::PathBuf>,
}

/// Written by the supervisor when the job ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusFile {
    pub job: u64,
    /// COMPLETED, FAILED, CANCELLED or TIMEOUT.
    pub state: JobState,
    pub exit_code: Option<i32>,
    /// The signal that ended the job's first process.
    pub signal: Option<i32>,
    /// Seconds since the epoch.
    pub end_time: u64,
    /// Why it failed to start, or what happened at its end.
    pub note: Option<String>,
}

/// Write `bytes` to `path` through a temporary file and a rename; with `durable`, fsync the
/// file before the rename and the directory after it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    std::fs::rename(&tmp, path)?;
    if durable {
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
    }
    Ok(())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

pub fn read_run(run_dir: &Path, job: JobId) -> Result<Option<RunFile>, String> {
    read_json(&run_file(run_dir, job))
}

pub fn read_status(run_dir: &Path, job: JobId) -> Result<Option<StatusFile>, String> {
    read_json(&status_file(run_dir, job))
}

/// Remove a job's run and status files (after its end is committed).
pub(crate) fn remove_job_files(run_dir: &Path, job: JobId) {
    for p in [run_file(run_dir, job), status_file(run_dir, job)] {
        if let Err(e) = std::fs::remove_file(&p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", p.display());
            }
        }
    }
}

/// The command line a supervisor of `job` runs with: `<exe> supervise --job <job> --run-dir
/// <run_dir>`. The run directory tells apart the supervisors of two flexds on one host, whose
/// job numbers overlap.
fn is_supervisor_cmdline(cmdline: &[u8], job: JobId, run_dir: &Path) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let want = job.to_string();
    let dir = run_dir.as_os_str().as_bytes();
    args.windows(5).any(|w| {
        w[0] == b"supervise"
            && w[1] == b"--job"
            && w[2] == want.as_bytes()
            && w[3] == b"--run-dir"
            && w[4] == dir
    })
}

/// Is `pid` a live supervisor of `job` of the flexd with this run directory? (A reused pid
/// runs something else.)
pub(crate) fn is_supervisor(pid: u32, job: JobId, run_dir: &Path) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| is_supervisor_cmdline(&c, job, run_dir))
        .unwrap_or(false)
}

/// The live supervisor of `job`: the pid its run file names, else the one flexd recorded, else
/// any process running as its supervisor (one that started while flexd went down).
pub(crate) fn find_supervisor(run_dir: &Path, job: JobId, recorded: Option<u32>) -> Option<u32> {
    let from_run = read_run(run_dir, job)
        .ok()
        .flatten()
        .map(|r| r.supervisor_pid);
    if let Some(pid) = [from_run, recorded]
        .into_iter()
        .flatten()
        .find(|&p| is_supervisor(p, job, run_dir))
    {
        return Some(pid);
    }
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| is_supervisor(pid, job, run_dir))
}

/// SIGKILL every process left in a job's process group after its supervisor vanished, but
/// only processes of the job's user (a reused group id belongs to someone else).
pub(crate) fn kill_orphaned_group(pgid: i32, uid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let pgrp: Option<i32> = rest.split_whitespace().nth(2).and_then(|s| s.parse().ok());
        if pgrp != Some(pgid) || process_uid(pid) != Some(uid) {
            continue;
        }
        if nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok()
        {
            killed += 1;
        }
    }
    killed
}

fn process_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supervisor_command_lines_are_recognised() {
        let c = b"/usr/bin/flexd\0supervise\0--job\x0012\0--run-dir\0/x/run\0";
        let dir = Path::new("/x/run");
        assert!(is_supervisor_cmdline(c, JobId(12), dir));
        assert!(!is_supervisor_cmdline(c, JobId(1), dir));
        assert!(
            !is_supervisor_cmdline(c, JobId(12), Path::new("/y/run")),
            "another flexd's job 12"
        );
        assert!(!is_supervisor_cmdline(b"sleep\x0012\0", JobId(12), dir));
        assert!(!is_supervisor(std::process::id(), JobId(12), dir));
    }

    #[test]
    fn status_files_round_trip_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let s = StatusFile {
            job: 4,
            state: JobState::Timeout,
            exit_code: None,
            signal: Some(15),
            end_time: 99,
            note: None,
        };
        let p = status_file(dir.path(), JobId(4));
        write_atomic(&p, &serde_json::to_vec(&s).unwrap(), true).unwrap();
        assert_eq!(read_status(dir.path(), JobId(4)).unwrap(), Some(s));
        assert_eq!(read_status(dir.path(), JobId(5)).unwrap(), None);
        std::fs::write(status_file(dir.path(), JobId(6)), "{").unwrap();
        assert!(read_status(dir.path(), JobId(6)).is_err());
        remove_job_files(dir.path(), JobId(4));
        assert!(!p.exists());
    }
}

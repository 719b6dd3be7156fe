//! The files a supervisor leaves in the state directory, and how flexd finds a supervisor that
//! outlived it.
//!
//! - `run/<job>.run` (JSON [`RunFile`]): the supervisor's pid and the job's process group,
//!   each with its start time, and the boot they belong to, written when the job starts. flexd
//!   reads it to re-adopt the job after a restart and to forward signals.
//!
//! A supervisor is recognised by what another user cannot forge: it runs as flexd's own uid,
//! and its pid's start time (from /proc) and the boot are the ones its run file records. A
//! command line alone proves nothing. A look at /proc that fails for any reason other than
//! "no such process" (EMFILE, ENOMEM, EIO) is [`Liveness::Unknown`], never "dead".
//! - `run/<job>.status` (JSON [`StatusFile`]): how the job ended, written durably (temp file,
//!   fsync, rename, fsync of the directory) before the supervisor tells flexd. flexd removes
//!   both files once the end is committed to the database.

use crate::paths::{run_file, status_file};
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
    /// The job's directories on cgroup v1 hierarchies besides `cgroup` (memory, pids, cpuset
    /// on a hybrid host). Older run files have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups_v1: Vec<std::path::PathBuf>,
    /// The supervisor's start time (clock ticks after boot, /proc/PID/stat field 22). Older
    /// run files have none.
    #[serde(default)]
    pub supervisor_start: Option<u64>,
    /// The start time of the job's first process, the leader of `job_pgid`.
    #[serde(default)]
    pub job_start: Option<u64>,
    /// /proc/sys/kernel/random/boot_id when the file was written: pids and start times of
    /// another boot name other processes.
    #[serde(default)]
    pub boot_id: Option<String>,
}

/// Written by the supervisor when the job ends and flexd cannot be told (the same JSON as
/// the status files of earlier flexds).
pub use flex_proto::JobEndStatus as StatusFile;

/// Write `bytes` to `path` through a temporary file and a rename; with `durable`, fsync the
/// file before the rename and the directory after it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
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
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // A full disk leaves no half-written file behind to hold its space.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
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

/// The process name (`/proc/PID/comm`, 15 bytes at most) a supervisor forked by `flexd
/// supervise` gives itself: `fsv` and the job id in hex.
pub(crate) fn supervisor_comm(job: JobId) -> String {
    format!("fsv{:x}", job.0)
}

/// Does a process with `cmdline` and `comm` read like a supervisor of `job`? Supervisors are
/// forked by `<exe> supervise --run-dir <run_dir>` and keep its command line, which does not
/// name the job: their process name does ([`supervisor_comm`]). Supervisors started by earlier
/// flexds ran `<exe> supervise --job <job> --run-dir <run_dir>`. The run directory tells apart
/// the supervisors of two flexds on one host, whose job numbers overlap; `None` accepts any run
/// directory.
fn is_supervisor_cmdline(cmdline: &[u8], comm: &[u8], job: JobId, run_dir: Option<&Path>) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let want = job.to_string();
    let dir_ok = |d: &[u8]| run_dir.is_none_or(|r| d == r.as_os_str().as_bytes());
    let forked = args
        .windows(3)
        .any(|w| w[0] == b"supervise" && w[1] == b"--run-dir" && dir_ok(w[2]))
        && comm.trim_ascii_end() == supervisor_comm(job).as_bytes();
    forked
        || args.windows(5).any(|w| {
            w[0] == b"supervise"
                && w[1] == b"--job"
                && w[2] == want.as_bytes()
                && w[3] == b"--run-dir"
                && dir_ok(w[4])
        })
}

/// What a look at a process found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// It is the job's supervisor.
    Alive,
    /// It is gone, or the pid now names another process.
    Gone,
    /// It could not be checked (out of descriptors, memory, an I/O error): ask again later.
    Unknown(String),
}

/// Read a /proc file of `pid`: Ok(None) when the process does not exist.
fn proc_read(pid: u32, file: &str) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(format!("/proc/{pid}/{file}")) {
        Ok(b) => Ok(Some(b)),
        // ESRCH: it exited between the open and the read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(3) => {
            Ok(None)
        }
        Err(e) => Err(format!("cannot read /proc/{pid}/{file}: {e}")),
    }
}

/// A process's start time (clock ticks after boot) and effective uid; None when it is gone.
fn proc_identity(pid: u32) -> Result<Option<(u64, u32)>, String> {
    let Some(stat) = proc_read(pid, "stat")? else {
        return Ok(None);
    };
    let Some(start) = stat_field(&stat, 19) else {
        return Err(format!("/proc/{pid}/stat has no start time"));
    };
    let Some(status) = proc_read(pid, "status")? else {
        return Ok(None);
    };
    let uid = String::from_utf8_lossy(&status)
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/status has no uid"))?;
    Ok(Some((start, uid)))
}

/// Field `n` (0-based) after the command name in /proc/PID/stat: 0 state, 1 ppid, 2 pgrp,
/// 19 starttime. The name may hold spaces and parentheses, hence the last ')'.
fn stat_field(stat: &[u8], n: usize) -> Option<u64> {
    let at = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[at + 1..]).ok()?;
    rest.split_whitespace().nth(n)?.parse().ok()
}

/// The processes of process group `pgid` (from /proc), the leader included.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            proc_read(pid, "stat")
                .ok()
                .flatten()
                .and_then(|s| stat_field(&s, 2))
                == Some(u64::from(pgid))
        })
        .collect()
}

/// A process and every process below it (from /proc's parent links), `pid` first.
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![pid];
    };
    let parents: Vec<(u32, u64)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, stat_field(&proc_read(p, "stat").ok()??, 1)?)))
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = u64::from(out[i]);
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// A process's start time; None when it is gone.
pub(crate) fn start_time(pid: u32) -> Result<Option<u64>, String> {
    Ok(proc_read(pid, "stat")?.and_then(|s| stat_field(&s, 19)))
}

/// This boot's id; None where the kernel does not say.
pub(crate) fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Was this run file written during this boot? (Old run files do not say: assume so.)
fn this_boot(run: &RunFile) -> bool {
    match (&run.boot_id, boot_id()) {
        (Some(was), Some(now)) => *was == now,
        _ => true,
    }
}

/// Is `pid` a live supervisor of `job`? It must run `supervise` for the job (for this run
/// directory when one is given), as flexd's own uid, and when its run file names it, have
/// the start time and boot the run file recorded.
pub(crate) fn check_supervisor(
    pid: u32,
    job: JobId,
    run_dir: Option<&Path>,
    run: Option<&RunFile>,
) -> Liveness {
    let run = run.filter(|r| r.supervisor_pid == pid);
    if run.is_some_and(|r| !this_boot(r)) {
        return Liveness::Gone;
    }
    let ident = match proc_identity(pid) {
        Ok(Some(i)) => i,
        Ok(None) => return Liveness::Gone,
        Err(e) => return Liveness::Unknown(e),
    };
    let (cmdline, comm) = match (proc_read(pid, "cmdline"), proc_read(pid, "comm")) {
        (Ok(Some(c)), Ok(Some(n))) => (c, n),
        (Err(e), _) | (_, Err(e)) => return Liveness::Unknown(e),
        _ => return Liveness::Gone,
    };
    let own_uid = nix::unistd::geteuid().as_raw();
    let started_ok = run
        .and_then(|r| r.supervisor_start)
        .is_none_or(|s| s == ident.0);
    if ident.1 == own_uid && started_ok && is_supervisor_cmdline(&cmdline, &comm, job, run_dir) {
        Liveness::Alive
    } else {
        Liveness::Gone
    }
}

/// Is `pid` a live supervisor of `job` of the flexd with this run directory? Unknown counts
/// as alive: a supervisor is never declared dead because it could not be checked.
pub(crate) fn is_supervisor(pid: u32, job: JobId, run_dir: &Path) -> Liveness {
    let run = read_run(run_dir, job).ok().flatten();
    check_supervisor(pid, job, Some(run_dir), run.as_ref())
}

/// The live supervisor of `job`: the pid its run file names (with its start time), else the
/// one flexd recorded, else, only when there is no run file yet (a supervisor that started
/// while flexd went down), any process of flexd's uid running as its supervisor.
pub(crate) fn find_supervisor(
    run_dir: &Path,
    job: JobId,
    recorded: Option<u32>,
) -> Result<Option<u32>, String> {
    let run = read_run(run_dir, job)?;
    let mut unknown = None;
    for pid in [run.as_ref().map(|r| r.supervisor_pid), recorded]
        .into_iter()
        .flatten()
    {
        match check_supervisor(pid, job, Some(run_dir), run.as_ref()) {
            Liveness::Alive => return Ok(Some(pid)),
            Liveness::Gone => {}
            Liveness::Unknown(e) => unknown = Some(e),
        }
    }
    if let Some(e) = unknown {
        return Err(e);
    }
    if run.is_some() {
        return Ok(None);
    }
    let dir = std::fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        match check_supervisor(pid, job, Some(run_dir), None) {
            Liveness::Alive => return Ok(Some(pid)),
            Liveness::Gone => {}
            Liveness::Unknown(e) => return Err(e),
        }
    }
    Ok(None)
}

/// May flexd kill what is left of the job of this run file? Not when its run file is from
/// another boot (its ids name other processes now), nor while its supervisor still runs (for
/// any run directory: a flexd started on a copy of a live state directory finds the live
/// flexd's supervisors), nor when it cannot tell.
pub(crate) fn orphaned(run: &RunFile) -> Result<(), String> {
    if !this_boot(run) {
        return Err("its run file is from another boot".into());
    }
    match check_supervisor(run.supervisor_pid, JobId(run.job), None, Some(run)) {
        Liveness::Gone => Ok(()),
        Liveness::Alive => Err(format!(
            "its supervisor (pid {}) still runs",
            run.supervisor_pid
        )),
        Liveness::Unknown(e) => Err(e),
    }
}

/// SIGKILL every process left in a job's process group after its supervisor vanished. Only
/// the job's group is touched: processes of the job's user, and when the group's leader
/// still lives, only if it is the job's first process (its start time is the one recorded;
/// a pgid is reused only once the old group is empty). Call [`orphaned`] first.
pub(crate) fn kill_orphaned_group(run: &RunFile) -> Result<usize, String> {
    let Some(pgid) = run.job_pgid else {
        return Ok(0);
    };
    if let (Some(recorded), Ok(Some(now))) = (run.job_start, start_time(pgid as u32)) {
        if recorded != now {
            return Err(format!(
                "process group {pgid} is not the job's any more (its leader started later)"
            ));
        }
    }
    let dir = std::fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
    let mut killed = 0;
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(Some(stat)) = proc_read(pid, "stat") else {
            continue;
        };
        let pgrp = stat_field(&stat, 2);
        let started = stat_field(&stat, 19);
        if pgrp != Some(pgid as u64) || started < run.job_start {
            continue;
        }
        if !matches!(proc_identity(pid), Ok(Some((_, uid))) if uid == run.uid) {
            continue;
        }
        if nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok()
        {
            killed += 1;
        }
    }
    Ok(killed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_proto::JobState;

    #[test]
    fn descendants_are_the_process_and_those_below_it() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .expect("start sh");
        let pid = sh.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let below = loop {
            let d = descendants(pid);
            if d.len() == 3 || std::time::Instant::now() > deadline {
                break d;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        for p in &below[1..] {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*p as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!((below.len(), below[0]), (3, pid), "{below:?}");
        assert!(!descendants(std::process::id()).contains(&1));
    }

    #[test]
    fn supervisor_command_lines_are_recognised() {
        let c = b"/usr/bin/flexd\0supervise\0--job\x0012\0--run-dir\0/x/run\0";
        let dir = Path::new("/x/run");
        assert!(is_supervisor_cmdline(c, b"flexd\n", JobId(12), Some(dir)));
        assert!(is_supervisor_cmdline(c, b"flexd\n", JobId(12), None));
        assert!(!is_supervisor_cmdline(c, b"flexd\n", JobId(1), Some(dir)));
        assert!(
            !is_supervisor_cmdline(c, b"flexd\n", JobId(12), Some(Path::new("/y/run"))),
            "another flexd's job 12"
        );
        let forked = b"/usr/bin/flexd\0supervise\0--run-dir\0/x/run\0";
        assert!(is_supervisor_cmdline(
            forked,
            b"fsvc\n",
            JobId(12),
            Some(dir)
        ));
        assert!(
            !is_supervisor_cmdline(forked, b"fsvd\n", JobId(12), Some(dir)),
            "the supervisor of job 13"
        );
        assert!(
            !is_supervisor_cmdline(forked, b"flexd\n", JobId(12), Some(dir)),
            "the supervisors' process itself"
        );
        assert!(!is_supervisor_cmdline(
            forked,
            b"fsvc\n",
            JobId(12),
            Some(Path::new("/y/run"))
        ));
        assert!(!is_supervisor_cmdline(
            b"sleep\x0012\0",
            b"sleep\n",
            JobId(12),
            Some(dir)
        ));
        assert_eq!(
            is_supervisor(std::process::id(), JobId(12), dir),
            Liveness::Gone
        );
    }

    #[test]
    fn a_run_file_of_another_boot_names_no_process() {
        let me = std::process::id();
        let run = RunFile {
            job: 1,
            supervisor_pid: me,
            job_pgid: Some(me as i32),
            uid: nix::unistd::geteuid().as_raw(),
            cgroup: None,
            cgroups_v1: Vec::new(),
            supervisor_start: start_time(me).unwrap(),
            job_start: start_time(me).unwrap(),
            boot_id: Some("not-this-boot".into()),
        };
        assert!(orphaned(&run).unwrap_err().contains("another boot"));
        let later = RunFile {
            job_start: run.job_start.map(|s| s.saturating_sub(1)),
            boot_id: boot_id(),
            ..run
        };
        assert!(kill_orphaned_group(&later).is_err(), "a reused group id");
        assert_eq!(stat_field(b"1 (a) b) S 0 7 7", 2), Some(7));
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
            max_rss: None,
            cpu_usec: None,
            oom_killed: false,
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

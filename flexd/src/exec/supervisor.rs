//! The supervisors: `flexd supervise --run-dir DIR`, started once by flexd's launcher, reads
//! [`LaunchSpec`]s as frames on its stdin and forks one supervisor per job, answering each
//! with the supervisor's pid (or why there is none) on its stdout. Forking this small,
//! single-threaded process costs a fraction of executing flexd's binary anew for each job.
//!
//! 1. The supervisor is named `fsv<job id in hex>` (its /proc comm) from its fork on, so a
//!    restarted flexd knows it before it has written its run file. The fork leaves flexd's
//!    session (setsid): the supervisor is neither flexd's child nor in
//!    its process group or session, and outlives flexd and this process (which exits when
//!    flexd closes its stdin). This process ignores SIGCHLD, so its ended supervisors are
//!    reaped by the kernel and never linger as zombies that look alive.
//! 2. The supervisor starts the job in its own process group, and in its own cgroup where the
//!    host allows, with the job's memory, process, core and GPU device limits written into it
//!    first ([`super::cgroup`], [`super::spawn`]). Only the job's process drops privileges (groups,
//!    gid, uid), enters the working directory and creates its output files as the user (O_NOFOLLOW: no writing through a planted symlink); the supervisor stays
//!    privileged to write the status file. The script is passed in a memfd, so it is readable
//!    by the job without lying on disk.
//! 3. It waits for the job, its time limit (SIGTERM to the group, SIGKILL after the grace) or
//!    SIGTERM from flexd (cancel: the same), then kills what is left of the group and the
//!    cgroup, reads whether the OOM killer took one of its processes, and removes the cgroup.
//! 4. It writes the status file durably, then tells flexd (if it is up) over its socket.
//!
//! Everything here stays single-threaded: it forks.

use super::cgroup::{self, Hierarchy, JobCgroup, Limits};
use super::files::{self, write_atomic, RunFile, StatusFile};
use super::spawn::{spawn_job, JobProcess, NotStarted};
use super::tmpdir::JobTmp;
use super::LaunchSpec;
use crate::paths::{run_file, status_file};
use flex_proto::{self as proto, Hello, JobState, Request, Response};
use gres_plugin::JobId;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the end of a job waits for its cgroup to empty before removing it.
const CGROUP_DRAIN: Duration = Duration::from_secs(10);

/// The longest pause between two tries to record an end that neither flexd nor the disk could
/// take.
const REPORT_RETRY_MAX: Duration = Duration::from_secs(5);

/// The largest launch spec accepted (a job's script and environment are bounded far below).
const MAX_SPEC: usize = 1 << 30;

/// The `supervise` subcommand; returns the process exit code.
pub fn main(run_dir: &Path) -> i32 {
    // SAFETY: sets a disposition in this single-threaded process.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    // flexd's own protection, inherited already; said again for a forker started otherwise.
    if nix::unistd::geteuid().is_root() {
        let _ = cgroup::protect_from_oom();
    }
    // Where jobs' cgroups go, found once for every supervisor forked from here.
    let cgroups = cgroup::probe().ok();
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    loop {
        let spec: LaunchSpec = match proto::read_frame(&mut input, MAX_SPEC) {
            Ok(s) => s,
            Err(proto::FrameError::Closed) => return 0,
            Err(e) => {
                eprintln!("flexd supervise: cannot read a launch spec: {e}");
                return 2;
            }
        };
        let reply: Result<u32, String> = start(&spec, run_dir, cgroups.as_ref());
        if proto::write_frame(&mut output, &reply)
            .and_then(|()| output.flush().map_err(proto::FrameError::from))
            .is_err()
        {
            return 0;
        }
    }
}

/// Fork the supervisor of `spec`'s job: the pid in this process; the child supervises the job
/// and exits.
fn start(spec: &LaunchSpec, run_dir: &Path, cgroups: Option<&Hierarchy>) -> Result<u32, String> {
    // flexd may cancel the job as soon as it knows the supervisor's pid: hold SIGTERM until
    // the supervisor's handler is in place (the fork inherits the mask).
    let term_only = nix::sys::signal::SigSet::from(Signal::SIGTERM);
    term_only
        .thread_block()
        .map_err(|e| format!("sigprocmask: {e}"))?;
    // The supervisor is born with its job's name (inherited at the fork, so there is no moment
    // without it): a restarted flexd that finds no run file yet knows it by this name, with its
    // command line and uid.
    set_name(&files::supervisor_comm(JobId(spec.job)));
    // SAFETY: this process is single-threaded.
    let forked = unsafe { nix::unistd::fork() };
    if !matches!(forked, Ok(nix::unistd::ForkResult::Child)) {
        set_name("flexd");
        let _ = term_only.thread_unblock();
    }
    match forked {
        Err(e) => Err(format!("fork: {e}")),
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(child.as_raw() as u32),
        Ok(nix::unistd::ForkResult::Child) => {
            // SAFETY: restores a disposition in this single-threaded child.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
            let _ = nix::unistd::setsid();
            detach_stdio();
            let status = supervise(spec, run_dir, cgroups);
            report(spec, run_dir, status);
            // SAFETY: ends the supervisor without flushing buffers it shares with its parent.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Tell flexd how the job ended; when it cannot be told (down, restarting, no answer), write
/// the status file durably for it to read, and say so if it is up again. When neither works
/// (flexd down, or waiting for a full disk that the status file cannot be written to either),
/// keep the end and try both again, for as long as it takes: a flexd started meanwhile finds
/// this supervisor alive, takes the job back as running, and hears the end on the next try.
/// Only a run directory that no longer exists ends the wait: the state it belonged to was
/// removed, and no flexd will ever ask for this job again.
fn report(spec: &LaunchSpec, run_dir: &Path, status: StatusFile) {
    let job = JobId(spec.job);
    let body = serde_json::to_vec(&status).expect("status serializes");
    let mut pause = Duration::from_millis(250);
    loop {
        if notify(&spec.socket, job, Some(status.clone())).is_ok() {
            return;
        }
        match write_atomic(&status_file(run_dir, job), &body, true) {
            Ok(()) => {
                let _ = notify(&spec.socket, job, None);
                return;
            }
            Err(_) if gone(run_dir) => return,
            Err(_) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(REPORT_RETRY_MAX);
    }
}

/// The directory no longer exists (not merely unreadable for now).
fn gone(dir: &Path) -> bool {
    matches!(std::fs::metadata(dir), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Set this process's name (`/proc/self/comm`).
fn set_name(name: &str) {
    if let Ok(name) = std::ffi::CString::new(name) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of this process.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    }
}

/// Point stdin, stdout and stderr at /dev/null so flexd's pipes close and nothing follows the
/// supervisor into a journal that may be gone.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn ended(spec: &LaunchSpec, state: JobState, note: Option<String>) -> StatusFile {
    StatusFile {
        job: spec.job,
        state,
        exit_code: None,
        signal: None,
        end_time: now_s(),
        note,
        max_rss: None,
        cpu_usec: None,
        oom_killed: false,
    }
}

/// Write the run file: the supervisor, the job's process group `pgid` and its cgroup, for a
/// restarted flexd to find them. Err says why, and whether the disk had no room for it.
fn write_run(
    run_dir: &Path,
    spec: &LaunchSpec,
    pgid: i32,
    cg: Option<&JobCgroup>,
) -> Result<(), (String, bool)> {
    let run = RunFile {
        job: spec.job,
        supervisor_pid: std::process::id(),
        job_pgid: Some(pgid),
        uid: spec.uid,
        cgroup: cg.map(|c| c.path.clone()),
        cgroups_v1: cg.map_or_else(Vec::new, |c| c.other_v1().map(Path::to_path_buf).collect()),
        supervisor_start: files::start_time(std::process::id()).ok().flatten(),
        job_start: files::start_time(pgid as u32).ok().flatten(),
        boot_id: files::boot_id(),
    };
    let body = serde_json::to_vec(&run).expect("run file serializes");
    let path = run_file(run_dir, JobId(spec.job));
    write_atomic(&path, &body, false).map_err(|e| {
        let no_room = matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
        let why = format!("cannot write the run file {}: {e}", path.display());
        (why, no_room)
    })
}

/// Run the job to its end.
fn supervise(spec: &LaunchSpec, run_dir: &Path, cgroups: Option<&Hierarchy>) -> StatusFile {
    let term = Arc::new(AtomicBool::new(false));
    let wake = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => return ended(spec, JobState::Failed, Some(format!("socketpair: {e}"))),
    };
    let _ = wake.0.set_nonblocking(true);
    let _ = wake.1.set_nonblocking(true);
    let registered = signal_hook::flag::register(libc::SIGTERM, term.clone())
        .and_then(|_| wake.1.try_clone())
        .and_then(|w| signal_hook::low_level::pipe::register(libc::SIGTERM, w))
        .and_then(|_| wake.1.try_clone())
        .and_then(|w| signal_hook::low_level::pipe::register(libc::SIGCHLD, w));
    if let Err(e) = registered {
        return ended(
            spec,
            JobState::Failed,
            Some(format!("signal handlers: {e}")),
        );
    }
    let _ = nix::sys::signal::SigSet::from(Signal::SIGTERM).thread_unblock();
    // flexd has said once at its start why jobs have no cgroup when they cannot have one.
    // The base found at the start, or found again when it has gone since (removed by hand).
    let me = std::process::id();
    let cg = cgroups
        .and_then(|h| JobCgroup::create(h, spec.job, me).ok())
        .or_else(|| {
            let h = cgroup::probe().ok()?;
            JobCgroup::create(&h, spec.job, me).ok()
        });
    let remove_cg = |cg: Option<&JobCgroup>| {
        if let Some(c) = cg {
            c.kill_and_remove(CGROUP_DRAIN);
        }
    };
    // A job that cannot be held to its limits does not run (as with Slurm's cgroup plugins).
    let limits = Limits {
        mem_bytes: spec.mem_bytes,
        pids_max: spec.pids_max,
        cpus: spec.cpus.clone(),
        devices: spec.devices.clone(),
    };
    if let Some(Err(why)) = cg.as_ref().map(|c| c.apply(&limits)) {
        remove_cg(cg.as_ref());
        return ended(
            spec,
            JobState::Failed,
            Some(format!("cannot limit the job: {why}")),
        );
    }
    if term.load(Ordering::SeqCst) {
        remove_cg(cg.as_ref());
        return ended(
            spec,
            JobState::Cancelled,
            Some("cancelled before it started".into()),
        );
    }
    // The job's own TMPDIR, with its srun, scontrol and torchrun.
    let tmp = match JobTmp::create(spec) {
        Ok(t) => t,
        Err(note) => {
            remove_cg(cg.as_ref());
            return ended(spec, JobState::Failed, Some(note));
        }
    };
    let with_tmp = tmp.as_ref().map(|t| LaunchSpec {
        env: t.environment(&spec.env, !spec.job_commands.is_empty()),
        ..spec.clone()
    });
    let job = with_tmp.as_ref().unwrap_or(spec);
    let clean = |cg: Option<&JobCgroup>, tmp: Option<JobTmp>| {
        remove_cg(cg);
        if let Some(t) = tmp {
            t.remove();
        }
    };
    // The run file names the job's process group and cgroup before the job runs.
    let no_room = std::cell::Cell::new(false);
    let mut child = match spawn_job(job, cg.as_ref(), &term, |pid| {
        write_run(run_dir, spec, pid as i32, cg.as_ref()).map_err(|(why, full)| {
            no_room.set(full);
            why
        })
    }) {
        Ok(c) => c,
        Err(NotStarted::Cancelled) => {
            clean(cg.as_ref(), tmp);
            return ended(
                spec,
                JobState::Cancelled,
                Some("cancelled before it started".into()),
            );
        }
        Err(NotStarted::Failed(note)) => {
            clean(cg.as_ref(), tmp);
            // A start that could not be recorded for want of room on the state disk ran
            // nothing: PENDING tells flexd to queue the job again and try later, rather than
            // fail it. Any other failure to write it fails the job, with the reason.
            let state = if no_room.get() {
                JobState::Pending
            } else {
                JobState::Failed
            };
            return ended(spec, state, Some(note));
        }
    };
    let pgid = child.id() as i32;
    let (state, status) = watch(spec, &mut child, cg.as_ref(), &term, &wake.0);
    // Whatever the first process left behind goes with it: its group, and with a cgroup also
    // what left the group (setsid, daemons).
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    let max_rss = peak_memory(cg.as_ref());
    let cpu_usec = cpu_time(cg.as_ref());
    let oom_killed = cg.as_ref().is_some_and(JobCgroup::oom_killed);
    clean(cg.as_ref(), tmp);
    let state = state.unwrap_or(if status.code() == Some(0) {
        JobState::Completed
    } else {
        JobState::Failed
    });
    StatusFile {
        job: spec.job,
        state,
        exit_code: status.code(),
        signal: status.signal(),
        end_time: now_s(),
        note: None,
        max_rss,
        cpu_usec,
        oom_killed,
    }
}

/// The job's peak resident memory (flexacct's MaxRSS): its cgroup's peak, else the largest of
/// the processes this supervisor and they waited for (ru_maxrss, in KiB).
fn peak_memory(cg: Option<&JobCgroup>) -> Option<u64> {
    let peak = cg.and_then(JobCgroup::peak_memory);
    peak.or_else(|| {
        let u =
            nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).ok()?;
        u64::try_from(u.max_rss()).ok().map(|kib| kib * 1024)
    })
}

/// The CPU time the job used, in microseconds (flexacct's TotalCPU): its cgroup's `cpu.stat`
/// usage_usec (what every process in it used, daemons too), else the user and system time of
/// the processes this supervisor and they waited for.
fn cpu_time(cg: Option<&JobCgroup>) -> Option<u64> {
    let from_cgroup = cg
        .and_then(|c| std::fs::read_to_string(c.path.join("cpu.stat")).ok())
        .and_then(|s| cpu_stat_usage(&s));
    from_cgroup.or_else(|| {
        let u =
            nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).ok()?;
        // time_t and suseconds_t are 32 bits on some targets.
        #[allow(clippy::unnecessary_cast)]
        let us = |t: nix::sys::time::TimeVal| t.tv_sec() as i64 * 1_000_000 + t.tv_usec() as i64;
        u64::try_from(us(u.user_time()) + us(u.system_time())).ok()
    })
}

/// `usage_usec` of a cgroup v2 `cpu.stat`.
fn cpu_stat_usage(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// Send `--signal`'s signal as Slurm does: with `B:` to the batch shell alone, else to the
/// job's other processes and not the batch shell (whose default for USR1 is to die): the
/// commands it runs, and flexrun, which passes USR1, USR2, HUP, INT and TERM on to its ranks.
fn warn_job(w: &flex_proto::WarnSignal, group: Pid) {
    let Ok(sig) = Signal::try_from(w.signal) else {
        return;
    };
    if w.batch_only {
        let _ = nix::sys::signal::kill(group, sig);
        return;
    }
    let shell = group.as_raw() as u32;
    for pid in super::files::group_members(shell) {
        if pid != shell {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), sig);
        }
    }
}

/// Wait for the job; returns CANCELLED or TIMEOUT when the supervisor ended it.
fn watch(
    spec: &LaunchSpec,
    child: &mut JobProcess,
    cg: Option<&JobCgroup>,
    term: &AtomicBool,
    wake: &UnixStream,
) -> (Option<JobState>, std::process::ExitStatus) {
    let group = Pid::from_raw(child.id() as i32);
    let limit = Instant::now() + Duration::from_secs(spec.time_limit_s);
    let grace = Duration::from_millis(spec.kill_grace_ms);
    let mut ending: Option<(JobState, Instant)> = None;
    let mut killed = false;
    // `--signal`: when to warn the job, until it has been warned.
    let mut warn = spec.warn.map(|w| {
        let at = limit
            .checked_sub(Duration::from_secs(u64::from(w.before_s)))
            .unwrap_or_else(Instant::now);
        (w, at)
    });
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (ending.map(|(s, _)| s), status),
            Ok(None) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
        let now = Instant::now();
        if let Some((w, at)) = warn {
            if now >= at && ending.is_none() {
                warn_job(&w, group);
                warn = None;
            }
        }
        if ending.is_none() {
            let why = if term.load(Ordering::SeqCst) {
                Some(JobState::Cancelled)
            } else if now >= limit {
                Some(JobState::Timeout)
            } else {
                None
            };
            if let Some(s) = why {
                let _ = killpg(group, Signal::SIGTERM);
                if let Some(c) = cg {
                    c.signal(Signal::SIGTERM);
                }
                ending = Some((s, now + grace));
            }
        }
        if let Some((_, at)) = ending {
            if !killed && now >= at {
                let _ = killpg(group, Signal::SIGKILL);
                if let Some(c) = cg {
                    c.kill_all();
                }
                killed = true;
            }
        }
        let next = match ending {
            Some((_, at)) if !killed => at,
            Some(_) => now + Duration::from_secs(1),
            None => warn.map_or(limit, |(_, at)| at.min(limit)),
        };
        let wait = next
            .saturating_duration_since(now)
            .min(Duration::from_secs(60));
        let ms = u16::try_from(wait.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            wake.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
        let mut buf = [0u8; 64];
        while matches!((&*wake).read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// Tell flexd the job ended: how, or (None) that its status file says; Ok once flexd answers.
fn notify(socket: &Path, job: JobId, status: Option<StatusFile>) -> Result<(), String> {
    let mut s = UnixStream::connect(socket).map_err(|e| e.to_string())?;
    let t = Some(Duration::from_secs(10));
    s.set_read_timeout(t).map_err(|e| e.to_string())?;
    s.set_write_timeout(t).map_err(|e| e.to_string())?;
    // The Hello and the request in one write: flexd reads the request after answering the
    // Hello, so the supervisor waits for one round trip, not two.
    let mut frames = proto::encode(&Hello {
        version: proto::PROTOCOL_VERSION,
        client: "flexd-supervisor".into(),
    });
    frames.extend(proto::encode(&Request::JobEnded(
        flex_proto::JobEndedRequest { job, status },
    )));
    s.write_all(&frames).map_err(|e| e.to_string())?;
    match proto::read_frame::<Response>(&mut s, proto::DEFAULT_MAX_FRAME) {
        Ok(Response::Hello(flex_proto::HelloReply { .. })) => {}
        other => return Err(format!("unexpected answer to hello: {other:?}")),
    }
    match proto::read_frame::<Response>(&mut s, proto::DEFAULT_MAX_FRAME) {
        Ok(Response::Pong) => Ok(()),
        Ok(other) => Err(format!("unexpected answer to JobEnded: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_is_usage_usec_of_cpu_stat() {
        let stat = "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 0\n";
        assert_eq!(super::cpu_stat_usage(stat), Some(1_234_567));
        assert_eq!(super::cpu_stat_usage("nr_periods 0\n"), None);
    }
}

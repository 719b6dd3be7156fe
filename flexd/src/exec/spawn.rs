//! Starting a job's first process: the script's interpreter on a memfd copy of the script, in
//! a new process group, as the user, and created directly in the job's cgroup.
//!
//! The child is made with `clone3(CLONE_INTO_CGROUP)` where the kernel has it (Linux 5.7 and
//! a cgroup2 hierarchy): moving a running process into a cgroup by writing `cgroup.procs` takes
//! the kernel's cgroup write lock, which waits for an RCU grace period (10-15 ms measured on a
//! hybrid-cgroup VM, most of a job's start), while a process created inside its cgroup takes
//! only the read side. Elsewhere the child is forked and joins by writing `cgroup.procs`. On
//! a hybrid host the child also joins its memory, pids, cpuset and devices cgroups of the v1
//! hierarchies (clone3 creates into one cgroup2 cgroup only), while it is still root and
//! before it runs anything of the job's.
//!
//! Between the clone and exec the child only makes system calls (and formats a message when one
//! fails): the supervisor is single-threaded.
//!
//! The supervisor waits for the exec no longer than `batch_start_timeout`: a working directory
//! or output file on a network filesystem that does not answer holds the child in the kernel
//! (killably), and would otherwise hold the supervisor, the job's time limit, its cancel and
//! its resources with it.

use super::cgroup::JobCgroup;
use super::{interpreter, LaunchSpec};
use nix::errno::Errno;
use nix::unistd::{Gid, Pid, Uid};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The job's first process, a child of the supervisor.
#[derive(Debug)]
pub(crate) struct JobProcess {
    pid: Pid,
}

impl JobProcess {
    pub(crate) fn id(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// Its exit status once it has ended (and is reaped), else None.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(self.pid.as_raw(), &mut status, libc::WNOHANG) };
        match r {
            0 => Ok(None),
            r if r == self.pid.as_raw() => Ok(Some(ExitStatus::from_raw(status))),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

/// The program, arguments and environment of the exec, made before the clone.
struct Exec {
    prog: CString,
    shown: String,
    /// NUL-terminated pointer arrays into `_strings`.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _strings: Vec<CString>,
}

impl Exec {
    fn new(spec: &LaunchSpec, script_fd: i32) -> Result<Exec, String> {
        let (prog, arg) = interpreter(&spec.script);
        let c = |s: &str, what: &str| {
            CString::new(s).map_err(|_| format!("{what} contains a NUL byte: {s:?}"))
        };
        let mut args = vec![c(&prog, "the interpreter")?];
        if let Some(a) = arg {
            args.push(c(&a, "the interpreter's argument")?);
        }
        args.push(c(&format!("/proc/self/fd/{script_fd}"), "the script path")?);
        for a in &spec.args {
            args.push(c(a, "an argument")?);
        }
        let env = spec
            .env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}"), "an environment variable"))
            .collect::<Result<Vec<_>, _>>()?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let (argv, envp) = (ptrs(&args), ptrs(&env));
        let mut strings = args;
        strings.extend(env);
        Ok(Exec {
            prog: c(&prog, "the interpreter")?,
            shown: prog,
            argv,
            envp,
            _strings: strings,
        })
    }
}

/// `struct clone_args` of clone3(2), the fields this module sets.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Fork this single-threaded process, the child inside the cgroup open as `cgroup` when given.
/// Returns the child's pid (0 in the child) and whether it was created in the cgroup.
fn clone_child(cgroup: Option<&OwnedFd>) -> Result<(i32, bool), Errno> {
    if let Some(fd) = cgroup {
        let mut args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: fd.as_raw_fd() as u64,
            ..CloneArgs::default()
        };
        // SAFETY: clone3 without CLONE_VM is a fork; `args` is a valid clone_args of the size
        // given. The child returns here with 0 and only makes system calls before exec.
        let r = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &mut args as *mut CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if r >= 0 {
            return Ok((r as i32, true));
        }
        // No clone3 or no CLONE_INTO_CGROUP here (ENOSYS, E2BIG, EINVAL...): fork and join.
    }
    // SAFETY: this process is single-threaded (see the module's comment).
    let r = unsafe { libc::fork() };
    if r < 0 {
        return Err(Errno::last());
    }
    Ok((r, false))
}

/// Why a job's first process did not start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// It could not be made or set up, or did not reach the script in time: why.
    Failed(String),
    /// It did not reach the script in time, and `cancelled` was set meanwhile; it was killed.
    Cancelled,
}

impl From<String> for NotStarted {
    fn from(why: String) -> Self {
        NotStarted::Failed(why)
    }
}

/// Start the job's first process: the script's interpreter on a memfd copy of the script, in a
/// new process group, as the user, in the job's cgroup when it has one. `created` runs with
/// the child's pid while the child waits, before it does anything: what it records about the
/// job holds before the job runs. The child goes on only on the byte sent after `created`
/// succeeds, so it never runs unrecorded, neither when `created` fails (the job does not
/// start, with its message) nor when this process dies meanwhile. A child that has not reached
/// the script within the spec's `start_timeout_ms` is killed: the job was `Cancelled` when
/// `cancelled` is set by then, else it `Failed`.
pub(crate) fn spawn_job(
    spec: &LaunchSpec,
    cg: Option<&JobCgroup>,
    cancelled: &AtomicBool,
    created: impl FnOnce(u32) -> Result<(), String>,
) -> Result<JobProcess, NotStarted> {
    let memfd = script_memfd(&spec.script)?;
    let script_fd = memfd.as_raw_fd();
    let exec = Exec::new(spec, script_fd)?;
    let (ctx, err_r) = ChildSetup::prepare(spec, cg, script_fd)?;
    let cg_dir = match cg {
        Some(c) => Some(
            std::fs::File::open(&c.path)
                .map(OwnedFd::from)
                .map_err(|e| format!("cannot open the job's cgroup {}: {e}", c.path.display()))?,
        ),
        None => None,
    };
    let (go_r, go_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let (pid, joined) = clone_child(cg_dir.as_ref()).map_err(|e| format!("fork: {e}"))?;
    if pid == 0 {
        drop(go_w);
        let mut go = [0u8; 1];
        if nix::unistd::read(&go_r, &mut go) != Ok(1) {
            // SAFETY: ends the child, which must not run: its supervisor is gone.
            unsafe { libc::_exit(127) }
        }
        drop(go_r);
        ctx.child(&exec, joined);
    }
    drop(go_r);
    // The child makes its own process group too, but only after joining its cgroups (a v1
    // hierarchy's write waits for an RCU grace period): made here as well, the group exists
    // before the run file names it, so whoever kills the group by that name finds it.
    // SAFETY: setpgid on our own child, which has not executed yet.
    unsafe { libc::setpgid(pid, pid) };
    let recorded = created(pid as u32);
    if recorded.is_ok() {
        let _ = nix::unistd::write(&go_w, b"1");
    }
    drop(go_w);
    if let Err(why) = recorded {
        // SAFETY: reaps our own child, which exits on the closed pipe.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(NotStarted::Failed(why));
    }
    // This process's copy of the error pipe's write end goes, so the pipe reads as ended when
    // the child's copy closes (at its exec, or its exit).
    drop(ctx);
    drop(memfd);
    let err_r = std::fs::File::from(err_r);
    let deadline = Duration::from_millis(spec.start_timeout_ms);
    // A cancel does not cut the setup short: the job starts, output files made, as in
    // Slurm, and the supervisor ends it at once; only a setup held past the deadline is cut.
    if !readable_within(&err_r, deadline) {
        let stuck = stuck_at(pid, spec);
        kill_unstarted(pid);
        if cancelled.load(Ordering::SeqCst) {
            return Err(NotStarted::Cancelled);
        }
        return Err(NotStarted::Failed(format!(
            "the job's first process did not reach the script within {} \
             (batch_start_timeout) and was killed: {stuck}",
            humantime::format_duration(deadline)
        )));
    }
    let mut msg = String::new();
    let _ = (&err_r).read_to_string(&mut msg);
    let child = JobProcess {
        pid: Pid::from_raw(pid),
    };
    if msg.is_empty() {
        return Ok(child);
    }
    // SAFETY: reaps our own child, which has exited (or is exiting) after reporting.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    Err(NotStarted::Failed(msg))
}

/// A path as a job's end reason shows it: whole up to 512 bytes, else its first 256 and its
/// length (an output pattern of many `%x` expands to a long one, and the reason is stored).
fn shown(path: &str) -> String {
    if path.len() <= 512 {
        return path.to_string();
    }
    let mut cut = 256;
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &path[..cut], path.len())
}

/// Whether `pipe` has something to read or has ended within `deadline` (a signal does not end
/// the wait).
fn readable_within(pipe: &std::fs::File, deadline: Duration) -> bool {
    use std::os::fd::AsFd;
    let end = Instant::now() + deadline;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let slice = left.min(Duration::from_millis(100)).as_millis() as u16;
        let mut fds = [nix::poll::PollFd::new(
            pipe.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, slice) {
            Ok(0) | Err(Errno::EINTR) => {}
            // Readable or ended; or poll itself failed, and the read that follows blocks.
            Ok(_) | Err(_) => return true,
        }
    }
}

/// Where a child that has not reached the script is held, from the system call it is in
/// (`/proc/PID/syscall`) and the kernel function it waits in (`/proc/PID/wchan`).
fn stuck_at(pid: i32, spec: &LaunchSpec) -> String {
    let call = std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok());
    let outputs = std::iter::once(spec.stdout.as_str())
        .chain(spec.stderr.as_deref())
        .map(shown)
        .collect::<Vec<_>>()
        .join(" or ");
    let workdir = shown(&spec.workdir.to_string_lossy());
    let mut what = match call {
        Some(libc::SYS_chdir) => format!("it was entering its working directory {workdir}"),
        Some(libc::SYS_openat | libc::SYS_mkdirat) => {
            format!("it was opening its output file {outputs} (in {workdir})")
        }
        #[cfg(target_arch = "x86_64")]
        Some(libc::SYS_open | libc::SYS_mkdir) => {
            format!("it was opening its output file {outputs} (in {workdir})")
        }
        _ => format!(
            "it was setting up: joining its cgroup, entering its working directory {workdir} \
             or opening its output file {outputs}"
        ),
    };
    if let Ok(w) = std::fs::read_to_string(format!("/proc/{pid}/wchan")) {
        let w = w.trim();
        if !w.is_empty() && w != "0" {
            what.push_str(&format!(", waiting in the kernel at {w}"));
        }
    }
    what + " (a network filesystem that does not answer?)"
}

/// Kill a child that has not reached the script, and reap it if it dies within a second: one
/// held in an uninterruptible wait is left behind (its cgroup's removal waits for it in turn).
fn kill_unstarted(pid: i32) {
    // SAFETY: signals to our own child and its group, which setpgid above made.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::killpg(pid, libc::SIGKILL);
    }
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        // SAFETY: reaps our own child, without blocking.
        let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        if r != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The groups of `user` (whose primary group is `gid`) from the system's group database; just
/// `gid` when it cannot say.
pub(crate) fn user_groups(user: &str, gid: u32) -> Vec<Gid> {
    CString::new(user.as_bytes())
        .ok()
        .and_then(|u| nix::unistd::getgrouplist(&u, Gid::from_raw(gid)).ok())
        .unwrap_or_else(|| vec![Gid::from_raw(gid)])
}

/// The script in a memfd, so the job can read it without it lying on disk.
fn script_memfd(script: &str) -> Result<OwnedFd, String> {
    let memfd =
        nix::sys::memfd::memfd_create(c"flex-job-script", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(|e| format!("memfd_create: {e}"))?;
    std::fs::File::from(memfd.try_clone().map_err(|e| format!("memfd: {e}"))?)
        .write_all(script.as_bytes())
        .map_err(|e| format!("cannot write the script to a memfd: {e}"))?;
    Ok(memfd)
}

/// What the job's process does between the clone and exec.
struct ChildSetup {
    uid: Uid,
    gid: Gid,
    /// Set when the supervisor is root: drop to these groups, gid and uid.
    groups: Option<Vec<Gid>>,
    workdir: CString,
    workdir_shown: String,
    stdout: CString,
    stderr: Option<CString>,
    cpus: Option<nix::sched::CpuSet>,
    script_fd: i32,
    err_w: OwnedFd,
    /// The job's cgroup.procs: joined first, while still privileged.
    cgroup_procs: Option<CString>,
    /// The cgroup.procs of its v1 directories, joined next.
    v1_procs: Vec<CString>,
    /// The submitter's umask, set before the output files are created.
    umask: nix::sys::stat::Mode,
    /// `--open-mode=append`: O_APPEND instead of O_TRUNC.
    append: bool,
    /// The submitter's soft limits to set (resource, value).
    rlimits: Vec<(nix::sys::resource::Resource, nix::sys::resource::rlim_t)>,
}

impl ChildSetup {
    /// Everything the child needs, made before the fork (the child may only make system
    /// calls); returns it with the read end of the pipe the child reports a failure on.
    fn prepare(
        spec: &LaunchSpec,
        cg: Option<&JobCgroup>,
        script_fd: i32,
    ) -> Result<(ChildSetup, OwnedFd), String> {
        let privileged = nix::unistd::geteuid().is_root();
        if !privileged && spec.uid != nix::unistd::geteuid().as_raw() {
            return Err(format!(
                "flexd runs as uid {} and cannot run a job as uid {}",
                nix::unistd::geteuid(),
                spec.uid
            ));
        }
        let groups = privileged.then(|| match &spec.groups {
            Some(g) => g.iter().map(|&g| Gid::from_raw(g)).collect(),
            None => user_groups(&spec.user, spec.gid),
        });
        let cstr = |p: &[u8], what: &str| {
            CString::new(p).map_err(|_| format!("{what} contains a NUL byte"))
        };
        let workdir = cstr(spec.workdir.as_os_str().as_bytes(), "the working directory")?;
        let stdout = cstr(spec.stdout.as_bytes(), "the output path")?;
        let stderr = spec
            .stderr
            .as_ref()
            .map(|p| cstr(p.as_bytes(), "the error path"))
            .transpose()?;
        let cgroup_procs = cg
            .map(|c| cstr(c.procs_file().as_os_str().as_bytes(), "the cgroup path"))
            .transpose()?;
        let v1_procs = cg
            .into_iter()
            .flat_map(JobCgroup::other_v1)
            .map(|d| {
                cstr(
                    d.join("cgroup.procs").as_os_str().as_bytes(),
                    "the cgroup path",
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cpus = (!spec.cpus.is_empty()).then(|| {
            let mut set = nix::sched::CpuSet::new();
            for &c in &spec.cpus {
                let _ = set.set(c as usize);
            }
            set
        });
        let (err_r, err_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let ctx = ChildSetup {
            uid: Uid::from_raw(spec.uid),
            gid: Gid::from_raw(spec.gid),
            groups,
            workdir,
            workdir_shown: shown(&spec.workdir.to_string_lossy()),
            stdout,
            stderr,
            cpus,
            script_fd,
            err_w,
            cgroup_procs,
            v1_procs,
            umask: nix::sys::stat::Mode::from_bits_truncate(spec.umask & 0o777),
            append: spec.append,
            rlimits: spec
                .rlimits
                .iter()
                .filter_map(|(name, v)| {
                    let r = resource(name)?;
                    Some((r, v.unwrap_or(nix::sys::resource::RLIM_INFINITY)))
                })
                .collect(),
        };
        Ok((ctx, err_r))
    }

    fn fail(&self, what: String, e: nix::errno::Errno) -> std::io::Error {
        let msg = format!("{what}: {}", e.desc());
        let _ = nix::unistd::write(&self.err_w, msg.as_bytes());
        std::io::Error::from_raw_os_error(e as i32)
    }

    /// In the child: set up, then exec; never returns. A failure is written to the error pipe
    /// and the child exits 127.
    fn child(&self, exec: &Exec, joined: bool) -> ! {
        if self.run(joined).is_ok() {
            // SAFETY: NUL-terminated strings and NULL-terminated pointer arrays made before the
            // clone; execve returns only on failure.
            unsafe { libc::execve(exec.prog.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr()) };
            self.fail(format!("cannot run {}", exec.shown), Errno::last());
        }
        // SAFETY: ends the child without running the supervisor's exit handlers.
        unsafe { libc::_exit(127) }
    }

    /// The child's setup before exec. `joined`: it was created in its cgroup.
    fn run(&self, joined: bool) -> std::io::Result<()> {
        if let (Some(procs), false) = (&self.cgroup_procs, joined) {
            self.join_cgroup(procs)?;
        }
        for procs in &self.v1_procs {
            self.join_cgroup(procs)?;
        }
        if self.groups.is_some() {
            // flexd and the supervisors keep the OOM killer off themselves (-1000), which a
            // fork inherits: the job's processes are fair game again (and, written as root,
            // cannot lower it back).
            // SAFETY: a valid NUL-terminated path; the buffer is one valid byte.
            unsafe {
                let fd = libc::open(
                    c"/proc/self/oom_score_adj".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                );
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
        }
        // What std::process::Command does for a child: a process group of its own, stdin from
        // /dev/null, no blocked signals and SIGPIPE at its default.
        // SAFETY: plain system calls on this process.
        unsafe {
            if libc::setpgid(0, 0) < 0 {
                return Err(self.fail("setpgid".into(), Errno::last()));
            }
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null < 0 || libc::dup2(null, 0) < 0 {
                return Err(self.fail("cannot open /dev/null".into(), Errno::last()));
            }
            libc::close(null);
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
        // The submitter's soft limits, never above the hard limit the job starts under (best
        // effort: a limit that cannot be set leaves the job's as it is).
        for &(r, soft) in &self.rlimits {
            if let Ok((_, hard)) = nix::sys::resource::getrlimit(r) {
                let _ = nix::sys::resource::setrlimit(r, soft.min(hard), hard);
            }
        }
        if let Some(groups) = &self.groups {
            nix::unistd::setgroups(groups).map_err(|e| self.fail("setgroups".into(), e))?;
            nix::unistd::setgid(self.gid)
                .map_err(|e| self.fail(format!("setgid {}", self.gid), e))?;
            nix::unistd::setuid(self.uid)
                .map_err(|e| self.fail(format!("setuid {}", self.uid), e))?;
        }
        nix::sys::stat::umask(self.umask);
        nix::unistd::chdir(self.workdir.as_c_str()).map_err(|e| {
            self.fail(
                format!(
                    "cannot enter the working directory {} as uid {}",
                    self.workdir_shown, self.uid
                ),
                e,
            )
        })?;
        self.redirect(&self.stdout, 1)?;
        match &self.stderr {
            Some(p) => self.redirect(p, 2)?,
            // SAFETY: dup2 of an open descriptor onto stderr.
            None => {
                if unsafe { libc::dup2(1, 2) } < 0 {
                    return Err(self.fail("dup2".into(), Errno::last()));
                }
            }
        }
        if let Some(set) = &self.cpus {
            // Binding is best effort: it never fails the job.
            let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), set);
        }
        // The interpreter opens the script as /proc/self/fd/N: keep it across exec.
        // SAFETY: fcntl on a descriptor this process owns.
        if unsafe { libc::fcntl(self.script_fd, libc::F_SETFD, 0) } < 0 {
            return Err(self.fail("fcntl".into(), Errno::last()));
        }
        Ok(())
    }
}

impl ChildSetup {
    /// Move this process into the job's cgroup (writing "0" to its cgroup.procs).
    fn join_cgroup(&self, procs: &CString) -> std::io::Result<()> {
        let what = || format!("cannot join the job's cgroup {}", procs.to_string_lossy());
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(self.fail(what(), Errno::last()));
        }
        // SAFETY: fd is open; the buffer is one valid byte.
        let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        let err = Errno::last();
        // SAFETY: fd is ours and no longer needed.
        unsafe { libc::close(fd) };
        if n != 1 {
            return Err(self.fail(what(), err));
        }
        Ok(())
    }

    /// Create an output file as the user (never through a symlink) onto descriptor `target`;
    /// a directory of its path that does not exist is made first (as the user, with the job's
    /// umask), as Slurm 23.02 and later do for a job's output files.
    fn redirect(&self, path: &CString, target: i32) -> std::io::Result<()> {
        let mode = if self.append {
            libc::O_APPEND
        } else {
            libc::O_TRUNC
        };
        // Non-blocking, so that a FIFO (with no reader) cannot hold the job and its supervisor
        // before the job starts; the flag is cleared once the file is known to be a file.
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | mode
            | libc::O_NOFOLLOW
            | libc::O_CLOEXEC
            | libc::O_NONBLOCK;
        // SAFETY: a valid NUL-terminated path.
        let mut fd = unsafe { libc::open(path.as_ptr(), flags, 0o644 as libc::c_uint) };
        if fd < 0 && Errno::last() == Errno::ENOENT {
            make_parents(path.as_bytes());
            // SAFETY: as above.
            fd = unsafe { libc::open(path.as_ptr(), flags, 0o644 as libc::c_uint) };
        }
        if fd < 0 {
            return Err(self.fail(
                format!(
                    "cannot create the output file {} in {} as uid {}",
                    shown(&path.to_string_lossy()),
                    self.workdir_shown,
                    self.uid
                ),
                Errno::last(),
            ));
        }
        // A regular file, or /dev/null (as Slurm scripts' `-o /dev/null` asks); a FIFO, a socket
        // or another device is refused: it could block or feed something else.
        // SAFETY: fd is open; st is written by fstat.
        let kind = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) < 0 {
                None
            } else {
                let fmt = st.st_mode & libc::S_IFMT;
                let null = fmt == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3);
                (fmt != libc::S_IFREG && !null).then_some(fmt)
            }
        };
        if let Some(fmt) = kind {
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            let what = match fmt {
                libc::S_IFIFO => "a FIFO",
                libc::S_IFSOCK => "a socket",
                _ => "a device",
            };
            return Err(self.fail(
                format!(
                    "the output file {} in {} is {what}, not a file",
                    shown(&path.to_string_lossy()),
                    self.workdir_shown
                ),
                Errno::EINVAL,
            ));
        }
        // SAFETY: fcntl on a descriptor this process owns.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
        // SAFETY: fd is open; dup2 onto a standard descriptor, then close the original.
        let r = unsafe { libc::dup2(fd, target) };
        // SAFETY: fd is ours and no longer needed.
        unsafe { libc::close(fd) };
        if r < 0 {
            return Err(self.fail("dup2".into(), Errno::last()));
        }
        Ok(())
    }
}

/// Make each missing directory above the file `path` (mkdir(2) with mode 0777 less the umask;
/// one that exists, or cannot be made, is left to the open that follows to report).
fn make_parents(path: &[u8]) {
    let mut prefix = Vec::with_capacity(path.len() + 1);
    for (i, &b) in path.iter().enumerate() {
        if b == b'/' && i > 0 {
            prefix.clear();
            prefix.extend_from_slice(&path[..i]);
            prefix.push(0);
            // SAFETY: a NUL-terminated path.
            unsafe { libc::mkdir(prefix.as_ptr().cast(), 0o777) };
        }
    }
}

/// A resource limit by Slurm's name.
fn resource(name: &str) -> Option<nix::sys::resource::Resource> {
    use nix::sys::resource::Resource;
    Some(match name {
        "AS" => Resource::RLIMIT_AS,
        "CORE" => Resource::RLIMIT_CORE,
        "CPU" => Resource::RLIMIT_CPU,
        "DATA" => Resource::RLIMIT_DATA,
        "FSIZE" => Resource::RLIMIT_FSIZE,
        "MEMLOCK" => Resource::RLIMIT_MEMLOCK,
        "NOFILE" => Resource::RLIMIT_NOFILE,
        "NPROC" => Resource::RLIMIT_NPROC,
        "RSS" => Resource::RLIMIT_RSS,
        "STACK" => Resource::RLIMIT_STACK,
        _ => return None,
    })
}

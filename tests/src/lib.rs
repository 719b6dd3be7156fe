//! Harness for the end-to-end tests: start the real flexd on a temporary socket and state
//! directory, talk to it with a tiny protocol client, and run the real command binaries
//! against it.
//!
//! ```no_run
//! use flex_tests::{Daemon, script_job};
//! let d = Daemon::start("a100-40gb-x2.toml");
//! let job = d.client().submit(script_job("#!/bin/sh\ntrue\n", &d.scratch("w"))).unwrap();
//! let view = d.wait_finished(job);
//! assert_eq!(view.exit_code, Some(0));
//! let out = d.cmd("flexq").output().unwrap();
//! ```
//!
//! Binaries are found next to the test executable (`target/<profile>/`). `cargo test
//! --workspace` builds every workspace binary first; a narrower `cargo test -p flex-tests`
//! does not, so build them with `cargo build --workspace --bins` before it.
//!
//! Every daemon gets `--force-topology`, so the tests see the simulated topology even on a
//! host with GPUs, and a short `kill_grace` so time-limit and cancel tests end quickly.

pub mod cli;
mod client;

pub use client::{Client, ClientError};
use flex_proto::{JobSpec, JobState, JobView, QueueFilter, Request, Response};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long helpers wait for anything (a socket, a job state) before failing the test. Generous:
/// the tests share a slow machine; nothing here asserts on speed.
pub const WAIT: Duration = Duration::from_secs(60);

/// The directory that holds the workspace binaries of the profile the tests were built with.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>
    let dir = exe
        .parent()
        .and_then(|d| {
            if d.ends_with("deps") {
                d.parent()
            } else {
                Some(d)
            }
        })
        .expect("the test executable lies in a target directory");
    dir.to_path_buf()
}

/// The path of a workspace binary, with a clear panic when it has not been built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (README, command 2)",
        p.display()
    );
    p
}

/// A running flexd on its own temporary socket and state directory, killed on drop.
pub struct Daemon {
    dir: tempfile::TempDir,
    topology: String,
    child: Option<Child>,
    starts: u32,
    /// Extra environment for flexd, set after the harness's own.
    env: Vec<(String, String)>,
    /// Run flexd as this uid and gid instead of the test's own.
    user: Option<(u32, u32)>,
    /// flexd's open-file limit, soft and hard (None: the test's own).
    nofile: Option<u64>,
}

impl Daemon {
    /// Start flexd with a topology (a shipped name such as `a100-40gb-x2.toml`, or a path) and
    /// wait until it answers on its socket.
    pub fn start(topology: &str) -> Daemon {
        Self::start_with(topology, "")
    }

    /// Like [`Daemon::start`], with extra lines for the daemon's config file (`policy =
    /// "fifo"`, `[limits]` tables, ...). They are appended to the harness's own settings.
    pub fn start_with(topology: &str, config: &str) -> Daemon {
        Self::start_env(topology, config, &[])
    }

    /// Like [`Daemon::start_with`], with extra environment variables for flexd; they win over
    /// the harness's own (`("FLEX_LOG", "trace")` logs everything).
    pub fn start_env(topology: &str, config: &str, env: &[(&str, &str)]) -> Daemon {
        Self::start_seeded(topology, config, env, None)
    }

    /// Like [`Daemon::start`], on a copy of an existing database (an old version's, for the
    /// compatibility tests): flexd finds it in its state directory as if it had written it.
    pub fn start_on_db(topology: &str, db: &Path) -> Daemon {
        Self::start_seeded(topology, "", &[], Some(db))
    }

    /// Like [`Daemon::start_with`], with flexd's open-file limit (soft and hard) set to
    /// `nofile`, so that flexd cannot raise it.
    pub fn start_nofile(topology: &str, config: &str, nofile: u64) -> Daemon {
        let mut d = Self::unstarted(topology, config);
        d.nofile = Some(nofile);
        d.spawn();
        d
    }

    /// Like [`Daemon::start`], on a copy of another state directory (database, run files,
    /// everything), taken while its flexd may still run.
    pub fn start_on_state_copy(topology: &str, state_dir: &Path) -> Daemon {
        let d = Self::unstarted(topology, "");
        let out = Command::new("cp")
            .arg("-a")
            .arg(state_dir)
            .arg(d.state_dir())
            .output()
            .expect("run cp");
        assert!(
            out.status.success(),
            "cp -a {}: {}",
            state_dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut d = d;
        d.spawn();
        d
    }

    /// A daemon with its directory and config file written, not started.
    fn unstarted(topology: &str, config: &str) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("flexd-e2e-")
            .tempdir()
            .expect("temporary directory");
        // Jobs of other users must reach their scratch directories below this one.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the temporary directory");
        let text = format!("kill_grace = \"2s\"\n{config}\n");
        std::fs::write(dir.path().join("flexd.toml"), text).expect("write flexd.toml");
        Daemon {
            dir,
            topology: topology.to_string(),
            child: None,
            starts: 0,
            env: Vec::new(),
            user: None,
            nofile: None,
        }
    }

    fn start_seeded(
        topology: &str,
        config: &str,
        env: &[(&str, &str)],
        db: Option<&Path>,
    ) -> Daemon {
        let mut d = Self::unstarted(topology, config);
        d.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(db) = db {
            std::fs::create_dir_all(d.state_dir()).expect("create the state directory");
            std::fs::copy(db, d.db_path()).unwrap_or_else(|e| panic!("copy {}: {e}", db.display()));
        }
        d.spawn();
        d
    }

    /// Start flexd as another (non-root) user: the temporary directory becomes theirs so flexd
    /// can create its state and socket there. Needs root.
    pub fn start_as(topology: &str, config: &str, uid: u32, gid: u32) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("flexd-e2e-")
            .tempdir()
            .expect("temporary directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the temporary directory");
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
            .expect("chown the temporary directory");
        let text = format!("kill_grace = \"2s\"\n{config}\n");
        std::fs::write(dir.path().join("flexd.toml"), text).expect("write flexd.toml");
        let mut d = Daemon {
            dir,
            topology: topology.to_string(),
            child: None,
            starts: 0,
            env: Vec::new(),
            user: Some((uid, gid)),
            nofile: None,
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "flexd is already running");
        self.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the daemon log");
        let mut cmd = Command::new(bin("flexd"));
        if let Some((uid, gid)) = self.user {
            std::os::unix::process::CommandExt::uid(&mut cmd, uid);
            std::os::unix::process::CommandExt::gid(&mut cmd, gid);
        }
        if let Some(n) = self.nofile {
            let lim = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            // SAFETY: setrlimit is async-signal-safe and `lim` is a plain copied value.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = self
            .flexd_args(&mut cmd, &self.socket())
            .env_remove("FLEX_CONFIG")
            .env("FLEX_LOG", "flexd=debug")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup the log"))
            .stderr(log)
            .spawn()
            .expect("start flexd");
        self.child = Some(child);
        self.wait_ready();
    }

    /// flexd with this daemon's config, state directory and topology but its socket at
    /// `socket`, not started (to try a second flexd on the same state directory).
    pub fn flexd_command(&self, socket: &Path) -> Command {
        let mut cmd = Command::new(bin("flexd"));
        self.flexd_args(&mut cmd, socket);
        cmd
    }

    fn flexd_args<'c>(&self, cmd: &'c mut Command, socket: &Path) -> &'c mut Command {
        cmd.arg("--config")
            .arg(self.config_path())
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(self.state_dir())
            .arg("--topology")
            .arg(&self.topology)
            .arg("--force-topology")
            .arg("-vv")
            .current_dir(self.dir.path())
            .env_remove("FLEX_SOCKET")
    }

    /// Wait until the socket exists with mode 0666 and flexd answers a ping.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "flexd exited with {status} before it was ready; its log:\n{}",
                    self.log()
                );
            }
            if let Ok(meta) = std::fs::metadata(self.socket()) {
                if meta.file_type().is_socket() {
                    if let Ok(mut c) = Client::connect(self.socket()) {
                        if matches!(c.request(&Request::Ping), Ok(Response::Pong)) {
                            // Read again: flexd makes the socket 0666 right after binding
                            // it, and the first look may have come in between.
                            let meta = std::fs::metadata(self.socket()).unwrap_or(meta);
                            let mode = meta.permissions().mode() & 0o777;
                            assert_eq!(mode, 0o666, "socket mode is {mode:o}, not 666");
                            return;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "flexd did not answer on {} within {WAIT:?}; its log:\n{}",
                self.socket().display(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("flexd.sock")
    }

    /// The daemon's state directory (database, run and status files).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The daemon's database.
    pub fn db_path(&self) -> PathBuf {
        self.state_dir().join("flex.db")
    }

    /// The config file the daemon was started with (also exported as FLEX_CONFIG by `cmd`).
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("flexd.toml")
    }

    /// The daemon's combined stdout and stderr so far, across restarts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("flexd.log")
    }

    /// A fresh directory under the daemon's temporary directory, writable by every user (for
    /// job working directories and output files). Reuses it when it exists.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join("scratch").join(name);
        std::fs::create_dir_all(&p).expect("create a scratch directory");
        for d in [p.parent().expect("scratch parent"), p.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777))
                .expect("chmod a scratch directory");
        }
        p
    }

    /// The process id of the running flexd.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("flexd is running").id()
    }

    /// A command binary (`flexsub`, `flexq`, ...) with FLEX_SOCKET and FLEX_CONFIG pointing at
    /// this daemon, run in the daemon's temporary directory.
    pub fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(bin(name));
        c.env("FLEX_SOCKET", self.socket())
            .env("FLEX_CONFIG", self.config_path())
            .current_dir(self.dir.path());
        c
    }

    /// A new protocol connection (handshake done).
    pub fn client(&self) -> Client {
        Client::connect(self.socket()).unwrap_or_else(|e| {
            panic!(
                "cannot connect to {}: {e}; flexd log:\n{}",
                self.socket().display(),
                self.log()
            )
        })
    }

    /// Send one request as another user (through the `flex-testclient` binary, run with that
    /// uid and gid; needs root) and return flexd's response.
    pub fn request_as(&self, uid: u32, gid: u32, req: &Request) -> Response {
        use std::os::unix::process::CommandExt;
        let out = Command::new(bin("flex-testclient"))
            .arg(serde_json::to_string(req).expect("requests serialize"))
            .env("FLEX_SOCKET", self.socket())
            .uid(uid)
            .gid(gid)
            .output()
            .expect("run flex-testclient");
        assert!(
            out.status.success(),
            "flex-testclient as uid {uid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("flex-testclient prints a response")
    }

    /// Kill flexd with SIGKILL (its jobs and their supervisors keep running) and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop flexd with SIGTERM and return its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("flexd is running");
        signal(c.id(), libc::SIGTERM);
        wait_child(&mut c, WAIT).unwrap_or_else(|| {
            let _ = c.kill();
            panic!(
                "flexd did not exit within {WAIT:?} of SIGTERM; log:\n{}",
                self.log()
            )
        })
    }

    /// Send a signal to the running flexd (SIGHUP to reload its config).
    pub fn signal(&self, sig: i32) {
        signal(self.pid(), sig);
    }

    /// Start flexd again on the same socket, state directory and topology (after `kill9` or
    /// `stop`); waits until it answers.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    /// Start the next job ids at `first`, as Slurm's FirstJobId does (flexd is restarted), so
    /// that a test can give two schedulers' jobs the same ids.
    pub fn first_job_id(mut self, first: u64) -> Daemon {
        self.stop();
        let db = rusqlite::Connection::open(self.db_path()).unwrap();
        db.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?1)",
            [first - 1],
        )
        .unwrap();
        drop(db);
        self.restart();
        self
    }

    /// The job's view, including finished jobs; None when flexd does not know it.
    pub fn job(&self, job: JobId) -> Option<JobView> {
        self.client()
            .queue(QueueFilter {
                jobs: vec![job],
                include_finished: true,
                ..QueueFilter::default()
            })
            .expect("queue request")
            .into_iter()
            .find(|v| v.id == job)
    }

    /// Wait until the job is in one of `states`; panics with the daemon's log after [`WAIT`].
    pub fn wait_state(&self, job: JobId, states: &[JobState]) -> JobView {
        let deadline = Instant::now() + WAIT;
        loop {
            let view = self.job(job);
            if let Some(v) = &view {
                if states.contains(&v.state) {
                    return v.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "job {job} did not reach {states:?} within {WAIT:?} (now {view:?}); log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until the job has finished, whatever the outcome.
    pub fn wait_finished(&self, job: JobId) -> JobView {
        let done: Vec<JobState> = JobState::ALL
            .into_iter()
            .filter(|s| s.is_finished())
            .collect();
        self.wait_state(job, &done)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Supervisors outlive flexd by design; end the ones this daemon started so a test run
        // leaves no jobs behind.
        if let Ok(entries) = std::fs::read_dir(self.state_dir().join("run")) {
            for e in entries.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                        if let Some(pid) = v.get("supervisor_pid").and_then(|p| p.as_u64()) {
                            signal(pid as u32, libc::SIGTERM);
                        }
                    }
                }
            }
        }
    }
}

/// Send a signal to a process; errors (it is gone) are ignored.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Wait for a child with a timeout.
pub fn wait_child(c: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = c.try_wait().expect("wait for a child") {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until `check` returns Some, or panic with `what` after [`WAIT`].
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A one-leaf job running `script` in `workdir`, with the test's environment and a one-hour
/// limit; adjust the fields for other cases.
pub fn script_job(script: &str, workdir: &Path) -> JobSpec {
    JobSpec {
        name: "e2e".into(),
        script: script.into(),
        args: Vec::new(),
        workdir: workdir.to_path_buf(),
        submit_dir: workdir.to_path_buf(),
        env: vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("FLEX_E2E".into(), "1".into()),
        ]
        .into(),
        stdout: None,
        stderr: None,
        request: ResourceRequest::leaves(1, 3600),
        account: None,
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    }
}

/// The job's run file as JSON, once it names the job's process group (shared by the hardening
/// tests that act on a job's supervisor or group).
pub fn run_file(d: &Daemon, job: JobId) -> serde_json::Value {
    let path = d.state_dir().join("run").join(format!("{job}.run"));
    wait_for("the run file with the job's process group", || {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        v.get("job_pgid")?.as_i64()?;
        Some(v)
    })
}

/// A child killed with SIGKILL and reaped on drop, even when the test fails.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reading flexd's metrics endpoint.
pub mod metrics {
    use std::collections::{BTreeMap, HashMap};
    use std::io::{Read, Write};

    /// A loopback address with a port free now, for flexd's `metrics_listen` (flexd binds it
    /// a moment later).
    pub fn free_address() -> String {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string()
    }

    /// GET `path` from `addr`; returns the status code and the body.
    pub fn http_get(addr: &str, path: &str) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(crate::WAIT)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }

    /// Check the text exposition format; returns each sample's value by `name{labels}`.
    pub fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
        let mut types: HashMap<String, String> = HashMap::new();
        let mut helps = 0;
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                types.insert(name.to_string(), kind.to_string());
                continue;
            }
            if line.starts_with("# HELP ") {
                helps += 1;
                continue;
            }
            assert!(
                !line.starts_with('#') && !line.is_empty(),
                "stray line {line:?}"
            );
            let (key, value) = line.rsplit_once(' ').expect("a sample: name{labels} value");
            let name = key.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "metric name {name:?}"
            );
            if let Some(labels) = key.strip_prefix(name) {
                if !labels.is_empty() {
                    let inner = labels
                        .strip_prefix('{')
                        .and_then(|l| l.strip_suffix('}'))
                        .unwrap_or_else(|| panic!("labels of {line:?}"));
                    for pair in inner.split("\",") {
                        let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("{line:?}"));
                        assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
                        assert!(!v.trim_end_matches('"').contains('"'), "{line:?}");
                    }
                }
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(name);
            assert!(
                types.contains_key(family),
                "{name} has no TYPE line before it"
            );
            let v: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("value of {line:?}"));
            samples.insert(key.to_string(), v);
        }
        assert_eq!(helps, types.len(), "one HELP per family");
        samples
    }
}

/// A tmpfs over a directory, for tests of the state directory's file system (a full disk, a
/// read-only one). Mounting needs root.
pub mod mount {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// A tmpfs mounted over a directory, unmounted on drop.
    pub struct Mount(pub PathBuf);

    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }

    impl Mount {
        /// Remount it read-only (as a disk the kernel remounts after errors).
        pub fn read_only(&self) -> bool {
            Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(&self.0)
                .status()
                .is_ok_and(|s| s.success())
        }
    }

    /// A FUSE filesystem that never answers, mounted on a directory: every lookup, open or
    /// stat below it waits in the kernel (killably), as below a network filesystem whose
    /// server is gone. Dropping it aborts the connection (the waits fail with ENOTCONN) and
    /// unmounts it.
    pub struct DeadFuse {
        dir: PathBuf,
        dev: Option<std::fs::File>,
    }

    impl Drop for DeadFuse {
        fn drop(&mut self) {
            // The last descriptor of the connection closed aborts it.
            drop(self.dev.take());
            let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    /// Mount a [`DeadFuse`] on `dir`; None when this host does not let the test mount FUSE.
    pub fn dead_fuse(dir: &Path) -> Option<DeadFuse> {
        use std::os::fd::AsRawFd;
        let dev = Path::new("/dev/fuse");
        if !dev.exists() {
            // The module may be loaded with no node made for it (a container's /dev).
            let _ = nix::sys::stat::mknod(
                dev,
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::from_bits_truncate(0o666),
                nix::sys::stat::makedev(10, 229),
            );
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dev)
            .ok()?;
        let options = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            f.as_raw_fd()
        );
        nix::mount::mount(
            Some("flex-dead"),
            dir,
            Some("fuse"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .ok()?;
        Some(DeadFuse {
            dir: dir.to_path_buf(),
            dev: Some(f),
        })
    }

    /// Mount a tmpfs of `size` over `dir` (its contents copied in); None when this host does not
    /// let the test mount one.
    pub fn tmpfs_over(dir: &Path, size: &str) -> Option<Mount> {
        tmpfs_with(dir, &format!("size={size}"))
    }

    /// Like [`tmpfs_over`], with tmpfs's mount options (`size=64m,nr_inodes=64`).
    pub fn tmpfs_with(dir: &Path, options: &str) -> Option<Mount> {
        let saved = dir.with_extension("saved");
        std::fs::rename(dir, &saved).unwrap();
        std::fs::create_dir(dir).unwrap();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("{options},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            std::fs::remove_dir(dir).unwrap();
            std::fs::rename(&saved, dir).unwrap();
            return None;
        }
        let copied = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", saved.display()))
            .arg(dir)
            .status()
            .unwrap();
        assert!(copied.success());
        Some(Mount(dir.to_path_buf()))
    }
}

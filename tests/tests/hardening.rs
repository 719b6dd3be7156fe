//! Local users and exhausted resources (issue 12): a user who holds many connections, flexd out
//! of file descriptors, a look-alike supervisor, a reused process-group id, a flexd on a copy
//! of a live state directory. Each test runs the real flexd; those that act as another user
//! (uid 65534, `nobody`) need root and are skipped with a notice otherwise.

use flex_proto::{self as proto, Hello, JobState, Response, PROTOCOL_VERSION};
use flex_tests::{script_job, signal, wait_for, Daemon};
use gres_plugin::JobId;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const A100: &str = "a100-40gb-x2.toml";
const NOBODY: u32 = 65534;

fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("notice: skipped, needs root to act as another user");
    false
}

/// Run `f` on a thread whose effective uid is `uid` (credentials are per thread in Linux; the
/// raw syscall changes only the calling thread's, unlike libc's setresuid). Sockets it
/// connects or listens on carry that uid in SO_PEERCRED.
fn as_uid<T: Send + 'static>(uid: u32, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        let set = |euid: u32| {
            // SAFETY: setresuid has no memory-safety preconditions; -1 keeps a value as is.
            let r = unsafe { libc::syscall(libc::SYS_setresuid, -1i32, euid, -1i32) };
            assert_eq!(r, 0, "setresuid: {}", std::io::Error::last_os_error());
        };
        set(uid);
        let out = f();
        set(0);
        out
    })
    .join()
    .expect("the thread as another uid")
}

/// The job's run file as JSON, once it names the job's process group.
fn run_file(d: &Daemon, job: JobId) -> serde_json::Value {
    let path = d.state_dir().join("run").join(format!("{job}.run"));
    wait_for("the run file with the job's process group", || {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        v.get("job_pgid")?.as_i64()?;
        Some(v)
    })
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A job that waits for `gate` to exist, then exits 7.
fn gated_job(d: &Daemon, gate: &Path) -> JobId {
    let dir = d.scratch("gated");
    let script = format!(
        "#!/bin/sh\nwhile [ ! -e {} ]; do sleep 0.1; done\nexit 7\n",
        gate.display()
    );
    let job = d.client().submit(script_job(&script, &dir)).unwrap();
    d.wait_state(job, &[JobState::Running]);
    job
}

#[test]
fn one_user_cannot_take_every_connection() {
    if !root() {
        return;
    }
    let d = Daemon::start(A100);
    let socket = d.socket();
    let held: Vec<UnixStream> = as_uid(NOBODY, move || {
        (0..100)
            .map(|_| UnixStream::connect(&socket).expect("connect as nobody"))
            .collect()
    });
    let (mut ok, mut refused) = (0, 0);
    for mut s in held.iter() {
        s.set_read_timeout(Some(flex_tests::WAIT)).unwrap();
        let hello = Hello {
            version: PROTOCOL_VERSION,
            client: "hog".into(),
        };
        // A refused connection may be closed already; its answer is still there to read.
        let _ = proto::write_frame(&mut s, &hello);
        match proto::read_frame::<Response>(&mut s, 1 << 20).expect("an answer") {
            Response::Hello(_) => ok += 1,
            Response::Error(e) => {
                assert!(
                    e.message.contains(
                        "already has 64 connections open (max_connections_per_user = 64)"
                    ),
                    "{}",
                    e.message
                );
                refused += 1;
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((ok, refused), (64, 36));
    // Everyone else is served meanwhile.
    let out = d.cmd("flexq").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(held);
}

#[test]
fn running_out_of_file_descriptors_fails_no_job() {
    // flexd cannot raise a hard limit; one client holds more connections than it allows.
    let d = Daemon::start_nofile(
        A100,
        "[limits]\nmax_connections_per_user = 100000\nreserved_fds = 32",
        128,
    );
    let gate = d.scratch("gate").join("go");
    let job = gated_job(&d, &gate);
    let held: Vec<UnixStream> = (0..300)
        .filter_map(|_| UnixStream::connect(d.socket()).ok())
        .collect();
    // Supervisors are looked after once a second: let several looks happen while
    // descriptors are short, and the job end meanwhile.
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&gate, "").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    drop(held);
    // flexd reads each closed connection's end in its own time (slowly on a loaded machine):
    // until it has, a new connection is still over the limit and closed.
    wait_for("flexd to see the held connections close", || {
        flex_tests::Client::connect(d.socket()).ok()
    });
    let v = d.wait_finished(job);
    assert_eq!(
        (v.state, v.exit_code),
        (JobState::Failed, Some(7)),
        "the job's own end, not NODE_FAIL; log:\n{}",
        d.log()
    );
    assert!(!d.log().contains("died without recording"), "{}", d.log());
}

#[test]
fn a_look_alike_supervisor_of_another_user_is_not_adopted() {
    if !root() {
        return;
    }
    let d = Daemon::start(A100);
    let dir = d.scratch("look");
    let job = d
        .client()
        .submit(script_job("#!/bin/sh\nsleep 600\n", &dir))
        .unwrap();
    d.wait_state(job, &[JobState::Running]);
    let run = run_file(&d, job);
    let sup = run["supervisor_pid"].as_u64().unwrap() as u32;
    let run_dir = d.state_dir().join("run");
    // `sh -c CMD supervise --job N --run-dir DIR`: a command line like a supervisor's, ignoring
    // SIGTERM.
    let fake = Killed(
        Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "sh",
                "-c",
            ])
            .arg("trap '' TERM; while :; do sleep 1; done")
            .args(["supervise", "--job", &job.to_string(), "--run-dir"])
            .arg(&run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    signal(sup, libc::SIGKILL);
    let v = d.wait_state(job, &[JobState::NodeFail]);
    assert!(v
        .reason
        .unwrap_or_default()
        .contains("died without recording"));
    drop(fake);
}

/// A child killed with SIGKILL and reaped on drop, even when the test fails.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_reused_process_group_id_is_not_killed() {
    let mut d = Daemon::start(A100);
    let dir = d.scratch("reuse");
    let job = d
        .client()
        .submit(script_job("#!/bin/sh\nsleep 600\n", &dir))
        .unwrap();
    d.wait_state(job, &[JobState::Running]);
    let mut run = run_file(&d, job);
    let sup = run["supervisor_pid"].as_u64().unwrap() as u32;
    let pgid = run["job_pgid"].as_i64().unwrap() as i32;
    d.kill9();
    signal(sup, libc::SIGKILL);
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
    wait_for("the job's processes to go", || {
        (!alive(pgid as u32)).then_some(())
    });
    // An unrelated process of the same user leads a group whose id the run file names, as
    // after a reboot or a wrap of the pids.
    let mut other = Killed(
        Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    run["job_pgid"] = other.0.id().into();
    let path = d.state_dir().join("run").join(format!("{job}.run"));
    std::fs::write(&path, serde_json::to_vec(&run).unwrap()).unwrap();
    d.restart();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::NodeFail);
    assert!(
        other.0.try_wait().unwrap().is_none(),
        "the unrelated process was killed; log:\n{}",
        d.log()
    );
}

#[test]
fn a_flexd_on_a_copy_of_a_live_state_dir_kills_no_job() {
    let a = Daemon::start(A100);
    let gate = a.scratch("gate").join("go");
    let job = gated_job(&a, &gate);
    run_file(&a, job);
    let b = Daemon::start_on_state_copy(A100, &a.state_dir());
    // The copy's flexd finds no supervisor of its own for the job and ends it in its copy of
    // the database, but leaves the processes alone: they belong to a live supervisor.
    assert_eq!(b.wait_finished(job).state, JobState::NodeFail);
    std::fs::write(&gate, "").unwrap();
    let v = a.wait_finished(job);
    assert_eq!(
        (v.state, v.exit_code),
        (JobState::Failed, Some(7)),
        "log of the copy's flexd:\n{}",
        b.log()
    );
}

/// Run a flexd that is expected to refuse to start; returns its exit code and what it printed.
fn refused_start(d: &Daemon, socket: &Path) -> (Option<i32>, String) {
    let out = d.scratch("refused").join("out.txt");
    let f = std::fs::File::create(&out).unwrap();
    let mut child = Killed(
        d.flexd_command(socket)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap(),
    );
    let status = flex_tests::wait_child(&mut child.0, flex_tests::WAIT);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("flexd did not refuse to start:\n{text}"));
    (status.code(), text)
}

#[test]
fn deleting_the_lock_file_lets_no_second_flexd_use_the_state_dir() {
    let d = Daemon::start(A100);
    let _ = std::fs::remove_file(d.state_dir().join("flexd.lock"));
    let other = d.scratch("second").join("flexd.sock");
    let (code, text) = refused_start(&d, &other);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("another flexd uses the state directory"),
        "{text}"
    );
}

#[test]
fn a_loose_state_dir_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut d = Daemon::start(A100);
    let dir = d.scratch("w");
    let job = d
        .client()
        .submit(script_job("#!/bin/sh\ntrue\n", &dir))
        .unwrap();
    d.wait_finished(job);
    d.stop();
    let chmod = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    chmod(&d.state_dir(), 0o755);
    chmod(&d.db_path(), 0o644);
    d.restart();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.state_dir()), 0o700);
    assert_eq!(mode(&d.state_dir().join("run")), 0o700);
    let mut files = 0;
    for e in std::fs::read_dir(d.state_dir()).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
            files += 1;
        }
    }
    assert!(files >= 3, "flex.db and its -wal and -shm files");
}

#[test]
fn an_empty_or_foreign_database_is_refused() {
    let mut d = Daemon::start(A100);
    d.stop();
    let db = d.db_path();
    let sock = d.scratch("db").join("flexd.sock");
    for (what, make) in [
        (
            "empty",
            Box::new(|p: &Path| std::fs::write(p, "").unwrap()) as Box<dyn Fn(&Path)>,
        ),
        (
            "foreign",
            Box::new(|p: &Path| {
                let c = rusqlite::Connection::open(p).unwrap();
                c.execute_batch("CREATE TABLE notes (t TEXT)").unwrap();
            }),
        ),
    ] {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = db.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        make(&db);
        let (code, text) = refused_start(&d, &sock);
        assert_eq!(code, Some(5), "{what}: {text}");
        assert!(
            text.contains(&db.display().to_string()) && text.contains("refusing to start on it"),
            "{what}: {text}"
        );
    }
}

/// A server at `socket` run by `uid`: it answers the Hello as flexd would and records every
/// frame body it is sent.
fn impostor(
    uid: u32,
    socket: &Path,
) -> (
    std::os::unix::net::UnixListener,
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    let path = socket.to_path_buf();
    let listener = as_uid(uid, move || {
        std::os::unix::net::UnixListener::bind(&path).expect("bind as another user")
    });
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (l, g) = (listener.try_clone().unwrap(), got.clone());
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let g = g.clone();
            std::thread::spawn(move || {
                while let Ok(body) = proto::read_body(&mut s, 1 << 30) {
                    g.lock().unwrap().extend_from_slice(&body);
                    let hello = Response::Hello(flex_proto::HelloReply {
                        version: PROTOCOL_VERSION,
                        server: "flexd".into(),
                    });
                    if proto::write_frame(&mut s, &hello).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (listener, got)
}

#[test]
fn the_commands_send_nothing_to_a_socket_another_user_holds() {
    if !root() {
        return;
    }
    let mut d = Daemon::start(A100);
    d.stop();
    // The socket path lies in a directory every user may write to, like /tmp.
    let sock = d.scratch("squat").join("flexd.sock");
    let (_listener, got) = impostor(NOBODY, &sock);
    let script = d.scratch("squat").join("job.sh");
    std::fs::write(&script, "#!/bin/sh\necho SCRIPT-MARKER-12\n").unwrap();
    let out = d
        .cmd("flexsub")
        .env("FLEX_SOCKET", &sock)
        .env("SECRET_TOKEN", "ENV-MARKER-12")
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("served by uid 65534"), "{err}");
    let seen = String::from_utf8_lossy(&got.lock().unwrap()).into_owned();
    assert!(
        !seen.contains("MARKER-12"),
        "the impostor received the job: {seen}"
    );
    // flexd, started on that path, replaces the squatter's socket and serves.
    let mut flexd = Killed(
        d.flexd_command(&sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("flexd to serve the squatted path", || {
        if let Some(s) = flexd.0.try_wait().unwrap() {
            panic!("flexd exited with {s}");
        }
        let c = UnixStream::connect(&sock).ok()?;
        let cred =
            nix::sys::socket::getsockopt(&c, nix::sys::socket::sockopt::PeerCredentials).ok()?;
        (cred.uid() == 0).then_some(())
    });
    let out = d
        .cmd("flexsub")
        .env("FLEX_SOCKET", &sock)
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn job_names_cannot_forge_table_lines_or_drive_the_terminal() {
    let d = Daemon::start(A100);
    let dir = d.scratch("names");
    let name = "x\nFORGED 99 root R\x1b[2J\u{9b}";
    let mut spec = script_job("#!/bin/sh\ntrue\n", &dir);
    spec.name = name.into();
    let job = d.client().submit(spec).unwrap();
    d.wait_finished(job);
    let outputs = [
        d.cmd("flexq").args(["-t", "all"]).output().unwrap(),
        d.cmd("flexacct").output().unwrap(),
        d.cmd("flexacct").arg("--parsable2").output().unwrap(),
    ];
    for out in &outputs {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.chars().any(|c| c == '\x1b' || c == '\u{9b}'),
            "a raw escape: {text:?}"
        );
        assert!(
            text.lines().all(|l| !l.trim_start().starts_with("FORGED")),
            "a forged line: {text}"
        );
    }
    let queue = String::from_utf8_lossy(&outputs[0].stdout);
    assert!(
        queue.contains("x\\nFORGED 99 root R\\x1b[2J\\x9b"),
        "{queue}"
    );
    // JSON carries the name exactly.
    let json = d
        .cmd("flexq")
        .args(["-t", "all", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        v.to_string()
            .contains(&serde_json::to_string(name).unwrap()),
        "{v}"
    );

    // A name of 1 MB is refused with the limit.
    let mut spec = script_job("#!/bin/sh\ntrue\n", &dir);
    spec.name = "n".repeat(1 << 20);
    let e = d.client().submit(spec).unwrap_err().to_string();
    assert!(
        e.contains("the job name is 1048576 bytes, more than max_name_bytes = 256"),
        "{e}"
    );
}

#[test]
fn a_job_runs_with_its_submitters_umask() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start(A100);
    let dir = d.scratch("umask");
    std::fs::write(
        dir.join("job.sh"),
        "#!/bin/sh\numask > mask.txt\ntouch made.txt\n",
    )
    .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 077 && exec \"$0\" --parsable -o out.txt job.sh")
        .arg(flex_tests::bin("flexsub"))
        .env("FLEX_SOCKET", d.socket())
        .env("FLEX_CONFIG", d.config_path())
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let v = d.wait_finished(JobId(job));
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("mask.txt")).unwrap(),
        "0077\n"
    );
    let mode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("out.txt"), 0o600);
    assert_eq!(mode("made.txt"), 0o600);
}

/// A process's peak resident size in bytes (VmHWM).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

#[test]
fn slow_clients_cannot_grow_flexds_memory_without_bound() {
    use std::io::Write;
    let d = Daemon::start_with(A100, "[limits]\nmax_buffered_bytes = \"32 MiB\"");
    // 40 clients each send a 16 MiB frame but its last byte.
    let size: u32 = (16 << 20) - 64;
    let clients: Vec<_> = (0..40)
        .map(|_| {
            let socket = d.socket();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(socket).unwrap();
                let hello = Hello {
                    version: PROTOCOL_VERSION,
                    client: "slow".into(),
                };
                proto::write_frame(&mut s, &hello).unwrap();
                let _: Response = proto::read_frame(&mut s, 1 << 20).unwrap();
                let mut frame = size.to_be_bytes().to_vec();
                frame.resize(4 + size as usize - 1, b' ');
                let sent = s.write_all(&frame).is_ok();
                (s, sent)
            })
        })
        .collect();
    let clients: Vec<(UnixStream, bool)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let held = clients.iter().filter(|(_, sent)| *sent).count();
    let peak = peak_rss(d.pid());
    eprintln!("flexd's peak resident size: {} MiB", peak >> 20);
    assert!(held <= 2, "{held} frames of 16 MiB held within 32 MiB");
    for (mut s, sent) in clients {
        if !sent {
            s.set_read_timeout(Some(flex_tests::WAIT)).unwrap();
            let r: Response = proto::read_frame(&mut s, 1 << 20).unwrap();
            let Response::Error(e) = r else {
                panic!("{r:?}")
            };
            assert!(
                e.message.contains("max_buffered_bytes = 33554432"),
                "{}",
                e.message
            );
        }
    }
    assert!(peak < 160 << 20, "flexd peaked at {} MiB", peak >> 20);
    assert!(d.client().request(&flex_proto::Request::Ping).is_ok());
}

#[test]
fn an_accounting_period_past_the_largest_stored_time_is_refused() {
    let d = Daemon::start(A100);
    let q = flex_proto::AcctQuery {
        start: 0,
        end: u64::MAX,
        users: vec![],
        accounts: vec![],
        states: vec![],
        jobs: vec![],
        after: None,
    };
    let e = d
        .client()
        .call(&flex_proto::Request::Accounting(q))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("InvalidRequest")
            && e.contains("past the largest time flexd stores (9223372036854775807)"),
        "{e}"
    );
}

#[test]
fn a_malformed_database_is_named() {
    let mut d = Daemon::start(A100);
    let dir = d.scratch("w");
    for _ in 0..20 {
        d.client()
            .submit(script_job("#!/bin/sh\ntrue\n", &dir))
            .unwrap();
    }
    d.stop();
    // Everything into the database file, then keep its header and schema (page 1) and garble
    // every other page.
    let db = d.db_path();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let len = std::fs::metadata(&db).unwrap().len() as usize;
    assert!(len > 4096, "the jobs live beyond the first page");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[4096..].fill(0xa5);
    std::fs::write(&db, bytes).unwrap();
    let (code, text) = refused_start(&d, &d.scratch("m").join("flexd.sock"));
    assert_eq!(code, Some(5), "{text}");
    assert!(
        text.contains(&format!("database {}:", db.display())) && text.contains("malformed"),
        "{text}"
    );
}

//! Other local users and processes that look like flexd's own (issue 12): a user who holds
//! many connections, a look-alike supervisor, a reused process-group id, a socket another user
//! holds, job names that would forge output, the submitter's umask. Each test runs the real
//! flexd; those that act as another user (uid 65534, `nobody`) need root and are skipped with a
//! notice otherwise. Exhausted resources and untrusted state directories: `hardening_limits.rs`.

use flex_proto::{self as proto, Hello, JobState, Response, PROTOCOL_VERSION};
use flex_tests::{run_file, script_job, signal, wait_for, Daemon, Killed};
use gres_plugin::JobId;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

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

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
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
    // Root (as flexd's job supervisors, which report ends) is not held to the cap.
    let root_held: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(d.socket()).expect("connect as root"))
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for mut s in root_held.iter().chain(held.iter()) {
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
    assert_eq!((ok, refused), (100 + 64, 36));
    // Everyone else is served meanwhile.
    let out = d.cmd("flexq").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(held);
    drop(root_held);
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

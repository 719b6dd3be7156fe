//! Exhausted resources and state flexd cannot trust (issue 12): flexd out of file descriptors
//! (its socket's clients, or a flood of its metrics endpoint) or of buffer space for slow
//! clients, an accounting period past what it stores, a flexd on a copy of a live state
//! directory, a deleted lock file, a loose state directory, and an empty, foreign or malformed
//! database, and a run file that cannot be written. Each test runs the real flexd.

use flex_proto::{self as proto, Hello, JobState, Response, PROTOCOL_VERSION};
use flex_tests::{run_file, script_job, wait_for, Daemon, Killed};
use gres_plugin::JobId;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

const A100: &str = "a100-40gb-x2.toml";

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

/// A size in bytes from a process's `/proc/PID/status` (`VmHWM:` its peak resident size,
/// `VmRSS:` its resident size now).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
    kb * 1024
}

/// A process's peak resident size in bytes.
fn peak_rss(pid: u32) -> u64 {
    status_bytes(pid, "VmHWM:")
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
    let peak = peak_rss(d.pid());
    eprintln!("flexd's peak resident size: {} MiB", peak >> 20);
    // Each client is either refused, with the limit named (also one whose last bytes fitted
    // in the socket's buffer after flexd stopped reading), or held: flexd keeps its frame and
    // waits for the last byte, and answers nothing.
    let mut held = 0;
    for (mut s, sent) in clients {
        s.set_read_timeout(Some(Duration::from_secs(if sent { 5 } else { 30 })))
            .unwrap();
        match proto::read_frame::<Response>(&mut s, 1 << 20) {
            Ok(Response::Error(e)) => assert!(
                e.message.contains("max_buffered_bytes = 33554432"),
                "{}",
                e.message
            ),
            Ok(r) => panic!("{r:?}"),
            Err(e) => {
                assert!(
                    sent,
                    "a client whose frame was not taken got no answer: {e}"
                );
                held += 1;
            }
        }
    }
    assert!(held <= 2, "{held} frames of 16 MiB held within 32 MiB");
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

#[test]
fn a_job_whose_run_file_cannot_be_written_does_not_run() {
    let d = Daemon::start(A100);
    let dir = d.scratch("unrecorded");
    // The next job is 1: its run file's temporary path is taken by a directory, so the
    // supervisor cannot record the job's process group and cgroup.
    let blocker = d.state_dir().join("run").join("1.run.tmp");
    std::fs::create_dir_all(&blocker).unwrap();
    let marker = dir.join("ran");
    let script = format!("#!/bin/sh\ntouch {}\n", marker.display());
    let job = d.client().submit(script_job(&script, &dir)).unwrap();
    assert_eq!(job, JobId(1));
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    let reason = v.reason.unwrap_or_default();
    assert!(reason.contains("cannot write the run file"), "{reason}");
    assert!(!marker.exists(), "the job ran without a run file");
    // The leaves are free again: the next job runs.
    std::fs::remove_dir(&blocker).unwrap();
    let next = d.client().submit(script_job(&script, &dir)).unwrap();
    assert_eq!(d.wait_finished(next).state, JobState::Completed);
    assert!(marker.exists());
}

#[test]
fn a_users_queued_scripts_are_held_to_a_byte_quota() {
    let mut d = Daemon::start_with(A100, "[limits]\nmax_queued_bytes_per_user = \"40 KiB\"");
    let dir = d.scratch("quota");
    // Distinct scripts of 12,000 bytes, held so that their jobs stay pending.
    let script = |k: u32| format!("#!/bin/sh\n#{}\nexit {k}\n", "x".repeat(11_981));
    assert_eq!(script(0).len(), 12_000);
    let held = |k: u32| {
        let mut s = script_job(&script(k), &dir);
        s.queue.hold = true;
        s
    };
    let mut c = d.client();
    let mut jobs = Vec::new();
    for k in 0..3 {
        jobs.push(c.submit(held(k)).unwrap());
    }
    // A fourth distinct script passes 40 KiB (40,960 bytes): refused, the limit named.
    let refused = |c: &mut flex_tests::Client, k: u32| match c.submit(held(k)) {
        Err(e) => e.to_string(),
        Ok(id) => panic!("job {id} was queued past the byte quota"),
    };
    let e = refused(&mut c, 3);
    assert!(
        e.contains("max_queued_bytes_per_user") && e.contains("adds 12000 bytes"),
        "{e}"
    );
    // The same script again adds nothing, nor does an array of 1,000 tasks running it.
    jobs.push(c.submit(held(0)).unwrap());
    let mut array = held(1);
    array.queue.array = Some(proto::ArraySpec::parse("0-999").unwrap());
    c.submit(array).unwrap();
    // flexsub says why and exits non-zero.
    std::fs::write(dir.join("big.sh"), script(3)).unwrap();
    let out = d
        .cmd("flexsub")
        .args(["--hold", "-D"])
        .arg(&dir)
        .arg(dir.join("big.sh"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("max_queued_bytes_per_user"), "{stderr}");

    // The database holds each script once: the three, not 1,004 copies.
    let conn = flexd::store::open_reader(&d.db_path()).unwrap();
    let (scripts, bytes): (i64, i64) = conn
        .query_row("SELECT count(*), sum(length(body)) FROM scripts", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((scripts, bytes), (3, 36_000));
    drop(conn);

    // A restarted flexd counts the same from the database.
    d.restart();
    let mut c = d.client();
    let e = refused(&mut c, 3);
    assert!(e.contains("max_queued_bytes_per_user"), "{e}");
    // Once the only job holding script 2 ends, its bytes are free again.
    c.cancel(vec![jobs[2]], None).unwrap();
    d.wait_finished(jobs[2]);
    c.submit(held(3)).unwrap();
}

#[test]
fn a_rename_is_held_to_the_name_limit_of_a_submission() {
    let d = Daemon::start(A100);
    let dir = d.scratch("rename");
    let job = flex_tests::cli::submit(&d, &dir, "held.sh", "#!/bin/sh\ntrue\n", &["--hold"]);
    let update = |name: &str| {
        flex_tests::cli::cmd(&d, "flexcontrol")
            .args(["update", &job.to_string(), &format!("JobName={name}")])
            .output()
            .unwrap()
    };
    // A submission's -J is held to max_name_bytes (256 as shipped): so is a rename.
    let o = update(&"x".repeat(100_000));
    assert!(!o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("100000 bytes, more than max_name_bytes = 256"),
        "{err}"
    );
    assert_eq!(d.job(job).unwrap().name, "held.sh");
    let o = update("renamed");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(d.job(job).unwrap().name, "renamed");
}

#[test]
fn an_output_fifo_ends_the_job_with_a_reason_and_dev_null_is_still_an_output() {
    let d = Daemon::start(A100);
    let dir = d.scratch("fifo");
    nix::unistd::mkfifo(
        &dir.join("out.fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    let job = flex_tests::cli::submit(
        &d,
        &dir,
        "f.sh",
        "#!/bin/sh\necho hi\n",
        &["-o", "out.fifo"],
    );
    // It ends at once, not held by the FIFO past its time limit.
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    let why = v.reason.unwrap_or_default();
    assert!(why.contains("output file out.fifo"), "{why}");
    assert!(d.job(job).unwrap().alloc.is_some());
    // A FIFO with a reader is refused as well: it is not a file.
    let fifo = dir.join("read.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    // Held open for reading (a non-blocking open returns at once) while the job starts.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let job = flex_tests::cli::submit(
        &d,
        &dir,
        "r.sh",
        "#!/bin/sh\necho hi\n",
        &["-o", "read.fifo"],
    );
    let v = d.wait_finished(job);
    drop(reader);
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    assert!(v
        .reason
        .unwrap_or_default()
        .contains("is a FIFO, not a file"));
    // /dev/null, as Slurm scripts write it, stays an output.
    let job = flex_tests::cli::submit(
        &d,
        &dir,
        "n.sh",
        "#!/bin/sh\necho hi\n",
        &["-o", "/dev/null"],
    );
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
}

#[test]
fn a_read_only_state_directory_is_refused_at_start_saying_why() {
    let mut d = Daemon::start(A100);
    let socket = d.socket();
    d.stop();
    let Some(mount) = flex_tests::mount::tmpfs_over(&d.state_dir(), "8m") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot mount a tmpfs (CI=true: the test must run)"
        );
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    };
    assert!(mount.read_only(), "remount read-only");
    let (code, text) = refused_start(&d, &socket);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("cannot write in {}", d.state_dir().display()))
            && text.contains("Read-only file system"),
        "{text}"
    );
    drop(mount);
}

/// Submit `script` from a shell whose soft limits `ulimit` lowered; the job's id.
fn submit_limited(d: &Daemon, dir: &Path, script: &str) -> JobId {
    std::fs::write(dir.join("limits.sh"), script).unwrap();
    let o = std::process::Command::new("sh")
        .current_dir(dir)
        .env("FLEX_SOCKET", d.socket())
        .env("FLEX_CONFIG", d.config_path())
        .arg("-c")
        .arg(format!(
            "ulimit -S -n 200 && ulimit -S -c 0 && exec {} --parsable limits.sh",
            flex_tests::bin("flexsub").display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    JobId(String::from_utf8_lossy(&o.stdout).trim().parse().unwrap())
}

#[test]
fn the_submitters_resource_limits_go_with_the_job_as_slurm_propagates_them() {
    let script = "#!/bin/sh\necho \"$(ulimit -S -n) $(ulimit -S -c)\" > limits.txt\n";
    let d = Daemon::start(A100);
    let dir = d.scratch("limits");
    let job = submit_limited(&d, &dir, script);
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.join("limits.txt")).unwrap(),
        "200 0\n"
    );
    // With propagate_resource_limits = "NONE" the job keeps flexd's own.
    let d = Daemon::start_with(A100, "propagate_resource_limits = \"NONE\"\n");
    let dir = d.scratch("limits");
    let job = submit_limited(&d, &dir, script);
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    let got = std::fs::read_to_string(dir.join("limits.txt")).unwrap();
    assert!(!got.starts_with("200 "), "{got}");
}

#[test]
fn a_flood_of_metrics_connections_leaves_flexd_its_descriptors() {
    // A local user opens connections to the metrics endpoint as fast as it can, sends nothing
    // and keeps them: each would hold one of flexd's descriptors until its read times out.
    let addr = flex_tests::metrics::free_address();
    let nofile = 128;
    let d = Daemon::start_nofile(
        A100,
        &format!("metrics_listen = \"{addr}\"\n[limits]\nreserved_fds = 32"),
        nofile,
    );
    let gate = d.scratch("gate").join("go");
    let job = gated_job(&d, &gate);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (stop, addr) = (stop.clone(), addr.parse().unwrap());
        std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(s) =
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50))
                {
                    held.push_back(s);
                }
                if held.len() > 400 {
                    held.pop_front();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    // While it floods: flexd's open descriptors, sampled, stay out of what reserved_fds keeps
    // free; another client submits; the job's end is recorded.
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
            .unwrap()
            .count() as u64
    };
    let mut most = 0;
    for _ in 0..20 {
        most = most.max(fds());
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = d.scratch("during");
    let other = d.client().submit(script_job("#!/bin/sh\ntrue\n", &dir));
    std::fs::write(&gate, "").unwrap();
    let v = d.wait_finished(job);
    for _ in 0..10 {
        most = most.max(fds());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().unwrap();
    assert!(
        most < nofile - 32,
        "flexd held {most} descriptors of {nofile} during the flood; log:\n{}",
        d.log()
    );
    let other = other.expect("a submission while the metrics endpoint is flooded");
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(7)));
    assert_eq!(d.wait_finished(other).state, JobState::Completed);
    // The endpoint answers once the flood has stopped.
    let (code, _) = flex_tests::metrics::http_get(&addr, "/metrics");
    assert_eq!(code, 200);
}

#[test]
fn a_job_held_by_a_filesystem_that_never_answers_ends_saying_where() {
    let d = Daemon::start_with(A100, "batch_start_timeout = \"3s\"\n");
    let dir = d.scratch("jobs");
    let mnt = d.scratch("nfs");
    // Dropped before the daemon (declared after it), which removes its scratch directories.
    let Some(dead) = flex_tests::mount::dead_fuse(&mnt) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot mount FUSE (CI=true: the test must run)"
        );
        eprintln!("notice: skipped, cannot mount FUSE here");
        return;
    };
    let on_dead = |workdir: &Path, stdout: Option<String>| {
        let mut spec = script_job("#!/bin/sh\necho hi\n", workdir);
        spec.stdout = stdout;
        d.client().submit(spec).unwrap()
    };
    let out = Some(format!("{}/out.txt", mnt.display()));
    // Its output file there; its working directory there; and one cancelled while held.
    let output = on_dead(&dir, out.clone());
    let workdir = on_dead(&mnt, None);
    let cancelled = on_dead(&dir, out);
    d.wait_state(cancelled, &[JobState::Running]);
    d.client().cancel(vec![cancelled], None).unwrap();
    let v = d.wait_finished(cancelled);
    assert_eq!(v.state, JobState::Cancelled, "{v:?}\n{}", d.log());
    for (job, held) in [
        (output, "opening its output file"),
        (workdir, "entering its working directory"),
    ] {
        let v = d.wait_finished(job);
        assert_eq!(v.state, JobState::Failed, "{v:?}\n{}", d.log());
        let why = v.reason.unwrap_or_default();
        assert!(
            why.contains("within 3s (batch_start_timeout)") && why.contains(held),
            "{why}"
        );
    }
    // Nothing of theirs holds the host: a job of every leaf runs.
    let mut spec = script_job("#!/bin/sh\ntrue\n", &dir);
    spec.request = gres_plugin::Request::leaves(14, 3600);
    let all = d.client().submit(spec).unwrap();
    assert_eq!(d.wait_finished(all).state, JobState::Completed);
    drop(dead);
}

#[test]
fn output_patterns_are_held_to_a_paths_length_and_end_reasons_stay_short() {
    let d = Daemon::start(A100);
    let dir = d.scratch("pattern");
    let mut spec = script_job("#!/bin/sh\ntrue\n", &dir);
    spec.name = "n".repeat(256);
    // A megabyte of `%x` (each the 256-byte name) would be 128 MiB of path in flexd.
    spec.stdout = Some("%x".repeat(1 << 19));
    let e = d.client().submit(spec.clone()).unwrap_err().to_string();
    assert!(
        e.contains("the output path is 1048576 bytes, longer than a path may be (4096)"),
        "{e}"
    );
    let mut deep = spec.clone();
    deep.stdout = None;
    deep.workdir = dir.join("d".repeat(5000));
    let e = d.client().submit(deep).unwrap_err().to_string();
    assert!(e.contains("the working directory is"), "{e}");
    // The longest pattern taken names a 512 KiB path, which no file can have: the job fails,
    // and its reason shows the path's start and length, not all of it.
    spec.stdout = Some("%x".repeat(2048));
    let job = d.client().submit(spec).unwrap();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    let why = v.reason.unwrap_or_default();
    assert!(
        why.len() < 1024 && why.contains("… (524288 bytes)"),
        "{}",
        &why[..why.len().min(1024)]
    );
}

/// A process's resident memory now, in bytes.
fn rss(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS:")
}

#[test]
fn an_arrays_spec_and_dependency_are_kept_once_not_per_task() {
    let mut d = Daemon::start(A100);
    let dir = d.scratch("array");
    let mut first = script_job("#!/bin/sh\ntrue\n", &dir);
    first.queue.hold = true;
    let first = d.client().submit(first).unwrap();
    // 2,000 tasks named one by one (no range joins them), waiting on a dependency that names
    // the first job 1,000 times (max_dependencies).
    let indices: Vec<String> = (0..2000u32).map(|i| (i * 3).to_string()).collect();
    let array = proto::ArraySpec::parse(&format!("{}%5", indices.join(","))).unwrap();
    let dependency = proto::Dependency::parse(&format!(
        "afterok:{}",
        vec![first.to_string(); 1000].join(":")
    ))
    .unwrap();
    let mut spec = script_job("#!/bin/sh\ntrue\n", &dir);
    spec.queue.array = Some(array.clone());
    spec.queue.dependency = Some(dependency.clone());
    let before = rss(d.pid());
    let job = d.client().submit(spec.clone()).unwrap();
    let grown = rss(d.pid()).saturating_sub(before);
    // On disk: one copy of each, on the array's first row.
    let stored = || -> i64 {
        let db = rusqlite::Connection::open_with_flags(
            d.db_path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        db.query_row(
            "SELECT COALESCE(sum(length(array_spec)), 0) + COALESCE(sum(length(dependency)), 0)
             FROM jobs",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let one = (serde_json::to_string(&array).unwrap().len()
        + serde_json::to_string(&dependency).unwrap().len()) as i64;
    assert!(stored() <= one + 64, "{} bytes stored for {one}", stored());
    // In memory: the tasks share the dependency (2,000 copies of 1,000 terms were 96 MB).
    assert!(grown < 32 << 20, "flexd grew {grown} bytes");
    // The last task has both, before and after a restart, which reads them once too.
    let last = JobId(job.0 + 1999);
    let check = |d: &Daemon| {
        let v = d.job(last).unwrap();
        assert_eq!(v.array.map(|a| a.index), Some(5997));
        assert_eq!(v.dependency.as_ref(), Some(&dependency));
        let out = d.cmd("flexq").args(["-h", "-o", "%i"]).output().unwrap();
        let rows = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(rows.contains("%5]"), "{rows}");
    };
    check(&d);
    d.restart();
    check(&d);
    assert!(rss(d.pid()) < before + (32 << 20), "{}", rss(d.pid()));
    // A dependency naming more jobs than max_dependencies is refused, naming the limit.
    spec.queue.array = None;
    spec.queue.dependency = Some(
        proto::Dependency::parse(&format!(
            "afterok:{}",
            vec![first.to_string(); 1001].join(":")
        ))
        .unwrap(),
    );
    let e = d.client().submit(spec).unwrap_err().to_string();
    assert!(
        e.contains("--dependency names 1001 jobs, more than max_dependencies = 1000"),
        "{e}"
    );
    // The tasks run, each with its array's variables (read from the first task's row).
    let mut small = script_job(
        "#!/bin/sh\necho $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MAX > task-$SLURM_ARRAY_TASK_ID\n",
        &dir,
    );
    small.queue.array = Some(proto::ArraySpec::parse("1,5,9").unwrap());
    let small = d.client().submit(small).unwrap();
    for k in 0..3 {
        assert_eq!(
            d.wait_finished(JobId(small.0 + k)).state,
            JobState::Completed
        );
    }
    for i in [1, 5, 9] {
        let text = std::fs::read_to_string(dir.join(format!("task-{i}"))).unwrap();
        assert_eq!(text, "3 9\n");
    }
}

//! A full state disk (issue 12): flexd's state directory on a small tmpfs that a filler file
//! fills. Submissions are refused with a clear error while the database cannot be written; a
//! job that ends meanwhile, and one cancelled meanwhile, are recorded with their real outcome
//! once there is room again (never NODE_FAIL), and those records survive a restart, and a
//! crash of flexd while the end waited for room. Needs root (mount); skipped without it unless
//! CI=true.

use flex_proto::JobState;
use flex_tests::mount::{tmpfs_over, tmpfs_with, Mount};
use flex_tests::{run_file, script_job, wait_for, Daemon};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const A100: &str = "a100-40gb-x2.toml";

/// Fill the file system of `dir` with a file until it has no room left.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    loop {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    // Whatever room is left below one chunk, byte by byte.
    while f.write_all(&[0u8; 512]).is_ok() {}
    path
}

fn flexsub(d: &Daemon, dir: &Path, script: &str) -> std::process::Output {
    std::fs::write(dir.join("j.sh"), script).unwrap();
    d.cmd("flexsub")
        .current_dir(dir)
        .args(["-t", "10", "-o", "/dev/null", "j.sh"])
        .output()
        .unwrap()
}

/// A flexd whose state directory is on an 8 MiB tmpfs; None (the test is skipped) where no
/// tmpfs can be mounted, which CI does not accept.
fn on_small_disk() -> Option<(Daemon, Mount)> {
    on_tmpfs(|dir| tmpfs_over(dir, "8m"))
}

/// A flexd whose state directory is on the tmpfs `mount` mounts; None as [`on_small_disk`].
fn on_tmpfs(mount: impl FnOnce(&Path) -> Option<Mount>) -> Option<(Daemon, Mount)> {
    let mut d = Daemon::start(A100);
    d.stop();
    let Some(mount) = mount(&d.state_dir()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot mount a tmpfs (CI=true: the test must run)"
        );
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return None;
    };
    d.restart();
    Some((d, mount))
}

/// A script that waits for `gate` to exist, then exits 7.
fn gated(gate: &Path) -> String {
    format!(
        "#!/bin/sh\nwhile [ ! -e {} ]; do sleep 0.1; done\nexit 7\n",
        gate.display()
    )
}

/// Fill the disk of `mount` and submit until flexd refuses (the database may still have room
/// in its write-ahead log for a few); returns the filler and the refusal.
fn fill_until_refused(d: &Daemon, mount: &Mount, dir: &Path) -> (PathBuf, std::process::Output) {
    let filler = fill(&mount.0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = flexsub(d, dir, "#!/bin/sh\ntrue\n");
        if !out.status.success() {
            return (filler, out);
        }
        assert!(Instant::now() < deadline, "no submission was refused");
    }
}

#[test]
fn a_full_state_disk_refuses_submissions_and_loses_no_end() {
    let Some((mut d, mount)) = on_small_disk() else {
        return;
    };
    let dir = d.scratch("full");
    let gate = dir.join("go");
    let job = d.client().submit(script_job(&gated(&gate), &dir)).unwrap();
    let other = d
        .client()
        .submit(script_job("#!/bin/sh\nsleep 600\n", &dir))
        .unwrap();
    for j in [job, other] {
        d.wait_state(j, &[JobState::Running]);
        // Its supervisor has recorded it (a run file it cannot write fails the job instead).
        run_file(&d, j);
    }

    let (filler, refused) = fill_until_refused(&d, &mount, &dir);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("cannot write its database") && err.contains("not queued"),
        "{err}"
    );

    // A job ends, and another is cancelled, while nothing can be written: flexd knows, and
    // neither becomes NODE_FAIL.
    std::fs::write(&gate, "").unwrap();
    let v = d.wait_finished(job);
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(7)), "{v:?}");
    let out = d.cmd("flexcancel").arg(other.to_string()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(d.wait_finished(other).state, JobState::Cancelled);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(d.job(job).unwrap().state, JobState::Failed);
    assert_eq!(d.job(other).unwrap().state, JobState::Cancelled);

    // Room again: the end is written by itself, and a submission is taken.
    std::fs::remove_file(&filler).unwrap();
    let acct = wait_for("the end in flexacct", || {
        let out = d
            .cmd("flexacct")
            .args(["-j", &job.to_string(), "-n", "-P", "-o", "State,ExitCode"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (text == "FAILED|7:0").then_some(text)
    });
    assert_eq!(acct, "FAILED|7:0");
    let out = flexsub(&d, &dir, "#!/bin/sh\ntrue\n");
    assert!(out.status.success(), "{out:?}\n{}", d.log());

    // It was written for good: a restarted flexd reads the same.
    d.restart();
    let v = d.job(job).expect("the job after a restart");
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(7)), "{v:?}");
    let v = d.job(other).expect("the cancelled job after a restart");
    assert_eq!(v.state, JobState::Cancelled, "{v:?}");
    d.stop();
    drop(mount);
}

#[test]
fn an_end_waiting_for_room_survives_a_crash_of_flexd() {
    let Some((mut d, mount)) = on_small_disk() else {
        return;
    };
    let dir = d.scratch("crash");
    let gate = dir.join("go");
    let job = d.client().submit(script_job(&gated(&gate), &dir)).unwrap();
    d.wait_state(job, &[JobState::Running]);
    let supervisor = run_file(&d, job)["supervisor_pid"].as_u64().unwrap();
    let (filler, _) = fill_until_refused(&d, &mount, &dir);

    // The job ends; flexd knows it, but cannot write it, and is killed before it can.
    std::fs::write(&gate, "").unwrap();
    assert_eq!(d.wait_finished(job).state, JobState::Failed);
    d.kill9();
    // Its supervisor could tell no flexd and write no status file: it keeps the end.
    std::thread::sleep(Duration::from_secs(2));
    let comm = std::fs::read_to_string(format!("/proc/{supervisor}/comm")).unwrap_or_default();
    assert!(
        comm.starts_with("fsv"),
        "the supervisor gave the end up ({comm:?})"
    );

    // Room again, flexd again: the end is the job's own, not NODE_FAIL.
    std::fs::remove_file(&filler).unwrap();
    d.restart();
    let v = wait_for("the end recorded after the restart", || {
        d.job(job).filter(|v| v.state.is_finished())
    });
    assert_eq!(
        (v.state, v.exit_code),
        (JobState::Failed, Some(7)),
        "{v:?}\n{}",
        d.log()
    );
    d.restart();
    let v = d.job(job).expect("the job after another restart");
    assert_eq!((v.state, v.exit_code), (JobState::Failed, Some(7)), "{v:?}");
    d.stop();
    drop(mount);
}

/// Use up the inodes of the file system of `dir` with empty files; returns the directory
/// holding them (removing it gives them back).
fn use_up_inodes(dir: &Path) -> PathBuf {
    let fillers = dir.join("fillers");
    std::fs::create_dir(&fillers).unwrap();
    for i in 0.. {
        if std::fs::File::create(fillers.join(i.to_string())).is_err() {
            break;
        }
    }
    fillers
}

#[test]
fn a_start_that_cannot_be_recorded_waits_for_room_and_then_runs() {
    // Room for the database to grow, but no file can be created: the job's start is
    // committed, and its supervisor cannot write the job's run file.
    let Some((mut d, mount)) = on_tmpfs(|dir| tmpfs_with(dir, "size=64m,nr_inodes=64")) else {
        return;
    };
    let dir = d.scratch("no-inodes");
    let ran = dir.join("ran");
    let fillers = use_up_inodes(&mount.0);
    let script = format!("#!/bin/sh\necho yes > {}\n", ran.display());
    let job = d.client().submit(script_job(&script, &dir)).unwrap();
    // Several tries, each of which cannot record the start: the job waits, and never ran.
    std::thread::sleep(Duration::from_secs(8));
    let v = d.job(job).unwrap();
    assert!(!v.state.is_finished(), "{v:?}\n{}", d.log());
    assert!(!ran.exists());
    assert!(d.log().contains("cannot write the run file"), "{}", d.log());

    // Room again: it starts by itself, runs and completes.
    std::fs::remove_dir_all(&fillers).unwrap();
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "yes\n");
    d.stop();
    drop(mount);
}

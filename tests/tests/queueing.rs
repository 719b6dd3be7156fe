//! Job arrays, dependencies, holds and requeues against the real flexd, through the real
//! commands: an array's tasks run each with its own index and never more than its throttle at
//! once; an afterok pipeline runs in order and a failed step leaves the rest
//! DependencyNeverSatisfied; singleton; hold and release; requeue of a running job; another
//! user can neither hold, release nor requeue your jobs; flexcancel of a whole array and of a
//! task range. Jobs that must wait are held at a gate file, never by a sleep.

use flex_proto::{ControlAction, ControlRequest, JobRef, JobState, JobView, Request, Response};
use flex_tests::{wait_for, Daemon};
use gres_plugin::JobId;
use std::path::Path;
use std::process::Output;

const A100: &str = "a100-40gb-x2.toml";
const NOBODY: u32 = 65534;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(d: &Daemon, cmd: &str, args: &[&str]) -> Output {
    d.cmd(cmd).args(args).output().expect("run a command")
}

/// `flexsub --parsable ARGS SCRIPT` with `body` as the script; the job id it printed.
fn submit(d: &Daemon, dir: &Path, name: &str, args: &[&str], body: &str) -> JobId {
    let script = dir.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncd {}\n{body}\n", dir.display()),
    )
    .unwrap();
    let mut all = vec!["--parsable", "-J", name, "-D"];
    let dir_s = dir.to_str().unwrap();
    all.push(dir_s);
    all.extend(args);
    all.push(script.to_str().unwrap());
    let out = run(d, "flexsub", &all);
    assert!(
        out.status.success(),
        "flexsub {all:?}: {}",
        text(&out.stderr)
    );
    JobId(
        text(&out.stdout)
            .trim()
            .parse()
            .expect("--parsable prints the id"),
    )
}

fn view(d: &Daemon, id: JobId) -> JobView {
    d.job(id).unwrap_or_else(|| panic!("job {id} is unknown"))
}

/// Wait until the pending job waits for `reason`.
fn wait_reason(d: &Daemon, id: JobId, reason: &str) -> JobView {
    wait_for(&format!("job {id} pending with {reason}"), || {
        let v = view(d, id);
        (v.state == JobState::Pending && v.reason.as_deref() == Some(reason)).then_some(v)
    })
}

fn control_as(d: &Daemon, uid: u32, action: ControlAction, id: JobId) -> Vec<Option<String>> {
    let req = Request::Control(ControlRequest {
        action,
        jobs: vec![JobRef {
            job: id,
            tasks: None,
        }],
    });
    match d.request_as(uid, uid, &req) {
        Response::Controlled(o) => o.into_iter().map(|o| o.error).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_array_runs_every_task_with_its_index_and_never_more_than_its_throttle() {
    let d = Daemon::start(A100);
    let w = d.scratch("array");
    let body = "mkdir -p running\ntouch running/$SLURM_ARRAY_TASK_ID\nls running | wc -l >> counts\n\
                echo $FLEX_ARRAY_TASK_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_COUNT > task-$SLURM_ARRAY_TASK_ID\n\
                sleep 1\nrm running/$SLURM_ARRAY_TASK_ID";
    let id = submit(
        &d,
        &w,
        "arr",
        &["--array=0-5%2", "-o", "out-%A_%a.txt"],
        body,
    );
    // Pending tasks share one row; -r shows each.
    let q = text(&run(&d, "flexq", &[]).stdout);
    assert!(q.contains(&format!("{id}_")), "{q}");
    let tasks: Vec<JobId> = (0..6).map(|k| JobId(id.0 + k)).collect();
    for (k, t) in tasks.iter().enumerate() {
        let v = d.wait_finished(*t);
        assert_eq!(v.state, JobState::Completed, "{v:?}");
        assert_eq!(v.array.map(|a| (a.job, a.index)), Some((id, k as u32)));
        let seen = std::fs::read_to_string(w.join(format!("task-{k}"))).unwrap();
        assert_eq!(seen.trim(), format!("{k} {id} 6"));
        assert!(w.join(format!("out-{id}_{k}.txt")).exists());
    }
    let counts = std::fs::read_to_string(w.join("counts")).unwrap();
    let most = counts
        .lines()
        .map(|l| l.trim().parse::<u32>().unwrap())
        .max();
    assert!(most.is_some_and(|n| n <= 2), "tasks at once: {counts}");
    // Accounting records each task as ARRAY_INDEX.
    let acct = run(
        &d,
        "flexacct",
        &["-P", "-n", "-o", "jobid,state", "-j", &id.to_string()],
    );
    let acct = text(&acct.stdout);
    for k in 0..6 {
        assert!(acct.contains(&format!("{id}_{k}|COMPLETED")), "{acct}");
    }
}

#[test]
fn an_afterok_pipeline_runs_in_order_and_a_failed_step_blocks_the_rest() {
    let d = Daemon::start(A100);
    let w = d.scratch("pipe");
    let gate = "while [ ! -e go ]; do sleep 0.05; done";
    let a = submit(&d, &w, "a", &[], &format!("{gate}\necho a >> order"));
    let b = submit(
        &d,
        &w,
        "b",
        &[&format!("--dependency=afterok:{a}")],
        "echo b >> order",
    );
    let c = submit(
        &d,
        &w,
        "c",
        &["-d", &format!("afterok:{b}")],
        "echo c >> order",
    );
    wait_reason(&d, b, "Dependency");
    wait_reason(&d, c, "Dependency");
    std::fs::write(w.join("go"), "").unwrap();
    assert_eq!(d.wait_finished(c).state, JobState::Completed);
    assert_eq!(
        std::fs::read_to_string(w.join("order")).unwrap(),
        "a\nb\nc\n"
    );

    let a2 = submit(&d, &w, "a2", &[], "exit 3");
    let b2 = submit(&d, &w, "b2", &["-d", &format!("afterok:{a2}")], "true");
    let c2 = submit(&d, &w, "c2", &["-d", &format!("afterok:{b2}")], "true");
    assert_eq!(d.wait_finished(a2).state, JobState::Failed);
    wait_reason(&d, b2, "DependencyNeverSatisfied");
    wait_reason(&d, c2, "DependencyNeverSatisfied");
    // Unknown dependees are refused, named.
    let out = run(
        &d,
        "flexsub",
        &["--dependency=afterany:999999", "--wrap", "true"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("999999"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn kill_invalid_depend_cancels_what_can_never_start() {
    let d = Daemon::start_with(A100, "kill_invalid_depend = true\n");
    let w = d.scratch("kill");
    let a = submit(&d, &w, "a", &[], "true");
    let b = submit(&d, &w, "b", &["-d", &format!("afternotok:{a}")], "true");
    let v = d.wait_finished(b);
    assert_eq!(v.state, JobState::Cancelled);
    assert!(v
        .reason
        .unwrap_or_default()
        .contains("DependencyNeverSatisfied"));
}

#[test]
fn singleton_waits_for_the_earlier_job_of_the_same_name() {
    let d = Daemon::start(A100);
    let w = d.scratch("solo");
    let gate = "while [ ! -e go ]; do sleep 0.05; done";
    let first = submit(&d, &w, "solo", &["-d", "singleton"], gate);
    d.wait_state(first, &[JobState::Running]);
    let second = submit(&d, &w, "solo", &["--dependency=singleton"], "true");
    let other = submit(&d, &w, "other", &["-d", "singleton"], "true");
    assert_eq!(d.wait_finished(other).state, JobState::Completed);
    wait_reason(&d, second, "Dependency");
    std::fs::write(w.join("go"), "").unwrap();
    let (f, s) = (d.wait_finished(first), d.wait_finished(second));
    assert_eq!(s.state, JobState::Completed);
    assert!(s.start_time >= f.end_time, "{f:?} {s:?}");
}

#[test]
fn hold_release_and_who_may_do_them() {
    let d = Daemon::start(A100);
    let w = d.scratch("hold");
    let id = submit(&d, &w, "held", &["--hold"], "true");
    wait_reason(&d, id, "JobHeldUser");
    // Another user may not release it (nor hold or requeue it).
    for action in [
        ControlAction::Release,
        ControlAction::Hold,
        ControlAction::Requeue { hold: false },
    ] {
        let e = control_as(&d, NOBODY, action, id);
        let e = e[0].as_deref().unwrap_or_default();
        assert!(
            e.contains("permission denied") && e.contains(&id.to_string()),
            "{e}"
        );
    }
    // Root's hold is JobHeldAdmin (these tests run as root).
    let out = run(&d, "flexcontrol", &["hold", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_reason(&d, id, "JobHeldAdmin");
    let shown = text(&run(&d, "flexcontrol", &["show", "job", &id.to_string()]).stdout);
    assert!(shown.contains(&format!("JobId={id} ")) && shown.contains("Reason=JobHeldAdmin"));
    let out = run(&d, "flexcontrol", &["release", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(d.wait_finished(id).state, JobState::Completed);
    let out = run(&d, "flexcontrol", &["release", &id.to_string()]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&format!("job {id}")));
}

#[test]
fn a_running_job_is_requeued_under_its_id_and_runs_again() {
    let d = Daemon::start(A100);
    let w = d.scratch("requeue");
    let body = "echo run >> runs\nwhile [ ! -e go ]; do sleep 0.05; done";
    let id = submit(&d, &w, "rq", &[], body);
    d.wait_state(id, &[JobState::Running]);
    wait_for("the first run", || std::fs::metadata(w.join("runs")).ok());
    let out = run(&d, "flexcontrol", &["requeue", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("the second run", || {
        let runs = std::fs::read_to_string(w.join("runs")).ok()?;
        (runs.lines().count() == 2).then_some(())
    });
    std::fs::write(w.join("go"), "").unwrap();
    let v = d.wait_finished(id);
    assert_eq!((v.state, v.restarts), (JobState::Completed, 1));
    let db = rusqlite::Connection::open(d.db_path()).unwrap();
    let kept: i64 = db
        .query_row(
            "SELECT count(*) FROM job_runs WHERE job = ?1",
            [id.0 as i64],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 1, "the first run is kept");
    let no = submit(&d, &w, "norq", &["--no-requeue"], "true");
    d.wait_finished(no);
    let out = run(&d, "flexcontrol", &["requeue", &no.to_string()]);
    assert!(
        text(&out.stderr).contains("--no-requeue"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn flexcancel_takes_a_task_range_and_a_whole_array() {
    let d = Daemon::start(A100);
    let w = d.scratch("cancel");
    let id = submit(&d, &w, "many", &["--array=0-9", "--hold"], "true");
    let out = run(&d, "flexcancel", &[&format!("{id}_[3-5]")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for k in 0..10u64 {
        let v = view(&d, JobId(id.0 + k));
        let want = if (3..=5).contains(&k) {
            JobState::Cancelled
        } else {
            JobState::Pending
        };
        assert_eq!(v.state, want, "task {k}");
    }
    let q = text(&run(&d, "flexq", &["-h"]).stdout);
    assert!(q.contains(&format!("{id}_[0-2,6-9]")), "{q}");
    let q = text(&run(&d, "flexq", &["-h", "-r"]).stdout);
    assert_eq!(q.lines().count(), 7, "{q}");
    let out = run(&d, "flexcancel", &[&id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for k in 0..10 {
        assert_eq!(view(&d, JobId(id.0 + k)).state, JobState::Cancelled);
    }
}

#[test]
fn an_array_over_max_array_size_is_refused_whole() {
    let d = Daemon::start_with(A100, "[limits]\nmax_array_size = 5\n");
    let out = run(&d, "flexsub", &["--array=0-5", "--wrap", "true"]);
    assert!(!out.status.success());
    let e = text(&out.stderr);
    assert!(
        e.contains("max_array_size = 5") && e.contains("6 tasks"),
        "{e}"
    );
    assert!(text(&run(&d, "flexq", &["-h"]).stdout).trim().is_empty());
}

//! flexd killed with SIGKILL while an array is half started and a dependency half satisfied:
//! after the restart no task runs twice, none is lost, the throttle still holds and the jobs
//! that depend on the array start once it is done (and only then). Beside crash.rs, which
//! does the same for plain submissions.

use flex_proto::JobState;
use flex_tests::{wait_for, Daemon};
use gres_plugin::JobId;
use std::collections::BTreeMap;
use std::path::Path;

const A100: &str = "a100-40gb-x2.toml";
const TASKS: u64 = 8;

fn submit(d: &Daemon, dir: &Path, name: &str, args: &[&str], body: &str) -> JobId {
    let script = dir.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncd {}\n{body}\n", dir.display()),
    )
    .unwrap();
    let out = d
        .cmd("flexsub")
        .args(["--parsable", "-J", name])
        .args(args)
        .arg(&script)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    JobId(text.trim().parse().unwrap())
}

/// How often each line occurs in a file (empty when it does not exist yet).
fn counts(path: &Path) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

#[test]
fn a_half_started_array_and_its_dependents_survive_kill_9() {
    let mut d = Daemon::start(A100);
    let w = d.scratch("crash-array");
    // Each task records its start, waits at its own gate, records its end.
    let task = "echo $SLURM_ARRAY_TASK_ID >> started\n\
                while [ ! -e go-$SLURM_ARRAY_TASK_ID ]; do sleep 0.05; done\n\
                echo $SLURM_ARRAY_TASK_ID >> ended";
    let array = submit(
        &d,
        &w,
        "arr",
        &[&format!("--array=0-{}%3", TASKS - 1)],
        task,
    );
    let after = submit(
        &d,
        &w,
        "after",
        &["-d", &format!("afterok:{array}")],
        "wc -l < ended > seen",
    );
    let chain = submit(
        &d,
        &w,
        "chain",
        &["-d", &format!("afterok:{after}")],
        "echo ok > chain",
    );
    wait_for("three tasks started", || {
        (counts(&w.join("started")).len() == 3).then_some(())
    });
    // Two tasks end while flexd runs, then it is killed with one more started.
    std::fs::write(w.join("go-0"), "").unwrap();
    std::fs::write(w.join("go-1"), "").unwrap();
    wait_for("a fourth task", || {
        (counts(&w.join("started")).len() >= 4).then_some(())
    });
    d.kill9();
    // Tasks that end while flexd is down leave their status files.
    std::fs::write(w.join("go-2"), "").unwrap();
    d.restart();
    for k in 3..TASKS {
        std::fs::write(w.join(format!("go-{k}")), "").unwrap();
    }
    assert_eq!(d.wait_finished(chain).state, JobState::Completed);
    let started = counts(&w.join("started"));
    let ended = counts(&w.join("ended"));
    for k in 0..TASKS {
        let k = k.to_string();
        assert_eq!(
            started.get(&k),
            Some(&1),
            "task {k} started once: {started:?}"
        );
        assert_eq!(ended.get(&k), Some(&1), "task {k} ended once: {ended:?}");
    }
    for k in 0..TASKS {
        let v = d.wait_finished(JobId(array.0 + k));
        assert_eq!(v.state, JobState::Completed, "{v:?}");
    }
    // The dependent started only after every task had ended.
    let seen = std::fs::read_to_string(w.join("seen")).unwrap();
    assert_eq!(seen.trim(), TASKS.to_string());
    assert_eq!(d.wait_finished(after).state, JobState::Completed);
}

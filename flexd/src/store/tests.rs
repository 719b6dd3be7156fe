//! The schema, its migrations, and the group-committing writer on real SQLite files.

use super::writer::{Done, End, Op, Writer};
use super::*;
use gres_plugin::Request as ResourceRequest;

fn spec(name: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        script: "#!/bin/sh\necho secret\n".into(),
        args: vec!["a b".into()],
        workdir: "/w".into(),
        submit_dir: "/s".into(),
        env: vec![("HOME".into(), "/home/u".into())].into(),
        stdout: Some("o-%j".into()),
        stderr: None,
        request: ResourceRequest::leaves(2, 600),
        account: Some("proj".into()),
        qos: None,
        nice: 0,
        options: Default::default(),
        queue: Default::default(),
        umask: None,
        signal: None,
    }
}

fn new_job(name: &str) -> NewJob {
    NewJob {
        spec: spec(name),
        uid: 1000,
        gid: 100,
        user: "ana".into(),
        account: "proj".into(),
        priority: 0,
        submit_time: 1_700_000_000,
        start: None,
        held: [u32::MAX; 2],
    }
}

fn version(conn: &Connection) -> u32 {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn a_version_1_database_migrates_and_keeps_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    {
        let mut conn = Connection::open(&path).unwrap();
        schema::migrate_to(&mut conn, 1).unwrap();
        assert_eq!(version(&conn), 1);
        // A row as version 1 wrote it.
        conn.execute(
            "INSERT INTO jobs (name, uid, gid, user, account, script, args, env, workdir,
                submit_dir, request, cores_per_leaf, time_limit, state, submit_time,
                eligible_time, end_time, exit_code)
             VALUES ('old', 7, 7, 'bo', '', 'true', '[]', '[[\"OLD\",\"1\"]]', '/', '/', ?1, 1, 60,
                'COMPLETED', 10, 10, 20, 0)",
            [serde_json::to_string(&ResourceRequest::leaves(1, 60)).unwrap()],
        )
        .unwrap();
    }
    let conn = open(&path).unwrap();
    assert_eq!(version(&conn), schema::VERSION);
    let old = load_job(&conn, JobId(1)).unwrap().unwrap();
    assert_eq!(
        (old.name.as_str(), old.state, old.exit_code),
        ("old", JobState::Completed, Some(0))
    );
    let by: Option<u32> = conn
        .query_row("SELECT cancelled_by FROM jobs WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(by, None);
    // Its environment stayed in its row.
    let env = launch_row(&conn, JobId(1), None).unwrap().unwrap().env;
    assert_eq!(env, [("OLD".to_string(), "1".to_string())]);
    // Opening again changes nothing.
    drop(conn);
    let conn = open(&path).unwrap();
    assert_eq!(version(&conn), schema::VERSION);
}

#[test]
fn an_environment_is_stored_once_for_the_jobs_that_share_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("flex.db")).unwrap();
    let mut envs = Bodies::default();
    let other: flex_proto::Env = vec![("HOME".to_string(), "/home/bo".to_string())].into();
    let tx = conn.transaction().unwrap();
    let a = insert_job(&tx, &new_job("a"), &mut envs).unwrap();
    let mut j = new_job("b");
    j.spec.env = other.clone();
    let b = insert_job(&tx, &j, &mut envs).unwrap();
    tx.commit().unwrap();
    // A writer that starts again finds the stored rows without its memory of them.
    let mut fresh = Bodies::default();
    let tx = conn.transaction().unwrap();
    let c = insert_job(&tx, &new_job("c"), &mut fresh).unwrap();
    tx.commit().unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM envs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2);
    let env = |conn: &Connection, id| launch_row(conn, id, None).unwrap().unwrap().env;
    assert_eq!(env(&conn, a), [("HOME".to_string(), "/home/u".to_string())]);
    assert_eq!(env(&conn, b), other.pairs().unwrap());
    assert_eq!(env(&conn, c), env(&conn, a));
    // A transaction that rolls back takes its new rows along: forgotten, they are added again.
    let tx = conn.transaction().unwrap();
    let mut j = new_job("d");
    j.spec.env = vec![("X".to_string(), "1".to_string())].into();
    insert_job(&tx, &j, &mut envs).unwrap();
    drop(tx);
    envs.forget();
    let tx = conn.transaction().unwrap();
    let e = insert_job(&tx, &j, &mut envs).unwrap();
    tx.commit().unwrap();
    assert_eq!(env(&conn, e), [("X".to_string(), "1".to_string())]);
    // The FNV-1a of the empty text and of "a", as published.
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn sbatch_options_and_begin_times_are_stored_and_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("flex.db")).unwrap();
    let mut envs = Bodies::default();
    let mut j = new_job("opts");
    *j.spec.options = flex_proto::JobOptions {
        comment: Some("sweep 3 of 9".into()),
        append: true,
        mail: Some(flex_proto::Mail {
            events: flex_proto::MailEvents(flex_proto::MailEvents::END),
            user: Some("ana@example.org".into()),
        }),
        ..Default::default()
    };
    j.spec.queue.begin = Some(j.submit_time + 600);
    j.spec.queue.array = Some(flex_proto::ArraySpec::parse("0-1").unwrap());
    let tx = conn.transaction().unwrap();
    let a = insert_job(&tx, &j, &mut envs).unwrap();
    let plain = insert_job(&tx, &new_job("plain"), &mut envs).unwrap();
    tx.commit().unwrap();
    // Both tasks of the array carry them.
    for id in [a, JobId(a.0 + 1)] {
        let row = rows::load_job(&conn, id).unwrap().unwrap();
        assert_eq!(row.q.comment.as_deref(), Some("sweep 3 of 9"));
        assert_eq!(row.q.begin, Some(j.submit_time + 600));
        assert_eq!(
            launch_row(&conn, id, None).unwrap().unwrap().options,
            *j.spec.options
        );
    }
    // The second task reads the array's spec from the first task's row, unless the caller
    // says it knows that array.
    let spec = |known| {
        launch_row(&conn, JobId(a.0 + 1), known)
            .unwrap()
            .unwrap()
            .array
    };
    let task = flex_proto::ArrayTask { job: a, index: 1 };
    assert_eq!(spec(None), Some((task, j.spec.queue.array.clone())));
    assert_eq!(spec(Some(a)), Some((task, None)));
    assert_eq!(spec(Some(plain)), Some((task, j.spec.queue.array.clone())));
    let row = rows::load_job(&conn, plain).unwrap().unwrap();
    assert_eq!((row.q.comment.as_deref(), row.q.begin), (None, None));
    assert!(launch_row(&conn, plain, None)
        .unwrap()
        .unwrap()
        .options
        .is_plain());
}

#[test]
fn a_newer_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", schema::VERSION + 1)
        .unwrap();
    let e = open(&path).unwrap_err().to_string();
    assert!(e.contains("newer than this flexd"), "{e}");
}

#[test]
fn submissions_commit_in_groups_with_distinct_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    let (w, thread) = Writer::spawn(open(&path).unwrap());
    let rxs: Vec<_> = (0..500)
        .map(|i| w.submit(new_job(&format!("j{i}"))))
        .collect();
    let mut ids: Vec<u64> = rxs
        .into_iter()
        .map(|rx| rx.blocking_recv().unwrap().unwrap().0 .0)
        .collect();
    let sorted = {
        let mut s = ids.clone();
        s.sort();
        s.dedup();
        s
    };
    assert_eq!(sorted.len(), 500);
    ids.truncate(1);
    drop(w);
    thread.join().unwrap();
    let conn = open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 500);
    let events: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM job_events WHERE to_state = 'PENDING'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, 500);
    let row = launch_row(&conn, JobId(ids[0]), None).unwrap().unwrap();
    assert_eq!(row.env, vec![("HOME".to_string(), "/home/u".to_string())]);
    assert_eq!(row.args, vec!["a b".to_string()]);
    assert_eq!(row.script, "#!/bin/sh\necho secret\n");
}

#[test]
fn one_bad_change_does_not_fail_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    let (w, thread) = Writer::spawn(open(&path).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    // Hold the writer in a commit callback so the next changes land in one batch.
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    w.send(
        Op::Barrier,
        Done::Then(Box::new(move |_| gate_rx.recv().unwrap())),
    );
    let first = w.submit(new_job("first"));
    let good = w.submit(new_job("good"));
    let t2 = tx.clone();
    // An end for a job that does not exist breaks the events' foreign key.
    w.send(
        Op::End(End {
            job: JobId(999),
            from: JobState::Running,
            to: JobState::Completed,
            time: 5,
            exit_code: Some(0),
            signal: None,
            reason: None,
            cancelled_by: None,
            charge: Vec::new(),
            max_rss: None,
            cpu_usec: None,
        }),
        Done::Then(Box::new(move |r| t2.send(r).unwrap())),
    );
    let after = w.submit(new_job("after"));
    gate_tx.send(()).unwrap();
    assert!(first.blocking_recv().unwrap().is_ok());
    assert!(good.blocking_recv().unwrap().is_ok());
    assert!(rx.recv().unwrap().is_err());
    assert!(after.blocking_recv().unwrap().is_ok());
    drop((w, tx));
    thread.join().unwrap();
}

#[test]
fn starts_and_ends_are_recorded_and_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    let (w, thread) = Writer::spawn(open(&path).unwrap());
    let a = w.submit(new_job("a")).blocking_recv().unwrap().unwrap().0;
    let b = w.submit(new_job("b")).blocking_recv().unwrap().unwrap().0;
    let c = w.submit(new_job("c")).blocking_recv().unwrap().unwrap().0;
    let host = gres_plugin::probe::discover_file(std::path::Path::new("a100-40gb-x2.toml"))
        .unwrap()
        .host;
    let cluster = flex_sched::Cluster::new(vec![host.clone()], Default::default());
    let placement = flex_sched::Model::place(
        &cluster,
        &flex_sched::PendingJob {
            id: JobId(1),
            request: ResourceRequest::leaves(2, 60),
            priority: 0,
            kind: Default::default(),
        },
    )
    .unwrap();
    let alloc = StoredAlloc::new(&placement, &host);
    assert_eq!(alloc.to_alloc(&host), Ok(placement));
    for job in [a, b] {
        w.send(
            Op::Start {
                job,
                time: 100,
                alloc: alloc.clone(),
            },
            Done::Nothing,
        );
    }
    w.send(
        Op::Launched {
            job: a,
            supervisor_pid: 4242,
            master_port: 29500,
        },
        Done::Nothing,
    );
    w.send(
        Op::End(End {
            job: b,
            from: JobState::Running,
            to: JobState::Timeout,
            time: 200,
            exit_code: None,
            signal: Some(15),
            reason: None,
            cancelled_by: None,
            charge: Vec::new(),
            max_rss: None,
            cpu_usec: None,
        }),
        Done::Nothing,
    );
    drop(w);
    thread.join().unwrap();
    let conn = open(&path).unwrap();
    let rows = load_jobs(&conn, 150).unwrap();
    let ids: Vec<JobId> = rows.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![a, b, c]);
    assert_eq!(rows[0].state, JobState::Running);
    assert_eq!(rows[0].alloc.as_deref(), Some(&alloc));
    assert_eq!(rows[0].supervisor_pid, Some(4242));
    assert_eq!(rows[0].master_port, Some(29500));
    assert_eq!(
        (rows[1].state, rows[1].signal),
        (JobState::Timeout, Some(15))
    );
    // Finished before the cut-off: not loaded, still in the table.
    assert_eq!(load_jobs(&conn, 201).unwrap().len(), 2);
    assert!(load_job(&conn, b).unwrap().is_some());
    let events: Vec<(Option<String>, String)> = conn
        .prepare("SELECT from_state, to_state FROM job_events WHERE job = ?1 ORDER BY id")
        .unwrap()
        .query_map([b.0 as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        events,
        vec![
            (None, "PENDING".into()),
            (Some("PENDING".into()), "RUNNING".into()),
            (Some("RUNNING".into()), "TIMEOUT".into()),
        ]
    );
}

#[test]
fn an_arrays_tasks_share_the_throttle_and_dependency_stored_on_its_first_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("flex.db")).unwrap();
    let mut envs = Bodies::default();
    let mut j = new_job("deps");
    j.spec.queue.array = Some(flex_proto::ArraySpec::parse("0-2%2").unwrap());
    j.spec.queue.dependency = Some(flex_proto::Dependency::parse("afterany:1:2").unwrap());
    let tx = conn.transaction().unwrap();
    let a = insert_job(&tx, &j, &mut envs).unwrap();
    tx.commit().unwrap();
    let stored: Vec<bool> = conn
        .prepare("SELECT dependency IS NOT NULL FROM jobs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stored, [true, false, false]);
    // Also when the first task ended long ago and is not loaded.
    for first_ended in [false, true] {
        if first_ended {
            conn.execute(
                "UPDATE jobs SET state = 'COMPLETED', end_time = 1 WHERE id = ?1",
                [a.0 as i64],
            )
            .unwrap();
        }
        let rows = rows::load_jobs(&conn, 100).unwrap();
        let tasks: Vec<_> = rows.iter().filter(|r| r.id != a || !first_ended).collect();
        assert_eq!(tasks.len(), if first_ended { 2 } else { 3 });
        let deps: Vec<_> = tasks
            .iter()
            .map(|r| r.q.dependency.clone().unwrap())
            .collect();
        assert_eq!(*deps[0], j.spec.queue.dependency.clone().unwrap());
        assert!(deps.iter().all(|d| std::sync::Arc::ptr_eq(d, &deps[0])));
        assert!(tasks.iter().all(|r| r.q.throttle == Some(2)));
    }
}

//! flexd killed with SIGKILL at random moments: what it acknowledged survives exactly once, and
//! jobs running across a restart keep running, end with their own exit codes and never share a
//! leaf or a core with a job started after the restart.
//!
//! `FLEX_CRASH_KILLS` sets the number of kills of the submission test (default 10, the full run
//! uses 100) and `FLEX_CRASH_SEED` its seed (printed on every run; the kill moments also depend
//! on the machine's timing, so a seed repeats the schedule, not every interleaving):
//!
//! ```text
//! FLEX_CRASH_KILLS=100 cargo test -p flex-tests --test crash -- --nocapture acknowledged
//! ```

use flex_proto::{JobSpec, JobState, JobView, QueueFilter};
use flex_tests::{script_job, signal, wait_for, Client, ClientError, Daemon};
use gres_plugin::{JobId, Request as ResourceRequest};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A100: &str = "a100-40gb-x2.toml";
const H100: &str = "h100-80gb-x8.toml";
const CLIENTS: usize = 4;

/// SplitMix64: a small seeded generator, enough to pick kill moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A duration in [lo, hi) milliseconds.
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo))
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The environment of a client's submissions: the same for all of them, stored once.
fn crash_env(client: usize) -> flex_proto::Env {
    vec![
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ("FLEX_CRASH_CLIENT".to_string(), client.to_string()),
    ]
    .into()
}

/// The script of submission `name`: the name inside, so a row cannot pass for another's.
fn crash_script(name: &str) -> String {
    format!("#!/bin/sh\n# submission {name}\ntrue\n")
}

/// What one submitting client saw.
#[derive(Default)]
struct Seen {
    /// Acknowledged: name -> job id.
    acked: Vec<(String, JobId)>,
    /// Sent but the connection broke before an answer: committed or not, never both.
    in_doubt: Vec<String>,
    /// Refused by flexd with an error answer (none expected).
    refused: Vec<String>,
}

/// Submit as fast as one connection allows until `stop`; reconnect whenever flexd is gone.
fn submitter(
    socket: &Path,
    workdir: &Path,
    client: usize,
    stop: &AtomicBool,
    acks: &AtomicUsize,
) -> Seen {
    let mut seen = Seen::default();
    let mut conn: Option<Client> = None;
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Client::connect(socket) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        let name = format!("crash-{client}-{i}");
        i += 1;
        let mut spec: JobSpec = script_job(&crash_script(&name), workdir);
        spec.name = name.clone();
        spec.env = crash_env(client);
        match c.submit(spec) {
            Ok(id) => {
                seen.acked.push((name, id));
                acks.fetch_add(1, Ordering::SeqCst);
            }
            Err(ClientError::Daemon { kind, message }) => {
                seen.refused.push(format!("{name}: {kind:?}: {message}"));
            }
            Err(_) => {
                seen.in_doubt.push(name);
                conn = None;
            }
        }
    }
    seen
}

#[test]
fn acknowledged_submissions_survive_sigkill_exactly_once() {
    let kills = env_u64("FLEX_CRASH_KILLS").unwrap_or(10);
    let seed = env_u64("FLEX_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("crash test: {kills} kills, seed {seed} (FLEX_CRASH_SEED={seed} repeats it)");
    let mut rng = Rng(seed);

    // A job holding every leaf keeps the submissions pending: the test measures the store.
    let mut d = Daemon::start_with(A100, "policy = \"fifo\"");
    let w = d.scratch("crash");
    let mut blocker = script_job("#!/bin/sh\nexec sleep 3600\n", &w);
    blocker.name = "blocker".into();
    blocker.request = ResourceRequest::leaves(14, 3600);
    let blocker = d.client().submit(blocker).unwrap();
    d.wait_state(blocker, &[JobState::Running]);

    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (socket, w, stop, acks) = (d.socket(), w.clone(), stop.clone(), acks.clone());
            std::thread::spawn(move || submitter(&socket, &w, n, &stop, &acks))
        })
        .collect();

    let started = Instant::now();
    for _ in 0..kills {
        // Let the clients get at least one submission through this incarnation, then kill at a
        // random moment inside the stream of commits.
        let before = acks.load(Ordering::SeqCst);
        wait_for("a submission to be acknowledged", || {
            (acks.load(Ordering::SeqCst) > before).then_some(())
        });
        std::thread::sleep(rng.millis(0, 300));
        d.kill9();
        std::thread::sleep(rng.millis(0, 50));
        d.restart();
    }
    let before = acks.load(Ordering::SeqCst);
    wait_for("a submission after the last restart", || {
        (acks.load(Ordering::SeqCst) > before).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    let seen: Vec<Seen> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let elapsed = started.elapsed();

    let acked: BTreeMap<String, JobId> =
        seen.iter().flat_map(|s| s.acked.iter().cloned()).collect();
    let in_doubt: BTreeSet<String> = seen
        .iter()
        .flat_map(|s| s.in_doubt.iter().cloned())
        .collect();
    let refused: Vec<&String> = seen.iter().flat_map(|s| s.refused.iter()).collect();
    assert!(refused.is_empty(), "flexd refused submissions: {refused:?}");
    let ids: BTreeSet<JobId> = acked.values().copied().collect();
    assert_eq!(ids.len(), acked.len(), "one job id acknowledged twice");

    // The restarted flexd knows every acknowledged job, under its name, still pending.
    let views: HashMap<JobId, JobView> = d
        .client()
        .queue(QueueFilter {
            include_finished: true,
            ..QueueFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|v| (v.id, v))
        .collect();
    for (name, id) in &acked {
        let v = views
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged job {id} ({name}) is not in flexq"));
        assert_eq!((&v.name, v.state), (name, JobState::Pending), "job {id}");
    }

    d.stop();
    let db = rusqlite::Connection::open_with_flags(
        d.state_dir().join("flex.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "PRAGMA integrity_check");

    // Each environment is stored once, whatever the kills interrupted.
    let (envs, distinct): (i64, i64) = db
        .query_row("SELECT COUNT(*), COUNT(DISTINCT body) FROM envs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(envs, distinct, "environments stored more than once");
    // Every row is one submission, whole: its own script and its client's environment, one
    // submit event, pending.
    let mut rows: HashMap<String, Vec<JobId>> = HashMap::new();
    let mut st = db
        .prepare(
            "SELECT j.id, j.name, COALESCE(s.body, j.script), j.state,
                (SELECT COUNT(*) FROM job_events e WHERE e.job = j.id AND e.from_state IS NULL),
                e.body
             FROM jobs j LEFT JOIN envs e ON e.id = j.env_id
                LEFT JOIN scripts s ON s.id = j.script_id
             WHERE j.id != ?1",
        )
        .unwrap();
    let mut q = st.query([blocker.0 as i64]).unwrap();
    while let Some(r) = q.next().unwrap() {
        let id = JobId(r.get::<_, i64>(0).unwrap() as u64);
        let name: String = r.get(1).unwrap();
        let script: String = r.get(2).unwrap();
        let state: String = r.get(3).unwrap();
        let events: i64 = r.get(4).unwrap();
        assert!(
            acked.contains_key(&name) || in_doubt.contains(&name),
            "job {id}: {name:?} was never sent"
        );
        assert_eq!(script, crash_script(&name), "job {id}: script");
        let env: Option<String> = r.get(5).unwrap();
        let client: usize = name.split('-').nth(1).unwrap().parse().unwrap();
        assert_eq!(
            env.as_deref(),
            Some(crash_env(client).json()),
            "job {id}: environment"
        );
        assert_eq!(state, "PENDING", "job {id}");
        assert_eq!(events, 1, "job {id}: submit events");
        rows.entry(name).or_default().push(id);
    }
    let duplicated: Vec<_> = rows.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(duplicated.is_empty(), "stored twice: {duplicated:?}");
    let mut lost = Vec::new();
    for (name, id) in &acked {
        if rows.get(name) != Some(&vec![*id]) {
            lost.push((name, id));
        }
    }
    let found = acked.len() - lost.len();
    let doubt_stored = in_doubt.iter().filter(|n| rows.contains_key(*n)).count();
    let submitted = acked.len() + in_doubt.len();
    eprintln!(
        "crash test: seed {seed}, {kills} SIGKILLs in {:.1}s, {CLIENTS} clients: \
         submitted {submitted}, acknowledged {}, found {found}, lost {}, duplicated 0, \
         unanswered {} (of which stored {doubt_stored}), integrity_check ok",
        elapsed.as_secs_f64(),
        acked.len(),
        lost.len(),
        in_doubt.len()
    );
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(!acked.is_empty());
}

/// The run file of a job: (supervisor pid, job process group) once the job runs.
fn run_file(d: &Daemon, job: JobId) -> Option<(i32, i32)> {
    let path = d.state_dir().join("run").join(format!("{job}.run"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some((
        v["supervisor_pid"].as_i64()? as i32,
        v["job_pgid"].as_i64()? as i32,
    ))
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// No two jobs that ran at overlapping times held the same leaf or core.
fn assert_disjoint(views: &[JobView]) {
    for (i, a) in views.iter().enumerate() {
        for b in &views[i + 1..] {
            let (Some(sa), Some(ea), Some(sb), Some(eb)) =
                (a.start_time, a.end_time, b.start_time, b.end_time)
            else {
                panic!("jobs {} and {} have no start or end", a.id, b.id);
            };
            // Whole seconds: a job that starts in the second another ended did not overlap.
            if !(sa < eb && sb < ea) {
                continue;
            }
            let (aa, ab) = (a.alloc.as_ref().unwrap(), b.alloc.as_ref().unwrap());
            let la: BTreeSet<&str> = aa.leaves.iter().map(|l| l.uuid.as_str()).collect();
            let shared: Vec<_> = ab
                .leaves
                .iter()
                .filter(|l| la.contains(l.uuid.as_str()))
                .collect();
            assert!(
                shared.is_empty(),
                "jobs {} [{sa},{ea}] and {} [{sb},{eb}] both held {shared:?}",
                a.id,
                b.id
            );
            let ca: BTreeSet<u32> = aa.cores.iter().copied().collect();
            let cores: Vec<u32> = ab
                .cores
                .iter()
                .copied()
                .filter(|c| ca.contains(c))
                .collect();
            assert!(
                cores.is_empty(),
                "jobs {} and {} both held cores {cores:?}",
                a.id,
                b.id
            );
        }
    }
}

#[test]
fn running_jobs_survive_a_restart_and_no_leaf_is_handed_out_twice() {
    const RUNNING: usize = 20;
    const LEAVES: usize = 56;
    let mut d = Daemon::start(H100);
    let w = d.scratch("survive");
    let mut c = d.client();
    // Job i waits for `go` (even i) or `go2` (odd i), then sleeps 1 to 3 s and exits with its
    // own code: the even ones end while flexd is down, the odd ones after it is back.
    let jobs: Vec<(JobId, i32)> = (0..RUNNING)
        .map(|i| {
            let code = 10 + i as i32;
            let gate = if i % 2 == 0 { "go" } else { "go2" };
            let script = format!(
                "#!/bin/sh\necho $$ > pid-{i}\nwhile [ ! -e {gate} ]; do sleep 0.1; done\n\
                 sleep {}\nexit {code}\n",
                1 + i % 3
            );
            let mut spec = script_job(&script, &w);
            spec.name = format!("survivor-{i}");
            (c.submit(spec).unwrap(), code)
        })
        .collect();
    let sups: Vec<(i32, i32)> = jobs
        .iter()
        .map(|(j, _)| {
            d.wait_state(*j, &[JobState::Running]);
            wait_for("the job's run file", || run_file(&d, *j))
        })
        .collect();
    for i in 0..RUNNING {
        wait_for("the job's first process", || {
            w.join(format!("pid-{i}")).exists().then_some(())
        });
    }

    // flexd dies; while it is down one supervisor dies too and the even jobs end.
    d.kill9();
    let (victim, _) = jobs[0];
    let victim_pid: i32 = std::fs::read_to_string(w.join("pid-0"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(sups[0].0 as u32, libc::SIGKILL);
    wait_for("the supervisor to die", || {
        (!alive(sups[0].0)).then_some(())
    });
    std::fs::write(w.join("go"), "").unwrap();
    for (job, _) in jobs.iter().step_by(2).skip(1) {
        let status = d.state_dir().join("run").join(format!("{job}.status"));
        wait_for("an even job's status file", || {
            status.exists().then_some(())
        });
    }
    d.restart();
    for (job, _) in jobs.iter().skip(1).step_by(2) {
        assert_eq!(d.job(*job).unwrap().state, JobState::Running, "job {job}");
    }

    // New jobs right away: as many start as leaves are free (56 less the 10 odd jobs), each on
    // leaves and cores no running job holds; the rest wait.
    let free = LEAVES - RUNNING / 2;
    let mut c = d.client();
    let later: Vec<JobId> = (0..free + 4)
        .map(|i| {
            let mut spec = script_job(
                "#!/bin/sh\nwhile [ ! -e go2 ]; do sleep 0.1; done\nsleep 1\n",
                &w,
            );
            spec.name = format!("later-{i}");
            c.submit(spec).unwrap()
        })
        .collect();
    let v = d.wait_finished(victim);
    assert_eq!(v.state, JobState::NodeFail, "{v:?}");
    assert!(
        v.reason.as_deref().unwrap_or("").contains("supervisor"),
        "{v:?}"
    );
    wait_for("the victim's job process to be killed", || {
        (!alive(victim_pid)).then_some(())
    });
    let running = |d: &Daemon| {
        later
            .iter()
            .filter(|j| d.job(**j).unwrap().state == JobState::Running)
            .count()
    };
    wait_for("the later jobs to fill the free leaves", || {
        (running(&d) == free).then_some(())
    });
    // The count holds: no leaf of a re-adopted job counts as free.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(running(&d), free);
    std::fs::write(w.join("go2"), "").unwrap();

    for &(job, code) in &jobs[1..] {
        let v = d.wait_finished(job);
        assert_eq!(
            (v.state, v.exit_code, v.signal),
            (JobState::Failed, Some(code), None),
            "job {job} ({})",
            v.name
        );
        assert!(v.end_time >= v.start_time);
    }
    let mut views = Vec::new();
    for j in jobs.iter().map(|(j, _)| *j).chain(later.iter().copied()) {
        let v = d.wait_finished(j);
        if j != victim {
            assert!(v.state != JobState::NodeFail, "{v:?}");
        }
        views.push(v);
    }
    assert_disjoint(&views);

    // Everything is free again: a job needing every leaf starts.
    let mut all = script_job("true\n", &w);
    all.request = ResourceRequest::leaves(LEAVES as u32, 60);
    let all = d.client().submit(all).unwrap();
    assert_eq!(d.wait_finished(all).state, JobState::Completed);
}

#[test]
fn a_supervisor_that_dies_with_flexd_down_frees_its_leaves_for_a_waiting_job() {
    // Two jobs split the host; a third wants the first one's leaves.
    let mut d = Daemon::start_with(A100, "policy = \"fifo\"");
    let w = d.scratch("freed");
    let mut c = d.client();
    let mut first = script_job("#!/bin/sh\nexec sleep 3600\n", &w);
    first.request = ResourceRequest::leaves(7, 3600);
    let first = c.submit(first).unwrap();
    let mut second = script_job("#!/bin/sh\nexec sleep 3600\n", &w);
    second.request = ResourceRequest::leaves(7, 3600);
    let second = c.submit(second).unwrap();
    for j in [first, second] {
        d.wait_state(j, &[JobState::Running]);
    }
    let (sup, pgid) = wait_for("the first job's run file", || run_file(&d, first));
    let mut waiting = script_job("true\n", &w);
    waiting.request = ResourceRequest::leaves(7, 60);
    let waiting = c.submit(waiting).unwrap();
    assert_eq!(
        d.wait_state(waiting, &[JobState::Pending]).state,
        JobState::Pending
    );

    d.kill9();
    signal(sup as u32, libc::SIGKILL);
    wait_for("the supervisor to die", || (!alive(sup)).then_some(()));
    d.restart();
    assert_eq!(d.wait_finished(first).state, JobState::NodeFail);
    wait_for("the job's process group to be killed", || {
        (!alive(pgid)).then_some(())
    });
    let v = d.wait_finished(waiting);
    assert_eq!(v.state, JobState::Completed);
    let held: BTreeSet<String> = d
        .job(second)
        .unwrap()
        .alloc
        .unwrap()
        .leaves
        .into_iter()
        .map(|l| l.uuid)
        .collect();
    assert!(v
        .alloc
        .unwrap()
        .leaves
        .iter()
        .all(|l| !held.contains(&l.uuid)));
    d.client().cancel(vec![second], None).unwrap();
    d.wait_finished(second);
}

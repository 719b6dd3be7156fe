//! The accounting query (flexacct, flexreport) on a database of 200,000 finished jobs spread
//! over 30 days, each holding 1 to 8 leaves, fetched page by page as the commands do: the last
//! day (about 6,700 jobs: flexreport's nightly run), a day in the middle, one user's jobs of
//! that day, and all 30 days.
//!
//! `cargo bench -p flexd --bench acct_query`

use criterion::{criterion_group, criterion_main, Criterion};
use flex_proto::{AcctQuery, JobSpec};
use flex_sched::Allocation;
use flexd::store::{self, NewJob, StoredAlloc, StoredUnit};
use gres_plugin::{HostId, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const JOBS: u64 = 200_000;
const DAYS: u64 = 30;
const T0: u64 = 1_800_000_000;

fn build(path: &std::path::Path) {
    let mut conn = store::open(path).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let tx = conn.transaction().unwrap();
    for i in 0..JOBS {
        let submit = T0 + i * DAYS * 86_400 / JOBS;
        let leaves = rng.gen_range(1..=8u32);
        let spec = JobSpec {
            name: format!("j{i}"),
            script: "true".into(),
            args: vec![],
            workdir: "/".into(),
            submit_dir: "/".into(),
            env: vec![].into(),
            stdout: None,
            stderr: None,
            request: Request::leaves(leaves, 3600),
            account: None,
            qos: None,
            nice: 0,
            options: Default::default(),
            queue: Default::default(),
            umask: None,
            signal: None,
        };
        let uid = 1000 + (i % 50) as u32;
        let id = store::insert_job(
            &tx,
            &NewJob {
                spec,
                uid,
                gid: uid,
                user: format!("u{uid}"),
                account: format!("a{}", i % 7),
                priority: 0,
                submit_time: submit,
                start: None,
                held: [u32::MAX; 2],
            },
            &mut Default::default(),
        )
        .unwrap();
        let start = submit + rng.gen_range(0..600);
        let alloc = StoredAlloc {
            host: "h".into(),
            units: (0..leaves)
                .map(|l| StoredUnit {
                    leaf: l,
                    uuid: format!("MIG-{l}"),
                    profile: "1g.10gb".into(),
                    gpu: l % 8,
                    share: 1000,
                    sm_slices: 1,
                    memory_bytes: 10 << 30,
                })
                .collect(),
            cores: (0..leaves).collect(),
            placement: Allocation {
                host: HostId(0),
                units: vec![],
                cores: vec![],
                mem_bytes: 0,
            },
        };
        store::start_job(&tx, id, start, &alloc).unwrap();
        tx.execute(
            "UPDATE jobs SET state = 'COMPLETED', end_time = ?2, exit_code = 0 WHERE id = ?1",
            rusqlite::params![id.0 as i64, (start + rng.gen_range(60..7200)) as i64],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// Every page of a query, as flexacct and flexreport fetch them; returns the job count.
fn all_pages(conn: &rusqlite::Connection, q: &AcctQuery, only: Option<u32>, now: u64) -> usize {
    let mut q = q.clone();
    let mut n = 0;
    loop {
        let (jobs, more) = store::acct::query(conn, &q, only, now, store::acct::PAGE).unwrap();
        n += jobs.len();
        match jobs.last() {
            Some(j) if more => q.after = Some(j.id),
            _ => return n,
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flex.db");
    build(&path);
    let conn = store::open_reader(&path).unwrap();
    let now = T0 + DAYS * 86_400;
    let day = |d: u64| AcctQuery {
        start: T0 + d * 86_400,
        end: T0 + (d + 1) * 86_400,
        ..AcctQuery::default()
    };
    let all = AcctQuery {
        start: 0,
        end: now,
        ..AcctQuery::default()
    };
    for (what, q, only) in [
        ("last day", day(DAYS - 1), None),
        ("day 10", day(10), None),
        ("day 10, one user", day(10), Some(1007)),
        ("30 days", all.clone(), None),
    ] {
        println!("{what}: {} jobs", all_pages(&conn, &q, only, now));
    }
    let mut g = c.benchmark_group("acct_query");
    g.sample_size(10);
    g.bench_function("last_day_all_users", |b| {
        b.iter(|| all_pages(&conn, &day(DAYS - 1), None, now))
    });
    g.bench_function("day_10_all_users", |b| {
        b.iter(|| all_pages(&conn, &day(10), None, now))
    });
    g.bench_function("day_10_one_user", |b| {
        b.iter(|| all_pages(&conn, &day(10), Some(1007), now))
    });
    g.bench_function("thirty_days_all_users", |b| {
        b.iter(|| all_pages(&conn, &all, None, now))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

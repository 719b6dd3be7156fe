//! flexd's scheduling pass with priorities: 100,000 pending jobs from 1,000 users on one full
//! h100-80gb-x8 host (56 leaves), the old path (every weight 0, no limit: the queue as it was)
//! side by side with fair share (the shipped weights) and fair share with a per-user limit,
//! alternating, in one run. Each pass is State::plan (priorities and limits), Plan::decide (the
//! core, EASY backfilling) and State::apply, as the daemon runs them.
//!
//! `cargo bench -p flexd --bench sched_plan`; FLEX_PLAN_JOBS (default 100000), FLEX_PLAN_USERS
//! (default 1000) and FLEX_PLAN_ROUNDS (default 10) change the sizes.

use flexd::bench::{PassBench, Weighing};
use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test --benches` runs bench binaries without --bench: nothing to do
    }
    let jobs = env("FLEX_PLAN_JOBS", 100_000);
    let users = env("FLEX_PLAN_USERS", 1000) as u32;
    let rounds = env("FLEX_PLAN_ROUNDS", 10);
    let kinds = [
        Weighing::Fifo,
        Weighing::FairShare,
        Weighing::FairShareAndLimit,
    ];
    let mut benches: Vec<PassBench> = kinds
        .iter()
        .map(|w| PassBench::new("h100-80gb-x8.toml", jobs, users, *w))
        .collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    for _ in 0..rounds {
        for (b, t) in benches.iter_mut().zip(&mut times) {
            let t0 = Instant::now();
            std::hint::black_box(b.pass());
            t.push(t0.elapsed());
        }
    }
    println!("{jobs} pending jobs from {users} users, one full host, {rounds} passes each:");
    for (w, t) in kinds.iter().zip(&mut times) {
        t.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{w:?}: median {:.1} ms, min {:.1} ms, max {:.1} ms",
            ms(t[t.len() / 2]),
            ms(t[0]),
            ms(t[t.len() - 1])
        );
    }
}

//! Jobs simulated per second by flexsim, through the real scheduler core:
//!
//! - the paper's setup: one host of two A100-40GB (14 leaves), its synthetic traces (every
//!   category and kind, 59-64 jobs each), Flex-MIG with backfilling (window 14); Dynamic- and
//!   Static-MIG and FIFO alongside for reference;
//! - scale: 1,000 hosts of eight H100-80GB × 7 leaves (56,000 leaves, one shared host model),
//!   one long trace offered at the cluster's capacity.
//!
//! Trace generation is outside the timed part. Run with `cargo bench -p flexsim --bench flexsim`.

use flex_sched::{Order, Policy};
use flexsim::gen::{generate, Category, GenSpec, KindMix};
use flexsim::metrics::policy_name;
use flexsim::models::{Hardware, ModelKind};
use flexsim::{SimConfig, Trace};
use std::time::Instant;

fn measure(
    hw: &Hardware,
    model: ModelKind,
    policy: Policy,
    traces: &[Trace],
    reps: usize,
) -> (f64, usize, u64) {
    let cfg = SimConfig::new(policy);
    let jobs: usize = traces.iter().map(|t| t.jobs.len()).sum::<usize>() * reps;
    let mut passes = 0;
    let start = Instant::now();
    for _ in 0..reps {
        for t in traces {
            let r = hw.run(model, t, &cfg).expect("runs");
            passes += r.passes;
            std::hint::black_box(&r);
        }
    }
    (jobs as f64 / start.elapsed().as_secs_f64(), jobs, passes)
}

fn main() {
    // `cargo bench` passes --bench; anything else (cargo test --benches) gets a quick run.
    let full = std::env::args().any(|a| a == "--bench");
    let hw = Hardware::load("a100-40gb-x2", 1).expect("testbed topology");
    let traces: Vec<Trace> = (0..if full { 40 } else { 2 })
        .flat_map(|seed| {
            Category::ALL.into_iter().flat_map(move |c| {
                KindMix::ALL
                    .into_iter()
                    .map(move |k| generate(&GenSpec::paper(c, k, seed, 14)).expect("trace"))
            })
        })
        .collect();
    let reps = if full { 5 } else { 1 };
    println!(
        "paper setup: a100-40gb-x2, {} traces x {reps}",
        traces.len()
    );
    for (model, policy) in [
        (ModelKind::Fm, Policy::backfill(14)),
        (ModelKind::Fm, Policy::fifo()),
        (ModelKind::Fm, Policy::conservative(14)),
        (ModelKind::Fm, Policy::backfill(14).ordered(Order::Adaptive)),
        (ModelKind::Dm, Policy::backfill(14)),
        (ModelKind::Sm, Policy::backfill(14)),
    ] {
        // Warm up once, then measure.
        measure(&hw, model, policy, &traces[..1], 1);
        let (rate, jobs, passes) = measure(&hw, model, policy, &traces, reps);
        let p = policy_name(&policy);
        println!("  {model} {p:<22} {jobs:>8} jobs {passes:>8} passes {rate:>12.0} jobs/s");
    }

    let hosts = 1000;
    let big = Hardware::load("h100-80gb-x8", hosts).expect("h100 topology");
    let n = if full { 20_000 } else { 500 };
    let trace = generate(&GenSpec {
        jobs: Some(n),
        ..GenSpec::paper(Category::Balanced, KindMix::Mixed, 1, big.total_leaves())
    })
    .expect("trace");
    println!(
        "scale: {hosts} hosts x h100-80gb-x8 ({} leaves), one balanced mixed trace",
        big.total_leaves()
    );
    for policy in [
        Policy::backfill(14),
        Policy::fifo(),
        Policy::backfill(14).ordered(Order::Adaptive),
    ] {
        let (rate, jobs, passes) =
            measure(&big, ModelKind::Fm, policy, std::slice::from_ref(&trace), 1);
        let p = policy_name(&policy);
        println!("  fm {p:<22} {jobs:>8} jobs {passes:>8} passes {rate:>12.0} jobs/s");
    }
}

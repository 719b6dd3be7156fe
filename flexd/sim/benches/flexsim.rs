//! Jobs simulated per second by flexsim, through the real scheduler core:
//!
//! - the paper's setup: one host of two A100-40GB (14 leaves), its synthetic traces (every
//!   category and kind, 59-64 jobs each), Flex-MIG with backfilling (window 14); Dynamic- and
//!   Static-MIG and FIFO alongside for reference;
//! - scale: 1,000 hosts of eight H100-80GB × 7 leaves (56,000 leaves, one shared host model),
//!   one long trace offered at the cluster's capacity;
//! - one long trace on the paper's host: 300,000 jobs, as `flexsim gen --category balanced
//!   --kind mixed --seed 7 --jobs 300000` writes them, read from the file and replayed, metrics
//!   included, as `flexsim run --trace` does (at load 1 its queue grows to tens of thousands).
//!
//! Trace generation is outside the timed part (but not reading the file in the last case). Run
//! with `cargo bench -p flexsim --bench flexsim`.

use flex_sched::{Order, Policy};
use flexsim::gen::{generate, Category, GenSpec, KindMix};
use flexsim::metrics::{policy_name, Metrics};
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

/// Write the long trace to a file, then read it and replay it as `flexsim run` does: jobs/s
/// over the whole, and the time of each part.
fn long_trace(hw: &Hardware, jobs: usize) {
    let trace = generate(&GenSpec {
        jobs: Some(jobs),
        ..GenSpec::paper(Category::Balanced, KindMix::Mixed, 7, hw.total_leaves())
    })
    .expect("trace");
    let file = tempfile::NamedTempFile::new().expect("temp file");
    trace
        .write(std::io::BufWriter::new(file.as_file()))
        .expect("write");
    let policy = Policy::backfill(14);
    let start = Instant::now();
    let read = Trace::read(file.path()).expect("read");
    let t_read = start.elapsed();
    let r = hw
        .run(ModelKind::Fm, &read, &SimConfig::new(policy))
        .expect("runs");
    let t_run = start.elapsed() - t_read;
    std::hint::black_box(Metrics::of(&r));
    let total = start.elapsed();
    println!(
        "long trace: a100-40gb-x2, balanced mixed seed 7, read from a file and replayed\n  \
         fm {:<22} {jobs:>8} jobs {:>8} passes {:>12.0} jobs/s (read {:.2} s, replay {:.2} s, \
         total {:.2} s)",
        policy_name(&policy),
        r.passes,
        jobs as f64 / total.as_secs_f64(),
        t_read.as_secs_f64(),
        t_run.as_secs_f64(),
        total.as_secs_f64()
    );
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

    long_trace(&hw, if full { 300_000 } else { 3_000 });
}

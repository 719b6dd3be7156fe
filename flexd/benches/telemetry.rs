//! What flexd's GPU telemetry sampling costs: one sample of a full h100-80gb-x8 host (56 leaves
//! busy) from a samples file (collecting the leaves under the state's lock, reading, adding to
//! each job's totals), the writer's transaction that stores the running jobs' totals after each
//! sample, and, where NVML finds GPUs, NVML's reads for 56 leaves (this host's
//! leaves, read in turn until 56 are read). The share of one core at the default period
//! (30 s) is a sample's time over the period.
//!
//! `cargo bench -p flexd --bench telemetry`; FLEX_TELEMETRY_ROUNDS (default 2000).

use flexd::bench::TelemetryBench;
use gres_plugin::telemetry::{nvml::NvmlTelemetry, Target, Telemetry};
use gres_plugin::JobId;
use std::time::{Duration, Instant};

const PERIOD_S: f64 = 30.0;

fn report(what: &str, mut t: Vec<Duration>) {
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let median = t[t.len() / 2];
    println!(
        "{what}: median {:.1} us, p99 {:.1} us, max {:.1} us over {} rounds; at a {PERIOD_S} s \
         period {:.5}% of one core",
        us(median),
        us(t[t.len() * 99 / 100]),
        us(t[t.len() - 1]),
        t.len(),
        median.as_secs_f64() / PERIOD_S * 100.0
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test --benches` runs bench binaries without --bench: nothing to do
    }
    let rounds: u32 = std::env::var("FLEX_TELEMETRY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut b = TelemetryBench::new("h100-80gb-x8.toml", rounds);
    let (mut collect, mut tick, mut store) = (Vec::new(), Vec::new(), Vec::new());
    let (mut leaves, mut jobs) = (0, 0);
    for _ in 0..rounds {
        let t0 = Instant::now();
        leaves = std::hint::black_box(b.collect());
        collect.push(t0.elapsed());
        let t0 = Instant::now();
        std::hint::black_box(b.tick());
        tick.push(t0.elapsed());
        let t0 = Instant::now();
        jobs = std::hint::black_box(b.store_totals());
        store.push(t0.elapsed());
    }
    println!("h100-80gb-x8, {leaves} leaves busy, simulated samples file:");
    report("  collect the busy leaves (under the lock)", collect);
    report("  one whole sample (collect, read, add)", tick);
    report(
        &format!("  store the {jobs} running jobs' totals (the writer's transaction)"),
        store,
    );
    nvml(rounds.min(200));
}

/// NVML's reads for 56 leaves, where NVML finds GPUs.
fn nvml(rounds: u32) {
    let found = match gres_plugin::probe::discover(std::path::Path::new("none.toml"), false) {
        Ok(f) if f.source == "nvml" => f,
        _ => {
            println!("NVML: no GPU here, not measured");
            return;
        }
    };
    let mut t = match NvmlTelemetry::open() {
        Ok(t) => t,
        Err(e) => {
            println!("NVML: {e}");
            return;
        }
    };
    let targets: Vec<Target> = found
        .host
        .leaves
        .iter()
        .cycle()
        .take(56)
        .map(|l| Target {
            leaf: l.id,
            uuid: l.uuid.clone(),
            job: JobId(1),
            whole: true,
            gpu_uuid: found
                .host
                .gpus
                .iter()
                .find(|g| g.index == l.gpu)
                .map_or_else(String::new, |g| g.uuid.clone()),
            gpu_share: l.sm_slices as f64 / 7.0,
            gpu_instance: l.gpu_instance,
            leaf_mem_bytes: l.memory_bytes,
            pids: Vec::new(),
        })
        .collect();
    let first = t.read(&targets);
    println!(
        "NVML, {} GPUs, {} leaves read 56 times a sample; first reading {:?}:",
        found.host.gpus.len(),
        found.host.leaves.len(),
        first[0]
    );
    let mut times = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        std::hint::black_box(t.read(&targets));
        times.push(t0.elapsed());
    }
    report("  56 leaves read through NVML", times);
}

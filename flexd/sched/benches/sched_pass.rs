//! One scheduling pass with 100,000 pending jobs of mixed sizes on 1,000 hosts of 8 GPUs × 7
//! leaves (h100-80gb-x8), FIFO and EASY with K = 14 and K = 0 (whole queue).
//!
//! Two starting states: "full" (running jobs hold ~97% of the leaves, the steady state of a
//! busy site) and "empty" (the pass itself places jobs until the hosts are full).
//!
//! Two queues: leaves alone (`pass_100k_jobs_1000_hosts`), and jobs as Slurm scripts ask
//! (`pass_100k_cores_mem_1000_hosts`): each also asks for cores (2 to 16 per leaf's worth, as
//! `-n`×`-c`) and host memory (`--mem` or `--mem-per-cpu`), and one in five asks for no GPU,
//! on hosts of 2 TiB (h100-80gb-x8's `memory_gib`); jobs no host could hold (more cores than a
//! host has) are left out, as flexd refuses them at submission.
//!
//! `cargo bench -p flex-sched --bench sched_pass`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use flex_sched::{
    schedule, Cluster, ClusterConfig, JobKind, Model, PendingJob, Policy, RunningJob,
};
use gres_plugin::probe::build_host;
use gres_plugin::topology::{builtin, parse};
use gres_plugin::{HostMem, JobId, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const HOSTS: usize = 1_000;
const PENDING: u64 = 100_000;
const SIZES: [u32; 10] = [1, 1, 1, 2, 2, 3, 4, 7, 8, 14];

fn job(id: u64, rng: &mut ChaCha8Rng, resources: bool) -> PendingJob {
    let leaves = SIZES[rng.gen_range(0..SIZES.len())];
    let mut request = Request::leaves(leaves, rng.gen_range(600..14_400));
    if resources {
        request.cpus = leaves * rng.gen_range(2..=16);
        request.host_mem = Some(if rng.gen_bool(0.5) {
            HostMem::PerNode((u64::from(leaves) * rng.gen_range(8..=64)) << 30)
        } else {
            HostMem::PerCpu(rng.gen_range(2..=8) << 30)
        });
        if rng.gen_range(0..5) == 0 {
            request.leaves = None;
        }
    }
    PendingJob {
        id: JobId(id),
        request,
        priority: 0,
        kind: JobKind::Batch,
    }
}

fn world(
    full: bool,
    resources: bool,
) -> (
    Cluster,
    Vec<RunningJob<flex_sched::Allocation>>,
    Vec<PendingJob>,
) {
    let t = builtin("h100-80gb-x8").unwrap();
    let host = Arc::new(build_host(&parse(t, "h100").unwrap()).unwrap());
    let mut c = Cluster::from_shared(vec![host; HOSTS], ClusterConfig::default());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut running = Vec::new();
    if full {
        let total = (HOSTS * 56) as u64;
        let (mut used, mut misses, mut id) = (0u64, 0, 1_000_000_000u64);
        while used * 100 < total * 97 && misses < 1_000 {
            id += 1;
            let j = job(id, &mut rng, resources);
            match c.place(&j) {
                Some(a) => {
                    used += a.units.len() as u64;
                    c.occupy(&a);
                    running.push(RunningJob {
                        id: j.id,
                        placement: a,
                        expected_end: rng.gen_range(60..7_200),
                    });
                }
                None => misses += 1,
            }
        }
    }
    // Only jobs flexd would accept: it refuses at submission what no host could hold (more
    // cores than a host has, here).
    let queue = (1..)
        .map(|i| job(i, &mut rng, resources))
        .filter(|j| c.admit(j).is_ok())
        .take(PENDING as usize)
        .collect();
    (c, running, queue)
}

fn bench(cr: &mut Criterion) {
    for (group, resources) in [
        ("pass_100k_jobs_1000_hosts", false),
        ("pass_100k_cores_mem_1000_hosts", true),
    ] {
        bench_group(cr, group, resources);
    }
}

fn bench_group(cr: &mut Criterion, group: &str, resources: bool) {
    let mut g = cr.benchmark_group(group);
    g.sample_size(10);
    for (state, full) in [("full", true), ("empty", false)] {
        let (c, running, queue) = world(full, resources);
        let d = schedule(&c, &queue, &running, 0, &Policy::backfill(14));
        eprintln!(
            "{group} {state}: {} running jobs, the pass starts {} jobs",
            running.len(),
            d.starts.len()
        );
        for (name, policy) in [
            ("fifo", Policy::fifo()),
            ("easy_k14", Policy::backfill(14)),
            ("easy_k0", Policy::backfill(0)),
        ] {
            g.bench_function(format!("{state}/{name}"), |b| {
                b.iter_batched(
                    || (),
                    |()| schedule(&c, &queue, &running, 0, &policy),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

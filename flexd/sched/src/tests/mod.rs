//! Scenario and property tests of the scheduler core, with small builders for hosts and jobs.

use super::*;
use gres_plugin::probe::build_host;
use gres_plugin::topology::{builtin, parse};
use gres_plugin::{GpuIndex, HostId, HostModel, JobId, Request};
use proptest::prelude::*;
use std::collections::HashSet;

mod env;
mod pass;
mod resources;

fn host(name: &str) -> HostModel {
    build_host(&parse(builtin(name).unwrap(), name).unwrap()).unwrap()
}

fn cluster(names: &[&str]) -> Cluster {
    Cluster::new(
        names.iter().map(|n| host(n)).collect(),
        ClusterConfig::default(),
    )
}

fn job(id: u64, leaves: u32) -> PendingJob {
    with(id, Request::leaves(leaves, 3600))
}

fn with(id: u64, request: Request) -> PendingJob {
    PendingJob {
        id: JobId(id),
        request,
        priority: 0,
        kind: JobKind::Batch,
    }
}

fn frac(id: u64, f: f64) -> PendingJob {
    with(
        id,
        Request {
            leaves: None,
            gpus: Some(f),
            ..Request::leaves(1, 3600)
        },
    )
}

fn profiles(c: &Cluster, a: &Allocation) -> Vec<String> {
    a.units
        .iter()
        .map(|u| c.host(a.host).leaf(u.leaf).profile.clone())
        .collect()
}

/// Leaves per GPU index.
fn per_gpu(c: &Cluster, a: &Allocation) -> Vec<(u32, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for u in &a.units {
        *m.entry(c.host(a.host).leaf(u.leaf).gpu.0).or_insert(0) += 1;
    }
    m.into_iter().collect()
}

fn place_and_take(c: &mut Cluster, j: &PendingJob) -> Allocation {
    let a = c.place(j).expect("fits");
    c.occupy(&a);
    a
}

#[test]
fn one_leaf_job_gets_the_10gb_leaf() {
    let c = cluster(&["a100-40gb-x2"]);
    let a = c.place(&job(1, 1)).unwrap();
    assert_eq!(profiles(&c, &a), ["1g.10gb"]);
}

#[test]
fn larger_jobs_prefer_5gb_leaves_and_take_10gb_rather_than_wait() {
    let mut c = cluster(&["a100-40gb-x2"]);
    let a = place_and_take(&mut c, &job(1, 4));
    assert!(profiles(&c, &a).iter().all(|p| p == "1g.5gb"));
    // 10 leaves left, 8 of them 1g.5gb: an 8-leaf job takes those, a 2-leaf job then the
    // 1g.10gb ones rather than wait
    let b = place_and_take(&mut c, &job(2, 8));
    assert_eq!(b.units.len(), 8);
    assert!(profiles(&c, &b).iter().all(|p| p == "1g.5gb"));
    let d = place_and_take(&mut c, &job(3, 2));
    assert_eq!(profiles(&c, &d), ["1g.10gb", "1g.10gb"]);
}

#[test]
fn six_leaf_job_spreads_three_and_three() {
    let c = cluster(&["a100-40gb-x2"]);
    let a = c.place(&job(1, 6)).unwrap();
    assert_eq!(per_gpu(&c, &a), [(0, 3), (1, 3)]);
}

#[test]
fn a_job_that_fits_only_across_both_gpus_gets_both() {
    let mut c = cluster(&["a100-40gb-x2"]);
    // 4 leaves busy on each GPU: no single GPU has 6 free, together they have 6
    place_and_take(&mut c, &job(1, 8));
    let a = c.place(&job(2, 6)).unwrap();
    assert_eq!(per_gpu(&c, &a), [(0, 3), (1, 3)]);
}

#[test]
fn h100_jobs_stay_local_and_spread() {
    let c = cluster(&["h100-80gb-x8"]);
    let a = c.place(&job(1, 4)).unwrap();
    let gpus: Vec<u32> = per_gpu(&c, &a).iter().map(|g| g.0).collect();
    assert_eq!(gpus, [0, 1, 2, 3], "one leaf on each GPU of one NUMA node");
    let b = c.place(&job(2, 2)).unwrap();
    assert_eq!(
        per_gpu(&c, &b),
        [(0, 1), (1, 1)],
        "two GPUs under one switch"
    );
}

#[test]
fn cores_come_from_the_leafs_numa_node_and_are_never_shared() {
    let mut c = cluster(&["a100-40gb-x2"]);
    let mut seen = HashSet::new();
    for id in 1..=7 {
        let mut r = Request::leaves(2, 60);
        r.cores_per_leaf = 2;
        let a = place_and_take(&mut c, &with(id, r));
        let h = c.host(a.host);
        assert_eq!(a.cores.len(), 4);
        for (i, u) in a.units.iter().enumerate() {
            let numa = h.numa_of_gpu(h.leaf(u.leaf).gpu);
            for core in &a.cores[i * 2..i * 2 + 2] {
                let cn = h.cores.iter().find(|k| k.id == *core).unwrap().numa_node;
                assert_eq!(
                    cn, numa,
                    "core {core} of leaf {} is on the far node",
                    u.leaf
                );
            }
        }
        for core in &a.cores {
            assert!(seen.insert(*core), "core {core} handed out twice");
        }
    }
    // every leaf is taken now
    assert!(c.place(&job(99, 1)).is_none());
}

#[test]
fn cores_spill_to_the_far_node_only_when_the_near_one_is_full() {
    let mut c = cluster(&["a100-40gb-x2"]);
    let mut r = Request::leaves(1, 60);
    r.cores_per_leaf = 20;
    let a = place_and_take(&mut c, &with(1, r));
    let h = c.host(a.host);
    let near = h.numa_of_gpu(h.leaf(a.units[0].leaf).gpu);
    let on_near = a
        .cores
        .iter()
        .filter(|k| h.cores.iter().any(|c| c.id == **k && c.numa_node == near))
        .count();
    assert_eq!(on_near, 16);
}

#[test]
fn memory_requests_take_the_smallest_set_of_leaves() {
    let c = cluster(&["a100-40gb-x2"]);
    let mut r = Request::leaves(1, 60);
    r.leaves = None;
    r.mem_bytes = Some(12 << 30);
    let a = c.place(&with(1, r.clone())).unwrap();
    let mut p = profiles(&c, &a);
    p.sort();
    assert_eq!(p, ["1g.10gb", "1g.5gb"]);
    r.mem_bytes = Some(4 << 30);
    assert_eq!(c.place(&with(2, r)).unwrap().units.len(), 1);
}

#[test]
fn fractions_on_mig_mean_compute_slices() {
    let c = cluster(&["a100-40gb-x2"]);
    assert_eq!(c.place(&frac(1, 0.5)).unwrap().units.len(), 4);
    assert_eq!(c.place(&frac(2, 1.0 / 7.0)).unwrap().units.len(), 1);
    assert_eq!(c.place(&frac(3, 2.0)).unwrap().units.len(), 14);
}

#[test]
fn leaf_type_restricts_the_choice() {
    let c = cluster(&["a100-40gb-x2"]);
    let mut r = Request::leaves(2, 60);
    r.leaf_type = Some("1g.10gb".into());
    let a = c.place(&with(1, r.clone())).unwrap();
    assert_eq!(profiles(&c, &a), ["1g.10gb", "1g.10gb"]);
    r.leaves = Some(3);
    assert!(c.place(&with(2, r.clone())).is_none());
    let e = c.admit(&with(2, r)).unwrap_err();
    assert!(!e.is_empty());
}

#[test]
fn impossible_requests_are_rejected_with_a_reason() {
    let c = cluster(&["a100-40gb-x2"]);
    let e = c.admit(&job(1, 15)).unwrap_err();
    assert!(e.contains("15 leaves") && e.contains("14"), "{e}");
    let e = c.admit(&job(1, 33)).unwrap_err();
    assert!(e.contains("33 leaves"), "{e}");
    let e = c.admit(&frac(1, f64::NAN)).unwrap_err();
    assert!(e.contains("greater than 0"), "{e}");
    let e = c.admit(&frac(1, -0.5)).unwrap_err();
    assert!(e.contains("greater than 0"), "{e}");
    let mut r = Request::leaves(1, 60);
    r.mem_bytes = Some(200 << 30);
    let e = c.admit(&with(1, r)).unwrap_err();
    assert!(e.contains("memory"), "{e}");
    let mut r = Request::leaves(4, 60);
    r.cores_per_leaf = 9;
    let e = c.admit(&with(1, r)).unwrap_err();
    assert!(e.contains("cores"), "{e}");
    let mut r = Request::leaves(1, 60);
    r.leaf_type = Some("3g.20gb".into());
    let e = c.admit(&with(1, r)).unwrap_err();
    assert!(e.contains("3g.20gb"), "{e}");
    assert!(c.admit(&job(1, 14)).is_ok());
}

#[test]
fn an_impossible_head_does_not_block_the_queue() {
    let c = cluster(&["a100-40gb-x2"]);
    let q = vec![job(1, 20), job(2, 2)];
    let d = schedule(&c, &q, &[], 0, &Policy::fifo());
    assert_eq!(d.starts.len(), 1);
    assert_eq!(d.starts[0].job, JobId(2));
    assert!(matches!(d.pending[0].reason, Reason::Unsatisfiable(_)));
}

// Gaia's experiments on whole GPUs (p4-x4: GPUs 0,1 under one switch, 2,3 under another).

#[test]
fn fragments_share_one_gpu() {
    let mut c = cluster(&["p4-x4"]);
    let a = place_and_take(&mut c, &frac(1, 0.5));
    let b = place_and_take(&mut c, &frac(2, 0.4));
    let d = place_and_take(&mut c, &frac(3, 0.1));
    assert_eq!(a.units[0].leaf, b.units[0].leaf);
    assert_eq!(a.units[0].leaf, d.units[0].leaf);
    assert_eq!(
        (a.units[0].share, b.units[0].share, d.units[0].share),
        (500, 400, 100)
    );
    // the GPU is full now: the next fraction opens another one
    let e = place_and_take(&mut c, &frac(4, 0.1));
    assert_ne!(e.units[0].leaf, a.units[0].leaf);
}

#[test]
fn a_single_gpu_goes_beside_a_busy_sibling() {
    let mut c = cluster(&["p4-x4"]);
    let a = place_and_take(&mut c, &job(1, 1));
    let b = place_and_take(&mut c, &job(2, 1));
    let gpu = |x: &Allocation| c.host(x.host).leaf(x.units[0].leaf).gpu;
    assert_eq!(gpu(&a), GpuIndex(0));
    assert_eq!(
        gpu(&b),
        GpuIndex(1),
        "the idle sibling, keeping GPUs 2+3 whole"
    );
    // a 2-GPU job now takes the untouched switch
    let d = c.place(&job(3, 2)).unwrap();
    let gs: Vec<u32> = d
        .units
        .iter()
        .map(|u| c.host(d.host).leaf(u.leaf).gpu.0)
        .collect();
    assert_eq!(gs, [2, 3]);
}

#[test]
fn two_gpus_come_from_one_switch_every_time() {
    for _ in 0..3 {
        let mut c = cluster(&["p4-x4"]);
        place_and_take(&mut c, &frac(1, 0.3)); // GPU 0 partly used
        let d = c.place(&job(2, 2)).unwrap();
        let gs: Vec<u32> = d
            .units
            .iter()
            .map(|u| c.host(d.host).leaf(u.leaf).gpu.0)
            .collect();
        assert_eq!(gs, [2, 3]);
    }
}

#[test]
fn non_integer_fractions_above_one_are_rejected_or_rounded() {
    let c = cluster(&["p4-x4"]);
    let e = c.admit(&frac(1, 1.5)).unwrap_err();
    assert!(e.contains("1.5"), "{e}");
    let mut c = c;
    c.set_config(ClusterConfig {
        round_up_fractions: true,
        ..ClusterConfig::default()
    });
    assert_eq!(c.place(&frac(1, 1.5)).unwrap().units.len(), 2);
}

#[test]
fn placement_strategies_for_shares() {
    use gres_plugin::request::Strategy;
    let mk = |s: Strategy, mem_gib: u64| {
        let mut r = Request::leaves(1, 60);
        r.leaves = None;
        r.mem_bytes = Some(mem_gib << 30);
        r.placement = Some(s);
        r
    };
    for (s, want) in [
        (Strategy::FillFirst, [0, 0, 1, 0]),
        (Strategy::BalanceLoad, [0, 1, 2, 3]),
        (Strategy::BestFit, [0, 0, 1, 0]),
    ] {
        let mut c = cluster(&["p4-x4"]);
        let got: Vec<u32> = [3u64, 3, 5, 1]
            .iter()
            .enumerate()
            .map(|(i, &g)| {
                let a = place_and_take(&mut c, &with(i as u64, mk(s, g)));
                c.host(a.host).leaf(a.units[0].leaf).gpu.0
            })
            .collect();
        assert_eq!(got, want, "{s}");
    }
}

// Property tests over random hosts, running jobs and queues.

/// Hosts, running jobs (leaves, end), queued jobs (leaves, limit, priority), backfill window.
type World = (
    Vec<&'static str>,
    Vec<(u32, u64)>,
    Vec<(u32, u64, i64)>,
    usize,
);

fn arb_world() -> impl Strategy<Value = World> {
    let hosts = prop::collection::vec(
        prop::sample::select(vec!["a100-40gb-x2", "h100-80gb-x8", "p4-x4"]),
        1..3,
    );
    let running = prop::collection::vec((1u32..8, 1u64..2000), 0..12);
    let queue = prop::collection::vec((1u32..12, 1u64..3000, 0i64..3), 1..25);
    (hosts, running, queue, 0usize..6)
}

/// Fill the cluster with running jobs, as far as they fit.
fn world(hosts: &[&str], running: &[(u32, u64)]) -> (Cluster, Vec<RunningJob<Allocation>>) {
    let mut c = cluster(hosts);
    let mut r = Vec::new();
    for (i, &(n, end)) in running.iter().enumerate() {
        let j = job(1000 + i as u64, n);
        if let Some(a) = c.place(&j) {
            c.occupy(&a);
            r.push(RunningJob {
                id: j.id,
                placement: a,
                expected_end: end,
            });
        }
    }
    (c, r)
}

fn queue_of(q: &[(u32, u64, i64)]) -> Vec<PendingJob> {
    q.iter()
        .enumerate()
        .map(|(i, &(n, limit, prio))| {
            let mut j = job(i as u64 + 1, n);
            j.request.time_limit_s = limit;
            j.priority = prio;
            j
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn easy_never_delays_the_head_reservation((hosts, running, queue, window) in arb_world()) {
        let (c, run) = world(&hosts, &running);
        let q = queue_of(&queue);
        let now = 0;
        let d = schedule(&c, &q, &run, now, &Policy::backfill(window));
        // nothing is handed out twice: occupying every start on top of the running jobs works
        let mut after = c.clone();
        for s in &d.starts {
            prop_assert!(after.place_on_check(&s.placement), "start {} overlaps", s.job);
            after.occupy(&s.placement);
        }
        if let Some(res) = &d.reservation {
            // at the reservation, with every job that may still run holding its resources,
            // the head fits
            let mut at = after.clone();
            for r in &run {
                if r.expected_end <= res.start { at.release(&r.placement); }
            }
            for s in &d.starts {
                let limit = q.iter().find(|j| j.id == s.job).unwrap().request.time_limit_s;
                if now + limit <= res.start { at.release(&s.placement); }
            }
            let head = q.iter().find(|j| j.id == res.job).unwrap();
            prop_assert!(at.place(head).is_some(), "head {} cannot start at {}", res.job, res.start);
            // and the reservation is not later than without any backfilling
            let fifo = schedule(&c, &q, &run, now, &Policy::fifo());
            prop_assert_eq!(fifo.reservation.as_ref().map(|r| (r.job, r.start)), Some((res.job, res.start)));
        }
    }

    #[test]
    fn fifo_never_starts_a_later_job_before_an_earlier_one((hosts, running, queue, _w) in arb_world()) {
        let (c, run) = world(&hosts, &running);
        let q = queue_of(&queue);
        let d = schedule(&c, &q, &run, 0, &Policy::fifo());
        let mut order: Vec<&PendingJob> = q.iter().collect();
        order.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.id.cmp(&b.id)));
        let started: HashSet<JobId> = d.starts.iter().map(|s| s.job).collect();
        // the started jobs are exactly a prefix of the queue order, skipping only unsatisfiable ones
        let mut blocked = false;
        for j in order {
            let unsat = d.pending.iter().any(|p| p.job == j.id && matches!(p.reason, Reason::Unsatisfiable(_)));
            if started.contains(&j.id) {
                prop_assert!(!blocked, "job {} started behind a blocked job", j.id);
            } else if !unsat {
                blocked = true;
            }
        }
        prop_assert_eq!(d.starts.len() + d.pending.len(), q.len());
    }

    #[test]
    fn placements_are_deterministic((hosts, running, queue, window) in arb_world()) {
        let (c, run) = world(&hosts, &running);
        let q = queue_of(&queue);
        let a = schedule(&c, &q, &run, 7, &Policy::backfill(window));
        let b = schedule(&c, &q, &run, 7, &Policy::backfill(window));
        prop_assert_eq!(a, b);
    }
}

impl Cluster {
    /// Test helper: does the allocation fit the current free state?
    fn place_on_check(&self, a: &Allocation) -> bool {
        let mut c = self.clone();
        c.try_occupy(a).is_ok()
    }
}

#[test]
fn readopting_an_overlapping_allocation_is_refused() {
    let mut c = cluster(&["a100-40gb-x2"]);
    let a = place_and_take(&mut c, &job(1, 3));
    let e = c.try_occupy(&a).unwrap_err();
    assert!(e.contains("already taken"), "{e}");
    let bad = Allocation {
        host: HostId(5),
        ..a
    };
    assert!(c.try_occupy(&bad).is_err());
}

#[test]
fn estimates_follow_the_queue_forward() {
    let mut c = cluster(&["a100-40gb-x2"]);
    let running = vec![
        RunningJob {
            id: JobId(100),
            placement: place_and_take(&mut c, &job(100, 8)),
            expected_end: 500,
        },
        RunningJob {
            id: JobId(101),
            placement: place_and_take(&mut c, &job(101, 6)),
            expected_end: 900,
        },
    ];
    // 1 needs 8 (free at 500), 2 needs all 14 (after 1 ends at 500 + 3600), 3 waits behind 2
    // (in queue order) until 4100 + 3600
    let q = vec![job(1, 8), job(2, 14), job(3, 1)];
    let mut d = schedule(&c, &q, &running, 0, &Policy::fifo());
    estimate_starts(&c, &q, &running, 0, &mut d, 10);
    let est: Vec<Option<Time>> = d.pending.iter().map(|p| p.estimated_start).collect();
    assert_eq!(est, [Some(500), Some(4100), Some(7700)]);
    // depth bounds the work
    let mut d = schedule(&c, &q, &running, 0, &Policy::fifo());
    estimate_starts(&c, &q, &running, 0, &mut d, 1);
    assert_eq!(d.pending[1].estimated_start, None);
}

#[test]
fn a_head_without_a_reservation_blocks_but_is_not_failed() {
    // the model holds leaves of a job the pass is not told about (a reconfiguring GPU in a
    // simulator model, say): the head fits idle hardware but gets no reservation
    let mut c = cluster(&["a100-40gb-x2"]);
    place_and_take(&mut c, &job(100, 2));
    let d = schedule(&c, &[job(1, 14), job(2, 1)], &[], 0, &Policy::backfill(14));
    assert!(d.starts.is_empty());
    assert_eq!(d.reservation, None);
    assert_eq!(d.pending[0].reason, Reason::Resources);
    assert_eq!(d.pending[0].estimated_start, None);
    assert_eq!(d.pending[1].reason, Reason::Priority);
}
mod policies;

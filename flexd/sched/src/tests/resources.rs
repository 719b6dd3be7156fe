//! Cores and host memory beside leaves: CPU-only jobs, Slurm's memory spellings, `--exclusive`
//! and the reason a job waits.

use super::*;
use gres_plugin::HostMem;

const GIB: u64 = 1 << 30;

/// The testbed (two A100-40GB, 14 leaves, 32 cores on two NUMA nodes) with `ram` GiB of RAM.
fn testbed(ram: u64, reserved: u64) -> Cluster {
    let mut h = host("a100-40gb-x2");
    h.memory_bytes = ram * GIB;
    Cluster::new(
        vec![h],
        ClusterConfig {
            reserved_memory: reserved * GIB,
            ..ClusterConfig::default()
        },
    )
}

fn cpu_job(id: u64, cores: u32, mem: Option<HostMem>) -> PendingJob {
    with(
        id,
        Request {
            host_mem: mem,
            ..Request::cpus(cores, 3600)
        },
    )
}

fn numa_of(c: &Cluster, a: &Allocation) -> Vec<u32> {
    let mut n: Vec<u32> = a
        .cores
        .iter()
        .map(|id| {
            c.host(a.host)
                .cores
                .iter()
                .find(|k| k.id == *id)
                .unwrap()
                .numa_node
        })
        .collect();
    n.dedup();
    n
}

#[test]
fn a_cpu_only_job_takes_cores_and_no_leaf() {
    let mut c = testbed(64, 2);
    let a = place_and_take(&mut c, &cpu_job(1, 4, None));
    assert!(a.units.is_empty());
    assert_eq!(a.cores.len(), 4);
    assert_eq!(numa_of(&c, &a).len(), 1, "one NUMA node: {:?}", a.cores);
    // Every leaf is still there for a GPU job.
    assert!(c.place(&job(2, 14)).is_some());
}

#[test]
fn cpu_only_jobs_fill_the_cores_gpu_jobs_leave() {
    let mut c = testbed(64, 2);
    // Every leaf, one core each: 18 cores remain.
    let g = place_and_take(&mut c, &job(1, 14));
    assert_eq!(g.cores.len(), 14);
    let mut got = 0;
    for id in 2..100 {
        match c.place(&cpu_job(id, 1, None)) {
            Some(a) => {
                assert!(a.cores.iter().all(|k| !g.cores.contains(k)));
                c.occupy(&a);
                got += 1;
            }
            None => break,
        }
    }
    assert_eq!(got, 18);
}

#[test]
fn cpu_only_jobs_leave_the_near_cores_to_gpu_jobs() {
    let mut c = testbed(64, 2);
    let cpu = place_and_take(&mut c, &cpu_job(1, 8, None));
    let gpu = place_and_take(&mut c, &job(2, 7));
    assert!(cpu.cores.iter().all(|k| !gpu.cores.contains(k)));
    // The GPU job's cores are on its GPUs' NUMA nodes.
    for u in &gpu.units {
        let numa = c
            .host(gpu.host)
            .numa_of_gpu(c.host(gpu.host).leaf(u.leaf).gpu);
        assert!(numa_of(&c, &gpu).contains(&numa));
    }
}

#[test]
fn memory_is_reserved_and_a_job_that_does_not_fit_waits() {
    let mut c = testbed(34, 2); // 32 GiB for jobs
    let a = place_and_take(&mut c, &cpu_job(1, 1, Some(HostMem::PerNode(20 * GIB))));
    assert_eq!(a.mem_bytes, 20 * GIB);
    let second = cpu_job(2, 1, Some(HostMem::PerNode(20 * GIB)));
    assert!(c.place(&second).is_none());
    assert!(!c.fits(&second));
    assert_eq!(c.shortage(&second.request), Some("memory"));
    c.release(&a);
    assert!(c.place(&second).is_some());
}

#[test]
fn slurms_memory_spellings_scale_with_cores_and_units() {
    let c = testbed(64, 2);
    let per_cpu = cpu_job(1, 4, Some(HostMem::PerCpu(GIB)));
    assert_eq!(c.place(&per_cpu).unwrap().mem_bytes, 4 * GIB);
    let mut r = Request::leaves(3, 3600);
    r.host_mem = Some(HostMem::PerGpu(2 * GIB));
    assert_eq!(c.place(&with(2, r)).unwrap().mem_bytes, 6 * GIB);
    let all = cpu_job(3, 1, Some(HostMem::All));
    assert_eq!(c.place(&all).unwrap().mem_bytes, 62 * GIB);
}

#[test]
fn mem_all_needs_all_of_the_memory_free() {
    let mut c = testbed(64, 2);
    place_and_take(&mut c, &cpu_job(1, 1, Some(HostMem::PerNode(GIB))));
    let all = cpu_job(2, 1, Some(HostMem::All));
    assert!(c.place(&all).is_none());
    assert_eq!(c.shortage(&all.request), Some("memory"));
}

#[test]
fn a_job_larger_than_the_hosts_memory_is_refused_naming_it() {
    let c = testbed(34, 2);
    let e = c
        .admit(&cpu_job(1, 1, Some(HostMem::PerNode(40 * GIB))))
        .unwrap_err();
    assert!(e.contains("host memory") && e.contains("32.00 GiB"), "{e}");
    let e = c.admit(&cpu_job(2, 33, None)).unwrap_err();
    assert!(e.contains("33 cores") && e.contains("32"), "{e}");
}

#[test]
fn unknown_ram_is_no_limit() {
    let c = testbed(0, 2);
    let j = cpu_job(1, 1, Some(HostMem::PerNode(1 << 50)));
    assert!(c.admit(&j).is_ok());
    assert_eq!(c.place(&j).unwrap().mem_bytes, 1 << 50);
    assert_eq!(c.memory(HostId(0)).0, None);
}

#[test]
fn tasks_cores_beyond_the_leaves_share_are_spread_over_the_leaves() {
    let c = testbed(64, 2);
    // Slurm's -n 1 -c 10 --gres=gpu:4: 10 cores for 4 leaves.
    let mut r = Request::leaves(4, 3600);
    r.cpus = 10;
    let a = c.place(&with(1, r)).unwrap();
    assert_eq!(a.units.len(), 4);
    assert_eq!(a.cores.len(), 10);
    let distinct: HashSet<_> = a.cores.iter().collect();
    assert_eq!(distinct.len(), 10);
}

#[test]
fn exclusive_waits_for_an_idle_host_and_takes_all_of_it() {
    let mut c = testbed(64, 2);
    let excl = with(
        9,
        Request {
            exclusive: true,
            ..Request::cpus(1, 3600)
        },
    );
    let small = place_and_take(&mut c, &cpu_job(1, 1, None));
    assert!(c.place(&excl).is_none());
    assert_eq!(c.shortage(&excl.request), Some("cores"));
    c.release(&small);
    let a = place_and_take(&mut c, &excl);
    assert_eq!(a.units.len(), 14);
    assert_eq!(a.cores.len(), 32);
    assert_eq!(a.mem_bytes, 62 * GIB);
    assert!(c.place(&cpu_job(2, 1, None)).is_none());
    assert!(c.place(&job(3, 1)).is_none());
}

#[test]
fn a_recorded_allocation_is_refused_when_its_memory_is_taken() {
    let mut c = testbed(34, 2);
    let a = place_and_take(&mut c, &cpu_job(1, 1, Some(HostMem::PerNode(20 * GIB))));
    let mut b = c
        .place(&cpu_job(2, 1, Some(HostMem::PerNode(10 * GIB))))
        .unwrap();
    b.mem_bytes = 20 * GIB;
    let e = c.try_occupy(&b).unwrap_err();
    assert!(e.contains("host memory"), "{e}");
    c.release(&a);
    assert!(c.try_occupy(&b).is_ok());
}

#[test]
fn a_pass_starts_memory_bound_jobs_one_after_the_other() {
    let c = testbed(34, 2);
    let queue: Vec<PendingJob> = (1..=2)
        .map(|id| cpu_job(id, 1, Some(HostMem::PerNode(20 * GIB))))
        .collect();
    let d = schedule(&c, &queue, &[], 0, &Policy::backfill(14));
    assert_eq!(d.starts.len(), 1);
    assert_eq!(d.pending.len(), 1);
    assert_eq!(d.pending[0].reason, Reason::Resources);
}

#[test]
fn a_reserved_memory_change_keeps_what_is_in_use() {
    let mut c = testbed(34, 2);
    place_and_take(&mut c, &cpu_job(1, 1, Some(HostMem::PerNode(20 * GIB))));
    c.set_config(ClusterConfig {
        reserved_memory: 4 * GIB,
        ..ClusterConfig::default()
    });
    assert_eq!(c.memory(HostId(0)), (Some(30 * GIB), 10 * GIB));
}

proptest! {
    /// Whatever mix of CPU-only, memory and GPU jobs is placed and released, no core and no
    /// byte is given twice, and releasing everything gives the idle host back.
    #[test]
    fn cores_and_memory_are_never_given_twice(
        jobs in proptest::collection::vec((0u32..4, 1u32..12, 0u64..24, any::<bool>()), 1..40)
    ) {
        let mut c = testbed(34, 2);
        let mut held: Vec<Allocation> = Vec::new();
        for (i, (leaves, cpus, mem, release)) in jobs.into_iter().enumerate() {
            let mut r = if leaves == 0 { Request::cpus(cpus, 60) } else { Request::leaves(leaves, 60) };
            r.cpus = cpus;
            if mem > 0 {
                r.host_mem = Some(HostMem::PerNode(mem * GIB));
            }
            if let Some(a) = c.place(&with(i as u64, r)) {
                c.occupy(&a);
                held.push(a);
            }
            if release && !held.is_empty() {
                let a = held.remove(0);
                c.release(&a);
            }
            let cores: Vec<_> = held.iter().flat_map(|a| a.cores.iter()).collect();
            let distinct: HashSet<_> = cores.iter().collect();
            prop_assert_eq!(cores.len(), distinct.len());
            let used: u64 = held.iter().map(|a| a.mem_bytes).sum();
            prop_assert!(used <= 32 * GIB);
            prop_assert_eq!(c.memory(HostId(0)).1, 32 * GIB - used);
        }
        for a in held.drain(..) {
            c.release(&a);
        }
        prop_assert_eq!(c.memory(HostId(0)), (Some(32 * GIB), 32 * GIB));
        prop_assert_eq!(c.cores_free(HostId(0)), 32);
    }
}

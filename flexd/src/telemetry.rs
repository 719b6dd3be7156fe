//! GPU telemetry of running jobs: every `telemetry_period` the sampler reads each leaf that a
//! running job holds (`gres_plugin::telemetry`: NVML, or a simulated topology's file or seed)
//! and adds the readings to that job's running totals (`gres_plugin::telemetry::summary`); when
//! the job is no longer running its summary, a `GpuUsage`, goes to the database for
//! accounting. The totals of running jobs go to the database after every sample, and a
//! restarted flexd goes on from them ([`Sampler::resume`]). The latest readings are kept for
//! the metrics endpoint.

use flex_proto::GpuUsage;
use gres_plugin::telemetry::summary::GpuTotals;
use gres_plugin::telemetry::{Reading, Target, Telemetry};
use gres_plugin::{JobId, LeafId};
use std::collections::BTreeMap;

/// What the metrics endpoint shows of a leaf: its latest reading and the job holding it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeafGauge {
    pub leaf: LeafId,
    pub uuid: String,
    pub gpu: u32,
    pub job: JobId,
    pub mem_bytes: Option<u64>,
    pub util_pct: Option<f64>,
}

/// The sampler: a source and the totals of the jobs it has seen running.
pub(crate) struct Sampler {
    source: Box<dyn Telemetry>,
    label: String,
    period_s: f64,
    totals: BTreeMap<JobId, GpuTotals>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sampler({}, every {} s)", self.label, self.period_s)
    }
}

impl Sampler {
    pub(crate) fn new(source: Box<dyn Telemetry>, period_s: f64) -> Sampler {
        let label = source.label();
        Sampler {
            source,
            label,
            period_s,
            totals: BTreeMap::new(),
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Go on from the totals stored by the flexd before (jobs running when it stopped, or
    /// that ended before their summary was written): the jobs still running add to them, from
    /// the same sample of a simulated series; the others' summaries come with the next tick.
    pub(crate) fn resume(&mut self, stored: Vec<(JobId, GpuTotals)>) {
        if !stored.is_empty() {
            tracing::info!(
                "GPU telemetry totals of {} job{} resumed from the database",
                stored.len(),
                if stored.len() == 1 { "" } else { "s" }
            );
        }
        for (job, t) in stored {
            self.source.resume(job, t.ticks);
            self.totals.insert(job, t);
        }
    }

    /// The totals of the jobs running at the last tick, to store.
    pub(crate) fn running_totals(&self) -> Vec<(JobId, GpuTotals)> {
        self.totals.iter().map(|(j, t)| (*j, t.clone())).collect()
    }

    /// One sample of `targets`, the leaves running jobs hold now (`runs`: when each job's run
    /// started): their readings, and the summaries of the runs seen before that are over (the
    /// job holds no leaf now, or a later run of it holds them).
    pub(crate) fn tick(
        &mut self,
        targets: &[Target],
        runs: &BTreeMap<JobId, u64>,
    ) -> (Vec<Reading>, Vec<(JobId, GpuUsage)>) {
        let mut ended = Vec::new();
        let running: std::collections::BTreeSet<JobId> = targets.iter().map(|t| t.job).collect();
        let mut new_runs = Vec::new();
        self.totals.retain(|job, t| {
            let run = runs.get(job).copied();
            let keep = running.contains(job) && (t.run_start.is_none() || t.run_start == run);
            if !keep {
                if let Some(s) = t.summary(&self.label, self.period_s) {
                    ended.push((*job, s));
                }
                if running.contains(job) {
                    new_runs.push(*job);
                }
            }
            keep
        });
        for job in new_runs {
            self.source.resume(job, 0);
        }
        let readings = self.source.read(targets);
        for job in running {
            let of_job = readings
                .iter()
                .zip(targets)
                .filter(|(r, _)| r.job == job)
                .map(|(r, t)| (r, t.gpu_share));
            self.totals
                .entry(job)
                .or_insert_with(|| GpuTotals::of_run(runs.get(&job).copied()))
                .add(of_job, self.period_s);
        }
        (readings, ended)
    }
}

/// When each running job's run started.
pub(crate) fn runs(core: &crate::server::Core) -> BTreeMap<JobId, u64> {
    core.state
        .running_jobs()
        .filter_map(|j| Some((j.row.id, j.row.start_time?)))
        .collect()
}

/// The leaves running jobs hold now, as the sampler reads them.
pub(crate) fn targets(core: &crate::server::Core) -> Vec<(Target, u32)> {
    let cluster = &core.state.cluster;
    let mut v = Vec::new();
    for job in core.state.running_jobs() {
        let Some(alloc) = &job.alloc else { continue };
        let host = cluster.host(alloc.host);
        for u in &alloc.units {
            let Some(leaf) = host.leaves.get(u.leaf.0 as usize) else {
                continue;
            };
            let Some(gpu) = host.gpus.iter().find(|g| g.index == leaf.gpu) else {
                continue;
            };
            let target = Target {
                leaf: u.leaf,
                uuid: leaf.uuid.clone(),
                job: job.row.id,
                whole: u.share >= 1000,
                gpu_uuid: gpu.uuid.clone(),
                gpu_share: leaf.sm_slices as f64 / 7.0 * u.share as f64 / 1000.0,
                gpu_instance: leaf.gpu_instance,
                leaf_mem_bytes: leaf.memory_bytes,
                // A share's processes are found off the lock ([`job_pids`]), from its
                // supervisor's.
                pids: match (u.share >= 1000, job.row.supervisor_pid) {
                    (false, Some(pid)) => vec![pid],
                    _ => Vec::new(),
                },
            };
            v.push((target, leaf.gpu.0));
        }
    }
    v
}

/// The processes of a job: those in its cgroup where its run file names one, else its
/// supervisor and the supervisor's descendants (None: not launched yet, no processes).
fn job_pids(run_dir: &std::path::Path, job: JobId, supervisor: Option<u32>) -> Vec<u32> {
    use crate::exec::{cgroup::JobCgroup, files};
    let run = files::read_run(run_dir, job).ok().flatten();
    let cgroup = run.and_then(|r| JobCgroup::existing(r.cgroup.as_deref()?, &r.cgroups_v1));
    match (cgroup, supervisor) {
        (Some(c), _) => c.pids().into_iter().map(|p| p as u32).collect(),
        (None, Some(pid)) => files::descendants(pid),
        (None, None) => Vec::new(),
    }
}

/// Sample every `period` until flexd stops: the readings go to `shared`'s gauges, the
/// summaries of jobs that ended to the database. Reading NVML blocks, so each sample runs off
/// the runtime's workers.
pub(crate) async fn sample_loop(
    shared: std::sync::Arc<crate::server::Shared>,
    mut sampler: Sampler,
    period: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let (held, runs) = shared.with_core(|c| (targets(c), runs(c)));
        let mut targets: Vec<Target> = held.iter().map(|(t, _)| t.clone()).collect();
        let run_dir = shared.run_dir.clone();
        let Ok((s, (readings, ended))) = tokio::task::spawn_blocking(move || {
            for t in targets.iter_mut().filter(|t| !t.whole) {
                t.pids = job_pids(&run_dir, t.job, t.pids.first().copied());
            }
            let r = sampler.tick(&targets, &runs);
            (sampler, r)
        })
        .await
        else {
            tracing::error!("GPU telemetry sampling panicked; no more samples are taken");
            return;
        };
        sampler = s;
        let gauges = readings
            .into_iter()
            .zip(held)
            .map(|(r, (t, gpu))| LeafGauge {
                leaf: r.leaf,
                uuid: t.uuid,
                gpu,
                job: r.job,
                mem_bytes: r.mem_bytes,
                util_pct: r.util_pct,
            })
            .collect();
        shared.set_gauges(sampler.label(), gauges);
        use crate::store::writer::{Done, Op};
        for (job, usage) in ended {
            let op = Op::GpuUsage {
                job,
                usage: Box::new(usage),
            };
            shared.writer.send(op, Done::Nothing);
        }
        let running = sampler.running_totals();
        if !running.is_empty() {
            shared.writer.send(Op::GpuTotals(running), Done::Nothing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::telemetry::file::FileTelemetry;
    use std::path::Path;

    fn target(leaf: u32, job: u64) -> Target {
        Target::test_mig_leaf(leaf, job)
    }

    /// Job 5 holds leaves 0-3 (1g each); only leaf 0 works (2-3 GiB, 90-100 %, its GPU at
    /// 280 and 300 W, then not reported); the others hold 1 MiB and report no utilisation.
    /// Its summary comes after the tick that no longer sees it.
    #[test]
    fn a_jobs_summary_is_the_sum_over_its_leaves_of_each_sample() {
        let file = "0,0,2048,90,280\n1,0,3072,100,300\n2,0,2048,95\n\
                    0,1,1,\n1,1,1,\n2,1,1,\n0,2,1,\n1,2,1,\n2,2,1,\n0,3,1,\n1,3,1,\n2,3,1,\n";
        let src = FileTelemetry::parse(file, Path::new("s.csv")).unwrap();
        let mut s = Sampler::new(Box::new(src), 30.0);
        let targets: Vec<Target> = (0..4).map(|l| target(l, 5)).collect();
        let runs = BTreeMap::from([(JobId(5), 100)]);
        for _ in 0..4 {
            assert!(s.tick(&targets, &runs).1.is_empty());
        }
        let (readings, ended) = s.tick(&[], &BTreeMap::new());
        assert!(readings.is_empty());
        let mib = 1u64 << 20;
        assert_eq!(
            ended,
            vec![(
                JobId(5),
                GpuUsage {
                    source: "simulated (s.csv)".into(),
                    samples: 3,
                    period_s: 30.0,
                    mem_max_bytes: Some(3075 * mib),
                    mem_ave_bytes: Some((7177 * mib + 1) / 3),
                    util_max_pct: Some(100.0),
                    util_ave_pct: Some(95.0),
                    // (280 + 300) W × 1/7 of the GPU × 30 s
                    energy_j: Some(2485.7),
                }
            )]
        );
    }

    /// A job requeued and started again within one period: its first run's summary comes out
    /// as the second starts, and the second reads its series from the first sample again.
    #[test]
    fn a_new_run_of_a_job_starts_new_totals() {
        let src = FileTelemetry::parse("0,0,1024,50\n1,0,2048,70\n", Path::new("s.csv")).unwrap();
        let mut s = Sampler::new(Box::new(src), 1.0);
        let targets = [target(0, 7)];
        let first = BTreeMap::from([(JobId(7), 100)]);
        assert!(s.tick(&targets, &first).1.is_empty());
        assert!(s.tick(&targets, &first).1.is_empty());
        let second = BTreeMap::from([(JobId(7), 160)]);
        let (readings, ended) = s.tick(&targets, &second);
        assert_eq!(ended.len(), 1);
        assert_eq!(
            (ended[0].1.samples, ended[0].1.mem_max_bytes),
            (2, Some(2048 << 20))
        );
        assert_eq!(readings[0].mem_bytes, Some(1024 << 20));
        let totals = s.running_totals();
        assert_eq!((totals[0].1.run_start, totals[0].1.ticks), (Some(160), 1));
    }
}

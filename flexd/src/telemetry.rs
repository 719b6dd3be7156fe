//! GPU telemetry of running jobs: every `telemetry_period` the sampler reads each leaf that a
//! running job holds (`gres_plugin::telemetry`, NVML or a simulated topology's file) and adds
//! the readings to that job's running totals; when the job is no longer running its summary,
//! a `flex_proto::GpuUsage`, goes to the database for accounting. The latest readings are kept
//! for the metrics endpoint. A restarted flexd starts its jobs' totals again.

use flex_proto::GpuUsage;
use gres_plugin::telemetry::{Reading, Target, Telemetry};
use gres_plugin::{JobId, LeafId};
use std::collections::BTreeMap;

/// One job's running totals. A sample counts (for `samples`, and for a figure) when at least
/// one of the job's leaves reported something (that figure); the job's value at a sample is
/// the sum over the leaves that did.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    samples: u32,
    mem_n: u32,
    mem_sum: u128,
    mem_max: u64,
    util_n: u32,
    util_sum: f64,
    util_max: f64,
    /// Joules so far, when any sample reported power.
    energy_j: Option<f64>,
}

impl Totals {
    /// Add one sample of the job's leaves (`readings`, with the part of its GPU each is),
    /// `period_s` after the one before.
    pub(crate) fn add<'a>(
        &mut self,
        readings: impl IntoIterator<Item = (&'a Reading, f64)>,
        period_s: f64,
    ) {
        let (mut mem, mut util): (Option<u64>, Option<f64>) = (None, None);
        let mut powered = false;
        for (r, gpu_share) in readings {
            if let Some(w) = r.gpu_power_w {
                *self.energy_j.get_or_insert(0.0) += w * gpu_share * period_s;
                powered = true;
            }
            if let Some(m) = r.mem_bytes {
                mem = Some(mem.unwrap_or(0) + m);
            }
            if let Some(u) = r.util_pct {
                util = Some(util.unwrap_or(0.0) + u);
            }
        }
        if mem.is_some() || util.is_some() || powered {
            self.samples += 1;
        }
        if let Some(m) = mem {
            self.mem_n += 1;
            self.mem_sum += m as u128;
            self.mem_max = self.mem_max.max(m);
        }
        if let Some(u) = util {
            self.util_n += 1;
            self.util_sum += u;
            self.util_max = self.util_max.max(u);
        }
    }

    /// The job's summary; None when no sample reported anything.
    pub(crate) fn summary(&self, source: &str, period_s: f64) -> Option<GpuUsage> {
        if self.mem_n == 0 && self.util_n == 0 && self.energy_j.is_none() {
            return None;
        }
        // Means rounded to whole bytes and hundredths of a percent, so that a summary reads
        // the same wherever it is computed.
        let mem_ave = (self.mem_n > 0)
            .then(|| ((self.mem_sum + self.mem_n as u128 / 2) / self.mem_n as u128) as u64);
        let util_ave =
            (self.util_n > 0).then(|| (self.util_sum / self.util_n as f64 * 100.0).round() / 100.0);
        Some(GpuUsage {
            source: source.to_string(),
            samples: self.samples,
            period_s,
            mem_max_bytes: (self.mem_n > 0).then_some(self.mem_max),
            mem_ave_bytes: mem_ave,
            util_max_pct: (self.util_n > 0).then_some(self.util_max),
            util_ave_pct: util_ave,
            energy_j: self.energy_j.map(|j| (j * 10.0).round() / 10.0),
        })
    }
}

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
    totals: BTreeMap<JobId, Totals>,
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

    /// One sample of `targets`, the leaves running jobs hold now: their readings, and the
    /// summaries of the jobs seen before that hold none now (they ended).
    pub(crate) fn tick(&mut self, targets: &[Target]) -> (Vec<Reading>, Vec<(JobId, GpuUsage)>) {
        let readings = self.source.read(targets);
        let mut ended = Vec::new();
        let running: std::collections::BTreeSet<JobId> = targets.iter().map(|t| t.job).collect();
        self.totals.retain(|job, t| {
            let keep = running.contains(job);
            if !keep {
                if let Some(s) = t.summary(&self.label, self.period_s) {
                    ended.push((*job, s));
                }
            }
            keep
        });
        for job in running {
            let of_job = readings
                .iter()
                .zip(targets)
                .filter(|(r, _)| r.job == job)
                .map(|(r, t)| (r, t.gpu_share));
            self.totals
                .entry(job)
                .or_default()
                .add(of_job, self.period_s);
        }
        (readings, ended)
    }
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
            };
            v.push((target, leaf.gpu.0));
        }
    }
    v
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
        let held = shared.with_core(|c| targets(c));
        let targets: Vec<Target> = held.iter().map(|(t, _)| t.clone()).collect();
        let Ok((s, (readings, ended))) = tokio::task::spawn_blocking(move || {
            let r = sampler.tick(&targets);
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
        for (job, usage) in ended {
            let op = crate::store::writer::Op::GpuUsage {
                job,
                usage: Box::new(usage),
            };
            shared.writer.send(op, crate::store::writer::Done::Nothing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::telemetry::file::FileTelemetry;
    use std::path::Path;

    fn target(leaf: u32, job: u64) -> Target {
        Target {
            leaf: LeafId(leaf),
            uuid: format!("MIG-{leaf}"),
            job: JobId(job),
            whole: true,
            gpu_uuid: "GPU-0".into(),
            gpu_share: 1.0 / 7.0,
            gpu_instance: Some(leaf),
        }
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
        for _ in 0..4 {
            assert!(s.tick(&targets).1.is_empty());
        }
        let (readings, ended) = s.tick(&[]);
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

    #[test]
    fn a_job_whose_leaves_report_nothing_has_no_summary() {
        let mut t = Totals::default();
        let r = Reading {
            leaf: LeafId(0),
            job: JobId(1),
            mem_bytes: None,
            util_pct: None,
            gpu_power_w: None,
        };
        t.add([(&r, 1.0)], 1.0);
        assert_eq!(t.summary("nvml", 1.0), None);
        // Memory without utilisation or power: those are not reported, never 0.
        let mem = Reading {
            mem_bytes: Some(10),
            ..r.clone()
        };
        t.add([(&mem, 1.0)], 1.0);
        let s = t.summary("nvml", 1.0).unwrap();
        assert_eq!(
            (s.mem_max_bytes, s.util_max_pct, s.util_ave_pct, s.energy_j),
            (Some(10), None, None, None)
        );
        assert_eq!(s.samples, 1);
        // A half share of a whole GPU: half its GPU's power, and nothing else of its own.
        let mut share = Totals::default();
        let power = Reading {
            gpu_power_w: Some(400.0),
            ..r
        };
        share.add([(&power, 0.5)], 2.0);
        let s = share.summary("nvml", 2.0).unwrap();
        assert_eq!(
            (s.samples, s.mem_max_bytes, s.energy_j),
            (1, None, Some(400.0))
        );
    }
}

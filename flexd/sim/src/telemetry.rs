//! Simulated GPU telemetry of a replay: where the topology names a telemetry source (a samples
//! file or a seed, `gres_plugin::telemetry::Simulated`), each job of a Flex-MIG run is sampled
//! as flexd samples it, once at the end of each whole period of its run, through the same
//! source and the same totals (`gres_plugin::telemetry::summary::GpuTotals`), so a job's
//! summary is the one flexd would keep for it. What comes out is labelled simulated.
//!
//! Only Flex-MIG (`fm`) runs are sampled: the sources read leaves, and Static- and Dynamic-MIG
//! place instances that are not the topology's leaves.

use crate::engine::RunResult;
use crate::models::{Hardware, ModelKind};
use gres_plugin::telemetry::summary::GpuUsage;
use gres_plugin::telemetry::summary::{leaves_needed, GpuTotals};
use gres_plugin::telemetry::{Simulated, Target};
use gres_plugin::{JobId, LeafId};
use serde::Serialize;

/// One job's simulated GPU usage.
#[derive(Clone, Debug, PartialEq)]
pub struct JobGpu {
    pub id: u64,
    /// None when the job ran less than one period (no sample) or nothing was reported.
    pub usage: Option<GpuUsage>,
    /// The leaves flexeff would tell it to ask for, when fewer than it held.
    pub right_size: Option<usize>,
}

/// The run's simulated GPU usage, all jobs together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuTelemetry {
    /// `simulated (seed N)` or `simulated (FILE)`.
    pub source: String,
    pub period_s: u64,
    /// Jobs with a summary.
    pub jobs_sampled: usize,
    /// Mean utilisation of the leaves the sampled jobs held, weighted by leaf-seconds:
    /// Σ (mean utilisation × run) ÷ Σ (leaves × run), percent of one leaf; None when no job's
    /// utilisation was reported.
    pub mean_leaf_util_pct: Option<f64>,
    /// Peak GPU memory over the memory of the leaves held, the same weighting, percent.
    pub mean_mem_peak_pct: Option<f64>,
    /// GPU energy of the sampled jobs, kWh.
    pub energy_kwh: Option<f64>,
    /// Jobs that flexeff would tell to ask for fewer leaves.
    pub right_size_jobs: usize,
}

/// Sample every job of an fm run through `source`, every `period_s` of its run. The run must
/// have recorded its rows (the leaves each job held).
pub fn sample(
    r: &RunResult,
    hw: &Hardware,
    source: &Simulated,
    period_s: u64,
) -> Result<(Vec<JobGpu>, GpuTelemetry), String> {
    if r.model != ModelKind::Fm {
        return Err(format!(
            "simulated telemetry samples Flex-MIG leaves; model {} places no leaves",
            r.model
        ));
    }
    let mut src = source.open().map_err(|e| e.to_string())?;
    let label = src.label();
    let period = period_s as f64;
    let per_host = hw.hosts[0].leaves.len() as u32;
    let (mut util_w, mut mem_w, mut leaf_s, mut mem_s) = (0.0, 0.0, 0.0, 0.0);
    let (mut util_seen, mut mem_seen) = (false, false);
    let mut energy: Option<f64> = None;
    let mut jobs = Vec::with_capacity(r.jobs.len());
    for j in &r.jobs {
        let host = &hw.hosts[(j.rows.first().copied().unwrap_or(0) / per_host.max(1)) as usize];
        let targets: Vec<Target> = j
            .rows
            .iter()
            .map(|row| {
                let leaf = &host.leaves[(row % per_host) as usize];
                let gpu = host.gpus.iter().find(|g| g.index == leaf.gpu);
                Target {
                    leaf: LeafId(leaf.id.0),
                    uuid: leaf.uuid.clone(),
                    job: JobId(j.id),
                    whole: true,
                    gpu_uuid: gpu.map_or_else(String::new, |g| g.uuid.clone()),
                    gpu_share: leaf.sm_slices as f64 / 7.0,
                    gpu_instance: leaf.gpu_instance,
                    leaf_mem_bytes: leaf.memory_bytes,
                    pids: Vec::new(),
                }
            })
            .collect();
        let mut totals = GpuTotals::default();
        for _ in 0..j.run_s / period_s.max(1) {
            let readings = src.read(&targets);
            totals.add(
                readings.iter().zip(&targets).map(|(r, t)| (r, t.gpu_share)),
                period,
            );
        }
        let usage = totals.summary(&label, period);
        let sizes: Vec<u64> = targets.iter().map(|t| t.leaf_mem_bytes).collect();
        let right_size = usage
            .as_ref()
            .and_then(|u| leaves_needed(u, &sizes))
            .filter(|n| *n < targets.len());
        if let Some(u) = &usage {
            let run = j.run_s as f64;
            if let Some(a) = u.util_ave_pct {
                util_w += a * run;
                leaf_s += targets.len() as f64 * run;
                util_seen = true;
            }
            if let Some(m) = u.mem_max_bytes {
                mem_w += m as f64 * run;
                mem_s += sizes.iter().sum::<u64>() as f64 * run;
                mem_seen = true;
            }
            if let Some(e) = u.energy_j {
                *energy.get_or_insert(0.0) += e;
            }
        }
        jobs.push(JobGpu {
            id: j.id,
            usage,
            right_size,
        });
    }
    let round2 = |v: f64| (v * 100.0).round() / 100.0;
    let summary = GpuTelemetry {
        source: label,
        period_s,
        jobs_sampled: jobs.iter().filter(|j| j.usage.is_some()).count(),
        mean_leaf_util_pct: util_seen.then(|| round2(util_w / leaf_s)),
        mean_mem_peak_pct: mem_seen.then(|| round2(mem_w / mem_s * 100.0)),
        energy_kwh: energy.map(|e| (e / 3.6e6 * 1e4).round() / 1e4),
        right_size_jobs: jobs.iter().filter(|j| j.right_size.is_some()).count(),
    };
    Ok((jobs, summary))
}

impl GpuTelemetry {
    /// (name, value) rows for the run's table and CSV; "not reported" where no job's source
    /// gave the figure.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let or_not = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("not reported".into(), f);
        vec![
            ("gpu_telemetry", self.source.clone()),
            ("gpu_jobs_sampled", self.jobs_sampled.to_string()),
            (
                "gpu_mean_leaf_util_pct",
                or_not(self.mean_leaf_util_pct, &|v| format!("{v:.2}")),
            ),
            (
                "gpu_mean_mem_peak_pct",
                or_not(self.mean_mem_peak_pct, &|v| format!("{v:.2}")),
            ),
            (
                "gpu_energy_kwh",
                or_not(self.energy_kwh, &|v| format!("{v:.4}")),
            ),
            ("gpu_right_size_jobs", self.right_size_jobs.to_string()),
        ]
    }
}

/// The per-job columns `--jobs-out` adds with telemetry, after the run's own.
pub const JOB_COLUMNS: &str = "gpu_mem_max_mib,gpu_mem_ave_mib,gpu_util_max_pct,\
    gpu_util_ave_pct,gpu_energy_j,right_size_leaves,gpu_telemetry";

/// A job's values for [`JOB_COLUMNS`]; empty where not reported.
pub fn job_fields(j: &JobGpu) -> String {
    let u = j.usage.as_ref();
    let mib = |b: Option<u64>| b.map_or(String::new(), |b| format!("{:.1}", b as f64 / 1048576.0));
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    format!(
        "{},{},{},{},{},{},{}",
        mib(u.and_then(|u| u.mem_max_bytes)),
        mib(u.and_then(|u| u.mem_ave_bytes)),
        num(u.and_then(|u| u.util_max_pct)),
        num(u.and_then(|u| u.util_ave_pct)),
        num(u.and_then(|u| u.energy_j)),
        j.right_size.map_or(String::new(), |n| n.to_string()),
        u.map_or("", |u| u.source.as_str())
    )
}

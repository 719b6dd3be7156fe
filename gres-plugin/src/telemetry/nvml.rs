//! Telemetry from NVML: per leaf, the memory in use on its MIG instance or whole GPU, its
//! utilisation and the power its GPU draws. Utilisation is GPM's SM utilisation between two
//! samples where the GPU has GPM (Hopper and later; per GPU instance for a MIG leaf), else
//! NVML's GPU utilisation for a whole GPU; a MIG instance without GPM reports none ("not
//! reported"), and so does a leaf's first sample under GPM (there is nothing to compare it with).
//!
//! A share of a whole GPU (`--gpu-fraction`) reports what NVML gives per process, summed over
//! the job's processes (`Target::pids`): the GPU memory of its running compute processes and
//! the SM utilisation of its processes' utilisation samples since the GPU's previous read
//! (their mean per process). NVML lists only processes with some utilisation in the period,
//! so a job none of whose processes is listed used none; where NVML refuses either query, or
//! cannot say a process's memory, the figure is not reported.

use super::{Reading, Target, Telemetry};
use crate::ids::{JobId, LeafId};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, GpmSample, Nvml};
use std::collections::HashMap;

/// Samples the local GPUs through libnvidia-ml.
pub struct NvmlTelemetry {
    /// One NVML for the life of the process, so that GPM samples (which borrow it) can be kept
    /// from one read to the next.
    nvml: &'static Nvml,
    /// Each job's leaf's latest GPM sample.
    gpm: HashMap<(JobId, LeafId), GpmSample<'static>>,
    /// The latest process utilisation sample read of each shared GPU (μs timestamp).
    last_seen: HashMap<String, u64>,
}

/// What NVML says of one shared GPU's processes at one read: memory by pid (None: NVML cannot
/// say), and the mean SM utilisation of each process it lists. None: the query failed.
#[derive(Debug, Default)]
struct Processes {
    mem: Option<HashMap<u32, Option<u64>>>,
    util: Option<HashMap<u32, f64>>,
}

impl Processes {
    /// The job's figures: the sums over its processes.
    fn of(&self, pids: &[u32]) -> (Option<u64>, Option<f64>) {
        let mem = self.mem.as_ref().and_then(|m| {
            pids.iter()
                .filter_map(|p| m.get(p))
                .try_fold(0u64, |sum, b| Some(sum + (*b)?))
        });
        let util = self
            .util
            .as_ref()
            .map(|u| pids.iter().filter_map(|p| u.get(p)).sum::<f64>());
        (mem, util.map(|u| (u * 100.0).round() / 100.0))
    }
}

impl std::fmt::Debug for NvmlTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlTelemetry")
    }
}

impl NvmlTelemetry {
    /// Open NVML; an error says why (no driver, no library).
    pub fn open() -> Result<Self, String> {
        let nvml = Nvml::init().map_err(|e| format!("nvml: init: {e}"))?;
        Ok(NvmlTelemetry {
            nvml: Box::leak(Box::new(nvml)),
            gpm: HashMap::new(),
            last_seen: HashMap::new(),
        })
    }

    /// GPM's SM utilisation of the leaf since its previous sample (None the first time, or
    /// where the GPU has no GPM).
    fn gpm_util(&mut self, t: &Target, device: &Device<'static>) -> Option<f64> {
        let sample = match t.gpu_instance {
            Some(gi) => {
                let gpu = self.nvml.device_by_uuid(t.gpu_uuid.as_str()).ok()?;
                gpu.gpm_mig_sample(gi).ok()?
            }
            None => device.gpm_sample().ok()?,
        };
        let before = self.gpm.insert((t.job, t.leaf), sample)?;
        let now = &self.gpm[&(t.job, t.leaf)];
        let m = nvml_wrapper::gpm::gpm_metrics_get(self.nvml, &before, now, &[GpmMetricId::SmUtil])
            .ok()?;
        // Hundredths of a percent: more digits than GPM's sampling supports would only be noise.
        m.into_iter()
            .next()?
            .ok()
            .map(|r| (r.value * 100.0).round() / 100.0)
    }
}

impl NvmlTelemetry {
    /// One read of a shared GPU's processes.
    fn processes(&mut self, gpu: &Device<'static>, uuid: &str) -> Processes {
        let mem = gpu.running_compute_processes().ok().map(|ps| {
            ps.into_iter()
                .map(|p| {
                    let used = match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    };
                    (p.pid, used)
                })
                .collect()
        });
        let since = self.last_seen.get(uuid).copied();
        let util = match gpu.process_utilization_stats(since) {
            Ok(samples) => {
                let mut sums: HashMap<u32, (f64, u32)> = HashMap::new();
                for s in &samples {
                    let e = sums.entry(s.pid).or_default();
                    e.0 += s.sm_util as f64;
                    e.1 += 1;
                }
                if let Some(t) = samples.iter().map(|s| s.timestamp).max() {
                    self.last_seen.insert(uuid.to_string(), t);
                }
                Some(
                    sums.into_iter()
                        .map(|(p, (s, n))| (p, s / n as f64))
                        .collect(),
                )
            }
            // No process had any utilisation since the last read.
            Err(NvmlError::NotFound) => Some(HashMap::new()),
            Err(_) => None,
        };
        Processes { mem, util }
    }
}

impl Telemetry for NvmlTelemetry {
    fn label(&self) -> String {
        "nvml".into()
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        // Samples of leaves no job of these holds any more are dropped.
        let held: Vec<(JobId, LeafId)> = targets.iter().map(|t| (t.job, t.leaf)).collect();
        self.gpm.retain(|k, _| held.contains(k));
        let shared: Vec<&str> = targets
            .iter()
            .filter(|t| !t.whole)
            .map(|t| t.gpu_uuid.as_str())
            .collect();
        self.last_seen.retain(|g, _| shared.contains(&g.as_str()));
        // Each GPU's power, and a shared GPU's processes, once a sample, whatever number of
        // its leaves are read.
        let mut power: HashMap<String, Option<f64>> = HashMap::new();
        let mut procs: HashMap<String, Processes> = HashMap::new();
        let nvml = self.nvml;
        targets
            .iter()
            .map(|t| {
                let mut r = Reading {
                    leaf: t.leaf,
                    job: t.job,
                    mem_bytes: None,
                    util_pct: None,
                    gpu_power_w: None,
                };
                r.gpu_power_w = *power.entry(t.gpu_uuid.clone()).or_insert_with(|| {
                    let gpu = nvml.device_by_uuid(t.gpu_uuid.as_str()).ok()?;
                    gpu.power_usage().ok().map(|mw| mw as f64 / 1000.0)
                });
                if !t.whole {
                    if !procs.contains_key(&t.gpu_uuid) {
                        let p = match nvml.device_by_uuid(t.gpu_uuid.as_str()) {
                            Ok(gpu) => self.processes(&gpu, &t.gpu_uuid),
                            Err(_) => Processes::default(),
                        };
                        procs.insert(t.gpu_uuid.clone(), p);
                    }
                    (r.mem_bytes, r.util_pct) = procs[&t.gpu_uuid].of(&t.pids);
                    return r;
                }
                let Ok(d) = nvml.device_by_uuid(t.uuid.as_str()) else {
                    return r;
                };
                r.mem_bytes = d.memory_info().ok().map(|m| m.used);
                let gpm = matches!(d.gpm_support(), Ok(true))
                    || t.gpu_instance.is_some_and(|_| {
                        nvml.device_by_uuid(t.gpu_uuid.as_str())
                            .is_ok_and(|g| matches!(g.gpm_support(), Ok(true)))
                    });
                r.util_pct = if gpm {
                    self.gpm_util(t, &d)
                } else if t.gpu_instance.is_none() {
                    d.utilization_rates().ok().map(|u| u.gpu as f64)
                } else {
                    None
                };
                r
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_share_sums_its_own_processes_and_says_what_nvml_does_not() {
        let p = Processes {
            mem: Some(HashMap::from([
                (10, Some(100)),
                (11, Some(50)),
                (20, Some(7)),
                (30, None),
            ])),
            util: Some(HashMap::from([(10, 12.5), (20, 40.0)])),
        };
        // Its two processes; the other job's are not its.
        assert_eq!(p.of(&[10, 11, 12]), (Some(150), Some(12.5)));
        // Processes NVML lists no utilisation for used none; no compute process, no memory.
        assert_eq!(p.of(&[12]), (Some(0), Some(0.0)));
        // A process whose memory NVML cannot say: the job's memory is not reported.
        assert_eq!(p.of(&[20, 30]), (None, Some(40.0)));
        // Queries NVML refused: nothing reported.
        assert_eq!(Processes::default().of(&[10]), (None, None));
    }
}

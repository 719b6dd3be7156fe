//! Telemetry from NVML: per leaf, the memory in use on its MIG instance or whole GPU, its
//! utilisation and the power its GPU draws. Utilisation is GPM's SM utilisation between two
//! samples where the GPU has GPM (Hopper and later; per GPU instance for a MIG leaf), else
//! NVML's GPU utilisation for a whole GPU; a MIG instance without GPM reports none ("not
//! reported"), and so does a leaf's first sample under GPM (there is nothing to compare it with).

use super::{Reading, Target, Telemetry};
use crate::ids::{JobId, LeafId};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::{Device, GpmSample, Nvml};
use std::collections::HashMap;

/// Samples the local GPUs through libnvidia-ml.
pub struct NvmlTelemetry {
    /// One NVML for the life of the process, so that GPM samples (which borrow it) can be kept
    /// from one read to the next.
    nvml: &'static Nvml,
    /// Each job's leaf's latest GPM sample.
    gpm: HashMap<(JobId, LeafId), GpmSample<'static>>,
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

impl Telemetry for NvmlTelemetry {
    fn label(&self) -> String {
        "nvml".into()
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        // Samples of leaves no job of these holds any more are dropped.
        let held: Vec<(JobId, LeafId)> = targets.iter().map(|t| (t.job, t.leaf)).collect();
        self.gpm.retain(|k, _| held.contains(k));
        // Each GPU's power once a sample, whatever number of its leaves are read.
        let mut power: HashMap<String, Option<f64>> = HashMap::new();
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

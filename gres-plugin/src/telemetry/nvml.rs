//! Telemetry from NVML: per leaf, the memory in use on its MIG instance or whole GPU, the
//! utilisation NVML reports for a whole GPU, and the power its GPU draws. MIG instances report
//! no utilisation through NVML's utilisation rates (GPM metrics would; not read yet), so theirs
//! is "not reported".

use super::{Reading, Target, Telemetry};
use nvml_wrapper::Nvml;

/// Samples the local GPUs through libnvidia-ml.
pub struct NvmlTelemetry {
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlTelemetry")
    }
}

impl NvmlTelemetry {
    /// Open NVML; an error says why (no driver, no library).
    pub fn open() -> Result<Self, String> {
        Nvml::init()
            .map(|nvml| NvmlTelemetry { nvml })
            .map_err(|e| format!("nvml: init: {e}"))
    }
}

impl Telemetry for NvmlTelemetry {
    fn label(&self) -> String {
        "nvml".into()
    }

    fn read(&mut self, targets: &[Target]) -> Vec<Reading> {
        // Each GPU's power once a sample, whatever number of its leaves are read.
        let mut power: std::collections::HashMap<&str, Option<f64>> = Default::default();
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
                r.gpu_power_w = *power.entry(t.gpu_uuid.as_str()).or_insert_with(|| {
                    let gpu = self.nvml.device_by_uuid(t.gpu_uuid.as_str()).ok()?;
                    gpu.power_usage().ok().map(|mw| mw as f64 / 1000.0)
                });
                if !t.whole {
                    return r;
                }
                let Ok(d) = self.nvml.device_by_uuid(t.uuid.as_str()) else {
                    return r;
                };
                r.mem_bytes = d.memory_info().ok().map(|m| m.used);
                if !t.uuid.starts_with("MIG-") {
                    r.util_pct = d.utilization_rates().ok().map(|u| u.gpu as f64);
                }
                r
            })
            .collect()
    }
}

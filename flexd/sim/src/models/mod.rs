//! The allocation models flexsim compares, each a [`Model`] of the scheduler core:
//!
//! - `fm`, Flex-MIG: the core's own [`Cluster`] (one-to-many over fixed leaves).
//! - `sm`, Static-MIG: [`StaticMig`], every GPU fixed to 1g.10gb + 2g.10gb + 4g.20gb.
//! - `dm`, Dynamic-MIG: [`DynamicMig`], one instance per job, reconfiguring (and draining) a
//!   GPU when the MIG placement tree blocks a fit.
//!
//! Only fm places a trace's cores and host memory (the core's own rules); sm and dm ignore
//! them and refuse CPU-only jobs ([`refuse_cpu_only`]).
//!
//! [`SimModel`] adds what only the simulator needs: compute-slice accounting (so utilization and
//! the lower bound compare across models), the run-time factor of a placement, and
//! reconfigurations that the engine turns into drains.

mod dynamic_mig;
mod flex;
mod static_mig;

pub use dynamic_mig::{DmPlacement, DynamicMig};
pub use static_mig::{SmSlot, StaticMig};

use super::exec_model::ExecModel;
#[cfg(doc)]
use flex_sched::Cluster;
use flex_sched::{Model, PendingJob};
use gres_plugin::model::nominal_slice_gb;
use gres_plugin::{GpuIndex, HostId, HostModel};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Which allocation model a run uses.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Flex-MIG: one job over many fixed leaves.
    Fm,
    /// Dynamic-MIG: one instance per job, reconfigured on demand.
    Dm,
    /// Static-MIG: one instance per job from a fixed layout.
    Sm,
}

impl ModelKind {
    pub const ALL: [ModelKind; 3] = [ModelKind::Fm, ModelKind::Dm, ModelKind::Sm];
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelKind::Fm => "fm",
            ModelKind::Dm => "dm",
            ModelKind::Sm => "sm",
        })
    }
}

/// What the simulator needs from a model beyond the scheduler core's [`Model`].
pub trait SimModel: Model {
    const KIND: ModelKind;

    /// Compute slices the job needs at least under this model.
    fn need(&self, job: &PendingJob) -> u32;

    /// Compute slices a placement holds.
    fn slices(&self, p: &Self::Placement) -> u32;

    /// Compute slices of the whole cluster.
    fn capacity(&self) -> u64;

    /// The most free compute slices on any one host.
    fn free_slices(&self) -> u32;

    /// Run-time factor of the placement itself (Flex-MIG's one-to-many overhead); the engine
    /// applies the interference factor on top.
    fn factor(&self, p: &Self::Placement, exec: &ExecModel) -> f64 {
        let _ = (p, exec);
        1.0
    }

    /// The least run-time factor any placement of the job could have (1 for one-to-one
    /// models), for the lower bound.
    fn min_factor(&self, job: &PendingJob, exec: &ExecModel) -> f64 {
        let _ = (job, exec);
        1.0
    }

    /// The GPU (the model's own numbering) that must be reconfigured, and so drained, before
    /// this placement can run.
    fn reconfigures(&self, p: &Self::Placement) -> Option<u32> {
        let _ = p;
        None
    }

    /// Whether a placement sits on that GPU (a drain of it suspends the job).
    fn on_gpu(&self, p: &Self::Placement, gpu: u32) -> bool {
        let _ = (p, gpu);
        false
    }

    /// The reconfiguration of that GPU is over.
    fn reconfigured(&mut self, gpu: u32) {
        let _ = gpu;
    }

    /// Chart rows a placement covers (leaves, or memory slices of one-to-one models).
    fn rows(&self, p: &Self::Placement) -> Vec<u32>;

    /// Labels of every chart row.
    fn row_labels(&self) -> Vec<String>;
}

/// A MIG GPU as the one-to-one models see it.
#[derive(Clone, Debug, PartialEq)]
pub struct MigGpu {
    pub host: HostId,
    pub index: GpuIndex,
    /// GB of one memory slice (5 on an A100-40GB).
    pub slice_gb: f64,
}

/// Every GPU of the hosts, refusing hosts with a GPU that is not in MIG mode.
pub fn mig_gpus(hosts: &[Arc<HostModel>]) -> Result<Vec<MigGpu>, String> {
    let mut out = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        for g in &host.gpus {
            check_mig(host, g)?;
            out.push(MigGpu {
                host: HostId(h as u32),
                index: g.index,
                slice_gb: nominal_slice_gb(g.memory_bytes),
            });
        }
    }
    if out.is_empty() {
        return Err("the topology has no GPUs".into());
    }
    Ok(out)
}

/// flexsim compares MIG operation models: every GPU must be in MIG mode with MIG leaves.
pub fn check_mig(host: &HostModel, g: &gres_plugin::Gpu) -> Result<(), String> {
    let leaves = host.leaves.iter().filter(|l| l.gpu == g.index);
    if !g.mig || leaves.clone().any(|l| !l.is_mig()) || leaves.count() == 0 {
        return Err(format!(
            "host {}: GPU {} ({}) is not in MIG mode; flexsim models MIG GPUs only",
            host.hostname, g.index, g.name
        ));
    }
    Ok(())
}

/// Compute slices a job asks for (its leaves; 0 for a CPU-only job).
pub(crate) fn size_of(job: &PendingJob) -> u32 {
    job.request.leaves.unwrap_or(0)
}

/// The one-to-one baselines model MIG instances alone: they ignore a job's cores and host
/// memory (as if every host had enough of both), and refuse a CPU-only job, which has no
/// instance for them to place.
pub(crate) fn refuse_cpu_only(job: &PendingJob, model: &str) -> Result<(), String> {
    if job.request.wants_gpu() {
        Ok(())
    } else {
        Err(format!(
            "a CPU-only job: {model} models MIG instances, not cores"
        ))
    }
}

/// GPU memory a job asks for, in GB (10^9 bytes).
pub(crate) fn mem_gb_of(job: &PendingJob) -> f64 {
    job.request.mem_bytes.map_or(0.0, |b| b as f64 / 1e9)
}

/// Host ranges of a GPU list sorted by host: `ranges[h]` are the GPU positions of host h.
pub(crate) fn host_ranges(gpus: &[MigGpu]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, g) in gpus.iter().enumerate() {
        match out.last_mut() {
            Some(r) if gpus[r.start].host == g.host => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Labels of memory-slice rows: `g0 s0` … (with the host when there are several).
pub(crate) fn slice_labels(gpus: &[MigGpu]) -> Vec<String> {
    let many = gpus.last().is_some_and(|g| g.host.0 > 0);
    gpus.iter()
        .flat_map(|g| {
            (0..8).map(move |s| {
                if many {
                    format!("h{} g{} s{s}", g.host, g.index)
                } else {
                    format!("g{} s{s}", g.index)
                }
            })
        })
        .collect()
}

/// The hosts a run simulates: copies of one topology sharing one host model.
#[derive(Clone, Debug)]
pub struct Hardware {
    pub hosts: Vec<Arc<HostModel>>,
    /// Where the topology came from (a file path or a built-in name).
    pub origin: String,
    /// The simulated GPU telemetry the topology names, if any.
    pub telemetry: Option<gres_plugin::telemetry::Simulated>,
}

impl Hardware {
    /// `n` hosts of a topology: a file path, or the name of a shipped topology
    /// (`a100-40gb-x2`, `h100-80gb-x8`). Their host memory is the topology's `memory_gib`;
    /// without it memory is no limit ([`Hardware::with_host_memory`] sets it).
    pub fn load(topology: &str, n: usize) -> Result<Self, String> {
        use gres_plugin::{probe, topology as topo};
        if n == 0 {
            return Err("hosts must be at least 1".into());
        }
        let path = std::path::Path::new(topology);
        let text = if path.is_file() {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read topology file {topology}: {e}"))?
        } else if let Some(t) = topo::builtin(topology) {
            t.to_string()
        } else {
            return Err(format!(
                "topology {topology:?} is neither a file nor a shipped topology ({})",
                topo::BUILTIN
                    .iter()
                    .map(|(f, _)| f.trim_end_matches(".toml"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let raw = topo::parse(&text, topology).map_err(|e| e.to_string())?;
        let dir = path.parent().filter(|_| path.is_file());
        let telemetry = topo::telemetry_source(&text, topology, dir.unwrap_or(path))
            .map_err(|e| e.to_string())?;
        let host = probe::build_host(&raw).map_err(|e| format!("topology {topology}: {e}"))?;
        for g in &host.gpus {
            check_mig(&host, g)?;
        }
        let host = Arc::new(host);
        Ok(Self {
            hosts: vec![host; n],
            origin: topology.to_string(),
            telemetry,
        })
    }

    /// Every host with `bytes` of host memory in place of what the topology says (its
    /// `memory_gib`); 0: memory is no limit.
    pub fn with_host_memory(mut self, bytes: u64) -> Self {
        let mut model = (*self.hosts[0]).clone();
        model.memory_bytes = bytes;
        // One shared model, as `load` makes them: the core keeps one idle copy per model.
        let model = Arc::new(model);
        self.hosts = vec![model; self.hosts.len()];
        self
    }

    /// Compute slices of every host together (every leaf of a MIG host).
    pub fn total_leaves(&self) -> u32 {
        self.hosts.iter().map(|h| h.leaves.len() as u32).sum()
    }

    /// Run a trace under a model.
    pub fn run(
        &self,
        kind: ModelKind,
        trace: &super::Trace,
        cfg: &super::SimConfig,
    ) -> Result<super::RunResult, String> {
        use super::simulate;
        Ok(match kind {
            ModelKind::Fm => simulate(
                flex_sched::Cluster::from_shared(self.hosts.clone(), Default::default()),
                trace,
                cfg,
            ),
            ModelKind::Dm => simulate(DynamicMig::new(mig_gpus(&self.hosts)?), trace, cfg),
            ModelKind::Sm => simulate(StaticMig::new(mig_gpus(&self.hosts)?), trace, cfg),
        })
    }
}

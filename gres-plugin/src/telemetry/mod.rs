//! GPU telemetry per leaf: what the hardware says each leaf of a running job uses, read every
//! sampling period. The interface ([`Telemetry`], [`Reading`]) and its sources: [`nvml`] on
//! real GPUs (behind the `nvml` feature), and for simulated topologies ([`Simulated`]) [`file`],
//! a file of samples, or [`gen`], samples drawn from a seed. A figure a source cannot give is
//! None ("not reported"), never a made-up number. [`summary`] turns a job's samples into its
//! totals and summary.

pub mod file;
pub mod gen;
#[cfg(feature = "nvml")]
pub mod nvml;
pub mod summary;

use crate::ids::{JobId, LeafId};
use std::collections::HashMap;
use std::path::PathBuf;

/// One leaf to sample: which job holds it, whether the job holds all of it (a share of a whole
/// GPU reports its own processes' figures, not the GPU's), and what part of its GPU it is (its
/// GPU's power is shared out by that).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub leaf: LeafId,
    pub uuid: String,
    pub job: JobId,
    pub whole: bool,
    /// The UUID of the leaf's GPU (the leaf's own for a whole GPU).
    pub gpu_uuid: String,
    /// The part of its GPU the job holds through this leaf: SM slices / 7 × share.
    pub gpu_share: f64,
    /// The GPU instance of a MIG leaf (GPM samples a MIG leaf through its GPU by this id).
    pub gpu_instance: Option<u32>,
    /// The leaf's GPU memory, bytes (the simulated generator fills a part of it).
    pub leaf_mem_bytes: u64,
    /// The job's processes, for a share of a whole GPU (NVML's per-process figures are summed
    /// over them); empty for a leaf the job holds whole.
    pub pids: Vec<u32>,
}

/// What one leaf reported at one sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub leaf: LeafId,
    pub job: JobId,
    /// GPU memory in use on the leaf, in bytes.
    pub mem_bytes: Option<u64>,
    /// Utilisation of the leaf, percent.
    pub util_pct: Option<f64>,
    /// The power drawn by the leaf's whole GPU, watts.
    pub gpu_power_w: Option<f64>,
}

/// A source of per-leaf samples.
pub trait Telemetry: Send {
    /// `nvml`, or `simulated (FILE)` / `simulated (seed N)`: shown with every figure that
    /// comes from it.
    fn label(&self) -> String;
    /// One sample of each target, in the targets' order.
    fn read(&mut self, targets: &[Target]) -> Vec<Reading>;
    /// `job` has taken `taken` samples of each of its leaves already (before flexd
    /// restarted; 0 when a new run of it starts): a source that reads a series per job goes on
    /// from there.
    fn resume(&mut self, job: JobId, taken: u32) {
        let _ = (job, taken);
    }
}

/// The telemetry a simulated topology names: a samples file (`telemetry = "FILE"`) or a seed
/// (`telemetry_seed = N`).
#[derive(Clone, Debug, PartialEq)]
pub enum Simulated {
    File(PathBuf),
    Seed(u64),
}

impl Simulated {
    /// The source, ready to read; an error names the file and what is wrong with it.
    pub fn open(&self) -> Result<Box<dyn Telemetry>, file::FileError> {
        Ok(match self {
            Simulated::File(p) => Box::new(file::FileTelemetry::open(p)?),
            Simulated::Seed(s) => Box::new(gen::GenTelemetry::new(*s)),
        })
    }
}

/// Where each job is in its series of samples, for the simulated sources, which read sample n
/// of a job's leaf: a job starts at 0 on each leaf, goes on where it was after a restart of
/// flexd ([`Telemetry::resume`]), and starts again from 0 when it comes back after losing its
/// leaf (a requeue).
#[derive(Debug, Default)]
pub(crate) struct Series {
    /// Samples each job has taken of each leaf so far.
    taken: HashMap<(JobId, LeafId), u32>,
    /// Samples each job had taken of its leaves before flexd restarted.
    resumed: HashMap<JobId, u32>,
}

impl Series {
    /// The sample number of each target's reading now, in the targets' order; the jobs that
    /// no longer hold their leaves are forgotten.
    pub(crate) fn next(&mut self, targets: &[Target]) -> Vec<u32> {
        let holding: Vec<(JobId, LeafId)> = targets.iter().map(|t| (t.job, t.leaf)).collect();
        self.taken.retain(|k, _| holding.contains(k));
        self.resumed
            .retain(|j, _| holding.iter().any(|(h, _)| h == j));
        targets
            .iter()
            .map(|t| {
                let from = self.resumed.get(&t.job).copied().unwrap_or(0);
                let n = self.taken.entry((t.job, t.leaf)).or_insert(from);
                *n += 1;
                *n - 1
            })
            .collect()
    }

    /// See [`Telemetry::resume`].
    pub(crate) fn resume(&mut self, job: JobId, taken: u32) {
        self.taken.retain(|(j, _), _| *j != job);
        self.resumed.insert(job, taken);
    }
}

impl Target {
    /// Leaf `leaf` of an A100 in MIG mode (a 1g.5gb instance, GPU instance `leaf`) held whole
    /// by job `job`: the target the sources' tests read.
    #[doc(hidden)]
    pub fn test_mig_leaf(leaf: u32, job: u64) -> Target {
        Target {
            leaf: LeafId(leaf),
            uuid: format!("MIG-{leaf}"),
            job: JobId(job),
            whole: true,
            gpu_uuid: "GPU-0".into(),
            gpu_share: 1.0 / 7.0,
            gpu_instance: Some(leaf),
            leaf_mem_bytes: 5 << 30,
            pids: Vec::new(),
        }
    }
}

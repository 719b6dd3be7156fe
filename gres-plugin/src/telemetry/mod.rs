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

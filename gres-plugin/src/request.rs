//! What a job asks for, in the vocabulary of the host model.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How memory requests are spread over whole (non-MIG) GPUs (ModelGrid's strategies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// The best-fitting GPU: the least free share that still holds the job (Gaia Fragment,
    /// ModelGrid memory-optimized).
    #[default]
    BestFit,
    /// The first GPU, by index, with room.
    FillFirst,
    /// The GPU with the most free share.
    BalanceLoad,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Strategy {
    pub const NAMES: [&'static str; 3] = ["memory-optimized", "fill-first", "balance-load"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "memory-optimized" | "best-fit" => Some(Strategy::BestFit),
            "fill-first" => Some(Strategy::FillFirst),
            "balance-load" => Some(Strategy::BalanceLoad),
            _ => None,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::BestFit => "memory-optimized",
            Strategy::FillFirst => "fill-first",
            Strategy::BalanceLoad => "balance-load",
        })
    }
}

/// How much host memory (RAM) a job asks for, in Slurm's four spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMem {
    /// `--mem=SIZE`: bytes for the job on its host.
    PerNode(u64),
    /// `--mem-per-cpu=SIZE` (and flexd's `default_mem_per_cpu`): bytes per allocated core.
    PerCpu(u64),
    /// `--mem-per-gpu=SIZE`: bytes per allocated unit (leaf, whole GPU or share of one).
    PerGpu(u64),
    /// `--mem=0`: all of the host's schedulable memory.
    All,
}

impl HostMem {
    /// Bytes for a job of `cores` cores and `units` units on a host of `total` schedulable
    /// bytes (saturating: a hostile request cannot wrap around).
    pub fn bytes(self, cores: u32, units: u32, total: u64) -> u64 {
        match self {
            HostMem::PerNode(b) => b,
            HostMem::PerCpu(b) => b.saturating_mul(cores.into()),
            HostMem::PerGpu(b) => b.saturating_mul(units.max(1).into()),
            HostMem::All => total,
        }
    }
}

impl fmt::Display for HostMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b.div_ceil(1 << 20);
        match *self {
            HostMem::PerNode(b) => write!(f, "{}M", mib(b)),
            HostMem::PerCpu(b) => write!(f, "{}M/cpu", mib(b)),
            HostMem::PerGpu(b) => write!(f, "{}M/gpu", mib(b)),
            HostMem::All => f.write_str("all"),
        }
    }
}

/// A job's resource request: GPU units (any of `leaves`, `gpus` and `mem_bytes`, meaning "the
/// smallest set of units on one host that meets every part"; none of them for a CPU-only
/// job), cores and host memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Number of leaves (MIG instances; whole GPUs on a host without MIG).
    pub leaves: Option<u32>,
    /// Only leaves of this profile (`1g.10gb`).
    pub leaf_type: Option<String>,
    /// A GPU fraction: on MIG, ceil(f × 7) compute slices; on whole GPUs, a share of one GPU
    /// (f < 1) or f idle GPUs (integer f ≥ 1).
    pub gpus: Option<f64>,
    /// GPU memory in bytes.
    pub mem_bytes: Option<u64>,
    /// CPU cores per leaf (per GPU for whole-GPU jobs).
    pub cores_per_leaf: u32,
    /// Cores for the whole job at least (Slurm's tasks × `-c`): the job gets the larger of
    /// this and `cores_per_leaf` per unit; a CPU-only job gets this many (at least 1).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpus: u32,
    /// Host memory; None: none reserved (flexd fills in `default_mem_per_cpu` at submission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_mem: Option<HostMem>,
    /// The whole host: every unit, core and byte of memory, on a host with nothing else.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// Wall-clock limit in seconds.
    pub time_limit_s: u64,
    /// Placement of shares on whole GPUs; None means the configured default.
    pub placement: Option<Strategy>,
}

impl Request {
    /// A request for `n` leaves, one core each, with a time limit.
    pub fn leaves(n: u32, time_limit_s: u64) -> Self {
        Self {
            leaves: Some(n),
            leaf_type: None,
            gpus: None,
            mem_bytes: None,
            cores_per_leaf: 1,
            time_limit_s,
            ..Self::default()
        }
    }

    /// A CPU-only request for `cores` cores.
    pub fn cpus(cores: u32, time_limit_s: u64) -> Self {
        Self {
            cpus: cores,
            cores_per_leaf: 1,
            time_limit_s,
            ..Self::default()
        }
    }

    /// Whether the job asks for any GPU unit (leaves, a fraction or GPU memory).
    pub fn wants_gpu(&self) -> bool {
        self.leaves.is_some_and(|n| n > 0) || self.gpus.is_some() || self.mem_bytes.is_some()
    }

    /// Reject what no host could ever satisfy because it is malformed (not because it is big).
    pub fn validate(&self) -> Result<(), String> {
        if self.leaves == Some(0) && (self.gpus.is_some() || self.mem_bytes.is_some()) {
            return Err("0 leaves and a GPU fraction or GPU memory contradict each other".into());
        }
        if self.leaf_type.is_some() && !self.wants_gpu() {
            return Err("a leaf type without a number of leaves".into());
        }
        match self.host_mem {
            Some(HostMem::PerNode(0) | HostMem::PerCpu(0) | HostMem::PerGpu(0)) => {
                return Err("host memory must be more than 0 bytes (--mem=0 is all of it)".into())
            }
            Some(HostMem::PerGpu(_)) if !self.wants_gpu() => {
                return Err("memory per GPU for a job that asks for no GPU".into())
            }
            _ => {}
        }
        if let Some(f) = self.gpus {
            if !f.is_finite() || f <= 0.0 {
                return Err(format!("GPU fraction {f} must be a number greater than 0"));
            }
            if f > 4096.0 {
                return Err(format!("GPU fraction {f} is larger than any host"));
            }
        }
        if self.mem_bytes == Some(0) {
            return Err("memory must be more than 0 bytes".into());
        }
        if self.cores_per_leaf == 0 {
            return Err("cores per leaf must be at least 1".into());
        }
        if self.time_limit_s == 0 {
            return Err("time limit must be more than 0 seconds".into());
        }
        if let Some(t) = &self.leaf_type {
            if t.is_empty() {
                return Err("leaf type is empty".into());
            }
        }
        Ok(())
    }
}

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

/// A job's resource request. At least one of `leaves`, `gpus` and `mem_bytes` is set; together
/// they mean "the smallest set of units on one host that meets every part".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
            placement: None,
        }
    }

    /// Reject what no host could ever satisfy because it is malformed (not because it is big).
    pub fn validate(&self) -> Result<(), String> {
        if self.leaves.is_none() && self.gpus.is_none() && self.mem_bytes.is_none() {
            return Err(
                "the request asks for no GPU resource: give leaves, a GPU fraction or memory"
                    .into(),
            );
        }
        if self.leaves == Some(0) {
            return Err("leaves must be at least 1".into());
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

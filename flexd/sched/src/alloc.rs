//! What a placement hands out: the units (leaves or shares of whole GPUs) and the exclusive
//! cores of one job on one host. Shared by the cluster's free state and the placement rules.

use gres_plugin::{CoreId, HostId, LeafId};
use serde::{Deserialize, Serialize};

/// One unit of an allocation: a leaf, or a share of a whole GPU in thousandths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Unit {
    pub leaf: LeafId,
    /// Thousandths of the unit: 1000 for a MIG leaf or a whole GPU.
    pub share: u32,
}

/// Where a job runs: one host, its units, its exclusive cores and its host memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Allocation {
    pub host: HostId,
    pub units: Vec<Unit>,
    pub cores: Vec<CoreId>,
    /// Bytes of host memory reserved for the job (0: none; allocations recorded before host
    /// memory was a resource have none).
    #[serde(default)]
    pub mem_bytes: u64,
}

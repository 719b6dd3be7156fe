//! The probe interface: what every probe returns ([`RawHost`], shaped like NVML's answers), the
//! [`Probe`] trait and its error. Implementations (`nvml`, `topology`) depend on this file only.

use crate::model::{Core, LinkLevel};
use serde::{Deserialize, Serialize};

/// A GPU as NVML describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawGpu {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_bytes: u64,
    pub pci_bus_id: String,
    /// `nvmlDeviceGetNumaNodeId`; None where the driver does not say.
    pub numa_node: Option<u32>,
    /// Cores from `nvmlDeviceGetCpuAffinity`.
    pub cpu_affinity: Vec<u32>,
    /// Current MIG mode.
    pub mig_enabled: bool,
    pub instances: Vec<RawMig>,
}

/// A MIG device (compute instance) as NVML describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawMig {
    pub uuid: String,
    pub memory_bytes: u64,
    /// `gpuInstanceSliceCount` from the device attributes.
    pub sm_slices: u8,
    /// Memory slices, when known (simulated files); otherwise derived from the memory size.
    pub mem_slices: Option<u8>,
    pub gpu_instance: Option<u32>,
    pub compute_instance: Option<u32>,
    /// Start memory slice, when known.
    pub start: Option<u8>,
}

/// Everything a probe found on one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawHost {
    pub hostname: String,
    pub gpus: Vec<RawGpu>,
    /// PCIe common-ancestor level between GPU positions (PIX..SYS); the diagonal is ignored.
    pub pcie: Vec<Vec<LinkLevel>>,
    /// Active NVLink count between GPU positions.
    pub nvlinks: Vec<Vec<u8>>,
    pub cores: Vec<Core>,
    /// The host's RAM in bytes; 0 when the source does not say.
    #[serde(default)]
    pub memory_bytes: u64,
}

/// Where a host model comes from.
pub trait Probe {
    /// A short name for logs ("nvml", "topology file PATH").
    fn name(&self) -> String;
    /// Probe the host. [`ProbeError::Absent`] means "nothing here" (no library, no driver, no GPU).
    fn probe(&self) -> Result<RawHost, ProbeError>;
}

/// A probe that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Nothing to probe here: the caller falls back to a simulated topology.
    #[error("{0}")]
    Absent(String),
    /// The probe ran and failed; its own error says how (an unreadable topology file, an NVML
    /// call that failed on a host that has GPUs).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Model(#[from] crate::probe::build::ModelError),
}

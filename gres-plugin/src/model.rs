//! The host model: GPUs, their MIG leaves (or the whole GPU where MIG is off), CPU cores with
//! their NUMA node, and the link level between every pair of GPUs.
//!
//! A model is built only by pure functions from probe output (`crate::probe`), so everything
//! here can be tested without a GPU.

use crate::ids::{CoreId, GpuIndex, LeafId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How two GPUs reach each other, cheapest first (nvidia-smi topo -m vocabulary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LinkLevel {
    /// NVLink with this many active links.
    Nv(u8),
    /// At most a single PCIe bridge.
    Pix,
    /// Multiple PCIe bridges, no host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU).
    Phb,
    /// Between host bridges inside one NUMA node.
    Node,
    /// Across NUMA nodes (the SMP interconnect).
    Sys,
}

impl LinkLevel {
    /// The Gaia access cost of a tree node whose children talk over this link (lower is better).
    pub fn access_cost(self) -> u32 {
        match self {
            LinkLevel::Nv(_) => 1,
            LinkLevel::Pix => 2,
            LinkLevel::Pxb => 3,
            LinkLevel::Phb => 4,
            LinkLevel::Node => 5,
            LinkLevel::Sys => 6,
        }
    }

    /// The PCIe part of the order, ignoring NVLink (used to group GPUs into the tree).
    pub(crate) fn pcie_rank(self) -> u8 {
        match self {
            LinkLevel::Nv(_) | LinkLevel::Pix => 0,
            LinkLevel::Pxb => 1,
            LinkLevel::Phb => 2,
            LinkLevel::Node => 3,
            LinkLevel::Sys => 4,
        }
    }
}

impl fmt::Display for LinkLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkLevel::Nv(n) => write!(f, "NV{n}"),
            LinkLevel::Pix => f.write_str("PIX"),
            LinkLevel::Pxb => f.write_str("PXB"),
            LinkLevel::Phb => f.write_str("PHB"),
            LinkLevel::Node => f.write_str("NODE"),
            LinkLevel::Sys => f.write_str("SYS"),
        }
    }
}

/// One physical GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub index: GpuIndex,
    /// `GPU-…` UUID.
    pub uuid: String,
    pub name: String,
    pub memory_bytes: u64,
    /// PCI bus id as NVML prints it (`00000000:17:00.0`).
    pub pci_bus_id: String,
    pub numa_node: u32,
    /// Cores the driver reports as close to this GPU.
    pub cpu_affinity: Vec<CoreId>,
    /// Whether MIG mode is on; when off the GPU is one shareable unit.
    pub mig: bool,
    /// Position in the PCIe hierarchy: host bridge and PCIe switch numbers (host-wide).
    pub host_bridge: u32,
    pub pcie_switch: u32,
}

/// A schedulable unit: a MIG leaf, or a whole GPU when MIG is off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Leaf {
    pub id: LeafId,
    /// `MIG-…` for a leaf, `GPU-…` for a whole GPU.
    pub uuid: String,
    /// MIG profile (`1g.5gb`) or `gpu` for a whole GPU.
    pub profile: String,
    /// SM slices out of the GPU's 7 (7 for a whole GPU).
    pub sm_slices: u8,
    pub memory_bytes: u64,
    pub gpu: GpuIndex,
    /// MIG GPU instance and compute instance ids (None for a whole GPU).
    pub gpu_instance: Option<u32>,
    pub compute_instance: Option<u32>,
}

impl Leaf {
    pub fn is_mig(&self) -> bool {
        self.gpu_instance.is_some() || self.uuid.starts_with("MIG-")
    }
}

/// A logical CPU and its NUMA node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    pub id: CoreId,
    pub numa_node: u32,
}

/// Everything the scheduler knows about one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub hostname: String,
    pub gpus: Vec<Gpu>,
    /// Leaves ordered by GPU, then by position on the GPU; `leaves[i].id == LeafId(i)`.
    pub leaves: Vec<Leaf>,
    pub cores: Vec<Core>,
    /// The host's RAM in bytes (0: unknown, as in topology files and traces that do not say;
    /// then host memory is not a limit).
    #[serde(default)]
    pub memory_bytes: u64,
    /// `links[a][b]`: level between GPU positions a and b in `gpus` (the diagonal is unused).
    pub links: Vec<Vec<LinkLevel>>,
}

impl HostModel {
    pub fn gpu(&self, index: GpuIndex) -> Option<&Gpu> {
        self.gpus.iter().find(|g| g.index == index)
    }

    pub fn leaf(&self, id: LeafId) -> &Leaf {
        &self.leaves[id.0 as usize]
    }

    pub fn leaf_by_uuid(&self, uuid: &str) -> Option<&Leaf> {
        self.leaves.iter().find(|l| l.uuid == uuid)
    }

    /// Position of a GPU in `gpus` (and in `links`).
    pub fn gpu_pos(&self, index: GpuIndex) -> Option<usize> {
        self.gpus.iter().position(|g| g.index == index)
    }

    pub fn numa_of_gpu(&self, index: GpuIndex) -> u32 {
        self.gpu(index).map_or(0, |g| g.numa_node)
    }

    pub fn numa_nodes(&self) -> Vec<u32> {
        let mut n: Vec<u32> = self
            .cores
            .iter()
            .map(|c| c.numa_node)
            .chain(self.gpus.iter().map(|g| g.numa_node))
            .collect();
        n.sort_unstable();
        n.dedup();
        n
    }

    pub fn total_memory_bytes(&self) -> u64 {
        self.leaves.iter().map(|l| l.memory_bytes).sum()
    }

    /// The link level between two GPUs by index.
    pub fn link(&self, a: GpuIndex, b: GpuIndex) -> Option<LinkLevel> {
        Some(self.links[self.gpu_pos(a)?][self.gpu_pos(b)?])
    }
}

/// One memory slice (an eighth of the card) in the nominal GB of NVIDIA's profile names: 5 on a
/// 40 GB card, 10 on an 80 GB card, 17.6 on a 141 GB card.
pub fn nominal_slice_gb(gpu_memory_bytes: u64) -> f64 {
    let gb = gpu_memory_bytes as f64 / 1e9;
    // Cards report a little more or less than their marketing size (40 GiB = 42.9 GB).
    let nominal = [8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 80.0, 94.0, 96.0, 141.0]
        .into_iter()
        .min_by(|a, b| (a - gb).abs().total_cmp(&(b - gb).abs()))
        .unwrap_or(gb);
    nominal / 8.0
}

/// The MIG profile name NVIDIA gives an instance of `sm` compute and `mem_slices` memory slices:
/// 1g.5gb on an A100-40GB, 1g.10gb on an H100-80GB, 1g.18gb on an H200.
pub fn profile_name(sm: u8, mem_slices: u8, gpu_memory_bytes: u64) -> String {
    let gb = nominal_slice_gb(gpu_memory_bytes) * mem_slices as f64;
    format!("{sm}g.{}gb", gb.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_match_nvidia_tables() {
        let a100_40 = 42_505_273_344; // 40 GiB as NVML reports it
        assert_eq!(profile_name(1, 1, a100_40), "1g.5gb");
        assert_eq!(profile_name(1, 2, a100_40), "1g.10gb");
        assert_eq!(profile_name(3, 4, a100_40), "3g.20gb");
        let h100 = 85_520_809_984;
        assert_eq!(profile_name(1, 1, h100), "1g.10gb");
        assert_eq!(profile_name(7, 8, h100), "7g.80gb");
        let h200 = 150_754_820_096;
        assert_eq!(profile_name(1, 1, h200), "1g.18gb");
        assert_eq!(profile_name(3, 4, h200), "3g.71gb");
    }

    #[test]
    fn link_costs_are_ordered() {
        let order = [
            LinkLevel::Nv(4),
            LinkLevel::Pix,
            LinkLevel::Pxb,
            LinkLevel::Phb,
            LinkLevel::Node,
            LinkLevel::Sys,
        ];
        for w in order.windows(2) {
            assert!(w[0].access_cost() < w[1].access_cost());
            assert!(w[0] < w[1]);
        }
        assert_eq!(LinkLevel::Nv(12).to_string(), "NV12");
    }
}

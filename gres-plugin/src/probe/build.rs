//! From probe output to the host model, with pure code: the same input always gives the same
//! model, so the path real hardware takes is tested with NVML-shaped fixtures.

use super::interface::{RawGpu, RawHost, RawMig};
use crate::ids::{CoreId, GpuIndex, LeafId};
use crate::model::{profile_name, Gpu, HostModel, Leaf, LinkLevel};

/// Why probe output could not become a host model.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("gpu index {0} appears twice")]
    DuplicateGpu(u32),
    #[error("link matrix is {rows}x? but there are {gpus} GPUs")]
    LinkMatrix { rows: usize, gpus: usize },
    #[error("gpu {gpu}: MIG instance {uuid}: memory {memory_bytes} bytes does not fit the card")]
    BadInstance {
        gpu: u32,
        uuid: String,
        memory_bytes: u64,
    },
    #[error("core {0} appears twice")]
    DuplicateCore(u32),
    #[error("host has no CPU cores")]
    NoCores,
}

/// Build the host model from probe output. Pure: the same input always gives the same model.
pub fn build_host(raw: &RawHost) -> Result<HostModel, ModelError> {
    check(raw)?;
    let n = raw.gpus.len();
    let numa: Vec<u32> = raw.gpus.iter().map(|g| numa_of(raw, g)).collect();
    // Host bridges: GPUs of one NUMA node that meet at or below a host bridge.
    let bridge = group(n, |a, b| {
        numa[a] == numa[b] && raw.pcie[a][b].pcie_rank() <= LinkLevel::Phb.pcie_rank()
    });
    // PCIe switches: GPUs of one host bridge that meet below it.
    let switch = group(n, |a, b| {
        bridge[a] == bridge[b] && raw.pcie[a][b].pcie_rank() <= LinkLevel::Pxb.pcie_rank()
    });
    let links = link_levels(raw, &numa);

    let mut gpus = Vec::with_capacity(n);
    let mut leaves = Vec::new();
    for (pos, g) in raw.gpus.iter().enumerate() {
        let index = GpuIndex(g.index);
        gpus.push(Gpu {
            index,
            uuid: g.uuid.clone(),
            name: g.name.clone(),
            memory_bytes: g.memory_bytes,
            pci_bus_id: g.pci_bus_id.clone(),
            numa_node: numa[pos],
            cpu_affinity: g.cpu_affinity.iter().map(|&c| CoreId(c)).collect(),
            mig: g.mig_enabled,
            host_bridge: bridge[pos],
            pcie_switch: switch[pos],
        });
        push_leaves(g, &mut leaves)?;
    }
    let mut cores = raw.cores.clone();
    cores.sort_by_key(|c| c.id);
    Ok(HostModel {
        hostname: raw.hostname.clone(),
        gpus,
        leaves,
        cores,
        memory_bytes: raw.memory_bytes,
        links,
    })
}

/// Rejects probe output the model cannot be built from: link matrices of the wrong shape, a GPU
/// or core listed twice, no cores at all.
fn check(raw: &RawHost) -> Result<(), ModelError> {
    let n = raw.gpus.len();
    if raw.pcie.len() != n || raw.pcie.iter().any(|r| r.len() != n) {
        return Err(ModelError::LinkMatrix {
            rows: raw.pcie.len(),
            gpus: n,
        });
    }
    if raw.nvlinks.len() != n || raw.nvlinks.iter().any(|r| r.len() != n) {
        return Err(ModelError::LinkMatrix {
            rows: raw.nvlinks.len(),
            gpus: n,
        });
    }
    let mut seen = std::collections::HashSet::new();
    for g in &raw.gpus {
        if !seen.insert(g.index) {
            return Err(ModelError::DuplicateGpu(g.index));
        }
    }
    if raw.cores.is_empty() {
        return Err(ModelError::NoCores);
    }
    let mut core_ids = std::collections::HashSet::new();
    for c in &raw.cores {
        if !core_ids.insert(c.id) {
            return Err(ModelError::DuplicateCore(c.id.0));
        }
    }
    Ok(())
}

/// A GPU's NUMA node: the driver's, else that of its first affine core (0 when unknown), since
/// some drivers report no NUMA id.
fn numa_of(raw: &RawHost, g: &RawGpu) -> u32 {
    g.numa_node.unwrap_or_else(|| {
        g.cpu_affinity
            .first()
            .and_then(|c| raw.cores.iter().find(|k| k.id.0 == *c))
            .map_or(0, |k| k.numa_node)
    })
}

/// The link between every pair of GPUs: NVLink where there is one, else across NUMA nodes the
/// system bus, else the PCIe level the probe reported.
fn link_levels(raw: &RawHost, numa: &[u32]) -> Vec<Vec<LinkLevel>> {
    let n = raw.gpus.len();
    let mut links = vec![vec![LinkLevel::Sys; n]; n];
    for a in 0..n {
        for b in 0..n {
            links[a][b] = if raw.nvlinks[a][b] > 0 {
                LinkLevel::Nv(raw.nvlinks[a][b])
            } else if numa[a] != numa[b] {
                LinkLevel::Sys
            } else {
                raw.pcie[a][b]
            };
        }
    }
    links
}

/// Appends a GPU's leaves, numbered on from `leaves`: the whole card when MIG is off, else its
/// MIG instances in placement order, so leaf ids do not depend on the order NVML lists them.
fn push_leaves(g: &RawGpu, leaves: &mut Vec<Leaf>) -> Result<(), ModelError> {
    let index = GpuIndex(g.index);
    if !g.mig_enabled {
        leaves.push(Leaf {
            id: LeafId(leaves.len() as u32),
            uuid: g.uuid.clone(),
            profile: "gpu".into(),
            sm_slices: 7,
            memory_bytes: g.memory_bytes,
            gpu: index,
            gpu_instance: None,
            compute_instance: None,
        });
        return Ok(());
    }
    let slice_bytes = (g.memory_bytes / 8).max(1);
    let mut inst: Vec<&RawMig> = g.instances.iter().collect();
    inst.sort_by(|a, b| {
        (a.start, a.gpu_instance, a.compute_instance, &a.uuid).cmp(&(
            b.start,
            b.gpu_instance,
            b.compute_instance,
            &b.uuid,
        ))
    });
    for m in inst {
        let mem_slices = m.mem_slices.unwrap_or_else(|| {
            ((m.memory_bytes as f64 / slice_bytes as f64).round() as u8).clamp(1, 8)
        });
        if m.memory_bytes > g.memory_bytes || m.sm_slices == 0 || m.sm_slices > 7 {
            return Err(ModelError::BadInstance {
                gpu: g.index,
                uuid: m.uuid.clone(),
                memory_bytes: m.memory_bytes,
            });
        }
        leaves.push(Leaf {
            id: LeafId(leaves.len() as u32),
            uuid: m.uuid.clone(),
            profile: profile_name(m.sm_slices, mem_slices, g.memory_bytes),
            sm_slices: m.sm_slices,
            memory_bytes: m.memory_bytes,
            gpu: index,
            gpu_instance: m.gpu_instance,
            compute_instance: m.compute_instance,
        });
    }
    Ok(())
}

/// Number the classes of the relation `same` (taken transitively) by first appearance.
fn group(n: usize, same: impl Fn(usize, usize) -> bool) -> Vec<u32> {
    let mut id = vec![u32::MAX; n];
    let mut next = 0;
    for a in 0..n {
        if id[a] != u32::MAX {
            continue;
        }
        id[a] = next;
        let mut stack = vec![a];
        while let Some(x) = stack.pop() {
            for (b, slot) in id.iter_mut().enumerate() {
                if *slot == u32::MAX && same(x, b) {
                    *slot = next;
                    stack.push(b);
                }
            }
        }
        next += 1;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Core;
    use crate::model::LinkLevel::*;
    use crate::probe::RawMig;

    /// What NVML reports on a 4-GPU host: GPUs 0,1 under one switch and 2,3 under two switches
    /// of one host bridge on NUMA node 1; GPU 0 in MIG mode with three instances (ids and memory
    /// as NVML gives them, no slice starts); GPU 3 has no NUMA id from the driver.
    fn fixture() -> RawHost {
        let mig = |uuid: &str, mib: u64, sm: u8, gi: u32| RawMig {
            uuid: uuid.into(),
            memory_bytes: mib << 20,
            sm_slices: sm,
            mem_slices: None,
            gpu_instance: Some(gi),
            compute_instance: Some(0),
            start: None,
        };
        let gpu =
            |i: u32, numa: Option<u32>, aff: Vec<u32>, mig_on: bool, inst: Vec<RawMig>| RawGpu {
                index: i,
                uuid: format!("GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd"),
                name: "NVIDIA A100-PCIE-40GB".into(),
                memory_bytes: 40960 << 20,
                pci_bus_id: format!("00000000:{:02X}:00.0", 0x10 + i),
                numa_node: numa,
                cpu_affinity: aff,
                mig_enabled: mig_on,
                instances: inst,
            };
        RawHost {
            memory_bytes: 0,
            hostname: "node7".into(),
            gpus: vec![
                gpu(
                    0,
                    Some(0),
                    vec![0, 1],
                    true,
                    vec![
                        mig("MIG-c", 9856, 1, 13),
                        mig("MIG-a", 4864, 1, 7),
                        mig("MIG-b", 19968, 3, 2),
                    ],
                ),
                gpu(1, Some(0), vec![0, 1], false, vec![]),
                gpu(2, Some(1), vec![2, 3], false, vec![]),
                gpu(3, None, vec![2, 3], false, vec![]),
            ],
            pcie: vec![
                vec![Pix, Pix, Sys, Sys],
                vec![Pix, Pix, Sys, Sys],
                vec![Sys, Sys, Pix, Phb],
                vec![Sys, Sys, Phb, Pix],
            ],
            nvlinks: vec![vec![0; 4]; 4],
            cores: (0..4)
                .map(|c| Core {
                    id: CoreId(c),
                    numa_node: c / 2,
                })
                .collect(),
        }
    }

    #[test]
    fn nvml_shaped_output_becomes_a_model() {
        let h = build_host(&fixture()).unwrap();
        assert_eq!(h.gpus.len(), 4);
        // NUMA of GPU 3 comes from its affinity
        assert_eq!(h.gpus[3].numa_node, 1);
        // GPUs 0 and 1 share a switch; 2 and 3 share a bridge but not a switch
        assert_eq!(h.gpus[0].pcie_switch, h.gpus[1].pcie_switch);
        assert_eq!(h.gpus[2].host_bridge, h.gpus[3].host_bridge);
        assert_ne!(h.gpus[2].pcie_switch, h.gpus[3].pcie_switch);
        assert_eq!(h.link(GpuIndex(0), GpuIndex(2)), Some(Sys));
        // three MIG leaves with derived profile names, then three whole GPUs
        let profiles: Vec<&str> = h.leaves.iter().map(|l| l.profile.as_str()).collect();
        assert_eq!(
            profiles,
            ["3g.20gb", "1g.5gb", "1g.10gb", "gpu", "gpu", "gpu"]
        );
        assert!(h.leaves[..3]
            .iter()
            .all(|l| l.is_mig() && l.gpu == GpuIndex(0)));
        assert_eq!(h.leaves[3].uuid, h.gpus[1].uuid);
        assert!(h
            .leaves
            .iter()
            .enumerate()
            .all(|(i, l)| l.id.0 as usize == i));
    }

    #[test]
    fn malformed_probe_output_is_rejected() {
        let mut r = fixture();
        r.pcie.pop();
        assert!(matches!(build_host(&r), Err(ModelError::LinkMatrix { .. })));
        let mut r = fixture();
        r.gpus[1].index = 0;
        assert_eq!(build_host(&r), Err(ModelError::DuplicateGpu(0)));
        let mut r = fixture();
        r.cores.clear();
        assert_eq!(build_host(&r), Err(ModelError::NoCores));
    }

    #[test]
    fn nvlink_overrides_pcie_level() {
        let mut r = fixture();
        r.nvlinks[2][3] = 4;
        r.nvlinks[3][2] = 4;
        let h = build_host(&r).unwrap();
        assert_eq!(h.link(GpuIndex(2), GpuIndex(3)), Some(Nv(4)));
    }
}

//! The NVML probe (nvml-wrapper): GPUs, MIG mode and leaves, memory, NUMA node and CPU affinity,
//! PCIe common ancestors and NVLink counts. Only the I/O lives here; turning the answers into a
//! host model is `probe::build_host`, tested with NVML-shaped fixtures.

use super::interface::{Probe, ProbeError, RawGpu, RawHost, RawMig};
use crate::ids::CoreId;
use crate::model::{Core, LinkLevel};
use nvml_wrapper::enum_wrappers::device::TopologyLevel;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// Probes the local GPUs through libnvidia-ml.
#[derive(Debug, Clone, Copy)]
pub struct NvmlProbe;

/// NVML errors that mean "no NVIDIA GPU here" rather than "something is broken".
fn absent(e: &NvmlError) -> Option<String> {
    match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
            Some("libnvidia-ml.so.1 not found".into())
        }
        NvmlError::DriverNotLoaded => Some("the NVIDIA driver is not loaded".into()),
        NvmlError::NoPermission => Some("no permission to open the NVIDIA driver".into()),
        _ => None,
    }
}

fn err(what: &str, e: NvmlError) -> ProbeError {
    ProbeError::Failed(format!("nvml: {what}: {e}").into())
}

impl Probe for NvmlProbe {
    fn name(&self) -> String {
        "nvml".into()
    }

    fn probe(&self) -> Result<RawHost, ProbeError> {
        let nvml = match Nvml::init() {
            Ok(n) => n,
            Err(e) => {
                return Err(match absent(&e) {
                    Some(why) => ProbeError::Absent(why),
                    None => err("init", e),
                })
            }
        };
        let count = nvml.device_count().map_err(|e| err("device count", e))?;
        if count == 0 {
            return Err(ProbeError::Absent("NVML reports no GPU".into()));
        }
        let cores = host_cores();
        let mut devices = Vec::new();
        let mut gpus = Vec::new();
        for i in 0..count {
            let d = nvml
                .device_by_index(i)
                .map_err(|e| err(&format!("gpu {i}"), e))?;
            gpus.push(gpu(&nvml, &d, i, &cores)?);
            devices.push(d);
        }
        let n = devices.len();
        let mut pcie = vec![vec![LinkLevel::Pix; n]; n];
        let mut nvlinks = vec![vec![0u8; n]; n];
        let buses: Vec<String> = gpus.iter().map(|g| g.pci_bus_id.to_uppercase()).collect();
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    continue;
                }
                pcie[a][b] = match nvml.topology_common_ancestor(&devices[a], &devices[b]) {
                    Ok(TopologyLevel::Internal | TopologyLevel::Single) => LinkLevel::Pix,
                    Ok(TopologyLevel::Multiple) => LinkLevel::Pxb,
                    Ok(TopologyLevel::HostBridge) => LinkLevel::Phb,
                    Ok(TopologyLevel::Node) => LinkLevel::Node,
                    Ok(TopologyLevel::System) | Err(_) => LinkLevel::Sys,
                };
            }
            // Count active NVLinks per peer by the remote end's PCI bus id.
            for l in 0..18 {
                let link = devices[a].link_wrapper_for(l);
                if !matches!(link.is_active(), Ok(true)) {
                    continue;
                }
                if let Ok(remote) = link.remote_pci_info() {
                    let bus = remote.bus_id.to_uppercase();
                    if let Some(b) = buses.iter().position(|x| *x == bus) {
                        nvlinks[a][b] = nvlinks[a][b].saturating_add(1);
                    }
                }
            }
        }
        Ok(RawHost {
            hostname: hostname(),
            gpus,
            pcie,
            nvlinks,
            cores,
            memory_bytes: super::host_memory_bytes().unwrap_or(0),
        })
    }
}

fn gpu(nvml: &Nvml, d: &Device, i: u32, cores: &[Core]) -> Result<RawGpu, ProbeError> {
    let what = |s: &str| format!("gpu {i}: {s}");
    let memory_bytes = d.memory_info().map_err(|e| err(&what("memory"), e))?.total;
    let words = cores.iter().map(|c| c.id.0 as usize).max().unwrap_or(0) / 64 + 1;
    let cpu_affinity = d
        .cpu_affinity(words)
        .map(|mask| {
            let mut v = Vec::new();
            for (w, bits) in mask.iter().enumerate() {
                // c_ulong is 32 bits on some targets.
                #[allow(clippy::unnecessary_cast)]
                let bits = *bits as u64;
                for b in 0..64 {
                    if bits >> b & 1 == 1 {
                        v.push((w * 64 + b) as u32);
                    }
                }
            }
            v
        })
        .unwrap_or_default();
    let mig_enabled = matches!(d.mig_mode(), Ok(m) if m.current == 1);
    let mut instances = Vec::new();
    if mig_enabled {
        // mig_device_count is the maximum: iterate and skip the indexes that are empty.
        let max = d.mig_device_count().unwrap_or(0);
        for m in 0..max {
            let Ok(md) = d.mig_device_by_index(m) else {
                continue;
            };
            let uuid = md.uuid().map_err(|e| err(&what("MIG uuid"), e))?;
            let attrs = md
                .attributes()
                .map_err(|e| err(&what("MIG attributes"), e))?;
            instances.push(RawMig {
                uuid,
                memory_bytes: attrs.memory_size_mb << 20,
                sm_slices: attrs.gpu_instance_slice_count.min(7) as u8,
                mem_slices: None,
                gpu_instance: instance_id(nvml, &md, true),
                compute_instance: instance_id(nvml, &md, false),
                start: None,
            });
        }
    }
    Ok(RawGpu {
        index: i,
        uuid: d.uuid().map_err(|e| err(&what("uuid"), e))?,
        name: d.name().map_err(|e| err(&what("name"), e))?,
        memory_bytes,
        pci_bus_id: d.pci_info().map_err(|e| err(&what("pci info"), e))?.bus_id,
        numa_node: d.numa_node_id().ok(),
        cpu_affinity,
        mig_enabled,
        instances,
    })
}

/// GPU- or compute-instance id of a MIG device: not wrapped by nvml-wrapper, so through the raw
/// library functions.
fn instance_id(nvml: &Nvml, md: &Device, gpu_instance: bool) -> Option<u32> {
    let lib = nvml.lib();
    let f = if gpu_instance {
        lib.nvmlDeviceGetGpuInstanceId.as_ref().ok()?
    } else {
        lib.nvmlDeviceGetComputeInstanceId.as_ref().ok()?
    };
    let mut id: std::os::raw::c_uint = 0;
    // SAFETY: the handle is a live MIG device handle of this Nvml; `id` is a valid out pointer.
    let rc = unsafe { f(md.handle(), &mut id) };
    (rc == 0).then_some(id)
}

/// Online cores and their NUMA node from sysfs (node 0 for all when sysfs has no NUMA info).
fn host_cores() -> Vec<Core> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::cpus::parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n as u32).collect()
        });
    let mut numa_of = std::collections::HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(list) = std::fs::read_to_string(e.path().join("cpulist")) {
                for c in crate::cpus::parse_cpu_list(list.trim()).unwrap_or_default() {
                    numa_of.insert(c, id);
                }
            }
        }
    }
    online
        .into_iter()
        .map(|c| Core {
            id: CoreId(c),
            numa_node: numa_of.get(&c).copied().unwrap_or(0),
        })
        .collect()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

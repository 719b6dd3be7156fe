//! GPU device confinement, as Slurm's `ConstrainDevices`: `CUDA_VISIBLE_DEVICES` only tells a
//! job which GPUs to use, so a job that opens another GPU's device node, or the capability
//! file of a MIG instance it was not given, would reach the driver. Each job's cgroup denies
//! it the device nodes of the host's GPUs and MIG instances that are not its own:
//!
//! - `/dev/nvidiaN` of each GPU none of its leaves is on (a MIG leaf needs its GPU's node);
//! - `/dev/nvidia-caps/nvidia-capM` of each other MIG instance: its GPU instance's and its
//!   compute instance's `access` capability (`gpuN/giG/access`, `gpuN/giG/ciC/access` in the
//!   driver's `/proc/driver/nvidia-caps/mig-minors`), minus those of the job's own leaves.
//!
//! Everything else stays open, as in Slurm, which denies only the GPU files of the leaves a
//! job was not given: `/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/nvidia-uvm-tools` and
//! `/dev/nvidia-modeset`, which every CUDA process opens; the MIG `config` and `monitor`
//! capabilities, which the driver guards by their file modes (root only, and read-only
//! monitoring); and every device that is not a GPU's (`/dev/null`, ptys, ...). Only the
//! numbers matter to the kernel, so the wall holds for a node the job makes itself, too.
//!
//! The numbers come from the device nodes below a root directory: `/` on a host whose model
//! came from NVML, the `device_root` a simulated topology names (laid out as `/`, with the
//! nodes made by `mknod`) elsewhere. The denied list travels in each job's launch spec; the
//! supervisor writes it into the job's v1 `devices.deny` or attaches it as a BPF device
//! program to its cgroup2 cgroup ([`super::bpf`]).

use gres_plugin::model::HostModel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The major number of NVIDIA's GPU device nodes, fixed in the driver (`/dev/nvidiaN` are its
/// minors N; `nvidia-modeset` 254 and `nvidiactl` 255).
pub(crate) const NVIDIA_MAJOR: u32 = 195;

/// A character device by its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Dev {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for Dev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c {}:{}", self.major, self.minor)
    }
}

/// The numbers of the character device node at `path`; None when there is none.
fn node(path: &Path) -> Option<Dev> {
    let m = std::fs::metadata(path).ok()?;
    m.file_type().is_char_device().then(|| {
        let rdev = m.rdev();
        Dev {
            major: libc::major(rdev),
            minor: libc::minor(rdev),
        }
    })
}

/// The host's GPU device nodes, found once by flexd from the host model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GpuDevices {
    /// Where the nodes were looked up (`/` on a real host).
    pub root: PathBuf,
    /// Each GPU's `/dev/nvidiaN`, by GPU index.
    gpus: Vec<(u32, Dev)>,
    /// Each MIG leaf's capabilities, by the leaf's UUID.
    leaves: Vec<(String, Vec<Dev>)>,
    /// What could not be found (said once in flexd's log).
    pub notes: Vec<String>,
}

impl GpuDevices {
    /// Look up the device numbers of `host`'s GPUs and MIG leaves below `root`.
    pub(crate) fn discover(root: &Path, host: &HostModel) -> GpuDevices {
        let mut notes = Vec::new();
        // The driver numbers a GPU's node by its minor, which is usually but not always
        // its index (NVML's nvmlDeviceGetMinorNumber; /proc/driver/nvidia says it too).
        let minor = |bus: &str, index: u32| gpu_minor(root, bus).unwrap_or(index);
        let gpus: Vec<(u32, u32, Dev)> = host
            .gpus
            .iter()
            .map(|g| {
                let m = minor(&g.pci_bus_id, g.index.0);
                let dev = node(&root.join(format!("dev/nvidia{m}"))).unwrap_or(Dev {
                    major: NVIDIA_MAJOR,
                    minor: m,
                });
                (g.index.0, m, dev)
            })
            .collect();
        let mig: Vec<_> = host.leaves.iter().filter(|l| l.is_mig()).collect();
        let table = std::fs::read_to_string(root.join("proc/driver/nvidia-caps/mig-minors"));
        let caps_major = caps_major(root);
        let mut leaves = Vec::new();
        if !mig.is_empty() {
            match &table {
                Err(e) => notes.push(format!(
                    "cannot read {}: {e}; MIG instances are told apart by their GPU only",
                    root.join("proc/driver/nvidia-caps/mig-minors").display()
                )),
                Ok(table) => {
                    for l in mig {
                        let gpu = gpus.iter().find(|(i, _, _)| *i == l.gpu.0).map(|g| g.1);
                        let (Some(m), Some(gi), Some(ci)) =
                            (gpu, l.gpu_instance, l.compute_instance)
                        else {
                            notes.push(format!("MIG leaf {} has no instance ids", l.uuid));
                            continue;
                        };
                        let keys = [
                            format!("gpu{m}/gi{gi}/access"),
                            format!("gpu{m}/gi{gi}/ci{ci}/access"),
                        ];
                        let mut devs = Vec::new();
                        for key in keys {
                            let Some(minor) = mig_minor(table, &key) else {
                                notes.push(format!("mig-minors has no {key}"));
                                continue;
                            };
                            let path = root.join(format!("dev/nvidia-caps/nvidia-cap{minor}"));
                            match node(&path).or(caps_major.map(|major| Dev { major, minor })) {
                                Some(d) => devs.push(d),
                                None => notes.push(format!(
                                    "no {} and no nvidia-caps in {}",
                                    path.display(),
                                    root.join("proc/devices").display()
                                )),
                            }
                        }
                        leaves.push((l.uuid.clone(), devs));
                    }
                }
            }
        }
        GpuDevices {
            root: root.to_path_buf(),
            gpus: gpus.into_iter().map(|(i, _, d)| (i, d)).collect(),
            leaves,
            notes,
        }
    }

    /// Whether there is anything to deny (a host without GPUs, or a simulated topology that
    /// names no device root, has nothing).
    pub(crate) fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// What the log and `flexcontrol show config` say of these devices.
    pub(crate) fn summary(&self) -> String {
        let caps: usize = self.leaves.iter().map(|(_, d)| d.len()).sum();
        format!(
            "{} GPU device nodes and {caps} MIG capabilities of {} MIG leaves below {}",
            self.gpus.len(),
            self.leaves.len(),
            self.root.display()
        )
    }

    /// The devices a job given `units` (each a GPU index and a leaf UUID) may not open: the
    /// host's GPU devices less those of its own GPUs and leaves.
    pub(crate) fn denied<'a>(&self, units: impl IntoIterator<Item = (u32, &'a str)>) -> Vec<Dev> {
        let units: Vec<(u32, &str)> = units.into_iter().collect();
        let allowed: BTreeSet<Dev> = self
            .gpus
            .iter()
            .filter(|(i, _)| units.iter().any(|(g, _)| g == i))
            .map(|(_, d)| *d)
            .chain(
                self.leaves
                    .iter()
                    .filter(|(uuid, _)| units.iter().any(|(_, u)| u == uuid))
                    .flat_map(|(_, d)| d.iter().copied()),
            )
            .collect();
        let all: BTreeSet<Dev> = self
            .gpus
            .iter()
            .map(|(_, d)| *d)
            .chain(self.leaves.iter().flat_map(|(_, d)| d.iter().copied()))
            .collect();
        all.difference(&allowed).copied().collect()
    }
}

/// The minor of the GPU at PCI address `bus` (NVML's `00000000:3B:00.0`) from the driver's
/// `/proc/driver/nvidia/gpus/0000:3b:00.0/information` ("Device Minor: 0").
fn gpu_minor(root: &Path, bus: &str) -> Option<u32> {
    let bus = bus.to_ascii_lowercase();
    let short = bus.get(bus.len().checked_sub(12)?..)?;
    let info = std::fs::read_to_string(
        root.join("proc/driver/nvidia/gpus")
            .join(short)
            .join("information"),
    )
    .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Device Minor:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The minor of `key` (`gpu0/gi1/access`) in the driver's mig-minors table.
pub(crate) fn mig_minor(table: &str, key: &str) -> Option<u32> {
    table.lines().find_map(|l| {
        let (k, v) = l.trim().split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// The major the kernel gave the driver's `nvidia-caps` devices (`/proc/devices`).
fn caps_major(root: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(root.join("proc/devices")).ok()?;
    text.lines()
        .take_while(|l| !l.starts_with("Block devices"))
        .find_map(|l| {
            let (n, name) = l.trim().split_once(' ')?;
            (name.trim() == "nvidia-caps").then(|| n.parse().ok())?
        })
}

/// Deny `deny` to the job's directory `dir` on the v1 devices hierarchy: one rule per write,
/// as the kernel reads `devices.deny`. Its other devices stay as its parent allows them.
pub(crate) fn write_v1(dir: &Path, deny: &[Dev]) -> Result<(), String> {
    if deny.is_empty() {
        return Ok(());
    }
    let path = dir.join("devices.deny");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    for d in deny {
        f.write_all(format!("{d} rwm\n").as_bytes())
            .map_err(|e| format!("cannot write {d} rwm to {}: {e}", path.display()))?;
    }
    Ok(())
}

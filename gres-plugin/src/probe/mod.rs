//! Probes: what a host's hardware looks like, as NVML (or a simulated topology file) reports it.
//!
//! The interface ([`Probe`], [`RawHost`]) is in `interface`; the implementations, [`nvml`]
//! (behind the `nvml` feature) and [`topology`], depend on it only. [`build_host`] turns any
//! probe's output into the [`HostModel`](crate::HostModel) with pure code. This file holds the
//! choice between the probes ([`discover`]).

mod build;
mod interface;
#[cfg(feature = "nvml")]
pub mod nvml;
pub mod topology;

pub use build::{build_host, ModelError};
pub use interface::{Probe, ProbeError, RawGpu, RawHost, RawMig};

use crate::model::HostModel;
use std::path::Path;

/// What `discover` found, and from where.
#[derive(Debug)]
pub struct Discovered {
    pub host: HostModel,
    /// "nvml" or "topology file PATH".
    pub source: String,
}

/// The host model the daemon runs with: NVML when it finds GPUs, else the simulated topology
/// file, with one log line saying why. `force_topology` skips NVML. A real NVML failure on a host
/// that has GPUs is an error: jobs must never get simulated UUIDs on real hardware.
pub fn discover(topology: &Path, force_topology: bool) -> Result<Discovered, ProbeError> {
    if !force_topology {
        match nvml_probe() {
            Some(p) => match p.probe() {
                Ok(raw) => {
                    return Ok(Discovered {
                        host: build_host(&raw)?,
                        source: p.name(),
                    })
                }
                Err(ProbeError::Absent(why)) => {
                    tracing::info!("{why}; using the simulated topology {}", topology.display())
                }
                Err(e) => return Err(e),
            },
            None => tracing::info!(
                "built without NVML support; using the simulated topology {}",
                topology.display()
            ),
        }
    }
    discover_file(topology)
}

/// The host model of a simulated topology file.
pub fn discover_file(topology: &Path) -> Result<Discovered, ProbeError> {
    let file = topology::FileProbe::new(topology.to_path_buf());
    Ok(Discovered {
        host: build_host(&file.probe()?)?,
        source: file.name(),
    })
}

#[cfg(feature = "nvml")]
fn nvml_probe() -> Option<Box<dyn Probe>> {
    Some(Box::new(nvml::NvmlProbe))
}

#[cfg(not(feature = "nvml"))]
fn nvml_probe() -> Option<Box<dyn Probe>> {
    None
}

/// This host's RAM (`MemTotal` of /proc/meminfo) in bytes.
pub fn host_memory_bytes() -> Option<u64> {
    meminfo_total(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemTotal` of /proc/meminfo text, in bytes.
pub fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => n.checked_mul(1024),
        Some(_) => None,
    }
}

#[cfg(test)]
mod meminfo_tests {
    #[test]
    fn memtotal_is_read_in_bytes() {
        let text = "MemTotal:       24567892 kB\nMemFree:         1000 kB\n";
        assert_eq!(super::meminfo_total(text), Some(24567892 * 1024));
        assert_eq!(super::meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(super::meminfo_total("MemTotal: x kB\n"), None);
    }
}

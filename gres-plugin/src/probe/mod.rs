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

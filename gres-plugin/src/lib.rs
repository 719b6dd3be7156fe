//! Flex's view of the hardware: probes (NVML, simulated topology files), the host model (GPUs,
//! MIG leaves, cores, NUMA nodes, links), the Gaia access-cost tree and resource requests.
//!
//! The crate is also what brings Flex's leaf model to Slurm (gres.conf export).

pub mod cpus;
pub mod env;
#[cfg(feature = "cli")]
pub mod flexgres;
pub mod ids;
pub mod mig;
pub mod model;
pub mod probe;
pub mod request;
pub mod slurm;
pub mod telemetry;
pub mod tree;

#[cfg(feature = "nvml")]
pub use probe::nvml;
pub use probe::topology;

pub use ids::{CoreId, GpuIndex, HostId, JobId, LeafId};
pub use model::{Core, Gpu, HostModel, Leaf, LinkLevel};
pub use request::{HostMem, Request};

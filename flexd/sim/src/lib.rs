//! flexsim: replays job traces in virtual time through the real scheduler core
//! ([`flex_sched::schedule`]) and measures what each MIG operation model does with them.
//!
//! - [`trace`] reads and writes trace CSV files; [`gen`] writes the Flex-MIG paper's synthetic
//!   traces.
//! - [`models`] holds the allocation models: Flex-MIG is the core's own [`Cluster`]; Static- and
//!   Dynamic-MIG are other [`Model`]s plugged into the same pass. [`SimModel`] is the little the
//!   simulator needs on top of [`Model`] (slice accounting, run times, reconfigurations).
//! - [`engine`] is the discrete-event loop; [`exec_model`] the run-time model; [`metrics`],
//!   [`compare`] and [`charts`] turn runs into numbers, tables and SVG charts; [`cli`] is the
//!   `flexsim` command line; [`telemetry`] samples a run's jobs through the simulated GPU
//!   telemetry a topology names.
//!
//! Time is whole seconds throughout, as in the core: trace times and run times are rounded up.

pub mod charts;
pub mod cli;
pub mod compare;
pub mod engine;
pub mod exec_model;
pub mod fairness;
pub mod gen;
pub mod metrics;
pub mod models;
mod queue;
pub mod sweep;
pub mod telemetry;
pub mod trace;

pub use engine::{simulate, JobRecord, RunResult, SimConfig};
pub use exec_model::ExecModel;
pub use metrics::Metrics;
pub use models::{ModelKind, SimModel};
pub use trace::{Trace, TraceError, TraceJob};

#[cfg(doc)]
use flex_sched::{Cluster, Model};

/// Why flexsim could not do what it was asked; each variant has an exit code ([`SimError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Topology(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Usage(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot draw {path}: {message}")]
    Chart { path: String, message: String },
}

impl SimError {
    /// 2 for bad input (trace, topology, configuration, arguments), 1 for failures to write.
    pub fn exit_code(&self) -> i32 {
        match self {
            SimError::Trace(_)
            | SimError::Topology(_)
            | SimError::Config(_)
            | SimError::Usage(_) => 2,
            SimError::Write { .. } | SimError::Chart { .. } => 1,
        }
    }
}

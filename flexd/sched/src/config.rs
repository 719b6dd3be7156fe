//! The placement settings that come from flexd's configuration.

use gres_plugin::request::Strategy;
use serde::{Deserialize, Serialize};

/// Placement settings that come from the daemon's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// How shares of whole GPUs are chosen when a job does not say.
    pub default_strategy: Strategy,
    /// Round a non-integer GPU fraction above 1 up to whole GPUs instead of rejecting it.
    pub round_up_fractions: bool,
    /// Host memory kept back from jobs on every host whose RAM is known.
    #[serde(default)]
    pub reserved_memory: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            default_strategy: Strategy::BestFit,
            round_up_fractions: false,
            reserved_memory: 0,
        }
    }
}

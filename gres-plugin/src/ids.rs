//! Newtype identifiers shared by the host model, the scheduler core and the protocol.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id!(
    /// A job, numbered by flexd from 1 in submission order.
    JobId(u64)
);
id!(
    /// A host known to one scheduler core (index into its host list).
    HostId(u32)
);
id!(
    /// A GPU's NVML index on its host.
    GpuIndex(u32)
);
id!(
    /// A schedulable unit on a host (a MIG leaf or a whole GPU): index into `HostModel::leaves`.
    LeafId(u32)
);
id!(
    /// A logical CPU as the kernel numbers it.
    CoreId(u32)
);

impl JobId {
    pub fn get(self) -> u64 {
        self.0
    }
}

//! LeafMap (`flexq --leaves`): every leaf of every host and the jobs holding it.

use crate::state::State;
use flex_proto::{HostLeaves, LeafMapEntry, Response};
use gres_plugin::JobId;
use std::collections::HashMap;

/// Every leaf of every host: its GPU, profile, free share and the jobs holding it.
pub(crate) fn leaf_map(st: &State) -> Response {
    let mut holders: HashMap<(u32, u32), Vec<JobId>> = HashMap::new();
    for j in st.running_jobs() {
        if let Some(a) = &j.alloc {
            for u in &a.units {
                holders
                    .entry((a.host.0, u.leaf.0))
                    .or_default()
                    .push(j.row.id);
            }
        }
    }
    let hosts = st
        .cluster
        .hosts()
        .map(|(hid, h)| HostLeaves {
            host: h.hostname.clone(),
            leaves: h
                .leaves
                .iter()
                .map(|l| LeafMapEntry {
                    uuid: l.uuid.clone(),
                    profile: l.profile.clone(),
                    gpu: l.gpu.0,
                    gpu_name: h.gpu(l.gpu).map(|g| g.name.clone()).unwrap_or_default(),
                    numa_node: h.numa_of_gpu(l.gpu),
                    free: st.cluster.leaf_free(hid, l.id),
                    jobs: holders.remove(&(hid.0, l.id.0)).unwrap_or_default(),
                })
                .collect(),
        })
        .collect();
    Response::LeafMap(hosts)
}

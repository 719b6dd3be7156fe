//! Flex-MIG is the core's own [`Cluster`]: its placement is exactly the daemon's. This file only
//! adds the simulator's accounting on top.

use super::{size_of, ModelKind, SimModel};
use crate::exec_model::ExecModel;
use flex_sched::{Allocation, Cluster, PendingJob};
use gres_plugin::tree::WHOLE;

impl SimModel for Cluster {
    const KIND: ModelKind = ModelKind::Fm;

    fn need(&self, job: &PendingJob) -> u32 {
        size_of(job)
    }

    fn slices(&self, a: &Allocation) -> u32 {
        let h = self.host(a.host);
        a.units
            .iter()
            .map(|u| h.leaf(u.leaf).sm_slices as u32)
            .sum()
    }

    fn capacity(&self) -> u64 {
        self.hosts()
            .map(|(_, h)| h.leaves.iter().map(|l| l.sm_slices as u64).sum::<u64>())
            .sum()
    }

    fn free_slices(&self) -> u32 {
        self.hosts()
            .map(|(id, h)| {
                if h.leaves.iter().all(|l| l.sm_slices == 1) {
                    // Idle leaves under the root of the cost tree.
                    self.capacity(id).idle[0]
                } else {
                    h.leaves
                        .iter()
                        .filter(|l| self.leaf_free(id, l.id) == WHOLE)
                        .map(|l| l.sm_slices as u32)
                        .sum()
                }
            })
            .max()
            .unwrap_or(0)
    }

    fn min_factor(&self, job: &PendingJob, exec: &ExecModel) -> f64 {
        // an even spread has no concentration overhead; one leaf none at all
        match job.request.leaves.unwrap_or(1) {
            0 | 1 => 1.0,
            _ => {
                1.0 + exec
                    .one_to_many
                    .even_overhead
                    .min(exec.one_to_many.max_overhead)
            }
        }
    }

    fn factor(&self, a: &Allocation, exec: &ExecModel) -> f64 {
        let h = self.host(a.host);
        let mut per_gpu = [0u32; 16];
        let mut per_gpu_vec;
        let counts: &mut [u32] = if h.gpus.len() <= per_gpu.len() {
            &mut per_gpu[..h.gpus.len()]
        } else {
            per_gpu_vec = vec![0u32; h.gpus.len()];
            &mut per_gpu_vec
        };
        for u in &a.units {
            if let Some(p) = h.gpu_pos(h.leaf(u.leaf).gpu) {
                counts[p] += 1;
            }
        }
        exec.one_to_many(counts, h.gpus.len())
    }

    fn rows(&self, a: &Allocation) -> Vec<u32> {
        let offset: u32 = self
            .hosts()
            .take_while(|(id, _)| *id != a.host)
            .map(|(_, h)| h.leaves.len() as u32)
            .sum();
        a.units.iter().map(|u| offset + u.leaf.0).collect()
    }

    fn row_labels(&self) -> Vec<String> {
        let many = self.hosts().nth(1).is_some();
        self.hosts()
            .flat_map(|(id, h)| {
                h.leaves.iter().map(move |l| {
                    let host = if many {
                        format!("h{id} ")
                    } else {
                        String::new()
                    };
                    format!("{host}g{} {} #{}", l.gpu, l.profile, l.id)
                })
            })
            .collect()
    }
}

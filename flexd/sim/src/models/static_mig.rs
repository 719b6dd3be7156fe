//! Static-MIG (Flex-MIG §5.1): every GPU fixed to [1g.10gb, 2g.10gb, 4g.20gb], one instance per
//! job. A job takes the smallest instance that holds its compute slices and memory and, when
//! every such instance is busy, a larger idle one (the paper's extra rule, after NVIDIA's MIG
//! guidance). Jobs above 4 slices can never run here. Cores and host memory are not modelled:
//! a job's `cpus` and `host_mem` are ignored, and a CPU-only job can never run here.

use super::{
    host_ranges, mem_gb_of, refuse_cpu_only, size_of, slice_labels, MigGpu, ModelKind, SimModel,
};
use flex_sched::{Model, PendingJob};
use gres_plugin::mig::{layout, Profile};
use std::sync::Arc;

/// The fixed layout, smallest instance first.
const LAYOUT: [Profile; 3] = [Profile::new(1, 2), Profile::new(2, 2), Profile::new(4, 4)];

#[derive(Debug)]
struct Shared {
    gpus: Vec<MigGpu>,
    hosts: Vec<std::ops::Range<usize>>,
    /// Start memory slice of each instance of the layout.
    starts: [u8; 3],
}

/// The free state: which instances are busy.
#[derive(Clone, Debug)]
pub struct StaticMig {
    shared: Arc<Shared>,
    /// Per GPU, bit i set when instance i of [`LAYOUT`] is busy.
    busy: Vec<u8>,
}

/// One instance of one GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmSlot {
    /// Position in the model's GPU list.
    pub gpu: u32,
    /// Instance of the layout: 0 = 1g.10gb, 1 = 2g.10gb, 2 = 4g.20gb.
    pub inst: u8,
}

impl StaticMig {
    pub fn new(gpus: Vec<MigGpu>) -> Self {
        let s = layout(&LAYOUT).expect("the Static-MIG layout is a valid MIG layout");
        let hosts = host_ranges(&gpus);
        Self {
            busy: vec![0; gpus.len()],
            shared: Arc::new(Shared {
                gpus,
                hosts,
                starts: [s[0], s[1], s[2]],
            }),
        }
    }

    fn mem_gb(&self, gpu: usize, inst: usize) -> f64 {
        LAYOUT[inst].mem_slices as f64 * self.shared.gpus[gpu].slice_gb
    }

    fn fits(&self, job: &PendingJob, gpu: usize, inst: usize) -> bool {
        LAYOUT[inst].sm_slices as u32 >= size_of(job)
            && self.mem_gb(gpu, inst) + 1e-9 >= mem_gb_of(job)
    }
}

impl Model for StaticMig {
    type Placement = SmSlot;

    fn admit(&self, job: &PendingJob) -> Result<(), String> {
        job.request.validate()?;
        refuse_cpu_only(job, "Static-MIG")?;
        if (0..self.shared.gpus.len()).any(|g| self.fits(job, g, 2)) {
            return Ok(());
        }
        let size = size_of(job);
        if size > 4 {
            return Err(format!(
                "asks for {size} compute slices but Static-MIG's largest instance (4g) has 4"
            ));
        }
        Err(format!(
            "asks for {:.1} GB but Static-MIG's largest instance has {:.1} GB",
            mem_gb_of(job),
            (0..self.shared.gpus.len())
                .map(|g| self.mem_gb(g, 2))
                .fold(0.0, f64::max)
        ))
    }

    fn place(&self, job: &PendingJob) -> Option<SmSlot> {
        for inst in 0..LAYOUT.len() {
            for (g, busy) in self.busy.iter().enumerate() {
                if busy >> inst & 1 == 0 && self.fits(job, g, inst) {
                    return Some(SmSlot {
                        gpu: g as u32,
                        inst: inst as u8,
                    });
                }
            }
        }
        None
    }

    fn occupy(&mut self, p: &SmSlot) {
        let b = &mut self.busy[p.gpu as usize];
        debug_assert!(*b >> p.inst & 1 == 0, "instance {p:?} is busy");
        *b |= 1 << p.inst;
    }

    fn release(&mut self, p: &SmSlot) {
        let b = &mut self.busy[p.gpu as usize];
        debug_assert!(*b >> p.inst & 1 == 1, "instance {p:?} is idle");
        *b &= !(1 << p.inst);
    }

    fn units(&self) -> u64 {
        SimModel::capacity(self)
    }
}

impl SimModel for StaticMig {
    const KIND: ModelKind = ModelKind::Sm;

    fn need(&self, job: &PendingJob) -> u32 {
        size_of(job)
    }

    fn slices(&self, p: &SmSlot) -> u32 {
        LAYOUT[p.inst as usize].sm_slices as u32
    }

    fn capacity(&self) -> u64 {
        let per_gpu: u64 = LAYOUT.iter().map(|p| p.sm_slices as u64).sum();
        per_gpu * self.busy.len() as u64
    }

    fn free_slices(&self) -> u32 {
        self.shared
            .hosts
            .iter()
            .map(|r| {
                self.busy[r.clone()]
                    .iter()
                    .map(|b| {
                        (0..3)
                            .filter(|i| b >> i & 1 == 0)
                            .map(|i| LAYOUT[i].sm_slices as u32)
                            .sum::<u32>()
                    })
                    .sum::<u32>()
            })
            .max()
            .unwrap_or(0)
    }

    fn rows(&self, p: &SmSlot) -> Vec<u32> {
        let start = self.shared.starts[p.inst as usize] as u32;
        let n = LAYOUT[p.inst as usize].mem_slices as u32;
        (start..start + n).map(|s| p.gpu * 8 + s).collect()
    }

    fn row_labels(&self) -> Vec<String> {
        slice_labels(&self.shared.gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_sched::JobKind;
    use gres_plugin::{GpuIndex, HostId, JobId, Request};

    fn model(n: u32) -> StaticMig {
        StaticMig::new(
            (0..n)
                .map(|i| MigGpu {
                    host: HostId(0),
                    index: GpuIndex(i),
                    slice_gb: 5.0,
                })
                .collect(),
        )
    }

    fn job(size: u32) -> PendingJob {
        PendingJob {
            id: JobId(1),
            request: Request::leaves(size, 60),
            priority: 0,
            kind: JobKind::Batch,
        }
    }

    #[test]
    fn smallest_instance_first_then_a_larger_idle_one() {
        let mut m = model(2);
        let take = |m: &mut StaticMig, size| {
            let p = m.place(&job(size))?;
            m.occupy(&p);
            Some(p)
        };
        assert_eq!(take(&mut m, 1), Some(SmSlot { gpu: 0, inst: 0 }));
        assert_eq!(take(&mut m, 1), Some(SmSlot { gpu: 1, inst: 0 }));
        // both 1g busy: a 1-slice job takes a 2g
        assert_eq!(take(&mut m, 1), Some(SmSlot { gpu: 0, inst: 1 }));
        assert_eq!(take(&mut m, 3), Some(SmSlot { gpu: 0, inst: 2 }));
        assert_eq!(take(&mut m, 2), Some(SmSlot { gpu: 1, inst: 1 }));
        assert_eq!(m.free_slices(), 4);
        assert_eq!(take(&mut m, 2), Some(SmSlot { gpu: 1, inst: 2 }));
        assert_eq!(take(&mut m, 1), None);
        assert_eq!(m.capacity(), 14);
        assert_eq!(m.rows(&SmSlot { gpu: 1, inst: 1 }), vec![12, 13]);
    }

    #[test]
    fn jobs_above_four_slices_never_fit() {
        let m = model(2);
        assert!(m.admit(&job(4)).is_ok());
        assert_eq!(
            m.admit(&job(6)).unwrap_err(),
            "asks for 6 compute slices but Static-MIG's largest instance (4g) has 4"
        );
        let mut big = job(1);
        big.request.mem_bytes = Some(25_000_000_000);
        assert!(m.admit(&big).unwrap_err().contains("20.0 GB"));
    }
}

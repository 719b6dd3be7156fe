//! Dynamic-MIG (Flex-MIG §5.1): one instance per job, the smallest NVIDIA profile that holds its
//! compute slices and memory (sizes 5–8 take the whole GPU, 7g, as the paper maps sizes 6–8),
//! on one GPU, at a valid start of NVIDIA's placement table (mig-profiles.md). A job larger
//! than the paper's largest mapped size (8: one GPU's eight memory slices, run on its 7g
//! instance) can never run here: one instance is one GPU at most, as in the paper's baseline.
//! Cores and host memory are not modelled: a job's `cpus` and `host_mem` are ignored, and a
//! CPU-only job can never run here.
//!
//! Instances outlive their jobs: an idle instance of the right profile is reused. A job goes, in
//! order of preference, to
//! 1. an idle instance of its profile (first GPU);
//! 2. a new instance in memory slices no instance covers, within the GPU's 7 SM slices (the GPU
//!    with the fewest uncovered slices, to keep others whole; the highest valid start, to keep
//!    slice 0 free for 4g and 7g);
//! 3. a reconfigured GPU: every idle instance on it is destroyed and the new one created beside
//!    the running ones (the GPU with the fewest running jobs). Reconfiguring needs the GPU
//!    drained (§2.3.3: mig-manager takes 100–120 s), so the placement says so and the engine
//!    suspends the GPU's running jobs for the drain; the GPU takes no other placement until the
//!    engine reports the reconfiguration over. A GPU running an inference job is never drained:
//!    there the job waits.

use super::{
    host_ranges, mem_gb_of, refuse_cpu_only, size_of, slice_labels, MigGpu, ModelKind, SimModel,
};
use flex_sched::{JobKind, Model, PendingJob};
use gres_plugin::mig::Profile;
use std::sync::Arc;

const SM_BUDGET: u8 = 7;
/// The largest job size the paper maps onto one instance (sizes 6–8 → 7g.40gb).
const MAX_SIZE: u32 = 8;
/// A GPU holds at most seven instances (seven 1g over seven SM slices).
const MAX_INST: usize = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Inst {
    profile: Profile,
    start: u8,
    /// The kind of job running on it, None when idle.
    busy: Option<JobKind>,
}

impl Inst {
    fn mask(&self) -> u8 {
        self.profile.mask(self.start)
    }
}

/// One GPU's instances; a fixed array so that cloning the model is a copy.
#[derive(Clone, Copy, Debug, Default)]
struct Gpu {
    inst: [Option<Inst>; MAX_INST],
    /// Being reconfigured: takes no placement.
    locked: bool,
}

impl Gpu {
    fn all(&self) -> impl Iterator<Item = &Inst> {
        self.inst.iter().flatten()
    }

    fn running(&self) -> impl Iterator<Item = &Inst> {
        self.all().filter(|i| i.busy.is_some())
    }

    fn mask(&self, only_running: bool) -> u8 {
        self.all()
            .filter(|i| !only_running || i.busy.is_some())
            .fold(0, |m, i| m | i.mask())
    }

    fn sm(&self, only_running: bool) -> u8 {
        self.all()
            .filter(|i| !only_running || i.busy.is_some())
            .map(|i| i.profile.sm_slices)
            .sum()
    }

    fn find(&self, profile: Profile, start: u8) -> Option<usize> {
        self.inst
            .iter()
            .position(|i| i.is_some_and(|i| i.profile == profile && i.start == start))
    }

    /// Highest valid start of `p` whose slices miss `used`, within the SM budget.
    fn start_for(&self, p: Profile, only_running: bool) -> Option<u8> {
        if self.sm(only_running) + p.sm_slices > SM_BUDGET {
            return None;
        }
        let used = self.mask(only_running);
        p.starts()
            .iter()
            .rev()
            .copied()
            .find(|&s| used & p.mask(s) == 0)
    }
}

/// The smallest profile holding the job on a GPU whose memory slices are `slice_gb` each.
fn profile_at(job: &PendingJob, slice_gb: f64) -> Option<Profile> {
    if size_of(job) > MAX_SIZE {
        return None;
    }
    let sm = size_of(job).min(SM_BUDGET as u32);
    let mem = mem_gb_of(job);
    Profile::ALL
        .into_iter()
        .find(|p| p.sm_slices as u32 >= sm && p.mem_slices as f64 * slice_gb + 1e-9 >= mem)
}

#[derive(Debug)]
struct Shared {
    gpus: Vec<MigGpu>,
    hosts: Vec<std::ops::Range<usize>>,
}

/// The instance layout and use of every GPU.
#[derive(Clone, Debug)]
pub struct DynamicMig {
    shared: Arc<Shared>,
    gpus: Vec<Gpu>,
}

/// One instance for one job, perhaps after reconfiguring its GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmPlacement {
    /// Position in the model's GPU list.
    pub gpu: u32,
    pub profile: Profile,
    pub start: u8,
    pub kind: JobKind,
    /// The GPU must be reconfigured (drained) first.
    pub reconfigure: bool,
}

impl DynamicMig {
    /// Every GPU starts with no instances.
    pub fn new(gpus: Vec<MigGpu>) -> Self {
        let hosts = host_ranges(&gpus);
        Self {
            gpus: vec![Gpu::default(); gpus.len()],
            shared: Arc::new(Shared { gpus, hosts }),
        }
    }

    /// The smallest profile holding the job on GPU `g`.
    fn profile(&self, job: &PendingJob, g: usize) -> Option<Profile> {
        profile_at(job, self.shared.gpus[g].slice_gb)
    }

    fn placement(
        &self,
        job: &PendingJob,
        g: usize,
        p: Profile,
        start: u8,
        reconfigure: bool,
    ) -> DmPlacement {
        DmPlacement {
            gpu: g as u32,
            profile: p,
            start,
            kind: job.kind,
            reconfigure,
        }
    }
}

impl Model for DynamicMig {
    type Placement = DmPlacement;

    fn admit(&self, job: &PendingJob) -> Result<(), String> {
        job.request.validate()?;
        refuse_cpu_only(job, "Dynamic-MIG")?;
        if (0..self.gpus.len()).any(|g| self.profile(job, g).is_some()) {
            return Ok(());
        }
        let size = size_of(job);
        if size > MAX_SIZE {
            return Err(format!(
                "asks for {size} compute slices but Dynamic-MIG runs a job on one instance of \
                 one GPU, at most 7g (sizes up to {MAX_SIZE})"
            ));
        }
        let most = self
            .shared
            .gpus
            .iter()
            .map(|g| 8.0 * g.slice_gb)
            .fold(0.0, f64::max);
        Err(format!(
            "asks for {:.1} GB but the largest MIG instance has {most:.1} GB",
            mem_gb_of(job)
        ))
    }

    fn place(&self, job: &PendingJob) -> Option<DmPlacement> {
        // The job's profile depends on a GPU only through its slice size, which GPUs of one
        // model share: it is found once per size seen last, not for every GPU at every step.
        let last = std::cell::Cell::new(None);
        let profile = |g: usize| {
            let slice_gb = self.shared.gpus[g].slice_gb;
            match last.get() {
                Some((at, p)) if at == slice_gb => p,
                _ => {
                    let p = profile_at(job, slice_gb);
                    last.set(Some((slice_gb, p)));
                    p
                }
            }
        };
        let open = || {
            self.gpus
                .iter()
                .enumerate()
                .filter(|(_, gpu)| !gpu.locked)
                .filter_map(|(g, gpu)| Some((g, gpu, profile(g)?)))
        };
        // 1. An idle instance of the profile.
        for (g, gpu, p) in open() {
            if let Some(i) = gpu.all().find(|i| i.busy.is_none() && i.profile == p) {
                return Some(self.placement(job, g, p, i.start, false));
            }
        }
        // 2. A new instance where no instance is: the fullest GPU that has room.
        let created = open()
            .filter_map(|(g, gpu, p)| {
                let s = gpu.start_for(p, false)?;
                Some(((8 - gpu.mask(false).count_ones(), g), (g, p, s)))
            })
            .min_by_key(|(k, _)| *k);
        if let Some((_, (g, p, s))) = created {
            return Some(self.placement(job, g, p, s, false));
        }
        // 3. Reconfigure a GPU without inference jobs: the one with the fewest jobs to drain.
        let reconf = open()
            .filter(|(_, gpu, _)| gpu.running().all(|i| i.busy != Some(JobKind::Infer)))
            .filter_map(|(g, gpu, p)| {
                let s = gpu.start_for(p, true)?;
                Some(((gpu.running().count(), g), (g, p, s)))
            })
            .min_by_key(|(k, _)| *k);
        reconf.map(|(_, (g, p, s))| self.placement(job, g, p, s, true))
    }

    fn occupy(&mut self, p: &DmPlacement) {
        let gpu = &mut self.gpus[p.gpu as usize];
        if p.reconfigure {
            for slot in &mut gpu.inst {
                if slot.is_some_and(|i| i.busy.is_none()) {
                    *slot = None;
                }
            }
            gpu.locked = true;
        }
        if let Some(k) = gpu.find(p.profile, p.start) {
            let i = gpu.inst[k].as_mut().expect("found");
            debug_assert!(i.busy.is_none(), "instance {p:?} is busy");
            i.busy = Some(p.kind);
            return;
        }
        // Planning copies of the scheduler core may have laid the GPU out differently: make
        // room by destroying idle instances in the way (never in the engine's own model, where
        // a placement without reconfiguration always finds its slices uncovered).
        let mask = p.profile.mask(p.start);
        for slot in &mut gpu.inst {
            if slot.is_some_and(|i| i.busy.is_none() && i.mask() & mask != 0) {
                *slot = None;
            }
        }
        while gpu.sm(false) + p.profile.sm_slices > SM_BUDGET {
            let Some(k) = gpu
                .inst
                .iter()
                .position(|i| i.is_some_and(|i| i.busy.is_none()))
            else {
                break;
            };
            gpu.inst[k] = None;
        }
        let free = gpu
            .inst
            .iter()
            .position(Option::is_none)
            .expect("a GPU holds seven instances");
        gpu.inst[free] = Some(Inst {
            profile: p.profile,
            start: p.start,
            busy: Some(p.kind),
        });
    }

    fn release(&mut self, p: &DmPlacement) {
        let gpu = &mut self.gpus[p.gpu as usize];
        if let Some(k) = gpu.find(p.profile, p.start) {
            if let Some(i) = gpu.inst[k].as_mut() {
                i.busy = None;
            }
        } else {
            debug_assert!(false, "released instance {p:?} does not exist");
        }
    }

    fn units(&self) -> u64 {
        SimModel::capacity(self)
    }
}

impl SimModel for DynamicMig {
    const KIND: ModelKind = ModelKind::Dm;

    fn need(&self, job: &PendingJob) -> u32 {
        self.profile(job, 0)
            .map_or(size_of(job), |p| p.sm_slices as u32)
    }

    fn slices(&self, p: &DmPlacement) -> u32 {
        p.profile.sm_slices as u32
    }

    fn capacity(&self) -> u64 {
        SM_BUDGET as u64 * self.gpus.len() as u64
    }

    fn free_slices(&self) -> u32 {
        self.shared
            .hosts
            .iter()
            .map(|r| {
                self.gpus[r.clone()]
                    .iter()
                    .map(|g| (SM_BUDGET - g.sm(true)) as u32)
                    .sum::<u32>()
            })
            .max()
            .unwrap_or(0)
    }

    fn reconfigures(&self, p: &DmPlacement) -> Option<u32> {
        p.reconfigure.then_some(p.gpu)
    }

    fn on_gpu(&self, p: &DmPlacement, gpu: u32) -> bool {
        p.gpu == gpu
    }

    fn reconfigured(&mut self, gpu: u32) {
        self.gpus[gpu as usize].locked = false;
    }

    fn rows(&self, p: &DmPlacement) -> Vec<u32> {
        let s = p.start as u32;
        (s..s + p.profile.mem_slices as u32)
            .map(|x| p.gpu * 8 + x)
            .collect()
    }

    fn row_labels(&self) -> Vec<String> {
        slice_labels(&self.shared.gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_plugin::{GpuIndex, HostId, JobId, Request};

    fn model(n: u32) -> DynamicMig {
        DynamicMig::new(
            (0..n)
                .map(|i| MigGpu {
                    host: HostId(0),
                    index: GpuIndex(i),
                    slice_gb: 5.0,
                })
                .collect(),
        )
    }

    fn job(size: u32, kind: JobKind) -> PendingJob {
        PendingJob {
            id: JobId(1),
            request: Request::leaves(size, 60),
            priority: 0,
            kind,
        }
    }

    fn take(m: &mut DynamicMig, size: u32, kind: JobKind) -> Option<DmPlacement> {
        let p = m.place(&job(size, kind))?;
        m.occupy(&p);
        Some(p)
    }

    #[test]
    fn profiles_follow_nvidia_table() {
        let m = model(1);
        let prof = |s| m.profile(&job(s, JobKind::Batch), 0).unwrap();
        assert_eq!(prof(1), Profile::new(1, 1));
        assert_eq!(prof(2), Profile::new(2, 2));
        assert_eq!(prof(3), Profile::new(3, 4));
        assert_eq!(prof(4), Profile::new(4, 4));
        assert_eq!(prof(5), Profile::new(7, 8));
        assert_eq!(prof(8), Profile::new(7, 8));
        let mut j = job(1, JobKind::Batch);
        j.request.mem_bytes = Some(8_000_000_000);
        assert_eq!(m.profile(&j, 0), Some(Profile::new(1, 2)));
    }

    #[test]
    fn reuse_then_create_then_reconfigure() {
        use JobKind::*;
        let mut m = model(1);
        // small instances go high, keeping slice 0 for 4g/7g
        let a = take(&mut m, 1, Batch).unwrap();
        assert_eq!((a.start, a.reconfigure), (6, false));
        let b = take(&mut m, 2, Batch).unwrap();
        assert_eq!((b.start, b.reconfigure), (4, false));
        m.release(&a);
        // the idle 1g at 6 is reused
        assert_eq!(take(&mut m, 1, Batch).unwrap().start, 6);
        let c = take(&mut m, 4, Batch).unwrap();
        assert_eq!((c.start, c.reconfigure), (0, false));
        m.release(&c);
        m.release(&b);
        // an idle 4g at 0 and 2g at 4 use the SM budget: a 3g needs the GPU reconfigured, and
        // goes to 0 since the running 1g holds slice 6
        let d = take(&mut m, 3, Batch).unwrap();
        assert_eq!((d.start, d.reconfigure), (0, true));
        assert_eq!(m.free_slices(), 3);
        // locked while reconfiguring
        assert_eq!(m.place(&job(1, Batch)), None);
        m.reconfigured(0);
        assert_eq!(take(&mut m, 1, Batch).unwrap().start, 5);
    }

    #[test]
    fn inference_jobs_are_never_drained() {
        use JobKind::*;
        let mut m = model(1);
        let a = take(&mut m, 2, Infer).unwrap();
        let b = take(&mut m, 2, Batch).unwrap();
        m.release(&b);
        // 2g idle at 2, infer 2g at 4: a 4g needs slices 0-3, covered by the idle 2g
        assert_eq!(m.place(&job(4, Batch)), None);
        m.release(&a);
        assert_eq!(take(&mut m, 4, Batch).map(|p| p.reconfigure), Some(true));
    }
}

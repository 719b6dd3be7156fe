//! Flex's own model: hosts of MIG leaves and whole GPUs over the Gaia access-cost tree, with
//! exclusive CPU cores. Placement rules live in `place`; this file keeps the free state.

use super::alloc::Allocation;
use super::config::ClusterConfig;
use super::place::scratch::Scratch;
use super::place::{self, HostState};
use super::{Model, PendingJob};
use gres_plugin::tree::CostTree;
use gres_plugin::{CoreId, HostId, HostModel, LeafId, Request};
use std::sync::Arc;

/// The free state of every host.
#[derive(Clone, Debug)]
pub struct Cluster {
    hosts: Vec<HostState>,
    /// Hosts by free share at the root (thousandths), ascending, for best-fit search across
    /// hosts. A sorted vector: a pass copies the free state twice, and a copy of this is one
    /// allocation (a tree set's was one per node), and a host's move in it one memmove.
    by_free: Index<u32>,
    /// Hosts by free cores and by free host memory, ascending: a job searches the index that
    /// leaves it the fewest hosts (see [`Cluster::candidates`]).
    by_cores: Index<u32>,
    by_mem: Index<u64>,
    /// Each host's free share, cores and memory side by side, so that a search skips the
    /// hosts short of one without reading their state.
    free: Scratch<Free, INLINE>,
    /// One idle copy per distinct host model, for admission.
    idle: Arc<Vec<HostState>>,
    config: ClusterConfig,
}

impl Cluster {
    pub fn new(hosts: Vec<HostModel>, config: ClusterConfig) -> Self {
        let models: Vec<Arc<HostModel>> = hosts.into_iter().map(Arc::new).collect();
        Self::from_shared(models, config)
    }

    /// Build from shared host models: hosts that share one `Arc` share their static data.
    pub fn from_shared(models: Vec<Arc<HostModel>>, config: ClusterConfig) -> Self {
        let mut idle: Vec<HostState> = Vec::new();
        let mut hosts = Vec::with_capacity(models.len());
        for m in models {
            let state = match idle.iter().find(|h| Arc::ptr_eq(&h.model, &m)) {
                Some(h) => h.clone(),
                None => {
                    let h = HostState::new(m, config.reserved_memory);
                    idle.push(h.clone());
                    h
                }
            };
            hosts.push(state);
        }
        Self {
            by_free: index(&hosts, HostState::free_root),
            by_cores: index(&hosts, HostState::cores_free),
            by_mem: index(&hosts, |h| h.memory().1),
            free: frees(&hosts),
            hosts,
            idle: Arc::new(idle),
            config,
        }
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: ClusterConfig) {
        if config.reserved_memory != self.config.reserved_memory {
            for h in &mut self.hosts {
                h.set_reserved_memory(config.reserved_memory);
            }
            self.by_mem = index(&self.hosts, |h| h.memory().1);
            self.free = frees(&self.hosts);
            let mut idle = (*self.idle).clone();
            for h in &mut idle {
                h.set_reserved_memory(config.reserved_memory);
            }
            self.idle = Arc::new(idle);
        }
        self.config = config;
    }

    /// A host's schedulable memory (None when its RAM is unknown: no limit) and what is free.
    pub fn memory(&self, id: HostId) -> (Option<u64>, u64) {
        let (total, free) = self.hosts[id.0 as usize].memory();
        ((total != u64::MAX).then_some(total), free)
    }

    /// A host's free cores.
    pub fn cores_free(&self, id: HostId) -> u32 {
        self.hosts[id.0 as usize].cores_free()
    }

    /// For a job that waits on resources: "memory" or "cores" when that alone keeps it off
    /// every host now (host memory first), None otherwise (its leaves are short). Cheap: for
    /// every pending row of a listing.
    pub fn shortage(&self, req: &Request) -> Option<&'static str> {
        let mut found = None;
        for h in &self.hosts {
            match place::shortage(h, req) {
                None => return None,
                Some("memory") => found = Some("memory"),
                Some(s) => found = found.or(Some(s)),
            }
        }
        found
    }

    pub fn hosts(&self) -> impl Iterator<Item = (HostId, &HostModel)> {
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (HostId(i as u32), &*h.model))
    }

    pub fn host(&self, id: HostId) -> &HostModel {
        &self.hosts[id.0 as usize].model
    }

    pub fn tree(&self, id: HostId) -> &CostTree {
        &self.hosts[id.0 as usize].stat.tree
    }

    pub fn capacity(&self, id: HostId) -> &gres_plugin::tree::Capacity {
        &self.hosts[id.0 as usize].cap
    }

    /// Free thousandths of a leaf (1000 = idle).
    pub fn leaf_free(&self, host: HostId, leaf: LeafId) -> u32 {
        let h = &self.hosts[host.0 as usize];
        h.cap.leaf_free(&h.stat.tree, leaf)
    }

    pub fn core_free(&self, host: HostId, core: CoreId) -> bool {
        self.hosts[host.0 as usize].core_is_free(core)
    }

    /// Occupy an allocation recorded earlier (re-adopting jobs after a restart), refusing one
    /// that overlaps what is already taken or names units and cores this host does not have.
    pub fn try_occupy(&mut self, a: &Allocation) -> Result<(), String> {
        let h = self
            .hosts
            .get(a.host.0 as usize)
            .ok_or_else(|| format!("host {} does not exist", a.host))?;
        h.check_free(a)?;
        self.occupy(a);
        Ok(())
    }

    fn update<F: FnOnce(&mut HostState)>(&mut self, host: HostId, f: F) {
        let h = &mut self.hosts[host.0 as usize];
        let before = (h.free_root(), h.cores_free(), h.memory().1);
        f(h);
        let after = (h.free_root(), h.cores_free(), h.memory().1);
        reindex(&mut self.by_free, host, before.0, after.0);
        reindex(&mut self.by_cores, host, before.1, after.1);
        reindex(&mut self.by_mem, host, before.2, after.2);
        self.free[host.0 as usize] = Free::of(h);
    }

    fn place_on(&self, host: HostId, req: &Request) -> Option<Allocation> {
        let h = &self.hosts[host.0 as usize];
        place::place(h, req, &self.config).map(|(units, cores, mem_bytes)| Allocation {
            host,
            units,
            cores,
            mem_bytes,
        })
    }

    /// The hosts that may hold a request, best fit first: those with at least its lower bound
    /// of free share at the root, of free cores and of free memory, from the index that leaves
    /// the fewest (free share when they tie, so that jobs without cores and memory place as
    /// before them). The others are checked host by host.
    fn candidates(&self, req: &Request) -> impl Iterator<Item = HostId> + '_ {
        // Most jobs of a long queue fit nowhere: the host with the most free share, the last of
        // its index, answers that before anything else is worked out.
        let share = place::lower_bound(req);
        let enough = match self.by_free.last() {
            Some(&(most, _)) if most >= share => {
                let (cores, mem) = place::cores_and_memory_bounds(req);
                Some(Free { share, cores, mem })
            }
            _ => None,
        };
        enough
            .map(|e| self.index_for(e.share, e.cores, e.mem))
            .into_iter()
            .flatten()
            .filter(move |h| enough.is_some_and(|e| self.free[h.0 as usize].holds(&e)))
    }

    /// The part of one index [`Cluster::candidates`] searches.
    fn index_for(&self, share: u32, cores: u32, mem: u64) -> Candidates<'_> {
        /// Few enough hosts to search without looking at the other indexes.
        const FEW: usize = 16;
        // The hosts with the most free cores and memory, the last of their indexes, answer
        // for jobs that fit nowhere before a search.
        if !(self.by_cores.last().is_some_and(|e| e.0 >= cores)
            && self.by_mem.last().is_some_and(|e| e.0 >= mem))
        {
            return Candidates::Share(self.by_free[..0].iter());
        }
        let n = self.by_free.len();
        let f = self.by_free.partition_point(|&(x, _)| x < share);
        if n - f <= FEW {
            return Candidates::Share(self.by_free[f..].iter());
        }
        let c = self.by_cores.partition_point(|&(x, _)| x < cores);
        let m = match mem {
            0 => 0,
            _ => self.by_mem.partition_point(|&(x, _)| x < mem),
        };
        let fewest = (n - f).min(n - c).min(n - m);
        if n - f == fewest {
            Candidates::Share(self.by_free[f..].iter())
        } else if n - m == fewest {
            Candidates::Memory(self.by_mem[m..].iter())
        } else {
            Candidates::Cores(self.by_cores[c..].iter())
        }
    }

    /// Whether the host that `released` was on, which just got it back, may hold `req`.
    fn may_hold_after_release(&self, req: &Request, released: &Allocation) -> bool {
        // As `place`: a host with less free share than the bound cannot hold the job.
        let share = place::lower_bound(req);
        let (cores, mem) = place::cores_and_memory_bounds(req);
        self.free[released.host.0 as usize].holds(&Free { share, cores, mem })
    }
}

impl Model for Cluster {
    type Placement = Allocation;

    fn admit(&self, job: &PendingJob) -> Result<(), String> {
        let req = &job.request;
        req.validate()?;
        if self.idle.iter().any(|h| place::fits(h, req, &self.config)) {
            return Ok(());
        }
        Err(place::why_not(&self.idle, req, &self.config))
    }

    fn place(&self, job: &PendingJob) -> Option<Allocation> {
        self.candidates(&job.request)
            .find_map(|host| self.place_on(host, &job.request))
    }

    fn place_after_release(&self, job: &PendingJob, released: &Allocation) -> Option<Allocation> {
        self.may_hold_after_release(&job.request, released)
            .then(|| self.place_on(released.host, &job.request))
            .flatten()
    }

    fn fits(&self, job: &PendingJob) -> bool {
        self.candidates(&job.request)
            .any(|host| place::fits(&self.hosts[host.0 as usize], &job.request, &self.config))
    }

    fn fits_after_release(&self, job: &PendingJob, released: &Allocation) -> bool {
        let h = &self.hosts[released.host.0 as usize];
        self.may_hold_after_release(&job.request, released)
            && place::fits(h, &job.request, &self.config)
    }

    fn occupy(&mut self, a: &Allocation) {
        self.update(a.host, |h| h.occupy(a));
    }

    fn release(&mut self, a: &Allocation) {
        self.update(a.host, |h| h.release(a));
    }

    fn units(&self) -> u64 {
        self.hosts().map(|(_, h)| h.leaves.len() as u64).sum()
    }
}

/// Hosts kept inline in the indexes (a pass copies the free state twice; a few hosts then
/// cost no allocation).
const INLINE: usize = 4;

/// Hosts sorted by one free quantity, ascending.
type Index<T> = Scratch<(T, HostId), INLINE>;

fn index<T: Ord + Copy + Default>(hosts: &[HostState], key: impl Fn(&HostState) -> T) -> Index<T> {
    let mut idx = Scratch::new((T::default(), HostId(0)));
    idx.extend(
        hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (key(h), HostId(i as u32))),
    );
    idx.sort_unstable();
    idx
}

fn frees(hosts: &[HostState]) -> Scratch<Free, INLINE> {
    let mut f = Scratch::new(Free::default());
    f.extend(hosts.iter().map(Free::of));
    f
}

/// Move `host`'s entry in a sorted index from `before` to `after`.
fn reindex<T: Ord + Copy>(index: &mut [(T, HostId)], host: HostId, before: T, after: T) {
    if before == after {
        return;
    }
    let i = index
        .binary_search(&(before, host))
        .expect("every host is indexed");
    let j = index.partition_point(|&e| e < (after, host));
    if j > i {
        index[i..j].rotate_left(1);
        index[j - 1] = (after, host);
    } else {
        index[j..=i].rotate_right(1);
        index[j] = (after, host);
    }
}

/// The hosts [`Cluster::candidates`] gives, from one of its indexes.
enum Candidates<'a> {
    Share(std::slice::Iter<'a, (u32, HostId)>),
    Cores(std::slice::Iter<'a, (u32, HostId)>),
    Memory(std::slice::Iter<'a, (u64, HostId)>),
}

impl Iterator for Candidates<'_> {
    type Item = HostId;

    fn next(&mut self) -> Option<HostId> {
        match self {
            Candidates::Share(i) | Candidates::Cores(i) => i.next().map(|&(_, h)| h),
            Candidates::Memory(i) => i.next().map(|&(_, h)| h),
        }
    }
}

/// What one host has free.
#[derive(Clone, Copy, Debug, Default)]
struct Free {
    share: u32,
    cores: u32,
    mem: u64,
}

impl Free {
    fn of(h: &HostState) -> Free {
        Free {
            share: h.free_root(),
            cores: h.cores_free(),
            mem: h.memory().1,
        }
    }

    fn holds(&self, need: &Free) -> bool {
        self.share >= need.share && self.cores >= need.cores && self.mem >= need.mem
    }
}

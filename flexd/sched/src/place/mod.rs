//! Placement on one host, combining the seeds' rules:
//!
//! 1. Size-aware leaf type (Flex-MIG §3.2): a 1-leaf job prefers the leaf with the most memory
//!    (1g.10gb on the testbed), a larger job the least (1g.5gb), taking the other rather than
//!    waiting.
//! 2. Lowest-cost subtree (Gaia Link) with an even spread inside it (Flex-MIG round-robin):
//!    candidate subtrees are GPUs and tree nodes with several children; leaves are dealt
//!    round-robin over the subtree's GPUs. Subtrees are compared by, in order: the number of
//!    leaves needed (smallest set first), the most leaves on one GPU (even spread first, as
//!    Flex-MIG's Figure 9 shows concentration costs most), leaves of the non-preferred type, the
//!    access cost, then best fit (fewest free units in the subtree, then in each ancestor), which
//!    keeps whole subtrees free for larger jobs (Gaia Singular).
//! 3. Whole GPUs (MIG off): n idle GPUs under the cheapest subtree (Link, Singular for n = 1);
//!    a share below one GPU on the best-fitting partly used GPU (Fragment), or by the job's
//!    ModelGrid strategy.
//! 4. Cores: the requested count per unit from the NUMA node of that unit's GPU, the GPU's
//!    affinity cores first, exclusive; farther NUMA nodes only when the near one is full. The
//!    job's cores beyond its units' share (Slurm's tasks × `-c`) are dealt round-robin over
//!    its units the same way. A CPU-only job takes its cores from one NUMA node where one
//!    holds them (best fit), the cores no GPU lists as near first, from the far end of each
//!    node, so that GPU jobs, which fill from the near end, find theirs.
//! 5. Host memory: a count of bytes per host (its RAM less `reserved_memory`), taken as the
//!    request's [`HostMem`] works out for the cores and units chosen; a host whose RAM is
//!    unknown has no memory limit.
//! 6. `--exclusive`: only an idle host, and all of it.

mod leaves;
pub(crate) mod scratch;

use super::alloc::{Allocation, Unit};
use super::config::ClusterConfig;
use gres_plugin::request::Strategy;
use gres_plugin::tree::{Capacity, CostTree, NodeId, WHOLE};
use gres_plugin::{CoreId, HostMem, HostModel, LeafId, Request};
use leaves::place_leaves;
use scratch::Scratch;
use std::sync::Arc;

/// The units of one placement (on the stack up to 16).
type Units = Scratch<Unit, 16>;

/// What fills the unused slots of [`Units`].
const NO_UNIT: Unit = Unit {
    leaf: LeafId(0),
    share: 0,
};

/// What never changes about a host.
#[derive(Debug)]
pub(crate) struct HostStatic {
    pub(crate) tree: CostTree,
    roots: Vec<NodeId>,
    /// GPU position of each leaf.
    leaf_gpu: Vec<u32>,
    /// Memory of each leaf, and whether it is a MIG leaf: read at every placement, kept here
    /// apart from the rest of the leaf's description.
    leaf_mem: Vec<u64>,
    leaf_mig: Vec<bool>,
    /// Leaves of each GPU position.
    gpu_leaves: Vec<Vec<LeafId>>,
    /// Core positions (into `HostModel::cores`) in order of preference for each GPU position.
    core_order: Vec<Vec<u32>>,
    /// Core positions of each NUMA node in a CPU-only job's order of preference, and the
    /// node's bitmap of them.
    numa_cores: Vec<(Vec<u32>, Scratch<u64, 4>)>,
    /// Free share at the root of the idle host.
    full_root: u32,
    has_mig: bool,
    /// Memory of the smallest whole (non-MIG) GPU, 0 when there is none.
    whole_gpu_mem: u64,
}

/// The free state of one host.
#[derive(Clone, Debug)]
pub(crate) struct HostState {
    pub(crate) model: Arc<HostModel>,
    pub(crate) stat: Arc<HostStatic>,
    pub(crate) cap: Capacity,
    /// Free cores, one bit per position (inline for hosts of up to 256 cores).
    cores_free: Scratch<u64, 4>,
    n_cores_free: u32,
    /// Schedulable host memory (u64::MAX when the host's RAM is unknown) and what is free.
    mem_total: u64,
    mem_free: u64,
}

impl HostState {
    pub(crate) fn new(model: Arc<HostModel>, reserved_memory: u64) -> Self {
        let tree = CostTree::build(&model);
        let roots = tree.placement_roots();
        let leaf_gpu = model
            .leaves
            .iter()
            .map(|l| model.gpu_pos(l.gpu).unwrap_or(0) as u32)
            .collect();
        let mut gpu_leaves = vec![Vec::new(); model.gpus.len()];
        for l in &model.leaves {
            if let Some(p) = model.gpu_pos(l.gpu) {
                gpu_leaves[p].push(l.id);
            }
        }
        let core_order = model
            .gpus
            .iter()
            .map(|g| {
                let mut pos: Vec<u32> = (0..model.cores.len() as u32).collect();
                pos.sort_by_key(|&p| {
                    let c = model.cores[p as usize];
                    (
                        c.numa_node.abs_diff(g.numa_node),
                        !g.cpu_affinity.contains(&c.id),
                        c.id,
                    )
                });
                pos
            })
            .collect();
        let leaf_mem = model.leaves.iter().map(|l| l.memory_bytes).collect();
        let leaf_mig: Vec<bool> = model.leaves.iter().map(|l| l.is_mig()).collect();
        let has_mig = leaf_mig.contains(&true);
        let whole_gpu_mem = model
            .leaves
            .iter()
            .filter(|l| !l.is_mig())
            .map(|l| l.memory_bytes)
            .min()
            .unwrap_or(0);
        let n = model.cores.len();
        let mut cores_free = Scratch::filled(0, n.div_ceil(64));
        for p in 0..n {
            cores_free[p / 64] |= 1 << (p % 64);
        }
        let cap = Capacity::new(&tree);
        let full_root = cap.free[0];
        let numa_cores = numa_core_order(&model, n);
        let mem_total = schedulable_memory(&model, reserved_memory);
        Self {
            stat: Arc::new(HostStatic {
                numa_cores,
                full_root,
                tree,
                roots,
                leaf_gpu,
                leaf_mem,
                leaf_mig,
                gpu_leaves,
                core_order,
                has_mig,
                whole_gpu_mem,
            }),
            model,
            cap,
            cores_free,
            n_cores_free: n as u32,
            mem_total,
            mem_free: mem_total,
        }
    }

    /// Another `reserved_memory` (a reloaded configuration): what is in use stays in use.
    pub(crate) fn set_reserved_memory(&mut self, reserved_memory: u64) {
        let used = self.mem_total - self.mem_free;
        self.mem_total = schedulable_memory(&self.model, reserved_memory);
        self.mem_free = self.mem_total.saturating_sub(used);
    }

    /// Schedulable host memory (u64::MAX: unknown, no limit) and what is free of it.
    pub(crate) fn memory(&self) -> (u64, u64) {
        (self.mem_total, self.mem_free)
    }

    pub(crate) fn cores_free(&self) -> u32 {
        self.n_cores_free
    }

    /// Nothing on it: every unit, core and byte free.
    fn is_idle(&self) -> bool {
        self.free_root() == self.stat.full_root
            && self.n_cores_free as usize == self.model.cores.len()
            && self.mem_free == self.mem_total
    }

    pub(crate) fn free_root(&self) -> u32 {
        self.cap.free[0]
    }

    fn free(&self, leaf: LeafId) -> u32 {
        self.cap.leaf_free(&self.stat.tree, leaf)
    }

    fn core_pos(&self, core: CoreId) -> Option<usize> {
        let cores = &self.model.cores;
        // Cores are usually numbered by position: look there before searching.
        match cores.get(core.0 as usize) {
            Some(c) if c.id == core => Some(core.0 as usize),
            _ => cores.binary_search_by_key(&core, |c| c.id).ok(),
        }
    }

    pub(crate) fn core_is_free(&self, core: CoreId) -> bool {
        self.core_pos(core)
            .is_some_and(|p| self.cores_free[p / 64] >> (p % 64) & 1 == 1)
    }

    pub(crate) fn check_free(&self, a: &Allocation) -> Result<(), String> {
        for u in &a.units {
            if u.leaf.0 as usize >= self.model.leaves.len() {
                return Err(format!("leaf {} does not exist on this host", u.leaf));
            }
            if self.free(u.leaf) < u.share {
                return Err(format!(
                    "leaf {} ({}) is already taken",
                    u.leaf,
                    self.model.leaf(u.leaf).uuid
                ));
            }
        }
        for c in &a.cores {
            if !self.core_is_free(*c) {
                return Err(format!("core {c} is already taken or does not exist"));
            }
        }
        if a.mem_bytes > self.mem_free {
            return Err(format!(
                "{} of host memory is more than the {} free",
                gib(a.mem_bytes),
                gib(self.mem_free)
            ));
        }
        Ok(())
    }

    pub(crate) fn occupy(&mut self, a: &Allocation) {
        for u in &a.units {
            self.cap.take(&self.stat.tree, u.leaf, u.share);
        }
        for c in &a.cores {
            let p = self.core_pos(*c).expect("allocated core exists");
            debug_assert!(self.cores_free[p / 64] >> (p % 64) & 1 == 1);
            self.cores_free[p / 64] &= !(1 << (p % 64));
            self.n_cores_free -= 1;
        }
        debug_assert!(a.mem_bytes <= self.mem_free);
        self.mem_free = self.mem_free.saturating_sub(a.mem_bytes);
    }

    pub(crate) fn release(&mut self, a: &Allocation) {
        for u in &a.units {
            self.cap.give(&self.stat.tree, u.leaf, u.share);
        }
        for c in &a.cores {
            let p = self.core_pos(*c).expect("allocated core exists");
            debug_assert!(self.cores_free[p / 64] >> (p % 64) & 1 == 0);
            self.cores_free[p / 64] |= 1 << (p % 64);
            self.n_cores_free += 1;
        }
        self.mem_free = (self.mem_free + a.mem_bytes).min(self.mem_total);
    }

    /// Best fit between two subtrees: less free share at the subtree, then at each ancestor
    /// upward, then the lower node id (the order of [`HostState::fit_key`], without allocating).
    fn cmp_fit(&self, a: NodeId, b: NodeId) -> std::cmp::Ordering {
        let free = |n: NodeId| self.cap.free[n.0 as usize];
        let (mut x, mut y) = (self.stat.tree.ancestors(a), self.stat.tree.ancestors(b));
        loop {
            match (x.next(), y.next()) {
                (Some(p), Some(q)) => match free(p).cmp(&free(q)) {
                    std::cmp::Ordering::Equal => continue,
                    o => return o,
                },
                (None, Some(_)) => return std::cmp::Ordering::Less,
                (Some(_), None) => return std::cmp::Ordering::Greater,
                (None, None) => return a.cmp(&b),
            }
        }
    }

    /// Free share of the subtree at `n`, and of each of its ancestors (best-fit keys).
    fn fit_key(&self, n: NodeId) -> Vec<u32> {
        self.stat
            .tree
            .ancestors(n)
            .map(|a| self.cap.free[a.0 as usize])
            .collect()
    }
}

/// Compute slices a fraction asks for on MIG: ceil(f × 7).
pub(crate) fn slices(f: f64) -> u32 {
    (f * 7.0 - 1e-9).ceil().max(1.0) as u32
}

/// Thousandths of a GPU a fraction asks for.
fn milli(f: f64) -> u32 {
    (f * WHOLE as f64 - 1e-9).ceil().max(1.0) as u32
}

/// What the request means on whole (non-MIG) GPUs of `gpu_mem` bytes each.
#[derive(Clone, Copy, Debug, PartialEq)]
enum WholeAsk {
    Gpus(u32),
    Share(u32),
}

fn whole_ask(req: &Request, gpu_mem: u64, cfg: &ClusterConfig) -> Result<WholeAsk, String> {
    let mem_gpus = req
        .mem_bytes
        .map_or(0, |m| m.div_ceil(gpu_mem.max(1)) as u32);
    if let Some(n) = req.leaves {
        return Ok(WholeAsk::Gpus(n.max(mem_gpus)));
    }
    let mem_share = req.mem_bytes.map_or(0, |m| {
        ((m as u128 * WHOLE as u128).div_ceil(gpu_mem.max(1) as u128)) as u64
    });
    match req.gpus {
        Some(f) if f > 1.0 && f.fract() != 0.0 && !cfg.round_up_fractions => Err(format!(
            "a GPU fraction above 1 must be a whole number of GPUs, not {f} (or set round_up_fractions)"
        )),
        Some(f) if f >= 1.0 => Ok(WholeAsk::Gpus((f.ceil() as u32).max(mem_gpus))),
        Some(f) => {
            let s = (milli(f) as u64).max(mem_share);
            Ok(if s <= WHOLE as u64 {
                WholeAsk::Share(s as u32)
            } else {
                WholeAsk::Gpus(mem_gpus)
            })
        }
        None if mem_share <= WHOLE as u64 => Ok(WholeAsk::Share(mem_share.max(1) as u32)),
        None => Ok(WholeAsk::Gpus(mem_gpus)),
    }
}

/// The cores and bytes of host memory a host must have free at least to hold the request
/// (`--mem=0`'s "all of it" counts as none here: it is checked per host); [`lower_bound`] is
/// the share at its root.
pub(crate) fn cores_and_memory_bounds(req: &Request) -> (u32, u64) {
    if req.exclusive {
        return (0, 0);
    }
    let units = if req.wants_gpu() {
        req.leaves.unwrap_or(1).max(1)
    } else {
        0
    };
    let cores = cores_needed(req, units as usize);
    let mem = match req.host_mem {
        Some(HostMem::All) | None => 0,
        Some(m) => m.bytes(cores, units, 0),
    };
    (cores, mem)
}

/// Free share at a host's root below which the request cannot fit there.
pub(crate) fn lower_bound(req: &Request) -> u32 {
    if !req.wants_gpu() || req.exclusive {
        return 0;
    }
    let by_leaves = req.leaves.map_or(1, |n| n.saturating_mul(WHOLE));
    let by_frac = req.gpus.map_or(1, |f| slices(f).min(milli(f)));
    by_leaves.max(by_frac).max(1)
}

/// A placement on one host: units, cores and bytes of host memory.
pub(crate) type Placed = (Vec<Unit>, Vec<CoreId>, u64);

/// Place a request on one host: its units, cores and memory, or None.
pub(crate) fn place(h: &HostState, req: &Request, cfg: &ClusterConfig) -> Option<Placed> {
    if req.exclusive {
        return h.is_idle().then(|| whole_host(h));
    }
    let mut units = Units::new(NO_UNIT);
    let (need, mem) = place_all(h, req, cfg, &mut units)?;
    // No more than the host's free cores (checked): a hostile request may ask for u32::MAX.
    let mut cores = Vec::with_capacity(need as usize);
    pick_cores(h, &units, req.cores_per_leaf, need, |c| cores.push(c))
        .then(|| (units.to_vec(), cores, mem))
}

/// Whether [`place`] would place the request on this host, without building the placement.
pub(crate) fn fits(h: &HostState, req: &Request, cfg: &ClusterConfig) -> bool {
    if req.exclusive {
        return h.is_idle();
    }
    let mut units = Units::new(NO_UNIT);
    place_all(h, req, cfg, &mut units)
        .is_some_and(|(need, _)| pick_cores(h, &units, req.cores_per_leaf, need, |_| ()))
}

/// Everything on the host, for `--exclusive`.
fn whole_host(h: &HostState) -> Placed {
    let units = h
        .model
        .leaves
        .iter()
        .map(|l| Unit {
            leaf: l.id,
            share: WHOLE,
        })
        .collect();
    let cores = h.model.cores.iter().map(|c| c.id).collect();
    let mem = if h.mem_total == u64::MAX {
        0
    } else {
        h.mem_total
    };
    (units, cores, mem)
}

/// The cores a job of `units` units gets: `cpus`, and at least `cores_per_leaf` per unit; at
/// least one.
pub(crate) fn cores_needed(req: &Request, units: usize) -> u32 {
    let per_units = (units as u32).saturating_mul(req.cores_per_leaf);
    req.cpus.max(per_units).max(1)
}

/// Bytes of host memory a job of `cores` cores and `units` units takes on this host.
fn memory_needed(h: &HostState, req: &Request, cores: u32, units: usize) -> u64 {
    match req.host_mem {
        None => 0,
        Some(HostMem::All) if h.mem_total == u64::MAX => 0,
        Some(m) => m.bytes(cores, units as u32, h.mem_total),
    }
}

/// The units of [`place`] into `units` (empty), then the count of cores and the memory they
/// need, when the host has that many free; None when something does not fit.
fn place_all(
    h: &HostState,
    req: &Request,
    cfg: &ClusterConfig,
    units: &mut Units,
) -> Option<(u32, u64)> {
    // Cheap bounds first: most jobs of a long queue that do not fit stop here.
    let min_units = if req.wants_gpu() {
        req.leaves.unwrap_or(1).max(1) as usize
    } else {
        0
    };
    let min_cores = cores_needed(req, min_units);
    if min_cores > h.n_cores_free || memory_needed(h, req, min_cores, min_units) > h.mem_free {
        return None;
    }
    if req.wants_gpu() && !place_units(h, req, cfg, units) {
        return None;
    }
    let need = cores_needed(req, units.len());
    let mem = memory_needed(h, req, need, units.len());
    (need <= h.n_cores_free && mem <= h.mem_free).then_some((need, mem))
}

/// The units of [`place`], into `units` (empty; its cores are picked for them after); false
/// when there are none.
fn place_units(h: &HostState, req: &Request, cfg: &ClusterConfig, units: &mut Units) -> bool {
    let wants_whole = req.leaf_type.as_deref() == Some("gpu");
    if h.stat.has_mig && !wants_whole && place_leaves(h, req, units) {
        return true;
    }
    if h.stat.whole_gpu_mem == 0 || req.leaf_type.as_deref().is_some_and(|t| t != "gpu") {
        return false;
    }
    let whole = match whole_ask(req, h.stat.whole_gpu_mem, cfg) {
        Ok(WholeAsk::Gpus(n)) => place_whole(h, n),
        Ok(WholeAsk::Share(s)) => place_share(h, s, req.placement.unwrap_or(cfg.default_strategy)),
        Err(_) => None,
    };
    whole.is_some_and(|w| {
        units.extend(w);
        true
    })
}

/// `n` idle whole GPUs under the cheapest subtree that holds them (Gaia Link; Singular when
/// n = 1, through the best-fit keys).
fn place_whole(h: &HostState, n: u32) -> Option<Vec<Unit>> {
    let m = &h.model;
    let idle = |g: u32| -> Option<LeafId> {
        let ls = &h.stat.gpu_leaves[g as usize];
        match ls.as_slice() {
            [l] if !m.leaf(*l).is_mig() && h.free(*l) == WHOLE => Some(*l),
            _ => None,
        }
    };
    let mut best: Option<(Vec<u64>, Vec<LeafId>)> = None;
    for &r in &h.stat.roots {
        let node = h.stat.tree.node(r);
        let mut cands: Vec<(Vec<u32>, LeafId)> = node
            .gpus
            .iter()
            .filter_map(|&g| idle(g).map(|l| (h.fit_key(h.stat.tree.gpu_node[g as usize]), l)))
            .collect();
        if (cands.len() as u32) < n {
            continue;
        }
        // Inside the subtree, fill the busiest corners first.
        cands.sort();
        let chosen: Vec<LeafId> = cands.into_iter().take(n as usize).map(|(_, l)| l).collect();
        let mut key = vec![node.access_cost as u64];
        key.extend(h.fit_key(r).into_iter().map(u64::from));
        key.push(r.0 as u64);
        if best.as_ref().is_none_or(|(b, _)| key < *b) {
            best = Some((key, chosen));
        }
    }
    let (_, mut chosen) = best?;
    chosen.sort_unstable();
    Some(
        chosen
            .into_iter()
            .map(|leaf| Unit { leaf, share: WHOLE })
            .collect(),
    )
}

/// A share of one whole GPU, chosen by strategy.
fn place_share(h: &HostState, share: u32, strategy: Strategy) -> Option<Vec<Unit>> {
    let m = &h.model;
    let cands = m
        .leaves
        .iter()
        .filter(|l| !l.is_mig() && h.free(l.id) >= share)
        .map(|l| l.id);
    let gpu_index = |l: LeafId| m.leaf(l).gpu;
    let leaf = match strategy {
        // Gaia Fragment / ModelGrid memory-optimized: the least free share that holds it; among
        // idle GPUs, the one in the busiest subtree (ancestor keys).
        Strategy::BestFit => {
            cands.min_by_key(|&l| (h.fit_key(h.stat.tree.leaf_node[l.0 as usize]), gpu_index(l)))
        }
        Strategy::FillFirst => cands.min_by_key(|&l| gpu_index(l)),
        Strategy::BalanceLoad => {
            cands.min_by_key(|&l| (std::cmp::Reverse(h.free(l)), gpu_index(l)))
        }
    }?;
    Some(vec![Unit { leaf, share }])
}

/// `need` cores for the units (`per` for each, the rest dealt round-robin over them), each
/// nearest its unit's GPU first, exclusive; for no units, a CPU-only job's cores. `take` gets
/// each one; false when they are not all there.
fn pick_cores(
    h: &HostState,
    units: &[Unit],
    per: u32,
    need: u32,
    mut take: impl FnMut(CoreId),
) -> bool {
    if need > h.n_cores_free {
        return false;
    }
    if units.is_empty() {
        return pick_cpu_cores(h, need, take);
    }
    let n = units.len() as u32;
    let per = per.min(need / n);
    let (extra, rest) = ((need - per * n) / n, (need - per * n) % n);
    // The free cores' bitmap, on the stack for hosts of up to 256 cores.
    let mut free = h.cores_free.clone();
    for (i, u) in units.iter().enumerate() {
        let g = h.stat.leaf_gpu[u.leaf.0 as usize] as usize;
        let mut left = per + extra + u32::from((i as u32) < rest);
        for &p in &h.stat.core_order[g] {
            if left == 0 {
                break;
            }
            let p = p as usize;
            if free[p / 64] >> (p % 64) & 1 == 1 {
                free[p / 64] &= !(1 << (p % 64));
                take(h.model.cores[p].id);
                left -= 1;
            }
        }
        if left > 0 {
            return false;
        }
    }
    true
}

/// `need` cores for a CPU-only job: from the NUMA node with the fewest free cores that holds
/// them all, else from every node, those with the most free first.
fn pick_cpu_cores(h: &HostState, need: u32, mut take: impl FnMut(CoreId)) -> bool {
    let free_in = |mask: &Scratch<u64, 4>| -> u32 {
        mask.iter()
            .zip(h.cores_free.iter())
            .map(|(m, f)| (m & f).count_ones())
            .sum()
    };
    let nodes = &h.stat.numa_cores;
    let one = nodes
        .iter()
        .map(|(order, mask)| (free_in(mask), order))
        .filter(|&(f, _)| f >= need)
        .min_by_key(|&(f, _)| f);
    let mut left = need;
    let mut take_from = |order: &[u32], left: &mut u32| {
        for &p in order {
            if *left == 0 {
                return;
            }
            let p = p as usize;
            if h.cores_free[p / 64] >> (p % 64) & 1 == 1 {
                take(h.model.cores[p].id);
                *left -= 1;
            }
        }
    };
    match one {
        Some((_, order)) => take_from(order, &mut left),
        None => {
            let mut by_free: Scratch<(u32, usize), 8> = Scratch::new((0, 0));
            for (i, (_, mask)) in nodes.iter().enumerate() {
                by_free.push((u32::MAX - free_in(mask), i));
            }
            by_free.sort_unstable();
            for &(_, i) in by_free.iter() {
                take_from(&nodes[i].0, &mut left);
            }
        }
    }
    left == 0
}

/// For each NUMA node, its core positions in a CPU-only job's order (cores no GPU lists as
/// near first, then from the highest id down) and their bitmap.
fn numa_core_order(model: &HostModel, n: usize) -> Vec<(Vec<u32>, Scratch<u64, 4>)> {
    let near = |c: CoreId| {
        model
            .gpus
            .iter()
            .filter(|g| g.cpu_affinity.contains(&c))
            .count()
    };
    let mut nodes: Vec<u32> = model.cores.iter().map(|c| c.numa_node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .map(|node| {
            let mut order: Vec<u32> = (0..model.cores.len() as u32)
                .filter(|&p| model.cores[p as usize].numa_node == node)
                .collect();
            order.sort_by_key(|&p| {
                let c = model.cores[p as usize];
                (near(c.id), std::cmp::Reverse(c.id))
            });
            let mut mask = Scratch::filled(0, n.div_ceil(64));
            for &p in &order {
                mask[p as usize / 64] |= 1 << (p % 64);
            }
            (order, mask)
        })
        .collect()
}

/// A host's RAM less the reserve; u64::MAX (no limit) when its RAM is unknown.
fn schedulable_memory(model: &HostModel, reserved_memory: u64) -> u64 {
    match model.memory_bytes {
        0 => u64::MAX,
        ram => ram.saturating_sub(reserved_memory),
    }
}

/// Why a request fits no idle host, for the admission error.
pub(crate) fn why_not(idle: &[HostState], req: &Request, cfg: &ClusterConfig) -> String {
    let max = |f: &dyn Fn(&HostState) -> u64| idle.iter().map(f).max().unwrap_or(0);
    if let Some(t) = req.leaf_type.as_deref() {
        let have = |h: &HostState| h.model.leaves.iter().filter(|l| l.profile == t).count() as u64;
        if max(&have) == 0 {
            return format!("no host has leaves of type {t}");
        }
    }
    let leaves = max(&|h| h.model.leaves.len() as u64);
    let k = req.leaves.unwrap_or(0).max(req.gpus.map_or(0, slices)) as u64;
    if idle.iter().all(|h| !h.stat.has_mig) {
        for h in idle {
            if let Err(e) = whole_ask(req, h.stat.whole_gpu_mem, cfg) {
                return e;
            }
        }
    }
    if k > leaves {
        return format!("asks for {k} leaves but the largest host has {leaves}");
    }
    if let Some(mem) = req.mem_bytes {
        let most = max(&|h| h.model.total_memory_bytes());
        if mem > most {
            return format!(
                "asks for {} of GPU memory but the largest host has {}",
                gib(mem),
                gib(most)
            );
        }
    }
    let cores = max(&|h| h.model.cores.len() as u64);
    let need = if req.wants_gpu() {
        (k.max(1) * req.cores_per_leaf as u64).max(req.cpus.into())
    } else {
        req.cpus.max(1).into()
    };
    if need > cores && !req.exclusive {
        return if need == u64::from(req.cpus) {
            format!("asks for {need} cores but the largest host has {cores}")
        } else {
            format!(
                "asks for {need} cores ({} per leaf) but the largest host has {cores}",
                req.cores_per_leaf
            )
        };
    }
    if let Some(m) = req.host_mem {
        let most = max(&|h| h.mem_total);
        let cores = need.min(cores) as u32;
        let asked = m.bytes(cores, k.max(1) as u32, most);
        if asked > most {
            return format!(
                "asks for {} of host memory ({m}) but the largest host has {} for jobs",
                gib(asked),
                gib(most)
            );
        }
    }
    "no host can hold this combination of leaves, memory and cores".into()
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Whether host memory or cores alone keep a job off this host now ("memory", "cores"), by
/// the bounds a placement checks first (cheap enough for every row of a listing); None when
/// they do not (its leaves are short, or it fits).
pub(crate) fn shortage(h: &HostState, req: &Request) -> Option<&'static str> {
    if req.exclusive {
        return if h.mem_free < h.mem_total {
            Some("memory")
        } else if (h.n_cores_free as usize) < h.model.cores.len() {
            Some("cores")
        } else {
            None
        };
    }
    let min_units = if req.wants_gpu() {
        req.leaves.unwrap_or(1).max(1) as usize
    } else {
        0
    };
    let min_cores = cores_needed(req, min_units);
    if memory_needed(h, req, min_cores, min_units) > h.mem_free {
        Some("memory")
    } else if min_cores > h.n_cores_free {
        Some("cores")
    } else {
        None
    }
}

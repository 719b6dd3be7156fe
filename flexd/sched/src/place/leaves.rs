//! MIG leaves (rules 1 and 2 of [`super`]): the smallest set of free leaves on one subtree of
//! the access-cost tree, dealt round-robin over its GPUs, of the size-aware preferred type.

use super::scratch::Scratch;
use super::{HostState, Units};
use crate::alloc::Unit;
use gres_plugin::tree::{NodeId, WHOLE};
use gres_plugin::{LeafId, Request};

/// A host's leaves (on the stack up to 64).
type Leaves = Scratch<LeafId, 64>;

/// The leaves of one job (on the stack up to 16).
type Chosen = Scratch<LeafId, 16>;

/// Memory of leaves, largest first (on the stack up to 64).
type Mems = Scratch<u64, 64>;

/// How a subtree's set of leaves ranks, best first: leaves needed, most leaves on one GPU,
/// leaves of the non-preferred type, access cost (best fit breaks the remaining ties).
type LeafKey = (u32, usize, usize, u32);

/// The free leaves a request may take, per GPU position, in one buffer: GPU `g` owns
/// `flat[at[g]..at[g + 1]]`. `lo` and `hi` are the least and most memory among them.
struct FreeLeaves {
    flat: Leaves,
    at: Scratch<u32, 17>,
    lo: u64,
    hi: u64,
}

impl FreeLeaves {
    /// Lists them in place (the lists are on the stack: built where they are used, not moved).
    fn list(&mut self, h: &HostState, req: &Request) {
        let stat = &h.stat;
        for ls in &stat.gpu_leaves {
            self.at.push(self.flat.len() as u32);
            for &l in ls {
                let i = l.0 as usize;
                if !stat.leaf_mig[i] || h.free(l) != WHOLE {
                    continue;
                }
                if req
                    .leaf_type
                    .as_deref()
                    .is_none_or(|t| h.model.leaf(l).profile == t)
                {
                    self.flat.push(l);
                    self.lo = self.lo.min(stat.leaf_mem[i]);
                    self.hi = self.hi.max(stat.leaf_mem[i]);
                }
            }
        }
        self.at.push(self.flat.len() as u32);
    }

    fn gpu(&self, g: u32) -> &[LeafId] {
        &self.flat[self.at[g as usize] as usize..self.at[g as usize + 1] as usize]
    }

    /// Put each GPU's leaves of the preferred memory first, then by id.
    fn prefer(&mut self, mem_of: impl Fn(LeafId) -> u64, pref_mem: u64) {
        for g in 0..self.at.len() - 1 {
            let (a, b) = (self.at[g] as usize, self.at[g + 1] as usize);
            self.flat[a..b].sort_by_key(|&l| (mem_of(l) != pref_mem, l));
        }
    }
}

/// What one placement asks of the leaves: how many, how much memory in all, and the leaf
/// memory it prefers.
struct LeafAsk {
    k: u32,
    need_mem: u64,
    pref_mem: u64,
}

/// MIG leaves: the smallest set on one subtree, spread round-robin over its GPUs, into `units`
/// (empty); false when there is none.
pub(super) fn place_leaves(h: &HostState, req: &Request, units: &mut Units) -> bool {
    let mem_of = |l: LeafId| h.stat.leaf_mem[l.0 as usize];
    let k = req
        .leaves
        .unwrap_or(0)
        .max(req.gpus.map_or(0, super::slices))
        .max(1);
    let need_mem = req.mem_bytes.unwrap_or(0);
    let mut free = FreeLeaves {
        flat: Leaves::new(LeafId(0)),
        at: Scratch::new(0),
        lo: u64::MAX,
        hi: 0,
    };
    free.list(h, req);
    if (free.flat.len() as u32) < k {
        return false;
    }
    // How many leaves the smallest set on the whole host takes, and the preferred leaf memory:
    // the most for a 1-leaf job, the least for a larger one.
    let n_host = if need_mem == 0 {
        k
    } else {
        let mut all = Mems::new(0);
        all.extend(free.flat.iter().map(|&l| mem_of(l)));
        all.sort_unstable_by(|a, b| b.cmp(a));
        match smallest_set(&all, k, need_mem) {
            Some(n) => n,
            None => return false,
        }
    };
    let pref_mem = if n_host == 1 { free.hi } else { free.lo };
    free.prefer(mem_of, pref_mem);
    let ask = LeafAsk {
        k,
        need_mem,
        pref_mem,
    };
    // The best subtree so far and its leaves; `chosen` is each candidate's, swapped in when
    // it is better.
    let mut best: Option<(LeafKey, NodeId)> = None;
    let (mut best_leaves, mut chosen) = (Chosen::new(LeafId(0)), Chosen::new(LeafId(0)));
    for &r in &h.stat.roots {
        chosen.clear();
        let Some(head) = subtree_choice(h, &free, &ask, r, &mut chosen) else {
            continue;
        };
        let better = match &best {
            None => true,
            Some((bh, br)) => head.cmp(bh).then_with(|| h.cmp_fit(r, *br)).is_lt(),
        };
        if better {
            best = Some((head, r));
            std::mem::swap(&mut best_leaves, &mut chosen);
        }
    }
    if best.is_none() {
        return false;
    }
    best_leaves.sort_unstable();
    units.extend(best_leaves.iter().map(|&leaf| Unit { leaf, share: WHOLE }));
    true
}

/// The leaves subtree `r` would give (into `chosen`, empty), and how they rank: leaves needed,
/// the most on one GPU, leaves of the other type, access cost (best fit breaks ties in the
/// caller).
fn subtree_choice(
    h: &HostState,
    free: &FreeLeaves,
    ask: &LeafAsk,
    r: NodeId,
    chosen: &mut Chosen,
) -> Option<LeafKey> {
    let mem_of = |l: LeafId| h.stat.leaf_mem[l.0 as usize];
    let slice = |g: u32| free.gpu(g);
    let node = h.stat.tree.node(r);
    let gpus = &node.gpus;
    let free_here: usize = gpus.iter().map(|&g| slice(g).len()).sum();
    if (free_here as u32) < ask.k {
        return None;
    }
    let n = if ask.need_mem == 0 {
        ask.k
    } else {
        let mut mems = Mems::new(0);
        mems.extend(
            gpus.iter()
                .flat_map(|&g| slice(g).iter().map(|&l| mem_of(l))),
        );
        mems.sort_unstable_by(|a, b| b.cmp(a));
        smallest_set(&mems, ask.k, ask.need_mem)?
    };
    let mut spread = round_robin(gpus, &slice, n as usize, chosen)?;
    if ask.need_mem > 0 {
        if !top_up_memory(chosen, gpus, &slice, ask.need_mem, mem_of) {
            return None;
        }
        spread = max_per_gpu(h, chosen);
    }
    let nonpref = chosen
        .iter()
        .filter(|&&l| mem_of(l) != ask.pref_mem)
        .count();
    Some((n, spread, nonpref, node.access_cost))
}

fn max_per_gpu(h: &HostState, chosen: &[LeafId]) -> usize {
    let mut counts: Scratch<usize, 16> = Scratch::filled(0, h.stat.gpu_leaves.len());
    for &l in chosen {
        counts[h.stat.leaf_gpu[l.0 as usize] as usize] += 1;
    }
    counts.iter().copied().max().unwrap_or(0)
}

/// Fewest leaves (at least `k`) whose memory, largest first, reaches `mem`.
fn smallest_set(mems_desc: &[u64], k: u32, mem: u64) -> Option<u32> {
    let mut sum = 0u64;
    for (i, m) in mems_desc.iter().enumerate() {
        sum += m;
        if sum >= mem && i as u32 + 1 >= k {
            return Some(i as u32 + 1);
        }
    }
    None
}

/// Deal `n` leaves over `gpus` into `out`: each next leaf from the GPU with the fewest dealt so
/// far (ties: the one with the most left, then the lowest position). Returns the most dealt to
/// one GPU; None when the GPUs hold fewer than `n`.
///
/// The dealing goes in rounds: in round `r` every GPU with more than `r` leaves gets its
/// `r + 1`-th, those with the most leaves first (ties: the lowest position). So the GPUs with
/// more than `r` leaves are a prefix of that order, and after the full rounds `r` a GPU holds
/// `min(leaves, r)` and the first `rest` of that prefix one more: the counts are computed
/// instead of dealt leaf by leaf, and each GPU's first leaves taken at once (`out` lists them
/// by GPU, not in dealing order; its callers use it as a set).
fn round_robin<'a>(
    gpus: &[u32],
    slice: &impl Fn(u32) -> &'a [LeafId],
    n: usize,
    out: &mut Chosen,
) -> Option<usize> {
    // (leaves, GPU) of each GPU, most leaves first, on the stack for any host of up to 16 GPUs.
    let mut order: Scratch<(usize, u32), 16> = Scratch::new((0, 0));
    order.extend(gpus.iter().map(|&g| (slice(g).len(), g)));
    order.sort_unstable_by_key(|&(len, g)| (std::cmp::Reverse(len), g));
    // Full rounds, and the leaves left for the last, partial one.
    let (mut rounds, mut rest) = (0, n);
    loop {
        // The GPUs with a leaf for round `rounds`.
        let open = order.partition_point(|&(len, _)| len > rounds);
        if rest < open || rest == 0 {
            break;
        }
        if open == 0 {
            return None;
        }
        rest -= open;
        rounds += 1;
    }
    let mut spread = 0;
    for (rank, &(len, g)) in order.iter().enumerate() {
        let taken = len.min(rounds) + usize::from(rank < rest);
        out.extend(slice(g)[..taken].iter().copied());
        spread = spread.max(taken);
    }
    Some(spread)
}

/// Swap small leaves for larger free ones in the subtree until the memory is met.
fn top_up_memory<'a>(
    chosen: &mut [LeafId],
    gpus: &[u32],
    slice: &impl Fn(u32) -> &'a [LeafId],
    need: u64,
    mem_of: impl Fn(LeafId) -> u64,
) -> bool {
    let mut spare = Leaves::new(LeafId(0));
    spare.extend(
        gpus.iter()
            .flat_map(|&g| slice(g).iter().copied())
            .filter(|l| !chosen.contains(l)),
    );
    spare.sort_by_key(|&l| (std::cmp::Reverse(mem_of(l)), l));
    let mut sum: u64 = chosen.iter().map(|&l| mem_of(l)).sum();
    let mut spare = spare.iter().copied();
    while sum < need {
        let Some(big) = spare.next() else {
            return false;
        };
        let (i, &small) = chosen
            .iter()
            .enumerate()
            .min_by_key(|(_, &l)| (mem_of(l), std::cmp::Reverse(l)))
            .expect("non-empty");
        if mem_of(big) <= mem_of(small) {
            return false;
        }
        sum = sum - mem_of(small) + mem_of(big);
        chosen[i] = big;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{round_robin, Chosen};
    use gres_plugin::LeafId;
    use proptest::prelude::*;

    /// The dealing itself, one leaf at a time, as [`round_robin`] describes it.
    fn dealt(gpus: &[u32], lists: &[Vec<LeafId>], n: usize) -> Option<(Vec<LeafId>, usize)> {
        let mut taken = vec![0usize; gpus.len()];
        let mut out = Vec::new();
        for _ in 0..n {
            let len = |i: usize| lists[gpus[i] as usize].len();
            let (i, _) = gpus
                .iter()
                .enumerate()
                .filter(|&(i, _)| taken[i] < len(i))
                .min_by_key(|&(i, &g)| (taken[i], std::cmp::Reverse(len(i) - taken[i]), g))?;
            out.push(lists[gpus[i] as usize][taken[i]]);
            taken[i] += 1;
        }
        Some((out, taken.into_iter().max().unwrap_or(0)))
    }

    proptest! {
        #[test]
        fn counts_give_the_leaves_of_the_dealing(
            lens in proptest::collection::vec(0usize..9, 1..20),
            pick in proptest::collection::vec(any::<bool>(), 20),
            n in 0usize..40,
        ) {
            // Leaves numbered by GPU; a subset of the GPUs in position order, as subtrees have.
            let mut next = 0u32;
            let lists: Vec<Vec<LeafId>> = lens
                .iter()
                .map(|&l| (0..l).map(|_| { next += 1; LeafId(next) }).collect())
                .collect();
            let gpus: Vec<u32> = (0..lens.len() as u32).filter(|&g| pick[g as usize]).collect();
            let slice = |g: u32| lists[g as usize].as_slice();
            let mut out = Chosen::new(LeafId(0));
            let got = round_robin(&gpus, &slice, n, &mut out);
            let want = dealt(&gpus, &lists, n);
            prop_assert_eq!(got.is_some(), want.is_some());
            if let (Some(spread), Some((mut leaves, most))) = (got, want) {
                let mut mine = out.to_vec();
                mine.sort_unstable();
                leaves.sort_unstable();
                prop_assert_eq!(mine, leaves);
                prop_assert_eq!(spread, most);
            }
        }
    }
}

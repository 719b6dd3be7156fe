//! The Gaia resource-access cost tree of one host: root → NUMA node → host bridge → PCIe switch
//! → GPU → leaves. Each node knows the link its children talk over, its access cost and (through
//! a [`Capacity`]) how much of it is free.
//!
//! The shape is fixed once per host and shared; the free counters live apart in [`Capacity`],
//! which the scheduler core clones cheaply when it plans ahead.

use crate::ids::{GpuIndex, LeafId};
use crate::model::{HostModel, LinkLevel};
use serde::Serialize;

/// Index of a node in a [`CostTree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NodeId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum NodeKind {
    Root,
    Numa(u32),
    HostBridge(u32),
    PcieSwitch(u32),
    Gpu(GpuIndex),
    Leaf(LeafId),
}

#[derive(Clone, Debug, Serialize)]
pub struct TreeNode {
    pub kind: NodeKind,
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    /// The slowest link between GPUs under different children (the tier's own level where the
    /// node has a single child); None for GPUs and leaves.
    pub link: Option<LinkLevel>,
    /// Gaia access cost: the cost of `link`; 0 for GPUs and leaves.
    pub access_cost: u32,
    /// Leaves (schedulable units) under this node.
    pub units: u32,
    /// Position of this node's GPUs in `HostModel::gpus`, for group nodes and GPUs.
    pub gpus: Vec<u32>,
}

/// One share of a unit, in thousandths: a MIG leaf is taken whole (1000), a whole GPU may be
/// shared by fraction.
pub const WHOLE: u32 = 1000;

/// The fixed shape of a host's cost tree.
#[derive(Clone, Debug, Serialize)]
pub struct CostTree {
    pub nodes: Vec<TreeNode>,
    /// Node of each leaf, by `LeafId`.
    pub leaf_node: Vec<NodeId>,
    /// Node of each GPU, by position in `HostModel::gpus`.
    pub gpu_node: Vec<NodeId>,
}

impl CostTree {
    pub fn root(&self) -> NodeId {
        NodeId(0)
    }

    pub fn node(&self, id: NodeId) -> &TreeNode {
        &self.nodes[id.0 as usize]
    }

    /// Build the tree of a host model.
    pub fn build(host: &HostModel) -> Self {
        let mut t = CostTree {
            nodes: Vec::new(),
            leaf_node: vec![NodeId(0); host.leaves.len()],
            gpu_node: vec![NodeId(0); host.gpus.len()],
        };
        let all: Vec<u32> = (0..host.gpus.len() as u32).collect();
        let root = t.push(NodeKind::Root, None, all.clone());
        let keyed = |f: &dyn Fn(usize) -> u32, within: &[u32]| {
            let mut keys: Vec<u32> = within.iter().map(|&p| f(p as usize)).collect();
            keys.dedup();
            let mut seen = Vec::new();
            for k in keys {
                if !seen.contains(&k) {
                    seen.push(k);
                }
            }
            seen
        };
        for numa in keyed(&|p| host.gpus[p].numa_node, &all) {
            let in_numa: Vec<u32> = all
                .iter()
                .copied()
                .filter(|&p| host.gpus[p as usize].numa_node == numa)
                .collect();
            let n = t.push(NodeKind::Numa(numa), Some(root), in_numa.clone());
            for br in keyed(&|p| host.gpus[p].host_bridge, &in_numa) {
                let in_br: Vec<u32> = in_numa
                    .iter()
                    .copied()
                    .filter(|&p| host.gpus[p as usize].host_bridge == br)
                    .collect();
                let b = t.push(NodeKind::HostBridge(br), Some(n), in_br.clone());
                for sw in keyed(&|p| host.gpus[p].pcie_switch, &in_br) {
                    let in_sw: Vec<u32> = in_br
                        .iter()
                        .copied()
                        .filter(|&p| host.gpus[p as usize].pcie_switch == sw)
                        .collect();
                    let s = t.push(NodeKind::PcieSwitch(sw), Some(b), in_sw.clone());
                    for &p in &in_sw {
                        let g =
                            t.push(NodeKind::Gpu(host.gpus[p as usize].index), Some(s), vec![p]);
                        t.gpu_node[p as usize] = g;
                        for leaf in host
                            .leaves
                            .iter()
                            .filter(|l| l.gpu == host.gpus[p as usize].index)
                        {
                            let l = t.push(NodeKind::Leaf(leaf.id), Some(g), Vec::new());
                            t.leaf_node[leaf.id.0 as usize] = l;
                        }
                    }
                }
            }
        }
        // Units, then links and costs, bottom-up (children always follow their parent).
        for i in (0..t.nodes.len()).rev() {
            let units = match t.nodes[i].kind {
                NodeKind::Leaf(_) => 1,
                _ => t.nodes[i]
                    .children
                    .iter()
                    .map(|c| t.nodes[c.0 as usize].units)
                    .sum(),
            };
            t.nodes[i].units = units;
            let link = t.link_of(host, i);
            t.nodes[i].link = link;
            t.nodes[i].access_cost = link.map_or(0, LinkLevel::access_cost);
        }
        t
    }

    fn push(&mut self, kind: NodeKind, parent: Option<NodeId>, gpus: Vec<u32>) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(TreeNode {
            kind,
            parent,
            children: Vec::new(),
            link: None,
            access_cost: 0,
            units: 0,
            gpus,
        });
        if let Some(p) = parent {
            self.nodes[p.0 as usize].children.push(id);
        }
        id
    }

    fn link_of(&self, host: &HostModel, i: usize) -> Option<LinkLevel> {
        let node = &self.nodes[i];
        let tier = match node.kind {
            NodeKind::Root => LinkLevel::Sys,
            NodeKind::Numa(_) => LinkLevel::Node,
            NodeKind::HostBridge(_) => LinkLevel::Phb,
            NodeKind::PcieSwitch(_) => LinkLevel::Pix,
            NodeKind::Gpu(_) | NodeKind::Leaf(_) => return None,
        };
        let mut worst: Option<LinkLevel> = None;
        for (ci, &a) in node.children.iter().enumerate() {
            for &b in &node.children[ci + 1..] {
                for &ga in &self.nodes[a.0 as usize].gpus {
                    for &gb in &self.nodes[b.0 as usize].gpus {
                        let l = host.links[ga as usize][gb as usize];
                        worst = Some(worst.map_or(l, |w| w.max(l)));
                    }
                }
            }
        }
        Some(worst.unwrap_or(tier))
    }

    /// Nodes from `id` up to the root, `id` first.
    pub fn ancestors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::successors(Some(id), move |n| self.node(*n).parent)
    }

    /// The subtrees a job may be placed under: GPUs, and group nodes with more than one child
    /// (a group with one child holds exactly what that child holds, at a higher cost).
    pub fn placement_roots(&self) -> Vec<NodeId> {
        (0..self.nodes.len() as u32)
            .map(NodeId)
            .filter(|&n| match self.node(n).kind {
                NodeKind::Gpu(_) => true,
                NodeKind::Leaf(_) => false,
                _ => self.node(n).children.len() > 1,
            })
            .collect()
    }
}

/// Free capacity of every node of one host's [`CostTree`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Capacity {
    /// Free share per node, in thousandths of a unit, summed over its leaves.
    pub free: Vec<u32>,
    /// Fully idle units per node.
    pub idle: Vec<u32>,
}

impl Capacity {
    /// Everything free.
    pub fn new(tree: &CostTree) -> Self {
        Self {
            free: tree.nodes.iter().map(|n| n.units * WHOLE).collect(),
            idle: tree.nodes.iter().map(|n| n.units).collect(),
        }
    }

    pub fn leaf_free(&self, tree: &CostTree, leaf: LeafId) -> u32 {
        self.free[tree.leaf_node[leaf.0 as usize].0 as usize]
    }

    /// Take `share` thousandths of a leaf. Panics if it is not free: the core checks first.
    pub fn take(&mut self, tree: &CostTree, leaf: LeafId, share: u32) {
        let node = tree.leaf_node[leaf.0 as usize];
        let before = self.free[node.0 as usize];
        assert!(
            share <= before,
            "leaf {leaf} has {before} free, {share} asked"
        );
        let was_idle = before == WHOLE;
        for a in tree.ancestors(node) {
            self.free[a.0 as usize] -= share;
            if was_idle && share > 0 {
                self.idle[a.0 as usize] -= 1;
            }
        }
    }

    /// Give back `share` thousandths of a leaf.
    pub fn give(&mut self, tree: &CostTree, leaf: LeafId, share: u32) {
        let node = tree.leaf_node[leaf.0 as usize];
        let after = self.free[node.0 as usize] + share;
        assert!(after <= WHOLE, "leaf {leaf} would have {after} free");
        let now_idle = after == WHOLE && share > 0;
        for a in tree.ancestors(node) {
            self.free[a.0 as usize] += share;
            if now_idle {
                self.idle[a.0 as usize] += 1;
            }
        }
    }

    /// GPUs with some but not all of their share taken (Gaia's fragment nodes).
    pub fn fragments(&self, tree: &CostTree) -> usize {
        tree.gpu_node
            .iter()
            .filter(|g| {
                let n = tree.node(**g);
                let f = self.free[g.0 as usize];
                f > 0 && f < n.units * WHOLE
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::build_host;
    use crate::probe::topology::{builtin, parse};

    fn host(name: &str) -> HostModel {
        build_host(&parse(builtin(name).unwrap(), name).unwrap()).unwrap()
    }

    #[test]
    fn p4_tree_has_gaia_shape() {
        let h = host("p4-x4");
        let t = CostTree::build(&h);
        let root = t.node(t.root());
        assert_eq!(root.link, Some(LinkLevel::Sys));
        assert_eq!(root.children.len(), 2);
        let numa0 = t.node(root.children[0]);
        // one bridge with one switch holding GPUs 0 and 1
        let sw = t.node(t.node(numa0.children[0]).children[0]);
        assert!(matches!(sw.kind, NodeKind::PcieSwitch(_)));
        assert_eq!(sw.link, Some(LinkLevel::Pix));
        assert_eq!(sw.gpus, vec![0, 1]);
        assert!(sw.access_cost < root.access_cost);
        assert_eq!(root.units, 4);
    }

    #[test]
    fn nvlink_makes_the_whole_h100_host_cheap() {
        let h = host("h100-80gb-x8");
        let t = CostTree::build(&h);
        assert_eq!(t.node(t.root()).link, Some(LinkLevel::Nv(18)));
        assert_eq!(t.node(t.root()).units, 56);
        // roots: 8 GPUs, 4 switches, 2 NUMA nodes (bridges have one child), the root
        assert_eq!(t.placement_roots().len(), 8 + 4 + 2 + 1);
    }

    #[test]
    fn capacity_tracks_idle_and_fragments() {
        let h = host("p4-x4");
        let t = CostTree::build(&h);
        let mut c = Capacity::new(&t);
        c.take(&t, LeafId(0), 500);
        assert_eq!(c.fragments(&t), 1);
        assert_eq!(c.idle[0], 3);
        assert_eq!(c.free[0], 3500);
        c.take(&t, LeafId(0), 500);
        assert_eq!(c.fragments(&t), 0);
        c.give(&t, LeafId(0), 1000);
        assert_eq!(c, Capacity::new(&t));
    }
}

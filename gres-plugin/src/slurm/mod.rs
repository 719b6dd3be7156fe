//! Flex on a Slurm cluster. Slurm decides which devices a job gets; Flex decides each task's
//! leaf, environment and cores.
//!
//! - [`conf`]: what `flexgres` prints: gres.conf lines (one per MIG leaf, in the order slurmd
//!   numbers them), the node line, and the optional job_submit.lua with the size-aware rule.
//! - [`step`]: reading a step's allocation from the variables Slurm sets, and the rank slot of
//!   each task, for the SPANK plugin (`flex-spank`) and for flexrun inside an allocation.
//!
//! Everything here is pure (text in, text out) except [`conf::read_mig_minors`].

pub mod conf;
pub mod step;

use crate::model::{HostModel, Leaf};

/// Why a Slurm allocation or configuration could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlurmError {
    #[error("{var}={value:?}: {why}")]
    BadVar {
        var: &'static str,
        value: String,
        why: String,
    },
    #[error("slurm device index {index} is beyond this host's {count} GPUs in gres order (is gres.conf from `flexgres conf` of this host?)")]
    NoSuchDevice { index: usize, count: usize },
    #[error("{0} is not a leaf of this host")]
    UnknownUuid(String),
    #[error("slurm gave device indexes ({0}) but no host model was given to map them (set topology= in plugstack.conf or FLEX_TOPOLOGY)")]
    NoHostModel(String),
    #[error("task {local_rank} on this node has no leaf: the step has {leaves} GPU(s) here for {tasks} task(s); ask for one GPU per task")]
    TooFewLeaves {
        local_rank: usize,
        leaves: usize,
        tasks: usize,
    },
    #[error("gpu {gpu} gi {gi} ci {ci}: no {what} in the mig-minors table")]
    NoMinor {
        gpu: u32,
        gi: u32,
        ci: u32,
        what: &'static str,
    },
    #[error("mig-minors line {line}: {text:?} is not `NAME MINOR`")]
    MigMinors { line: usize, text: String },
}

/// The host's GPUs in the order slurmd numbers them: grouped by type (profile), the types in
/// order of first appearance, leaf order inside each type. slurmd sorts gres.conf records this
/// way, so `flexgres conf` prints them in this order and device index `i` of a step is
/// `gres_order(host)[i]` on both sides.
pub fn gres_order(host: &HostModel) -> Vec<&Leaf> {
    let mut types: Vec<String> = Vec::new();
    for l in &host.leaves {
        let t = gres_type(host, l);
        if !types.contains(&t) {
            types.push(t);
        }
    }
    types
        .iter()
        .flat_map(|t| host.leaves.iter().filter(move |l| gres_type(host, l) == *t))
        .collect()
}

/// The gres `Type=` of a leaf: its MIG profile, or for a whole GPU its model in lower case
/// (`NVIDIA A100-PCIE-40GB` → `a100-pcie-40gb`).
pub fn gres_type(host: &HostModel, leaf: &Leaf) -> String {
    if leaf.is_mig() {
        return leaf.profile.clone();
    }
    let name = host.gpu(leaf.gpu).map_or("gpu", |g| g.name.as_str());
    let name = name.strip_prefix("NVIDIA ").unwrap_or(name);
    name.to_ascii_lowercase().replace(' ', "-")
}

/// The cores near a leaf: its parent GPU's CPU affinity.
pub fn near_cores(host: &HostModel, leaf: &Leaf) -> Vec<u32> {
    host.gpu(leaf.gpu)
        .map(|g| g.cpu_affinity.iter().map(|c| c.0).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{build_host, topology};

    #[test]
    fn gres_order_groups_types_in_first_appearance() {
        let raw = topology::parse(topology::builtin("a100-40gb-x2").unwrap(), "a").unwrap();
        let h = build_host(&raw).unwrap();
        let order: Vec<(String, u32)> = gres_order(&h)
            .iter()
            .map(|l| (l.profile.clone(), l.gpu.0))
            .collect();
        let mut want: Vec<(String, u32)> = Vec::new();
        want.extend((0..6).map(|_| ("1g.5gb".to_string(), 0)));
        want.extend((0..6).map(|_| ("1g.5gb".to_string(), 1)));
        want.push(("1g.10gb".into(), 0));
        want.push(("1g.10gb".into(), 1));
        assert_eq!(order, want);
        assert_eq!(
            near_cores(&h, gres_order(&h)[12]),
            (0..16).collect::<Vec<_>>()
        );
        let p = build_host(&topology::parse(topology::builtin("p4-x4").unwrap(), "p").unwrap())
            .unwrap();
        assert!(gres_type(&p, &p.leaves[0]).chars().all(|c| c != ' '));
    }
}

//! A Slurm step's allocation, read from the variables slurmstepd gives each task, and each
//! task's rank slot. The SPANK plugin and flexrun (inside `sbatch` or `srun`) both call these,
//! and both hand the slot to [`crate::env::slot_env`], so a task gets the same variables from
//! either as a Flex job's rank gets from flexrun.
//!
//! How the step's leaves are found: where Slurm exports MIG UUIDs in `CUDA_VISIBLE_DEVICES`
//! (NVML autodetection), those are the leaves. Otherwise Slurm exports device indexes
//! (`SLURM_STEP_GPUS`, else `SLURM_JOB_GPUS`, else `CUDA_VISIBLE_DEVICES`), which count the
//! host's GPUs in [`super::gres_order`], the order `flexgres conf` writes them: index `i` is
//! leaf `gres_order(host)[i]` of the host model (NVML's, or the simulated topology file's).

use super::{gres_order, near_cores, SlurmError};
use crate::env::{parse_nccl_mode, slot_env, NcclMode, RankPlan, RankSlot, World};
use crate::model::HostModel;

/// The step's GPUs on this node, as Slurm exported them.
#[derive(Clone, Debug, PartialEq)]
pub enum StepDevices {
    /// MIG (or GPU) UUIDs.
    Uuids(Vec<String>),
    /// Indexes of the host's GPUs in gres order.
    Indexes(Vec<usize>),
}

/// The step's GPUs on this node; `None` when it has none.
pub fn step_devices(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<StepDevices>, SlurmError> {
    let list = |var: &'static str| -> Option<(&'static str, Vec<String>)> {
        let v = get(var)?;
        let items: Vec<String> = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        (!items.is_empty()).then_some((var, items))
    };
    if let Some((_, cvd)) = list("CUDA_VISIBLE_DEVICES") {
        if cvd
            .iter()
            .all(|d| d.starts_with("MIG-") || d.starts_with("GPU-"))
        {
            return Ok(Some(StepDevices::Uuids(cvd)));
        }
    }
    let Some((var, items)) = list("SLURM_STEP_GPUS")
        .or_else(|| list("SLURM_JOB_GPUS"))
        .or_else(|| list("CUDA_VISIBLE_DEVICES"))
    else {
        return Ok(None);
    };
    let value = items.join(",");
    let idx = items
        .iter()
        .map(|s| {
            s.parse::<usize>().map_err(|_| SlurmError::BadVar {
                var,
                value: value.clone(),
                why: format!("{s:?} is neither a device index nor a MIG UUID"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(StepDevices::Indexes(idx)))
}

/// One of the step's leaves on this node.
#[derive(Clone, Debug, PartialEq)]
pub struct StepLeaf {
    pub uuid: String,
    /// The leaf's near cores (empty when no host model says).
    pub cores: Vec<u32>,
}

/// The step's leaves on this node, in Slurm's order.
pub fn step_leaves(d: &StepDevices, host: Option<&HostModel>) -> Result<Vec<StepLeaf>, SlurmError> {
    match (d, host) {
        (StepDevices::Uuids(u), None) => Ok(u
            .iter()
            .map(|uuid| StepLeaf {
                uuid: uuid.clone(),
                cores: Vec::new(),
            })
            .collect()),
        (StepDevices::Uuids(u), Some(h)) => u
            .iter()
            .map(|uuid| {
                let l = h
                    .leaf_by_uuid(uuid)
                    .ok_or_else(|| SlurmError::UnknownUuid(uuid.clone()))?;
                Ok(StepLeaf {
                    uuid: uuid.clone(),
                    cores: near_cores(h, l),
                })
            })
            .collect(),
        (StepDevices::Indexes(i), None) => Err(SlurmError::NoHostModel(
            i.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        )),
        (StepDevices::Indexes(i), Some(h)) => {
            let order = gres_order(h);
            i.iter()
                .map(|&index| {
                    let l = order.get(index).ok_or(SlurmError::NoSuchDevice {
                        index,
                        count: order.len(),
                    })?;
                    Ok(StepLeaf {
                        uuid: l.uuid.clone(),
                        cores: near_cores(h, l),
                    })
                })
                .collect()
        }
    }
}

/// The first host of a Slurm host list: `gpu[3-4],gpu9` → `gpu3`, `a,b` → `a`.
pub fn first_host(nodelist: &str) -> Result<String, SlurmError> {
    let bad = |why: &str| SlurmError::BadVar {
        var: "SLURM_STEP_NODELIST",
        value: nodelist.to_string(),
        why: why.to_string(),
    };
    let s = nodelist.trim();
    let Some(open) = s.find(['[', ',']) else {
        return if s.is_empty() {
            Err(bad("empty host list"))
        } else {
            Ok(s.to_string())
        };
    };
    if s.as_bytes()[open] == b',' {
        return first_host(&s[..open]);
    }
    let close = s[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| bad("unclosed '['"))?;
    let first = s[open + 1..close]
        .split([',', '-'])
        .next()
        .filter(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| bad("a range does not start with a number"))?;
    let rest = &s[close + 1..];
    let suffix = rest.split(',').next().unwrap_or("");
    Ok(format!("{}{first}{suffix}", &s[..open]))
}

/// The rendezvous port of a Slurm job: the same on every node of the job, below Linux's
/// ephemeral range (32768-60999), 20000-29999.
pub fn master_port(job_id: u64) -> u16 {
    20000 + (job_id % 10000) as u16
}

/// Where a task sits in its step, as slurmstepd says.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskIds {
    pub job_id: u64,
    pub rank: usize,
    pub local_rank: usize,
    pub world_size: usize,
    pub local_world_size: usize,
}

/// The Flex variables of one task of a step: its own leaf (the `local_rank`-th of the step's
/// leaves on this node), ranks, the rendezvous on the step's first host, NCCL.
pub fn task_env(
    ids: &TaskIds,
    leaves: &[StepLeaf],
    nodelist: &str,
    nccl: &NcclMode,
    ld_library_path: Option<&str>,
) -> Result<Vec<(String, String)>, SlurmError> {
    let leaf = leaves.get(ids.local_rank).ok_or(SlurmError::TooFewLeaves {
        local_rank: ids.local_rank,
        leaves: leaves.len(),
        tasks: ids.local_world_size,
    })?;
    let master = first_host(nodelist)?;
    let slot = RankSlot {
        uuid: &leaf.uuid,
        cores: &leaf.cores,
        rank: ids.rank,
        local_rank: ids.local_rank,
        world_size: ids.world_size,
        local_world_size: ids.local_world_size,
        master_addr: &master,
        master_port: master_port(ids.job_id),
    };
    Ok(slot_env(&slot, nccl, ld_library_path))
}

/// flexrun's plan inside a Slurm allocation: one rank per leaf Slurm gave this node, each
/// with its leaf's near cores; NCCL from `FLEX_NCCL_MODE` (and `FLEX_NCCL_LIB_DIR`), upstream
/// when unset.
pub fn rank_plan(
    get: &dyn Fn(&str) -> Option<String>,
    host: Option<&HostModel>,
) -> Result<RankPlan, SlurmError> {
    let job = get("SLURM_JOB_ID").unwrap_or_default();
    let job_id: u64 = job.parse().map_err(|_| SlurmError::BadVar {
        var: "SLURM_JOB_ID",
        value: job.clone(),
        why: "not a job id".into(),
    })?;
    let devices = step_devices(get)?.ok_or_else(|| SlurmError::BadVar {
        var: "SLURM_JOB_GPUS",
        value: String::new(),
        why: "the allocation has no GPU on this node".into(),
    })?;
    let leaves = step_leaves(&devices, host)?;
    let mode = get("FLEX_NCCL_MODE").unwrap_or_else(|| "upstream".into());
    let nccl = parse_nccl_mode(&mode, get("FLEX_NCCL_LIB_DIR").as_deref()).map_err(|why| {
        SlurmError::BadVar {
            var: "FLEX_NCCL_MODE",
            value: mode.clone(),
            why,
        }
    })?;
    Ok(RankPlan {
        uuids: leaves.iter().map(|l| l.uuid.clone()).collect(),
        cores: leaves.into_iter().map(|l| l.cores).collect(),
        master_port: master_port(job_id),
        nccl,
        world: None,
    })
}

/// flexrun's plan wherever it starts: in a Flex job (`FLEX_MIG_UUIDS`), else inside a Slurm
/// allocation (`SLURM_JOB_ID`): in a batch script, one rank per GPU Slurm gave this node (the
/// host model from `FLEX_TOPOLOGY`, which flex-spank sets); in a task of an `srun` step that
/// flex-spank prepared, that task's one leaf, keeping its rank, world and rendezvous.
pub fn flexrun_plan(get: &dyn Fn(&str) -> Option<String>) -> Result<RankPlan, String> {
    if get("FLEX_MIG_UUIDS").is_some() || get("SLURM_JOB_ID").is_none() {
        return crate::env::rank_plan(get);
    }
    let host = match get("FLEX_TOPOLOGY") {
        Some(t) if !t.is_empty() => Some(
            crate::probe::discover_file(std::path::Path::new(&t))
                .map_err(|e| format!("FLEX_TOPOLOGY: {e}"))?
                .host,
        ),
        _ => None,
    };
    let mut plan = rank_plan(get, host.as_ref()).map_err(|e| e.to_string())?;
    let num = |k: &'static str| -> Result<Option<usize>, String> {
        get(k)
            .map(|v| v.parse().map_err(|_| format!("{k}={v:?} is not a number")))
            .transpose()
    };
    // A task flex-spank prepared: FLEX_RANK_CPUS is its mark.
    if let (true, Some(rank), Some(world), Some(addr)) = (
        get("FLEX_RANK_CPUS").is_some() && plan.uuids.len() == 1,
        num("RANK")?,
        num("WORLD_SIZE")?,
        get("MASTER_ADDR"),
    ) {
        plan.world = Some(World {
            first_rank: rank,
            first_local_rank: num("LOCAL_RANK")?.unwrap_or(0),
            world_size: world,
            local_world_size: num("LOCAL_WORLD_SIZE")?.unwrap_or(1),
            master_addr: addr,
        });
    }
    Ok(plan)
}

/// Whether Slurm's task/affinity already bound the task: `SLURM_CPU_BIND_TYPE` names a
/// binding, or the task may run on fewer cores than are online.
pub fn already_bound(cpu_bind_type: Option<&str>, allowed: &[u32], online: &[u32]) -> bool {
    let typed = cpu_bind_type.is_some_and(|t| {
        [
            "mask_cpu",
            "map_cpu",
            "mask_ldom",
            "map_ldom",
            "rank",
            "sockets",
            "cores",
            "threads",
            "ldoms",
        ]
        .iter()
        .any(|k| t.contains(k))
    });
    typed || online.iter().any(|c| !allowed.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{rank_env, RankPlan};
    use crate::probe::{build_host, topology};
    use std::collections::HashMap;

    fn a100() -> HostModel {
        build_host(&topology::parse(topology::builtin("a100-40gb-x2").unwrap(), "a").unwrap())
            .unwrap()
    }

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn devices_come_from_uuids_or_indexes() {
        let v = vars(&[("CUDA_VISIBLE_DEVICES", "0,1"), ("SLURM_STEP_GPUS", "12,3")]);
        let d = step_devices(&|k| v.get(k).cloned()).unwrap();
        assert_eq!(d, Some(StepDevices::Indexes(vec![12, 3])));
        let v = vars(&[
            ("CUDA_VISIBLE_DEVICES", "MIG-a,MIG-b"),
            ("SLURM_STEP_GPUS", "0,1"),
        ]);
        let d = step_devices(&|k| v.get(k).cloned()).unwrap();
        assert_eq!(
            d,
            Some(StepDevices::Uuids(vec!["MIG-a".into(), "MIG-b".into()]))
        );
        assert_eq!(step_devices(&|_| None).unwrap(), None);
        let v = vars(&[("SLURM_STEP_GPUS", "0,x")]);
        let e = step_devices(&|k| v.get(k).cloned())
            .unwrap_err()
            .to_string();
        assert!(e.contains("SLURM_STEP_GPUS") && e.contains("\"x\""), "{e}");
    }

    #[test]
    fn indexes_map_through_gres_order() {
        let h = a100();
        let l = step_leaves(&StepDevices::Indexes(vec![12, 0, 6]), Some(&h)).unwrap();
        assert_eq!(l[0].uuid, h.leaves[6].uuid); // the 1g.10gb of GPU 0
        assert_eq!(l[1].uuid, h.leaves[0].uuid);
        assert_eq!(l[2].uuid, h.leaves[7].uuid); // first 1g.5gb of GPU 1
        assert_eq!(l[2].cores, (16..32).collect::<Vec<_>>());
        let e = step_leaves(&StepDevices::Indexes(vec![14]), Some(&h)).unwrap_err();
        assert_eq!(
            e,
            SlurmError::NoSuchDevice {
                index: 14,
                count: 14
            }
        );
        assert!(step_leaves(&StepDevices::Indexes(vec![0]), None).is_err());
        let e = step_leaves(&StepDevices::Uuids(vec!["MIG-nope".into()]), Some(&h)).unwrap_err();
        assert!(e.to_string().contains("MIG-nope"));
    }

    #[test]
    fn host_lists() {
        assert_eq!(first_host("flex[1-2]").unwrap(), "flex1");
        assert_eq!(first_host("gpu[03-04,7],cpu1").unwrap(), "gpu03");
        assert_eq!(first_host("a,b").unwrap(), "a");
        assert_eq!(first_host("rack[2-3]-gpu").unwrap(), "rack2-gpu");
        assert_eq!(first_host("solo").unwrap(), "solo");
        assert!(first_host("x[").is_err());
        assert!(first_host("").is_err());
        assert_eq!(master_port(7), master_port(10007));
        assert!((20000..30000).contains(&master_port(u64::MAX)));
    }

    /// The contract: for the same leaves, a one-node step's task gets what flexrun's rank gets,
    /// except the rendezvous address (the step's first host instead of loopback).
    #[test]
    fn a_task_gets_what_flexrun_gives_the_same_rank() {
        let h = a100();
        let leaves = step_leaves(&StepDevices::Indexes(vec![0, 1, 2, 3]), Some(&h)).unwrap();
        let nccl = NcclMode::Patched {
            lib_dir: "/opt/nccl-mig/lib".into(),
        };
        let plan = RankPlan {
            uuids: leaves.iter().map(|l| l.uuid.clone()).collect(),
            cores: leaves.iter().map(|l| l.cores.clone()).collect(),
            master_port: master_port(77),
            nccl: nccl.clone(),
            world: None,
        };
        for r in 0..4 {
            let ids = TaskIds {
                job_id: 77,
                rank: r,
                local_rank: r,
                world_size: 4,
                local_world_size: 4,
            };
            let mut task: HashMap<String, String> =
                task_env(&ids, &leaves, "node1", &nccl, Some("/usr/lib"))
                    .unwrap()
                    .into_iter()
                    .collect();
            // In a Slurm step, Slurm itself sets its task variables (SLURM_PROCID, ...);
            // flexrun sets them for its own ranks. Everything else is the same.
            let flexrun: HashMap<String, String> = rank_env(&plan, r, Some("/usr/lib"))
                .into_iter()
                .filter(|(k, _)| !k.starts_with("SLURM_"))
                .collect();
            assert_eq!(
                task.insert("MASTER_ADDR".into(), "127.0.0.1".into()),
                Some("node1".into())
            );
            assert_eq!(task, flexrun, "rank {r}");
        }
        let ids = TaskIds {
            job_id: 1,
            rank: 5,
            local_rank: 4,
            world_size: 6,
            local_world_size: 5,
        };
        let e = task_env(&ids, &leaves, "n", &nccl, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("task 4") && e.contains("4 GPU(s) here for 5 task(s)"),
            "{e}"
        );
    }

    #[test]
    fn flexrun_plan_inside_an_allocation() {
        let h = a100();
        let v = vars(&[("SLURM_JOB_ID", "31"), ("SLURM_JOB_GPUS", "0,12")]);
        let p = rank_plan(&|k| v.get(k).cloned(), Some(&h)).unwrap();
        assert_eq!(
            p.uuids,
            [h.leaves[0].uuid.clone(), h.leaves[6].uuid.clone()]
        );
        assert_eq!(p.master_port, master_port(31));
        assert_eq!(p.nccl, NcclMode::Upstream);
        let v = vars(&[
            ("SLURM_JOB_ID", "31"),
            ("SLURM_JOB_GPUS", "0"),
            ("FLEX_NCCL_MODE", "fast"),
        ]);
        let e = rank_plan(&|k| v.get(k).cloned(), Some(&h))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"fast\""), "{e}");
    }

    #[test]
    fn flexrun_in_a_batch_script_and_in_a_prepared_task() {
        let h = a100();
        let dir = std::env::temp_dir().join(format!("flex-step-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let topo = dir.join("t.toml");
        std::fs::write(&topo, topology::builtin("a100-40gb-x2").unwrap()).unwrap();
        let t = topo.display().to_string();
        // The batch script: both GPUs, ranks 0 and 1 on loopback.
        let v = vars(&[
            ("SLURM_JOB_ID", "9"),
            ("SLURM_JOB_GPUS", "0,1"),
            ("FLEX_TOPOLOGY", &t),
        ]);
        let p = flexrun_plan(&|k| v.get(k).cloned()).unwrap();
        assert_eq!(
            p.uuids,
            [h.leaves[0].uuid.clone(), h.leaves[1].uuid.clone()]
        );
        let r: HashMap<String, String> = rank_env(&p, 1, None).into_iter().collect();
        assert_eq!((r["RANK"].as_str(), r["WORLD_SIZE"].as_str()), ("1", "2"));
        // A task of a step: flexrun's one rank keeps what flex-spank gave the task.
        let leaf = h.leaves[7].uuid.clone();
        let task = vars(&[
            ("SLURM_JOB_ID", "9"),
            ("SLURM_STEP_GPUS", "6,7"),
            ("CUDA_VISIBLE_DEVICES", &leaf),
            ("FLEX_TOPOLOGY", &t),
            ("FLEX_RANK_CPUS", "16-31"),
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node1"),
        ]);
        let p = flexrun_plan(&|k| task.get(k).cloned()).unwrap();
        let r: HashMap<String, String> = rank_env(&p, 0, None).into_iter().collect();
        for k in [
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "CUDA_VISIBLE_DEVICES",
            "FLEX_RANK_CPUS",
        ] {
            assert_eq!(r[k], task[k], "{k}");
        }
        // Outside both: the Flex message.
        assert!(flexrun_plan(&|_| None)
            .unwrap_err()
            .contains("inside a Flex job"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn binding_by_slurm_is_detected() {
        let online = [0, 1, 2, 3];
        assert!(!already_bound(None, &online, &online));
        assert!(!already_bound(Some("none"), &online, &online));
        assert!(already_bound(Some("mask_cpu:"), &online, &online));
        assert!(already_bound(None, &[1], &online));
    }
}

//! The environment a job and each of its ranks get: the contract between flexd (which starts
//! the batch script), flexrun (which starts one rank per leaf) and, on Slurm sites, the
//! flex-spank plugin (through `crate::slurm::step`). Pure functions from an allocation to
//! variables.

use crate::cpus::{format_cpu_list, parse_cpu_list};
use crate::HostMem;
use std::path::PathBuf;

/// How ranks reach NCCL across MIG instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NcclMode {
    /// Flex-MIG's patched NCCL, found in this directory (prepended to LD_LIBRARY_PATH); it
    /// reads `NCCL_MIG_ID`.
    Patched { lib_dir: PathBuf },
    /// Upstream NCCL ≥ 2.31: `NCCL_MULTI_RANK_GPU_ENABLE=1`, P2P off, SHM on.
    Upstream,
    /// Set no NCCL variables.
    None,
}

impl NcclMode {
    pub fn name(&self) -> &'static str {
        match self {
            NcclMode::Patched { .. } => "patched",
            NcclMode::Upstream => "upstream",
            NcclMode::None => "none",
        }
    }
}

/// One allocated unit, as the environment needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvUnit {
    pub uuid: String,
    pub gpu: u32,
    /// Thousandths of the unit (1000 = all of it).
    pub share: u32,
    /// The unit's memory in bytes (for the MPS memory limit of a share).
    pub memory_bytes: u64,
}

/// Everything the batch script's environment is made from.
#[derive(Clone, Debug)]
pub struct JobEnvInput<'a> {
    pub job_id: u64,
    pub name: &'a str,
    pub submit_dir: &'a str,
    pub host: &'a str,
    pub units: &'a [EnvUnit],
    /// Allocated cores in unit order, `cores_per_unit` each.
    pub cores: &'a [u32],
    pub cores_per_unit: u32,
    /// The job's rendezvous port for flexrun's ranks.
    pub master_port: u16,
    pub nccl: &'a NcclMode,
    /// Also set SLURM_* aliases.
    pub slurm_aliases: bool,
    /// Give bash scripts an `srun` that runs flexrun's Slurm personality (an exported shell
    /// function, so nothing on disk; flexd decides whether a real Slurm's srun must win).
    pub srun: bool,
    /// Give bash scripts a `torchrun` that runs flexrun's torchrun personality (one leaf per
    /// worker, each told it is alone on its node).
    pub torchrun: bool,
    /// Host memory held in bytes (0: none reserved), and how the job asked for it.
    pub mem: (u64, Option<crate::HostMem>),
    /// The job's tasks, as its options gave them.
    pub tasks: &'a TaskShape,
    /// How many times the job was requeued before this run.
    pub restarts: u32,
}

/// The `srun` a job script gets: a bash function exported through the environment (bash reads
/// `BASH_FUNC_<name>%%` at start), running `flexrun --srun`.
pub const SRUN_FUNCTION: (&str, &str) = ("BASH_FUNC_srun%%", "() {  flexrun --srun \"$@\"\n}");
/// The `torchrun` a job script gets, the same way.
pub const TORCHRUN_FUNCTION: (&str, &str) =
    ("BASH_FUNC_torchrun%%", "() {  flexrun --torchrun \"$@\"\n}");
/// With `srun`, the `scontrol` of flexrun's scontrol personality, the same way.
pub const SCONTROL_FUNCTION: (&str, &str) =
    ("BASH_FUNC_scontrol%%", "() {  flexrun --scontrol \"$@\"\n}");
/// With `torchrun`, `python` and `python3` that run `-m torch.distributed.run ARGS` as
/// torchrun (flexrun's torchrun personality), `-m torch.distributed.launch ARGS` as the older
/// launcher (the same, with `--local-rank=0` for the script unless `--use-env`) and anything
/// else as the real interpreter.
pub const PYTHON_FUNCTIONS: [(&str, &str); 2] = [
    (
        "BASH_FUNC_python%%",
        "() {  if [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.run ]; then\n\
         shift 2;\n\
         flexrun --torchrun \"$@\";\n\
         elif [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.launch ]; then\n\
         shift 2;\n\
         flexrun --torch-launch \"$@\";\n\
         else\n\
         command python \"$@\";\n\
         fi\n}",
    ),
    (
        "BASH_FUNC_python3%%",
        "() {  if [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.run ]; then\n\
         shift 2;\n\
         flexrun --torchrun \"$@\";\n\
         elif [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.launch ]; then\n\
         shift 2;\n\
         flexrun --torch-launch \"$@\";\n\
         else\n\
         command python3 \"$@\";\n\
         fi\n}",
    ),
];

/// The one partition of a Flex host, as squeue and the job's `SLURM_JOB_PARTITION` name it.
pub const PARTITION: &str = "flex";
/// The cluster a Flex host is, as sacct and the job's `SLURM_CLUSTER_NAME` name it.
pub const CLUSTER: &str = "flex";

/// The batch script's Flex variables (added to the submitter's environment).
pub fn job_env(i: &JobEnvInput) -> Vec<(String, String)> {
    let uuids: Vec<&str> = i.units.iter().map(|u| u.uuid.as_str()).collect();
    let mut gpus: Vec<u32> = i.units.iter().map(|u| u.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let gpus = gpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let cpus = format_cpu_list(i.cores);
    let mut v = vec![
        ("FLEX_JOB_ID", i.job_id.to_string()),
        ("FLEX_JOB_NAME", i.name.to_string()),
        ("FLEX_SUBMIT_DIR", i.submit_dir.to_string()),
        ("FLEX_HOST", i.host.to_string()),
        ("FLEX_LEAVES", i.units.len().to_string()),
        ("FLEX_MIG_UUIDS", uuids.join(",")),
        ("FLEX_GPUS", gpus.clone()),
        ("FLEX_CPUS", cpus.clone()),
        // Unit order, so flexrun can give rank r the cores of unit r.
        (
            "FLEX_CPUS_BY_LEAF",
            i.cores
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("FLEX_CPUS_PER_LEAF", i.cores_per_unit.to_string()),
        ("FLEX_MASTER_PORT", i.master_port.to_string()),
        ("FLEX_NCCL_MODE", i.nccl.name().to_string()),
        ("CUDA_VISIBLE_DEVICES", uuids.join(",")),
    ];
    if let NcclMode::Patched { lib_dir } = i.nccl {
        v.push(("FLEX_NCCL_LIB_DIR", lib_dir.display().to_string()));
    }
    // What an `srun` line without -n starts (flexrun's Slurm personality): the job's -n, when
    // it gave one; otherwise one task.
    if i.tasks.ntasks.is_some() || i.tasks.ntasks_per_node.is_some() {
        v.push(("FLEX_NTASKS", i.tasks.tasks().to_string()));
    }
    if let Some(c) = i.tasks.cpus_per_task {
        v.push(("FLEX_CPUS_PER_TASK", c.to_string()));
    }
    if let Some(g) = i.tasks.gpus_per_task {
        v.push(("FLEX_GPUS_PER_TASK", g.to_string()));
    }
    if let [u] = i.units {
        if u.share < 1000 {
            // A share of a whole GPU: cooperative limits for CUDA MPS (enforced only when an
            // MPS control daemon runs).
            v.push((
                "FLEX_GPU_FRACTION",
                format!("{:.3}", u.share as f64 / 1000.0),
            ));
            v.push((
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                (u.share as f64 / 10.0).round().max(1.0).to_string(),
            ));
            let mib = u.memory_bytes / (1 << 20) * u.share as u64 / 1000;
            v.push(("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", format!("0={mib}M")));
        }
    }
    let mib = |b: u64| b.div_ceil(1 << 20).to_string();
    if i.mem.0 > 0 {
        v.push(("FLEX_MEM", mib(i.mem.0)));
    }
    if i.slurm_aliases {
        v.extend(slurm_env(i, gpus));
        // As sbatch exports them: the spelling the job asked with, in megabytes.
        match i.mem.1 {
            Some(HostMem::PerNode(b)) => v.push(("SLURM_MEM_PER_NODE", mib(b))),
            Some(HostMem::PerCpu(b)) => v.push(("SLURM_MEM_PER_CPU", mib(b))),
            Some(HostMem::PerGpu(b)) => v.push(("SLURM_MEM_PER_GPU", mib(b))),
            Some(HostMem::All) => v.push(("SLURM_MEM_PER_NODE", mib(i.mem.0))),
            None => {}
        }
    }
    if i.srun {
        v.push((SRUN_FUNCTION.0, SRUN_FUNCTION.1.to_string()));
        v.push((SCONTROL_FUNCTION.0, SCONTROL_FUNCTION.1.to_string()));
    }
    if i.torchrun {
        v.push((TORCHRUN_FUNCTION.0, TORCHRUN_FUNCTION.1.to_string()));
        for (name, body) in PYTHON_FUNCTIONS {
            v.push((name, body.to_string()));
        }
    }
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Slurm's names for the batch script's variables (`slurm_aliases`): one node, the batch
/// step's own task ids, and the task shape's variables for what the job gave, as slurmd sets
/// them.
fn slurm_env(i: &JobEnvInput, gpus: String) -> Vec<(&'static str, String)> {
    let t = i.tasks;
    let mut v = vec![
        ("SLURM_JOB_ID", i.job_id.to_string()),
        ("SLURM_JOBID", i.job_id.to_string()),
        ("SLURM_JOB_NAME", i.name.to_string()),
        ("SLURM_SUBMIT_DIR", i.submit_dir.to_string()),
        ("SLURM_JOB_NODELIST", i.host.to_string()),
        ("SLURM_NODELIST", i.host.to_string()),
        ("SLURMD_NODENAME", i.host.to_string()),
        ("SLURM_SUBMIT_HOST", i.host.to_string()),
        ("SLURM_CLUSTER_NAME", CLUSTER.to_string()),
        ("SLURM_JOB_NUM_NODES", "1".to_string()),
        ("SLURM_JOB_PARTITION", PARTITION.to_string()),
        ("SLURM_NNODES", "1".to_string()),
        ("SLURM_JOB_CPUS_PER_NODE", i.cores.len().to_string()),
        ("SLURM_CPUS_ON_NODE", i.cores.len().to_string()),
        // Without -n, slurmd counts the tasks the job's CPUs would hold.
        (
            "SLURM_TASKS_PER_NODE",
            if t.ntasks.is_some() || t.ntasks_per_node.is_some() {
                t.tasks()
            } else {
                (i.cores.len() as u32 / t.cpus_per_task.unwrap_or(1).max(1)).max(1)
            }
            .to_string(),
        ),
        ("SLURM_NODEID", "0".to_string()),
        ("SLURM_PROCID", "0".to_string()),
        ("SLURM_LOCALID", "0".to_string()),
    ];
    // A job without a GPU has none of the GPU variables, as under Slurm (its
    // CUDA_VISIBLE_DEVICES stays empty: no device cgroup hides the host's GPUs from it).
    if !i.units.is_empty() {
        v.push(("SLURM_JOB_GPUS", gpus));
        v.push(("SLURM_GPUS_ON_NODE", i.units.len().to_string()));
    }
    if t.ntasks.is_some() || t.ntasks_per_node.is_some() {
        v.push(("SLURM_NTASKS", t.tasks().to_string()));
        v.push(("SLURM_NPROCS", t.tasks().to_string()));
    }
    let given = [
        (
            "SLURM_NTASKS_PER_NODE",
            t.ntasks_per_node.map(|n| n.to_string()),
        ),
        (
            "SLURM_CPUS_PER_TASK",
            t.cpus_per_task.map(|n| n.to_string()),
        ),
        (
            "SLURM_GPUS_PER_TASK",
            t.gpus_per_task.map(|n| n.to_string()),
        ),
        ("SLURM_GPUS_PER_NODE", t.gpus_per_node.clone()),
        ("SLURM_GPUS", t.gpus.clone()),
    ];
    v.extend(given.into_iter().filter_map(|(k, x)| Some((k, x?))));
    if i.restarts > 0 {
        v.push(("SLURM_RESTART_COUNT", i.restarts.to_string()));
    }
    v
}

/// What flexrun reads back from a job's environment.
#[derive(Clone, Debug, PartialEq)]
pub struct RankPlan {
    pub uuids: Vec<String>,
    /// Cores of each rank.
    pub cores: Vec<Vec<u32>>,
    pub master_port: u16,
    pub nccl: NcclMode,
    /// Where the plan's ranks sit in a larger world; None: they are the whole world, on this
    /// host, meeting on loopback.
    pub world: Option<World>,
}

/// A larger world around a plan: flexrun started as one task of a Slurm step, whose rank
/// variables the SPANK plugin set already.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    pub first_rank: usize,
    pub first_local_rank: usize,
    pub world_size: usize,
    pub local_world_size: usize,
    pub master_addr: String,
}

/// Read a job's plan from its environment (`get` looks a variable up), with a clear error when
/// flexrun runs outside a Flex job.
pub fn rank_plan(get: impl Fn(&str) -> Option<String>) -> Result<RankPlan, String> {
    let need =
        |k: &str| get(k).ok_or_else(|| format!("{k} is not set: flexrun runs inside a Flex job"));
    let uuids: Vec<String> = need("FLEX_MIG_UUIDS")?
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    // A CPU-only job: one rank, with no GPU and every core.
    let uuids = if uuids.is_empty() {
        vec![String::new()]
    } else {
        uuids
    };
    let per: usize = need("FLEX_CPUS_PER_LEAF")?
        .parse()
        .map_err(|_| "FLEX_CPUS_PER_LEAF is not a number".to_string())?;
    let by_leaf: Vec<u32> = match get("FLEX_CPUS_BY_LEAF") {
        Some(s) if !s.is_empty() => s
            .split(',')
            .map(|c| {
                c.parse()
                    .map_err(|_| format!("FLEX_CPUS_BY_LEAF has a bad core {c:?}"))
            })
            .collect::<Result<_, _>>()?,
        _ => parse_cpu_list(&get("FLEX_CPUS").unwrap_or_default())?,
    };
    // The scheduler deals cores beyond `per` for each leaf one more to each of the first
    // leaves: rank r's are the r-th run of that dealing.
    let n = uuids.len();
    // At most one extra core per leaf: the first leaves' runs are one longer.
    let len = by_leaf.len().min(per * n + n);
    let cores = deal(len.max(per * n), n)
        .map(|r| {
            by_leaf
                .iter()
                .skip(r.start)
                .take(r.len())
                .copied()
                .collect()
        })
        .collect();
    let master_port = need("FLEX_MASTER_PORT")?
        .parse()
        .map_err(|_| "FLEX_MASTER_PORT is not a port".to_string())?;
    let nccl = match get("FLEX_NCCL_MODE").as_deref() {
        Some("patched") => NcclMode::Patched {
            lib_dir: need("FLEX_NCCL_LIB_DIR")?.into(),
        },
        Some("none") => NcclMode::None,
        _ => NcclMode::Upstream,
    };
    Ok(RankPlan {
        uuids,
        cores,
        master_port,
        nccl,
        world: None,
    })
}

/// The shape of a job's tasks, as sbatch's options gave it (None: not given). Slurm sets
/// `SLURM_NTASKS`, `SLURM_CPUS_PER_TASK` and the like only for what was given; Flex does the
/// same, and an `srun` line without options of its own starts these tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskShape {
    /// `-n`, or `--ntasks-per-node` on the one node.
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    /// `-c`.
    pub cpus_per_task: Option<u32>,
    pub gpus_per_task: Option<u32>,
    /// `--gpus-per-node` as given (`2`, `1g.5gb:2`).
    pub gpus_per_node: Option<String>,
    /// `-G/--gpus` as given.
    pub gpus: Option<String>,
}

impl TaskShape {
    /// The tasks an `srun` without `-n` starts: `-n`, else 1, as in Slurm.
    pub fn tasks(&self) -> u32 {
        self.ntasks.or(self.ntasks_per_node).unwrap_or(1).max(1)
    }
}

impl RankPlan {
    /// The plan regrouped into `n` Slurm tasks, as an `srun` line starts them: each task sees
    /// its own `gpus_per_task` leaves when given, otherwise every leaf of the job (as Slurm
    /// gives each task all of the step's GPUs without `--gpus-per-task` or `--gpu-bind`), and
    /// `cpus_per_task` cores (otherwise its share of the job's). A rank's entry in `uuids` is
    /// then its whole `CUDA_VISIBLE_DEVICES`, comma-separated. A task never sees a leaf or
    /// core the job does not hold: a shape the job cannot hold is an error. A step that asks
    /// for `gpus` of the job's leaves (srun's own `--gres=gpu:N`, `--gpus N`) sees the first
    /// `gpus` of them.
    pub fn into_tasks(
        self,
        n: usize,
        gpus: Option<usize>,
        gpus_per_task: Option<usize>,
        cpus_per_task: Option<usize>,
    ) -> Result<RankPlan, String> {
        if n == 0 {
            return Err("a step needs at least one task".into());
        }
        let mut leaves: Vec<&String> = self.uuids.iter().filter(|u| !u.is_empty()).collect();
        if let Some(g) = gpus {
            if g > leaves.len() {
                return Err(format!(
                    "the step asks for {g} GPUs; the job holds {}",
                    leaves.len()
                ));
            }
            leaves.truncate(g);
        }
        let l = leaves.len();
        // Each task's leaves, as indexes into `leaves`.
        let groups: Vec<Vec<usize>> = match gpus_per_task {
            Some(g) if n * g > l => {
                return Err(format!(
                    "{n} tasks of {g} GPUs each need {} GPUs; the job holds {l}",
                    n * g
                ))
            }
            Some(g) => (0..n).map(|t| (t * g..(t + 1) * g).collect()).collect(),
            None => vec![(0..l).collect(); n],
        };
        let all: Vec<u32> = self.cores.concat();
        let cores: Vec<Vec<u32>> = match cpus_per_task {
            Some(c) if n * c > all.len() => {
                return Err(format!(
                    "{n} tasks of {c} CPUs each need {} CPUs; the job holds {}",
                    n * c,
                    all.len()
                ))
            }
            Some(c) => (0..n).map(|t| all[t * c..(t + 1) * c].to_vec()).collect(),
            // Bound to its own leaves: each task its leaves' cores.
            None if gpus_per_task.is_some() && self.cores.len() == self.uuids.len() => groups
                .iter()
                .map(|g| {
                    g.iter()
                        .flat_map(|&i| self.cores[i].iter().copied())
                        .collect()
                })
                .collect(),
            None if all.len() >= n => deal(all.len(), n).map(|r| all[r].to_vec()).collect(),
            None => (0..n).map(|t| vec![all[t % all.len().max(1)]]).collect(),
        };
        let uuids = groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&i| leaves[i].as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        Ok(RankPlan {
            uuids,
            cores,
            ..self
        })
    }
}

/// `len` items dealt into `n` consecutive runs, the first `len % n` one longer.
fn deal(len: usize, n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (each, rest) = (len / n, len % n);
    (0..n).map(move |t| {
        let from = t * each + t.min(rest);
        from..from + each + usize::from(t < rest)
    })
}

/// Where one rank sits in its job, and which leaf and cores it has: everything its variables
/// are made from. flexrun fills it for one host ([`rank_env`]); the Slurm plugin for a step
/// that may span hosts (`crate::slurm`).
#[derive(Clone, Debug, PartialEq)]
pub struct RankSlot<'a> {
    pub uuid: &'a str,
    /// The rank's cores (its leaf's share of the job's cores, or the leaf's near cores).
    pub cores: &'a [u32],
    pub rank: usize,
    pub local_rank: usize,
    pub world_size: usize,
    pub local_world_size: usize,
    pub master_addr: &'a str,
    pub master_port: u16,
}

/// The variables of one rank (on top of the job's environment). Every rank sees its own leaf
/// as CUDA device 0: scripts must not call `set_device(LOCAL_RANK)`.
pub fn slot_env(
    s: &RankSlot,
    nccl: &NcclMode,
    ld_library_path: Option<&str>,
) -> Vec<(String, String)> {
    let mut v = vec![
        ("CUDA_VISIBLE_DEVICES".to_string(), s.uuid.to_string()),
        ("RANK".into(), s.rank.to_string()),
        ("LOCAL_RANK".into(), s.local_rank.to_string()),
        ("WORLD_SIZE".into(), s.world_size.to_string()),
        ("LOCAL_WORLD_SIZE".into(), s.local_world_size.to_string()),
        ("MASTER_ADDR".into(), s.master_addr.to_string()),
        ("MASTER_PORT".into(), s.master_port.to_string()),
        ("FLEX_RANK_CPUS".into(), format_cpu_list(s.cores)),
    ];
    // One leaf per rank: the rank's NCCL talks to the others over it (a Slurm task that sees
    // several leaves gets no MIG variables, as under Slurm).
    if *nccl != NcclMode::None && !s.uuid.is_empty() && !s.uuid.contains(',') {
        v.push(("NCCL_MIG_ID".into(), s.uuid.to_string()));
        v.push(("NCCL_MULTI_RANK_GPU_ENABLE".into(), "1".into()));
        v.push(("NCCL_P2P_DISABLE".into(), "1".into()));
    }
    if let NcclMode::Patched { lib_dir } = nccl {
        let dir = lib_dir.display().to_string();
        let path = match ld_library_path {
            Some(p) if !p.is_empty() => format!("{dir}:{p}"),
            _ => dir,
        };
        v.push(("LD_LIBRARY_PATH".into(), path));
    }
    v
}

/// The variables of flexrun's rank `rank`. In a one-host job local rank and rank agree and
/// the rendezvous is on loopback; in a larger [`World`] the ranks follow its first rank.
pub fn rank_env(
    plan: &RankPlan,
    rank: usize,
    ld_library_path: Option<&str>,
) -> Vec<(String, String)> {
    let n = plan.uuids.len();
    let (rank_, local_rank, world_size, local_world_size, master_addr) = match &plan.world {
        None => (rank, rank, n, n, "127.0.0.1"),
        Some(w) => (
            w.first_rank + rank,
            w.first_local_rank + rank,
            w.world_size,
            w.local_world_size,
            w.master_addr.as_str(),
        ),
    };
    let slot = RankSlot {
        uuid: &plan.uuids[rank],
        cores: &plan.cores[rank],
        rank: rank_,
        local_rank,
        world_size,
        local_world_size,
        master_addr,
        master_port: plan.master_port,
    };
    let mut v = slot_env(&slot, &plan.nccl, ld_library_path);
    if plan.world.is_none() {
        // Slurm's task variables, for scripts written for srun; inside a real Slurm step
        // Slurm sets its own.
        v.extend(
            [
                ("SLURM_PROCID", rank_),
                ("SLURM_LOCALID", local_rank),
                ("SLURM_NODEID", 0),
                ("SLURM_NTASKS", world_size),
                ("SLURM_STEP_NUM_TASKS", world_size),
                ("SLURM_NPROCS", world_size),
                ("SLURM_TASKS_PER_NODE", world_size),
            ]
            .map(|(k, n)| (k.to_string(), n.to_string())),
        );
    }
    v
}

/// Parse an NCCL mode as flexd.toml's `nccl_mode` and the Slurm plugin's `nccl=` argument
/// write it: `upstream`, `none`, or `patched` with the patched NCCL's library directory.
pub fn parse_nccl_mode(mode: &str, lib_dir: Option<&str>) -> Result<NcclMode, String> {
    match (mode, lib_dir) {
        ("upstream", _) => Ok(NcclMode::Upstream),
        ("none", _) => Ok(NcclMode::None),
        ("patched", Some(d)) if !d.is_empty() => Ok(NcclMode::Patched { lib_dir: d.into() }),
        ("patched", _) => {
            Err("nccl mode \"patched\" needs the patched NCCL's library directory".into())
        }
        (m, _) => Err(format!(
            "nccl mode {m:?} is not one of upstream, patched, none"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn units() -> Vec<EnvUnit> {
        (0..4)
            .map(|i| EnvUnit {
                uuid: format!("MIG-{i}"),
                gpu: i / 2,
                share: 1000,
                memory_bytes: 5 << 30,
            })
            .collect()
    }

    #[test]
    fn job_and_rank_environments_agree() {
        let u = units();
        let nccl = NcclMode::Patched {
            lib_dir: "/opt/nccl-mig/lib".into(),
        };
        let env: HashMap<String, String> = job_env(&JobEnvInput {
            job_id: 42,
            name: "ddp",
            submit_dir: "/home/a",
            host: "gpu1",
            units: &u,
            cores: &[0, 1, 2, 3, 16, 17, 18, 19],
            cores_per_unit: 2,
            master_port: 29512,
            nccl: &nccl,
            slurm_aliases: true,
            srun: true,
            torchrun: false,
            mem: (8 << 30, Some(HostMem::PerCpu(1 << 30))),
            tasks: &TaskShape {
                ntasks: Some(4),
                cpus_per_task: Some(2),
                ..TaskShape::default()
            },
            restarts: 2,
        })
        .into_iter()
        .collect();
        assert_eq!(env["FLEX_LEAVES"], "4");
        // The memory held, and Slurm's variable for the spelling the job asked with.
        assert_eq!(env["FLEX_MEM"], "8192");
        assert_eq!(env["SLURM_MEM_PER_CPU"], "1024");
        assert!(!env.contains_key("SLURM_MEM_PER_NODE"));
        assert_eq!(env["FLEX_GPUS"], "0,1");
        assert_eq!(env["FLEX_CPUS"], "0-3,16-19");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "MIG-0,MIG-1,MIG-2,MIG-3");
        assert_eq!(env["SLURM_JOB_ID"], "42");
        for k in ["SLURM_NODELIST", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST"] {
            assert_eq!(env[k], "gpu1", "{k}");
        }
        assert_eq!(env["SLURM_JOB_NUM_NODES"], "1");
        assert_eq!(env["SLURM_JOB_PARTITION"], "flex");
        assert_eq!(env["SLURM_CLUSTER_NAME"], "flex");
        // The task shape the job gave, as slurmd exports it.
        assert_eq!(env["SLURM_NTASKS"], "4");
        assert_eq!(env["SLURM_CPUS_PER_TASK"], "2");
        assert_eq!(env["FLEX_NTASKS"], "4");
        assert!(!env.contains_key("SLURM_NTASKS_PER_NODE"));
        assert_eq!(env["SLURM_RESTART_COUNT"], "2");
        assert!(!env.contains_key("FLEX_GPU_FRACTION"));
        let plan = rank_plan(|k| env.get(k).cloned()).unwrap();
        assert_eq!(plan.cores[2], vec![16, 17]);
        let r: HashMap<String, String> = rank_env(&plan, 2, Some("/usr/lib")).into_iter().collect();
        assert_eq!(r["CUDA_VISIBLE_DEVICES"], "MIG-2");
        assert_eq!(r["NCCL_MIG_ID"], "MIG-2");
        assert_eq!(r["RANK"], "2");
        assert_eq!(r["WORLD_SIZE"], "4");
        assert_eq!(r["MASTER_PORT"], "29512");
        assert_eq!(r["LD_LIBRARY_PATH"], "/opt/nccl-mig/lib:/usr/lib");
        assert_eq!(r["FLEX_RANK_CPUS"], "16-17");
        assert_eq!(
            (r["SLURM_PROCID"].as_str(), r["SLURM_LOCALID"].as_str()),
            ("2", "2")
        );
        assert_eq!(r["SLURM_NTASKS"], "4");
        assert_eq!(env["BASH_FUNC_srun%%"], "() {  flexrun --srun \"$@\"\n}");
    }

    #[test]
    fn slurm_variables_only_for_what_the_job_gave() {
        let u = units();
        let env: HashMap<String, String> = job_env(&JobEnvInput {
            job_id: 7,
            name: "one",
            submit_dir: "/",
            host: "h",
            units: &u,
            cores: &[0, 1, 2, 3],
            cores_per_unit: 1,
            master_port: 1,
            nccl: &NcclMode::Upstream,
            slurm_aliases: true,
            srun: false,
            torchrun: false,
            mem: (0, None),
            tasks: &TaskShape {
                gpus_per_node: Some("1g.5gb:4".into()),
                ..TaskShape::default()
            },
            restarts: 0,
        })
        .into_iter()
        .collect();
        // One task unless -n says otherwise; no SLURM_NTASKS or SLURM_CPUS_PER_TASK then, and
        // SLURM_TASKS_PER_NODE counts what the CPUs would hold, as slurmd's does.
        assert_eq!(env["SLURM_TASKS_PER_NODE"], "4");
        assert!(!env.contains_key("FLEX_NTASKS"));
        for k in [
            "SLURM_NTASKS",
            "SLURM_CPUS_PER_TASK",
            "SLURM_RESTART_COUNT",
            "SLURM_GPUS",
        ] {
            assert!(!env.contains_key(k), "{k}");
        }
        assert_eq!(env["SLURM_GPUS_PER_NODE"], "1g.5gb:4");
        assert_eq!(env["SLURM_GPUS_ON_NODE"], "4");
    }

    fn plan(leaves: usize, cores_each: u32) -> RankPlan {
        RankPlan {
            uuids: (0..leaves).map(|i| format!("MIG-{i}")).collect(),
            cores: (0..leaves as u32)
                .map(|l| (l * cores_each..(l + 1) * cores_each).collect())
                .collect(),
            master_port: 1,
            nccl: NcclMode::Upstream,
            world: None,
        }
    }

    #[test]
    fn tasks_see_their_share_of_the_leaves_and_cores() {
        // One task: every leaf and core of the job (Slurm's `--gpus=2`, `srun python`).
        let p = plan(2, 3).into_tasks(1, None, None, None).unwrap();
        assert_eq!(p.uuids, ["MIG-0,MIG-1"]);
        assert_eq!(p.cores, [vec![0, 1, 2, 3, 4, 5]]);
        // Without --gpus-per-task every task sees every leaf, as in Slurm; the cores are dealt.
        let p = plan(2, 4).into_tasks(4, None, None, None).unwrap();
        assert_eq!(p.uuids, ["MIG-0,MIG-1"; 4]);
        assert_eq!(p.cores, [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        let p = plan(4, 1).into_tasks(3, None, None, None).unwrap();
        assert_eq!(p.cores, [vec![0, 1], vec![2], vec![3]]);
        // A step of one of the job's two leaves.
        let p = plan(2, 1).into_tasks(2, Some(1), None, None).unwrap();
        assert_eq!(p.uuids, ["MIG-0", "MIG-0"]);
        assert!(plan(2, 1).into_tasks(1, Some(3), None, None).is_err());
        // --gpus-per-task 1: each task its own leaf, with its leaf's cores.
        let p = plan(4, 2).into_tasks(4, None, Some(1), None).unwrap();
        assert_eq!(p.uuids, ["MIG-0", "MIG-1", "MIG-2", "MIG-3"]);
        assert_eq!(p.cores[3], [6, 7]);
        // --gpus-per-task and -c.
        let p = plan(4, 2).into_tasks(2, None, Some(2), Some(3)).unwrap();
        assert_eq!(p.uuids, ["MIG-0,MIG-1", "MIG-2,MIG-3"]);
        assert_eq!(p.cores, [vec![0, 1, 2], vec![3, 4, 5]]);
        // A CPU-only job: no GPU for any task.
        let cpu = RankPlan {
            uuids: vec![String::new()],
            cores: vec![vec![0, 1, 2, 3]],
            ..plan(0, 0)
        };
        let p = cpu.clone().into_tasks(4, None, None, None).unwrap();
        assert_eq!(p.uuids, ["", "", "", ""]);
        assert_eq!(p.cores[2], [2]);
        // What the job does not hold is an error that says so.
        let e = plan(2, 1).into_tasks(2, None, Some(2), None).unwrap_err();
        assert!(e.contains("need 4 GPUs; the job holds 2"), "{e}");
        let e = cpu.into_tasks(2, None, None, Some(3)).unwrap_err();
        assert!(e.contains("need 6 CPUs; the job holds 4"), "{e}");
        // A task that sees several leaves gets no MIG variable naming one.
        let p = plan(2, 1).into_tasks(1, None, None, None).unwrap();
        let r: HashMap<String, String> = rank_env(&p, 0, None).into_iter().collect();
        assert_eq!(r["CUDA_VISIBLE_DEVICES"], "MIG-0,MIG-1");
        assert!(!r.contains_key("NCCL_MIG_ID"));
        assert_eq!(r["SLURM_NTASKS"], "1");
    }

    #[test]
    fn shares_get_mps_limits_and_none_mode_sets_no_nccl() {
        let u = vec![EnvUnit {
            uuid: "GPU-x".into(),
            gpu: 0,
            share: 250,
            memory_bytes: 8 << 30,
        }];
        let env: HashMap<String, String> = job_env(&JobEnvInput {
            job_id: 1,
            name: "f",
            submit_dir: "/",
            host: "h",
            units: &u,
            cores: &[3],
            cores_per_unit: 1,
            master_port: 1,
            nccl: &NcclMode::None,
            slurm_aliases: false,
            tasks: &TaskShape::default(),
            restarts: 0,
            srun: false,
            torchrun: true,
            mem: (0, None),
        })
        .into_iter()
        .collect();
        assert_eq!(env["FLEX_GPU_FRACTION"], "0.250");
        assert_eq!(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
        assert_eq!(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=2048M");
        assert!(!env.contains_key("SLURM_JOB_ID"));
        assert!(!env.contains_key("BASH_FUNC_srun%%"));
        assert_eq!(
            env["BASH_FUNC_torchrun%%"],
            "() {  flexrun --torchrun \"$@\"\n}"
        );
        let plan = rank_plan(|k| env.get(k).cloned()).unwrap();
        let r = rank_env(&plan, 0, None);
        assert!(r.iter().all(|(k, _)| !k.starts_with("NCCL")));
        assert!(rank_plan(|_| None)
            .unwrap_err()
            .contains("inside a Flex job"));
    }
}

/// The job script's functions run by a real bash, with stand-ins for flexrun and python3.
#[cfg(test)]
mod function_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn bash(script: &str) -> (i32, String, String) {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("flex-env-fn-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, body) in [
            ("flexrun", "#!/bin/sh\necho \"flexrun $*\"\n"),
            ("python3", "#!/bin/sh\necho \"real python3 $*\"\n"),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
            .env("SLURM_JOB_NODELIST", "gpu-host-1");
        for (k, v) in [SCONTROL_FUNCTION, TORCHRUN_FUNCTION]
            .into_iter()
            .chain(PYTHON_FUNCTIONS)
        {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("bash runs");
        let _ = std::fs::remove_dir_all(&dir);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn scontrol_is_flexruns() {
        assert_eq!(
            bash("scontrol show hostnames").1,
            "flexrun --scontrol show hostnames\n"
        );
        assert_eq!(
            bash("scontrol requeue 12").1,
            "flexrun --scontrol requeue 12\n"
        );
    }

    #[test]
    fn python_m_torch_distributed_run_is_torchrun() {
        assert_eq!(
            bash("python3 -m torch.distributed.run --nproc-per-node=gpu train.py --lr 1").1,
            "flexrun --torchrun --nproc-per-node=gpu train.py --lr 1\n"
        );
        assert_eq!(bash("python3 -u train.py").1, "real python3 -u train.py\n");
        assert_eq!(
            bash("python3 -m torch.distributed.launch --use-env x.py").1,
            "flexrun --torch-launch --use-env x.py\n"
        );
        assert_eq!(
            bash("python3 -m torch.distributed.elastic x.py").1,
            "real python3 -m torch.distributed.elastic x.py\n",
            "only the launchers are torchrun"
        );
    }
}

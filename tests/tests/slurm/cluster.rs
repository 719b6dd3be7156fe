//! A private Slurm cluster on loopback (munged, slurmctld, one slurmd per node) in a temporary
//! directory, the client commands run against it, and the checks of what a step's tasks saw.

use super::daemons::Daemons;
use super::setup::{
    flexgres, free_port, hostname, make_device_files, path_with_bins, random_key, self_logs,
    set_mode, spank_plugin,
};
use gres_plugin::cpus::{bind_cores, online_cores, parse_cpu_list};
use gres_plugin::env::NcclMode;
use gres_plugin::probe::{build_host, topology};
use gres_plugin::slurm::step::{master_port, step_leaves, task_env, StepDevices, TaskIds};
use gres_plugin::HostModel;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

const NODES: [&str; 2] = ["flex1", "flex2"];

/// The variables the plugin sets and the test compares, besides the node and affinity.
const KEYS: [&str; 11] = [
    "CUDA_VISIBLE_DEVICES",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "FLEX_RANK_CPUS",
    "NCCL_MIG_ID",
    "NCCL_MULTI_RANK_GPU_ENABLE",
    "NCCL_P2P_DISABLE",
];

/// A private Slurm cluster; its daemons are stopped on drop.
pub(super) struct Cluster {
    /// Dropped before `dir`: the daemons stop before their directory goes.
    daemons: Option<Daemons>,
    pub(super) dir: tempfile::TempDir,
    models: BTreeMap<String, HostModel>,
}

impl Cluster {
    pub(super) fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A cluster whose slurmd use `task_plugin` (task/none: Flex binds; task/affinity: Slurm).
    pub(super) fn start(task_plugin: &str) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("flex-slurm-")
            .tempdir()
            .expect("temp dir");
        let mut c = Cluster {
            daemons: None,
            dir,
            models: BTreeMap::new(),
        };
        let d = c.dir.path().to_path_buf();
        make_dirs(&d);
        let (ctld_port, host) = (free_port(), hostname());
        let nodes = c.write_node_files(&host);
        write_plugin_files(&d);
        std::fs::write(
            d.join("slurm.conf"),
            slurm_conf(&d, &host, ctld_port, task_plugin, &nodes),
        )
        .unwrap();
        c.daemons = Some(Daemons::start(&d, &NODES));
        c
    }

    /// Writes each node's topology file (remembering its model) and gres.conf with its device
    /// files; returns the nodes' lines for slurm.conf, all on `host` at 127.0.0.1.
    fn write_node_files(&mut self, host: &str) -> String {
        let d = self.dir.path().to_path_buf();
        let mut nodes = String::new();
        let mut gres = String::new();
        let shipped = topology::builtin("a100-40gb-x2").unwrap();
        for n in NODES {
            let text = shipped.replace(
                "hostname = \"a100-testbed\"",
                &format!("hostname = \"{n}\""),
            );
            assert_ne!(text, shipped, "the shipped topology names its host");
            let topo = d.join(format!("topo-{n}.toml"));
            std::fs::write(&topo, &text).unwrap();
            self.models.insert(
                n.to_string(),
                build_host(&topology::parse(&text, n).unwrap()).unwrap(),
            );
            let node = flexgres(&["node", "--force-topology", "--name", n], &topo);
            nodes.push_str(&format!(
                "{} NodeHostname={host} NodeAddr=127.0.0.1 Port={}\n",
                node.trim_end(),
                free_port()
            ));
            let root = d.join("root");
            gres.push_str(&flexgres(
                &[
                    "conf",
                    "--force-topology",
                    "--node",
                    n,
                    "--device-root",
                    root.to_str().unwrap(),
                ],
                &topo,
            ));
        }
        assert_eq!(
            make_device_files(&gres),
            NODES.len() * 14 * 3,
            "three device files per leaf, 14 leaves per node"
        );
        std::fs::write(d.join("gres.conf"), &gres).unwrap();
        nodes
    }

    /// Run a Slurm client command against this cluster, killed after `secs`.
    pub(super) fn run(&self, args: &[&str], secs: u64) -> Output {
        self.daemons
            .as_ref()
            .expect("the cluster's daemons run")
            .run(args, secs, &path_with_bins())
    }

    /// [`Cluster::run`] of a command that must succeed (the failure shows its stderr).
    pub(super) fn run_ok(&self, args: &[&str], secs: u64) -> Output {
        let o = self.run(args, secs);
        assert!(
            o.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// What each task of job `job` step `step` wrote with task.sh, by rank.
    pub(super) fn tasks(&self, job: &str, step: &str) -> BTreeMap<usize, BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(self.path("out")).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(&format!("{job}.{step}.")) else {
                continue;
            };
            let text = std::fs::read_to_string(self.path("out").join(&name)).unwrap();
            let vars: BTreeMap<String, String> = text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            out.insert(rest.parse().unwrap(), vars);
        }
        out
    }

    /// Check one step's tasks against the model: distinct leaves of the right node and
    /// profile, ranks 0..n, one port, the first node as MASTER_ADDR, near cores, and exactly
    /// the variables `task_env` (the contract flexrun shares) gives for those leaves.
    pub(super) fn check_step(
        &self,
        job: &str,
        step: &str,
        ranks: usize,
        per_node: &[(&str, usize)],
        profile: &str,
        slurm_bound: Option<u32>,
    ) {
        let tasks = self.tasks(job, step);
        assert_eq!(
            tasks.keys().copied().collect::<Vec<_>>(),
            (0..ranks).collect::<Vec<_>>(),
            "job {job} step {step}: {tasks:#?}\n{}",
            self_logs(&self.dir)
        );
        let job_id: u64 = job.parse().unwrap();
        let online = online_cores();
        let mut uuids = BTreeSet::new();
        for (rank, t) in &tasks {
            let node = t["SLURMD_NODENAME"].as_str();
            let model = &self.models[node];
            let uuid = &t["CUDA_VISIBLE_DEVICES"];
            let leaf = model
                .leaf_by_uuid(uuid)
                .unwrap_or_else(|| panic!("rank {rank}: {uuid} is not a leaf of {node}"));
            assert_eq!(leaf.profile, profile, "rank {rank}");
            assert!(
                uuids.insert(uuid.clone()),
                "rank {rank}: {uuid} given twice"
            );
            let local: usize = t["LOCAL_RANK"].parse().unwrap();
            let local_n = per_node.iter().find(|(n, _)| *n == node).unwrap().1;
            let ids = TaskIds {
                job_id,
                rank: *rank,
                local_rank: local,
                world_size: ranks,
                local_world_size: local_n,
            };
            // The expected variables, from the same leaf through the shared contract.
            let want = expected_env(model, uuid, &ids, per_node[0].0);
            let got: BTreeMap<String, String> = KEYS
                .iter()
                .filter_map(|k| t.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect();
            assert_eq!(got, want, "rank {rank} on {node}");
            assert_eq!(t["MASTER_PORT"], master_port(job_id).to_string());
            // Bound to the leaf's near cores, folded onto the cores this machine has.
            let near = parse_cpu_list(&t["FLEX_RANK_CPUS"]).unwrap();
            let gpu_cores: Vec<u32> = model
                .gpu(leaf.gpu)
                .unwrap()
                .cpu_affinity
                .iter()
                .map(|c| c.0)
                .collect();
            assert_eq!(near, gpu_cores, "rank {rank}: near cores");
            let allowed = parse_cpu_list(&t["Cpus_allowed_list"]).unwrap();
            let want = match slurm_bound {
                Some(core) => vec![core], // task/affinity's binding stands
                None => bind_cores(&near, &online),
            };
            assert_eq!(
                allowed, want,
                "job {job} step {step} rank {rank} on {node}: affinity"
            );
        }
        for (node, n) in per_node {
            let on = tasks
                .values()
                .filter(|t| t["SLURMD_NODENAME"] == *node)
                .count();
            assert_eq!(on, *n, "tasks on {node}");
        }
    }
}

/// The cluster's directories and munge key, private but for `out`, which jobs write into.
fn make_dirs(d: &Path) {
    for sub in ["state", "spool", "log", "munge", "out"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    // Jobs run as root here but write into the temp dir, which stays private otherwise.
    std::fs::write(d.join("munge/key"), random_key()).unwrap();
    set_mode(&d.join("munge/key"), 0o600);
    set_mode(&d.join("munge"), 0o711);
    set_mode(&d.join("out"), 0o777);
}

/// The job_submit.lua flexgres writes and the plugstack.conf that loads flex-spank with each
/// node's topology file.
fn write_plugin_files(d: &Path) {
    let lua = flexgres(
        &["job-submit", "--force-topology"],
        &d.join("topo-flex1.toml"),
    );
    std::fs::write(d.join("job_submit.lua"), lua).unwrap();
    std::fs::write(
        d.join("plugstack.conf"),
        format!(
            "required {} topology={}/topo-%n.toml nccl=upstream\n",
            spank_plugin().display(),
            d.display()
        ),
    )
    .unwrap();
}

/// slurm.conf for the cluster in `d`: everything on loopback and in `d`, munge through its
/// private socket, `nodes` (from [`Cluster::write_node_files`]) in one partition.
fn slurm_conf(d: &Path, host: &str, ctld_port: u16, task_plugin: &str, nodes: &str) -> String {
    let dd = d.display();
    format!(
        "ClusterName=flextest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={ctld_port}\n\
         SlurmUser=root\nSlurmdUser=root\n\
         AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={dd}/munge/sock\n\
         StateSaveLocation={dd}/state\nSlurmdSpoolDir={dd}/spool/%n\n\
         SlurmctldPidFile={dd}/slurmctld.pid\nSlurmdPidFile={dd}/slurmd-%n.pid\n\
         SlurmctldLogFile={dd}/log/slurmctld.log\nSlurmdLogFile={dd}/log/slurmd-%n.log\n\
         SlurmdDebug=debug\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin={task_plugin}\nMpiDefault=none\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
         GresTypes=gpu\nSlurmdParameters=config_overrides\n\
         PlugStackConfig={dd}/plugstack.conf\nJobSubmitPlugins=lua\n\
         ReturnToService=2\nSchedulerType=sched/builtin\n\
         AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n\
         JobCompType=jobcomp/none\nMailProg=/bin/true\n\
         {nodes}\
         PartitionName=flex Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
        NODES.join(",")
    )
}

/// The variables flex-spank should give the task `ids` on leaf `uuid`, from the contract
/// (`task_env`) that flexrun shares.
fn expected_env(
    model: &HostModel,
    uuid: &str,
    ids: &TaskIds,
    master: &str,
) -> BTreeMap<String, String> {
    let leaves = step_leaves(&StepDevices::Uuids(vec![uuid.to_string()]), Some(model)).unwrap();
    // task_env takes the local_rank-th leaf: put this task's leaf there.
    let slot_leaves = vec![leaves[0].clone(); ids.local_rank + 1];
    task_env(ids, &slot_leaves, master, &NcclMode::Upstream, None)
        .unwrap()
        .into_iter()
        .collect()
}

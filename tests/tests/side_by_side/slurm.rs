//! The Slurm side: one node named as Flex's simulated host (`a100-testbed`), declared as its
//! topology is (32 cores on two sockets, the 14 MIG leaves as typed `gpu` entries from
//! `flexgres conf`, the RAM flexd schedules), in one private cluster on loopback. Jobs are
//! plain Slurm: no SPANK plugin, no job_submit.lua.

use super::daemons::Daemons;
use super::setup::{
    clean_env, find, flexgres, free_port, hostname, make_device_files, random_key, self_logs,
    set_mode,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The node's name: the topology's host name, so the node-list variables match unchanged.
pub(super) const NODE: &str = "a100-testbed";

/// A100 topology's RAM (256 GiB) less flexd's default reserved_memory (2 GiB), in MB.
const REAL_MEMORY_MB: u64 = (256 - 2) * 1024;

/// A one-node Slurm cluster; its daemons are stopped on drop.
pub(super) struct Slurm {
    /// Dropped before `dir`: the daemons stop before their directory goes.
    daemons: Option<Daemons>,
    pub(super) dir: tempfile::TempDir,
}

impl Slurm {
    pub(super) fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Starts munged, slurmctld and slurmd for the topology file `topology`, job ids from
    /// `first_job_id`, and waits until the node is idle.
    pub(super) fn start(topology: &Path, first_job_id: u64) -> Slurm {
        let dir = tempfile::Builder::new()
            .prefix("flex-sbs-slurm-")
            .tempdir()
            .expect("temp dir");
        let mut s = Slurm { daemons: None, dir };
        let d = s.dir.path().to_path_buf();
        for sub in ["state", "spool", "log", "munge"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("munge/key"), random_key()).unwrap();
        set_mode(&d.join("munge/key"), 0o600);
        set_mode(&d.join("munge"), 0o711);
        let node = flexgres(&["node", "--force-topology", "--name", NODE], topology);
        let root = d.join("root");
        let gres = flexgres(
            &[
                "conf",
                "--force-topology",
                "--node",
                NODE,
                "--device-root",
                root.to_str().unwrap(),
            ],
            topology,
        );
        assert_eq!(make_device_files(&gres), 14 * 3, "three files per leaf");
        std::fs::write(d.join("gres.conf"), &gres).unwrap();
        std::fs::write(
            d.join("slurm.conf"),
            slurm_conf(&d, node.trim_end(), first_job_id),
        )
        .unwrap();
        s.daemons = Some(Daemons::start(&d, &[NODE]));
        s
    }

    pub(super) fn logs(&self) -> String {
        self_logs(&self.dir)
    }

    /// A Slurm client command against this cluster, from `cwd` with `path` as PATH.
    pub(super) fn command(&self, name: &str, cwd: &Path, path: &str) -> Command {
        let mut c = Command::new(find(name).unwrap());
        clean_env(&mut c)
            .env("SLURM_CONF", self.path("slurm.conf"))
            .env("PATH", path)
            .current_dir(cwd);
        c
    }

    /// A Slurm client command run from the cluster's directory, killed after `secs`.
    pub(super) fn run(&self, args: &[&str], secs: u64) -> Output {
        let path = std::env::var("PATH").unwrap_or_default();
        self.daemons
            .as_ref()
            .expect("the cluster's daemons run")
            .run(args, secs, &path)
    }

    /// The job completion log (jobcomp/filetxt): each ended job's fields by name, the State
    /// and ExitCode that sacct shows.
    pub(super) fn ended_jobs(&self) -> Vec<BTreeMap<String, String>> {
        let text = std::fs::read_to_string(self.path("jobcomp.txt")).unwrap_or_default();
        text.lines()
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|f| f.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }
}

/// slurm.conf: the node as flexd counts it, task/affinity binding, memory as a resource with
/// flexd's default per core, a short KillWait like the harness's kill_grace, and a second
/// partition named `gpu` (scripts name it; Flex has one).
fn slurm_conf(d: &Path, node_line: &str, first_job_id: u64) -> String {
    let dd = d.display();
    let host = hostname();
    let ctld_port = free_port();
    let node_port = free_port();
    let def_mem_per_cpu = REAL_MEMORY_MB / 32;
    format!(
        "ClusterName=flex\nFirstJobId={first_job_id}\n\
         SlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={ctld_port}\n\
         SlurmUser=root\nSlurmdUser=root\n\
         AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={dd}/munge/sock\n\
         StateSaveLocation={dd}/state\nSlurmdSpoolDir={dd}/spool/%n\n\
         SlurmctldPidFile={dd}/slurmctld.pid\nSlurmdPidFile={dd}/slurmd-%n.pid\n\
         SlurmctldLogFile={dd}/log/slurmctld.log\nSlurmdLogFile={dd}/log/slurmd-%n.log\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\nMpiDefault=none\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
         DefMemPerCPU={def_mem_per_cpu}\n\
         GresTypes=gpu\nSlurmdParameters=config_overrides\n\
         ReturnToService=2\nSchedulerType=sched/builtin\n\
         KillWait=2\nMinJobAge=600\n\
         AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n\
         JobCompType=jobcomp/filetxt\nJobCompLoc={dd}/jobcomp.txt\nMailProg=/bin/true\n\
         {node_line} RealMemory={REAL_MEMORY_MB} Features={FEATURES} \
         NodeHostname={host} NodeAddr=127.0.0.1 Port={node_port}\n\
         PartitionName=flex Nodes={NODE} Default=YES MaxTime=INFINITE State=UP\n\
         PartitionName=gpu Nodes={NODE} MaxTime=INFINITE State=UP\n"
    )
}

/// The features flexd names for the simulated host (its GPU model's words, GPU memory, MIG
/// profiles), so `--constraint` means the same on both.
const FEATURES: &str = "1g.10gb,1g.5gb,40gb,a100,mig,pcie";

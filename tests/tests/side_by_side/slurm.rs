//! The Slurm side: one node named as Flex's simulated host (`a100-testbed`), declared as its
//! topology is (32 cores on two sockets, the 14 MIG leaves as typed `gpu` entries from
//! `flexgres conf`, the RAM flexd schedules), in one private cluster on loopback. Jobs are
//! plain Slurm: no SPANK plugin, no job_submit.lua.

use super::setup::{
    clean_env, find, flexgres, free_port, hostname, make_device_files, random_key, self_logs,
    set_mode,
};
use flex_tests::wait_child;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The node's name: the topology's host name, so the node-list variables match unchanged.
pub(super) const NODE: &str = "a100-testbed";

/// A100 topology's RAM (256 GiB) less flexd's default reserved_memory (2 GiB), in MB.
const REAL_MEMORY_MB: u64 = (256 - 2) * 1024;

/// A one-node Slurm cluster; its daemons are stopped by pid on drop.
pub(super) struct Slurm {
    pub(super) dir: tempfile::TempDir,
    daemons: Vec<(String, Child)>,
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
        let mut s = Slurm {
            dir,
            daemons: Vec::new(),
        };
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
        s.start_daemons();
        s.wait("the node idle", |s| {
            let o = s.run(&["sinfo", "-h", "-N", "-o", "%N %T"], 30);
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            text.lines()
                .any(|l| l.trim() == format!("{NODE} idle"))
                .then_some(())
        });
        s
    }

    fn start_daemons(&mut self) {
        let d = self.dir.path().to_path_buf();
        let dd = d.display();
        self.spawn(
            "munged",
            Command::new(find("munged").unwrap()).args([
                "-F".to_string(),
                "-f".into(),
                format!("--socket={dd}/munge/sock"),
                format!("--key-file={dd}/munge/key"),
                format!("--log-file={dd}/log/munged.log"),
                format!("--pid-file={dd}/munge/pid"),
                format!("--seed-file={dd}/munge/seed"),
            ]),
        );
        let sock = d.join("munge/sock");
        self.wait("munged's socket", |_| sock.exists().then_some(()));
        let conf = d.join("slurm.conf");
        self.spawn(
            "slurmctld",
            Command::new(find("slurmctld").unwrap())
                .args(["-D", "-i", "-f"])
                .arg(&conf),
        );
        self.spawn(
            "slurmd",
            Command::new(find("slurmd").unwrap())
                .args(["-D", "-N", NODE, "-f"])
                .arg(&conf),
        );
    }

    fn spawn(&mut self, name: &str, cmd: &mut Command) {
        let log = std::fs::File::create(self.path(&format!("log/{name}.out"))).unwrap();
        let child = clean_env(cmd)
            .env("SLURM_CONF", self.path("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.daemons.push((name.to_string(), child));
    }

    /// Waits for `check`, failing with the daemons' logs when one dies or time runs out.
    pub(super) fn wait<T>(&mut self, what: &str, mut check: impl FnMut(&Slurm) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            for (name, child) in &mut self.daemons {
                if let Ok(Some(s)) = child.try_wait() {
                    panic!(
                        "{name} exited ({s}) while waiting for {what}\n{}",
                        self_logs(&self.dir)
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
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
        let mut child = self
            .command(args[0], self.dir.path(), &path)
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
        if wait_child(&mut child, Duration::from_secs(secs)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} did not finish in {secs} s\n{}", self.logs());
        }
        child.wait_with_output().unwrap()
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

impl Drop for Slurm {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.daemons.pop() {
            flex_tests::signal(child.id(), libc::SIGTERM);
            if wait_child(&mut child, Duration::from_secs(20)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
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

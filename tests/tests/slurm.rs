//! Flex on a real Slurm: Debian's slurmctld and two slurmd (`slurmd -N`, one port each) with
//! munge, all on loopback, state and spool in a temporary directory. gres.conf and the node
//! lines come from `flexgres` for the simulated a100-40gb-x2 host (one topology file per node,
//! differing only in the host name, so the nodes' MIG UUIDs differ), and plugstack.conf loads
//! the flex-spank plugin built by the workspace. Device files are symlinks to /dev/null:
//! slurmd wants character devices and there is no GPU.
//!
//! Needs root (slurmd runs jobs as their users) and slurm-wlm + munge. Without them the tests
//! are skipped, unless CI=true: then they fail. flex-tests depends on flex-spank, so even
//! `cargo test -p flex-tests` rebuilds the plugin; flexgres comes from `cargo build --workspace`.

use flex_tests::{bin, bin_dir, wait_child};
use gres_plugin::cpus::{bind_cores, online_cores, parse_cpu_list};
use gres_plugin::env::NcclMode;
use gres_plugin::probe::{build_host, topology};
use gres_plugin::slurm::step::{master_port, step_leaves, task_env, StepDevices, TaskIds};
use gres_plugin::HostModel;
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Whether the test can run here; panics under CI=true when it cannot.
fn usable() -> bool {
    let missing: Vec<&str> = ["slurmctld", "slurmd", "munged", "srun", "sbatch", "sinfo"]
        .into_iter()
        .filter(|n| find(n).is_none())
        .collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if missing.is_empty() && root {
        return true;
    }
    let why = if root {
        format!(
            "{} not installed (apt-get install slurm-wlm munge)",
            missing.join(", ")
        )
    } else {
        "not root (slurmd must run as root)".to_string()
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and Slurm cannot run: {why}"
    );
    eprintln!("skipping the Slurm test: {why}");
    false
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0, "gethostname");
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let h = String::from_utf8_lossy(&buf[..end]).into_owned();
    h.split('.').next().unwrap_or(&h).to_string()
}

/// A private Slurm cluster; every daemon is stopped by pid on drop.
struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<(String, Child)>,
    models: BTreeMap<String, HostModel>,
}

impl Cluster {
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A cluster whose slurmd use `task_plugin` (task/none: Flex binds; task/affinity: Slurm).
    fn start(task_plugin: &str) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("flex-slurm-")
            .tempdir()
            .expect("temp dir");
        let mut c = Cluster {
            dir,
            daemons: Vec::new(),
            models: BTreeMap::new(),
        };
        let d = c.dir.path().to_path_buf();
        for sub in ["state", "spool", "log", "munge", "out"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        // Jobs run as root here but write into the temp dir, which stays private otherwise.
        std::fs::write(d.join("munge/key"), random_key()).unwrap();
        set_mode(&d.join("munge/key"), 0o600);
        set_mode(&d.join("munge"), 0o711);
        set_mode(&d.join("out"), 0o777);

        let (ctld_port, host) = (free_port(), hostname());
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
            c.models.insert(
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
        make_device_files(&gres);
        std::fs::write(d.join("gres.conf"), &gres).unwrap();
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
        let dd = d.display();
        let conf = format!(
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
        );
        std::fs::write(d.join("slurm.conf"), conf).unwrap();

        c.spawn(
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
        c.wait_path(&d.join("munge/sock"), "munged's socket");
        let conf_path = d.join("slurm.conf");
        c.spawn(
            "slurmctld",
            Command::new(find("slurmctld").unwrap())
                .args(["-D", "-i", "-f"])
                .arg(&conf_path),
        );
        for n in NODES {
            std::fs::create_dir_all(d.join("spool").join(n)).unwrap();
            c.spawn(
                &format!("slurmd {n}"),
                Command::new(find("slurmd").unwrap())
                    .args(["-D", "-N", n, "-f"])
                    .arg(&conf_path),
            );
        }
        c.wait_idle();
        c
    }

    fn spawn(&mut self, name: &str, cmd: &mut Command) {
        let log = std::fs::File::create(self.path(&format!("log/{}.out", name.replace(' ', "-"))))
            .unwrap();
        let child = clean_env(cmd)
            .env("SLURM_CONF", self.path("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.daemons.push((name.to_string(), child));
    }

    fn wait_path(&mut self, p: &Path, what: &str) {
        self.wait(what, |_| p.exists().then_some(()));
    }

    /// Wait for `check`, failing with the daemons' logs when a daemon dies or time runs out.
    fn wait<T>(&mut self, what: &str, mut check: impl FnMut(&Cluster) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(90);
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
                self_logs(&self.dir)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn wait_idle(&mut self) {
        self.wait("both nodes idle", |c| {
            let o = c.run(&["sinfo", "-h", "-N", "-o", "%N %T"], 30);
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let idle = NODES
                .iter()
                .all(|n| text.lines().any(|l| l.trim() == format!("{n} idle")));
            idle.then_some(())
        });
    }

    /// Run a Slurm client command against this cluster, killed after `secs`.
    fn run(&self, args: &[&str], secs: u64) -> Output {
        let mut child = clean_env(&mut Command::new(find(args[0]).unwrap()))
            .args(&args[1..])
            .env("SLURM_CONF", self.path("slurm.conf"))
            .env("PATH", path_with_bins())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
        if wait_child(&mut child, Duration::from_secs(secs)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} did not finish in {secs} s\n{}",
                self_logs(&self.dir)
            );
        }
        child.wait_with_output().unwrap()
    }

    /// What each task of job `job` step `step` wrote with task.sh, by rank.
    fn tasks(&self, job: &str, step: &str) -> BTreeMap<usize, BTreeMap<String, String>> {
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
    fn check_step(
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
            // The expected variables, from the same leaf through the shared contract.
            let leaves = step_leaves(&StepDevices::Uuids(vec![uuid.clone()]), Some(model)).unwrap();
            // task_env takes the local_rank-th leaf: put this task's leaf there.
            let slot_leaves = vec![leaves[0].clone(); local + 1];
            let ids = TaskIds {
                job_id,
                rank: *rank,
                local_rank: local,
                world_size: ranks,
                local_world_size: local_n,
            };
            let want: BTreeMap<String, String> =
                task_env(&ids, &slot_leaves, per_node[0].0, &NcclMode::Upstream, None)
                    .unwrap()
                    .into_iter()
                    .collect();
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

impl Drop for Cluster {
    fn drop(&mut self) {
        // Daemons in reverse order of start, each by its own pid: TERM, then KILL.
        while let Some((_, mut child)) = self.daemons.pop() {
            flex_tests::signal(child.id(), libc::SIGTERM);
            if wait_child(&mut child, Duration::from_secs(20)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn self_logs(dir: &tempfile::TempDir) -> String {
    let mut s = String::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.path().join("log"))
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        s.push_str(&format!("--- {} (last lines)\n", p.display()));
        for l in tail.into_iter().rev() {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

/// No SLURM_* variable of an outer allocation may leak into the private cluster's commands.
fn clean_env(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") || k.starts_with("SBATCH_") || k.starts_with("SRUN_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn path_with_bins() -> String {
    format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 1024];
    let mut f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut f, &mut key).unwrap();
    key
}

/// The flex-spank cdylib of this build. `cargo test --workspace` builds it as part of the
/// flex-spank package (in `deps/`; `cargo build` also copies it beside the binaries).
fn spank_plugin() -> PathBuf {
    let dir = bin_dir();
    [dir.join("deps/libflex_spank.so"), dir.join("libflex_spank.so")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "libflex_spank.so is not under {}: run `cargo test --workspace` or `cargo build -p flex-spank`",
                dir.display()
            )
        })
}

/// Run flexgres with a topology file; its stdout.
fn flexgres(args: &[&str], topology: &Path) -> String {
    let o = Command::new(bin("flexgres"))
        .args(args)
        .arg("--topology")
        .arg(topology)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "flexgres {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Every device path gres.conf names, as a symlink to /dev/null (a character device).
fn make_device_files(gres: &str) {
    let mut n = 0;
    for line in gres.lines().filter(|l| !l.starts_with('#')) {
        for field in line.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            if key != "File" && key != "MultipleFiles" {
                continue;
            }
            for f in value.split(',') {
                let p = Path::new(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                if !p.exists() {
                    std::os::unix::fs::symlink("/dev/null", p).unwrap();
                }
                n += 1;
            }
        }
    }
    assert_eq!(
        n,
        2 * 14 * 3,
        "three device files per leaf, 14 leaves per node"
    );
}

const TASK_SH: &str = "#!/bin/sh\n\
# One file per task: the variables under test, the node and the task's affinity.\n\
f=\"$FLEX_OUT/$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURM_PROCID\"\n\
env | grep -E '^(CUDA_VISIBLE_DEVICES|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|FLEX_[A-Z0-9_]+|NCCL_[A-Z0-9_]+|SLURMD_NODENAME)=' > \"$f\"\n\
grep Cpus_allowed_list /proc/self/status | sed 's/:[[:space:]]*/=/' >> \"$f\"\n";

fn job_id(o: &Output) -> String {
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("JOB="))
        .unwrap_or_else(|| {
            panic!(
                "no JOB= line in {text:?} / {}",
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .trim()
        .to_string()
}

#[test]
fn slurm_runs_flex_tasks_on_their_own_leaves() {
    if !usable() {
        return;
    }
    let c = Cluster::start("task/none");
    let out = c.path("out");
    let task = c.path("task.sh");
    std::fs::write(&task, TASK_SH).unwrap();
    set_mode(&task, 0o755);
    let task = task.to_str().unwrap();
    let export = format!("--export=ALL,FLEX_OUT={}", out.display());

    // One node, four tasks, four 1g.5gb leaves.
    let o = c.run(
        &[
            "srun",
            &export,
            "-w",
            "flex1",
            "-n",
            "4",
            "--gres=gpu:1g.5gb:4",
            "sh",
            "-c",
            &format!("{task}; [ \"$SLURM_PROCID\" = 0 ] && echo JOB=$SLURM_JOB_ID; true"),
        ],
        120,
    );
    assert!(
        o.status.success(),
        "srun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.check_step(&job_id(&o), "0", 4, &[("flex1", 4)], "1g.5gb", None);

    // Two nodes, two tasks each: ranks 0..3 across both, MASTER_ADDR the first node.
    let o = c.run(
        &[
            "srun",
            &export,
            "-N",
            "2",
            "--ntasks-per-node=2",
            "--gres=gpu:1g.5gb:2",
            "sh",
            "-c",
            &format!("{task}; [ \"$SLURM_PROCID\" = 0 ] && echo JOB=$SLURM_JOB_ID; true"),
        ],
        120,
    );
    assert!(
        o.status.success(),
        "srun -N 2: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.check_step(
        &job_id(&o),
        "0",
        4,
        &[("flex1", 2), ("flex2", 2)],
        "1g.5gb",
        None,
    );

    // The optional job_submit.lua: an untyped one-GPU request gets the 1g.10gb leaf, an
    // untyped several-GPU request 1g.5gb leaves.
    let o = c.run(
        &[
            "srun",
            &export,
            "-w",
            "flex1",
            "-n",
            "1",
            "--gres=gpu:1",
            "sh",
            "-c",
            &format!("{task}; echo JOB=$SLURM_JOB_ID"),
        ],
        120,
    );
    assert!(
        o.status.success(),
        "srun gpu:1: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.check_step(&job_id(&o), "0", 1, &[("flex1", 1)], "1g.10gb", None);
    let o = c.run(
        &[
            "srun",
            &export,
            "-w",
            "flex1",
            "-n",
            "2",
            "--gres=gpu:2",
            "sh",
            "-c",
            &format!("{task}; [ \"$SLURM_PROCID\" = 0 ] && echo JOB=$SLURM_JOB_ID; true"),
        ],
        120,
    );
    assert!(
        o.status.success(),
        "srun gpu:2: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.check_step(&job_id(&o), "0", 2, &[("flex1", 2)], "1g.5gb", None);

    // A batch job: the batch script keeps both GPUs (Slurm's indexes) and learns where the
    // topology is; its srun step gets one leaf per task.
    let script = c.path("job.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH -w flex1 -n 2 --gres=gpu:1g.5gb:2\n\
             echo JOB=$SLURM_JOB_ID\necho BATCH_CVD=$CUDA_VISIBLE_DEVICES\necho BATCH_RANK=$RANK\n\
             echo BATCH_TOPOLOGY=$FLEX_TOPOLOGY\nsrun {task}\n\
             flexrun sh -c 'echo FLEXRUN $RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES'\n\
             srun flexrun sh -c 'echo IN_STEP $RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES'\n"
        ),
    )
    .unwrap();
    let o = c.run(
        &[
            "sbatch",
            "--wait",
            &export,
            "-o",
            &format!("{}/batch-%j.txt", out.display()),
            script.to_str().unwrap(),
        ],
        180,
    );
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(out.join(format!("batch-{job}.txt"))).unwrap();
    assert!(text.contains(&format!("JOB={job}")), "{text}");
    let cvd = text
        .lines()
        .find_map(|l| l.strip_prefix("BATCH_CVD="))
        .unwrap();
    assert_eq!(
        cvd.split(',').count(),
        2,
        "the batch script keeps both devices: {text}"
    );
    assert!(!cvd.contains("MIG-"), "Slurm's indexes, untouched: {text}");
    assert!(
        text.contains("BATCH_RANK=\n"),
        "no rank in the batch script: {text}"
    );
    assert!(
        text.contains(&format!(
            "BATCH_TOPOLOGY={}/topo-flex1.toml",
            c.dir.path().display()
        )),
        "{text}"
    );
    c.check_step(&job, "0", 2, &[("flex1", 2)], "1g.5gb", None);
    // flexrun in the batch script: one rank per GPU of the job, the step's leaves; flexrun in
    // each task of an srun step: that task's leaf and rank, as flex-spank set them.
    let step0: BTreeSet<(String, String)> = c
        .tasks(&job, "0")
        .values()
        .map(|t| (t["RANK"].clone(), t["CUDA_VISIBLE_DEVICES"].clone()))
        .collect();
    for tag in ["FLEXRUN", "IN_STEP"] {
        let got: BTreeSet<(String, String)> = text
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{tag} ")))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.get(1), Some(&"2"), "{tag}: world size: {text}");
                (f[0].to_string(), f.get(2).unwrap_or(&"").to_string())
            })
            .collect();
        let uuids = |s: &BTreeSet<(String, String)>| -> BTreeSet<String> {
            s.iter().map(|(_, u)| u.clone()).collect()
        };
        assert_eq!(uuids(&got), uuids(&step0), "{tag}: {text}");
        let ranks: BTreeSet<&str> = got.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(ranks, BTreeSet::from(["0", "1"]), "{tag}: {text}");
        if tag == "IN_STEP" {
            assert_eq!(got, step0, "each task keeps its rank and leaf: {text}");
        }
    }

    // A step without GPUs is left alone.
    let o = c.run(&["srun", "-w", "flex1", "-n", "1", "env"], 60);
    assert!(o.status.success());
    let env = String::from_utf8_lossy(&o.stdout);
    for k in [
        "RANK=",
        "MASTER_PORT=",
        "FLEX_NCCL_MODE=",
        "CUDA_VISIBLE_DEVICES=",
    ] {
        assert!(
            !env.lines().any(|l| l.starts_with(k)),
            "{k} in a GPU-less step: {env}"
        );
    }

    // A fault fails the task with a message on the job's stderr; slurmd lives on.
    let o = c.run(
        &[
            "srun",
            "-w",
            "flex1",
            "-n",
            "3",
            "--gres=gpu:1g.5gb:2",
            "true",
        ],
        60,
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "flex-spank: task 2 on this node has no leaf: the step has 2 GPU(s) here for 3 task(s)"
        ),
        "{err}"
    );
    let o = c.run(&["srun", "-w", "flex1", "-n", "1", "true"], 60);
    assert!(o.status.success(), "slurmd still runs jobs after a fault");
}

#[test]
fn a_binding_by_slurms_task_affinity_stands() {
    if !usable() {
        return;
    }
    let c = Cluster::start("task/affinity");
    let out = c.path("out");
    let task = c.path("task.sh");
    std::fs::write(&task, TASK_SH).unwrap();
    set_mode(&task, 0o755);
    let task = task.to_str().unwrap();
    let export = format!("--export=ALL,FLEX_OUT={}", out.display());
    // Slurm's task/affinity binds the tasks (--cpu-bind=map_cpu): Flex leaves that binding and
    // still names the leaf's near cores. Flex alone would bind each task to all of its GPU's
    // NUMA cores (folded onto this machine's), so on a machine with more than one core a
    // single core shows that Slurm's binding stood.
    let last = *online_cores().last().unwrap();
    let map = format!("--cpu-bind=map_cpu:{last},{last}");
    let o = c.run(
        &[
            "srun",
            &map,
            &export,
            "-w",
            "flex1",
            "-n",
            "2",
            "--gres=gpu:1g.5gb:2",
            "sh",
            "-c",
            &format!("{task}; [ \"$SLURM_PROCID\" = 0 ] && echo JOB=$SLURM_JOB_ID; true"),
        ],
        120,
    );
    assert!(
        o.status.success(),
        "srun {map}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    c.check_step(&job_id(&o), "0", 2, &[("flex1", 2)], "1g.5gb", Some(last));
}

//! Flex on a real Slurm: Debian's slurmctld and two slurmd (`slurmd -N`, one port each) with
//! munge, all on loopback, state and spool in a temporary directory. gres.conf and the node
//! lines come from `flexgres` for the simulated a100-40gb-x2 host (one topology file per node,
//! differing only in the host name, so the nodes' MIG UUIDs differ), and plugstack.conf loads
//! the flex-spank plugin built by the workspace. Device files are symlinks to /dev/null:
//! slurmd wants character devices and there is no GPU.
//!
//! Needs root (slurmd runs jobs as their users) and slurm-wlm + munge. Without them the tests
//! are skipped, unless CI=true: then they fail. flex-tests depends on flex-spank, so even
//! `cargo test -p flex-tests` rebuilds the plugin; flexgres and flexrun come from
//! `cargo build --workspace`.

mod cluster;
mod daemons;
mod setup;

use cluster::Cluster;
use gres_plugin::cpus::online_cores;
use setup::{set_mode, usable};
use std::collections::BTreeSet;
use std::process::Output;

const TASK_SH: &str = "#!/bin/sh\n\
# One file per task: the variables under test, the node and the task's affinity.\n\
f=\"$FLEX_OUT/$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURM_PROCID\"\n\
env | grep -E '^(CUDA_VISIBLE_DEVICES|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|FLEX_[A-Z0-9_]+|NCCL_[A-Z0-9_]+|SLURMD_NODENAME)=' > \"$f\"\n\
grep Cpus_allowed_list /proc/self/status | sed 's/:[[:space:]]*/=/' >> \"$f\"\n";

/// The job id a step printed as `JOB=<id>`.
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
    let o = c.run_ok(
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
    c.check_step(&job_id(&o), "0", 4, &[("flex1", 4)], "1g.5gb", None);

    // Two nodes, two tasks each: ranks 0..3 across both, MASTER_ADDR the first node.
    let o = c.run_ok(
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
    let o = c.run_ok(
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
    c.check_step(&job_id(&o), "0", 1, &[("flex1", 1)], "1g.10gb", None);
    let o = c.run_ok(
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
    let o = c.run_ok(
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
    let o = c.run_ok(&["srun", "-w", "flex1", "-n", "1", "env"], 60);
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
    c.check_step(&job_id(&o), "0", 2, &[("flex1", 2)], "1g.5gb", Some(last));
}

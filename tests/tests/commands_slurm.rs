//! The user commands as Slurm's, end to end: squeue's state filters and output formats from
//! flexq, an existing sbatch script, and srun and torchrun lines of a job script, with the real
//! binaries against the real flexd on the simulated a100-40gb-x2 topology (two A100-40GB, six
//! 1g.5gb and one 1g.10gb leaf each). Jobs really run, as the submitting user.

use flex_proto::JobState;
use flex_tests::cli::{cmd, flexq_json, submit, text, wait_running};
use flex_tests::{wait_for, Daemon};
use std::path::Path;

const TOPOLOGY: &str = "a100-40gb-x2.toml";

#[test]
fn a_pending_job_shows_its_reason_and_state_filters_work() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("pend");
    let big = submit(
        &d,
        &dir,
        "big.sh",
        "#!/bin/sh\nsleep 600\n",
        &["--leaves", "14"],
    );
    wait_running(&d, big);
    let waiting = submit(&d, &dir, "wait.sh", "#!/bin/sh\ntrue\n", &["--leaves", "2"]);
    let v = wait_for("a reason for the pending job", || {
        flexq_json(&d, &["-t", "PD"])
            .into_iter()
            .find(|j| j.id == waiting && j.reason.is_some())
    });
    assert_eq!(v.state, JobState::Pending);
    let out = text(
        &cmd(&d, "flexq")
            .args(["-t", "pending", "-h"])
            .output()
            .unwrap()
            .stdout,
    );
    let row: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(row[0], waiting.to_string());
    assert_eq!(row[3], "PD");
    assert!(row.last().unwrap().starts_with('('), "{out}");
    let running = flexq_json(&d, &["-t", "R"]);
    assert_eq!(running.iter().map(|j| j.id).collect::<Vec<_>>(), [big]);
    let out = cmd(&d, "flexq").args(["-t", "sleeping"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    // The formats scripts parse, as squeue prints them.
    let squeue = |args: &[&str]| text(&cmd(&d, "flexq").args(args).output().unwrap().stdout);
    // In squeue's order: by state code (PD before R), then priority.
    let out = squeue(&["-h", "-o", "%i|%j|%t|%D|%C|%b|%R"]);
    assert_eq!(
        out,
        format!("{waiting}|wait.sh|PD|1|2|gres/gpu:2|(Resources)\n{big}|big.sh|R|1|14|gres/gpu:14|{host}\n",
            host = running[0].alloc.as_ref().unwrap().host)
    );
    // What flexd reads of the submission from its database: group, directory, script.
    let out = squeue(&[
        "-h",
        "-j",
        &waiting.to_string(),
        "-o",
        "%G|%Z|%o|%f|%U|%E|%c",
    ]);
    let dir = std::fs::canonicalize(&dir).unwrap();
    assert_eq!(
        out,
        format!(
            "{gid}|{d}|{d}/wait.sh|(null)|{uid}|(null)|2\n",
            gid = nix::unistd::getgid(),
            uid = nix::unistd::getuid(),
            d = dir.display()
        )
    );
    let out = squeue(&["--me", "-n", "wait.sh", "-O", "JobID:8,State:.10"]);
    assert_eq!(out, format!("JOBID        STATE\n{waiting:<8}   PENDING\n"));
    let out = squeue(&["--start", "-h"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains(" PD ") && out.contains("(Resources)"), "{out}");
    let out = cmd(&d, "flexq").args(["-o", "%i %!"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("%!"), "{out:?}");
    let out = cmd(&d, "flexcancel")
        .arg(big.to_string())
        .arg(waiting.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn an_existing_sbatch_script_runs_unchanged() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("sbatch");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../etc/examples/sbatch-only.sh");
    let script = std::fs::read_to_string(&example).unwrap();
    let job = submit(&d, &dir, "sbatch-only.sh", &script, &[]);
    let v = d.wait_finished(job);
    let out = std::fs::read_to_string(dir.join(format!("slurm-{job}.out"))).unwrap_or_default();
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{out}\n{}", d.log());
    assert_eq!(v.name, "sbatch-example");
    assert_eq!(v.request.leaves, Some(2));
    assert_eq!(v.request.leaf_type.as_deref(), Some("1g.5gb"));
    for r in 0..2 {
        assert!(
            out.contains(&format!("{r}: rank {r} of 2 on MIG-")),
            "{out}"
        );
    }
    assert!(v
        .alloc
        .unwrap()
        .leaves
        .iter()
        .all(|l| l.profile == "1g.5gb"));
}

#[test]
fn srun_lines_of_a_slurm_script_run_their_tasks() {
    // The host may have Slurm installed (the CI does): ask for flexrun's srun explicitly.
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("srun");
    let script = "#!/bin/bash\n#SBATCH --job-name=ddp\n#SBATCH --nodes=1\n\
                  #SBATCH --gres=gpu:1g.5gb:3\n#SBATCH --time=00:05:00\n\
                  srun --ntasks=3 --cpus-per-task=1 --mpi=none bash -c \\\n\
                  'echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS $WORLD_SIZE $CUDA_VISIBLE_DEVICES > rank-$SLURM_PROCID'\n\
                  srun -n 2 -l bash -c 'echo world $WORLD_SIZE'\n";
    let job = submit(&d, &dir, "job.sh", script, &[]);
    let v = d.wait_finished(job);
    let out = std::fs::read_to_string(dir.join(format!("flex-{job}.out"))).unwrap_or_default();
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{out}\n{}", d.log());
    let leaves: Vec<String> = v
        .alloc
        .unwrap()
        .leaves
        .into_iter()
        .map(|l| l.uuid)
        .collect();
    for r in 0..leaves.len() {
        let line = std::fs::read_to_string(dir.join(format!("rank-{r}"))).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            f[..4],
            [&*r.to_string(), &*r.to_string(), "3", "3"],
            "{line}"
        );
        // Without --gpus-per-task every task sees all of the job's GPUs, as in Slurm.
        assert_eq!(f[4], leaves.join(","), "task {r}");
    }
    // -n 2 of 3 leaves: a world of 2, labelled lines.
    assert!(
        out.contains("0: world 2") && out.contains("1: world 2"),
        "{out}"
    );

    // The job's own -n: an srun line without one starts that many ranks, as in Slurm, and
    // scontrol show hostnames names the host.
    let script = "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --gres=gpu:3\n\
                  echo $SLURM_NTASKS $FLEX_NTASKS > tasks\n\
                  scontrol show hostnames \"$SLURM_JOB_NODELIST\" > hosts\n\
                  srun bash -c 'echo $SLURM_PROCID $WORLD_SIZE > n-$SLURM_PROCID'\n";
    let job = submit(&d, &dir, "ntasks.sh", script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    assert_eq!(std::fs::read_to_string(dir.join("tasks")).unwrap(), "2 2\n");
    let host = v.alloc.as_ref().unwrap().host.clone();
    assert_eq!(
        std::fs::read_to_string(dir.join("hosts")).unwrap(),
        format!("{host}\n")
    );
    for r in 0..2 {
        let line = std::fs::read_to_string(dir.join(format!("n-{r}"))).unwrap();
        assert_eq!(line, format!("{r} 2\n"));
    }
    assert!(!dir.join("n-2").exists(), "a third rank ran");

    // torchrun: each worker on its own leaf, alone on its node, the global rank as usual.
    let script = "#!/bin/bash\n#SBATCH --gres=gpu:2\n\
                  torchrun --standalone --nnodes=1 --nproc_per_node=2 --no-python bash -c \\\n\
                  'echo $RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $WORLD_SIZE $CUDA_VISIBLE_DEVICES > torch-$RANK'\n";
    let job = submit(&d, &dir, "torch.sh", script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    let leaves: Vec<String> = v
        .alloc
        .unwrap()
        .leaves
        .into_iter()
        .map(|l| l.uuid)
        .collect();
    for (r, leaf) in leaves.iter().enumerate() {
        let line = std::fs::read_to_string(dir.join(format!("torch-{r}"))).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f, [&*r.to_string(), "0", "1", "2", leaf], "{line}");
    }

    // Off: no srun function; the script's srun is whatever the host has.
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"off\"");
    let dir = d.scratch("nosrun");
    let job = submit(
        &d,
        &dir,
        "job.sh",
        "#!/bin/bash\ndeclare -F srun && exit 3\ntrue\n",
        &[],
    );
    let v = d.wait_finished(job);
    assert_eq!(
        (v.state, v.exit_code),
        (JobState::Completed, Some(0)),
        "{v:?}"
    );
}

/// The lines of `dir/file`, or nothing.
fn lines(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// How many CPUs a `Cpus_allowed_list` value (`0-3,8`) names.
fn cpu_count(list: &str) -> usize {
    list.split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn srun_starts_the_jobs_tasks_as_slurm_does_from_any_program() {
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("tasks");
    // Each task writes: its id, the task count, its GPUs, -c and the CPUs it may use.
    let task = "echo $SLURM_PROCID $SLURM_NTASKS ${CUDA_VISIBLE_DEVICES:-none} \
                ${SLURM_CPUS_PER_TASK:-unset} $(grep Cpus_allowed_list /proc/self/status | cut -f2)";

    // --gpus=2 and a bare srun: one task that sees both leaves, as on a Slurm node whose MIG
    // instances are its GPUs.
    let script = format!(
        "#!/bin/bash\n#SBATCH --gpus=2\necho ${{SLURM_NTASKS:-unset}} $SLURM_TASKS_PER_NODE > batch\n\
         srun bash -c '{task}' > gpus2\n"
    );
    let job = submit(&d, &dir, "gpus2.sh", &script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    assert_eq!(v.alloc.as_ref().unwrap().leaves.len(), 2);
    // Without -n, SLURM_TASKS_PER_NODE counts what the job's CPUs hold (one per leaf here).
    assert_eq!(lines(&dir, "batch"), ["unset 2"]);
    let out = lines(&dir, "gpus2");
    assert_eq!(out.len(), 1, "{out:?}");
    let f: Vec<&str> = out[0].split_whitespace().collect();
    assert_eq!(f[..2], ["0", "1"]);
    assert_eq!(f[2].split(',').count(), 2, "{out:?}");

    // -n 1 -c 10 --gres=gpu:4: one task with four leaves and ten cores.
    let script =
        format!("#!/bin/bash\n#SBATCH -n 1 -c 10 --gres=gpu:4\nsrun bash -c '{task}' > c10\n");
    let job = submit(&d, &dir, "c10.sh", &script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    let out = lines(&dir, "c10");
    assert_eq!(out.len(), 1, "{out:?}");
    let f: Vec<&str> = out[0].split_whitespace().collect();
    assert_eq!((f[0], f[1], f[3]), ("0", "1", "10"), "{out:?}");
    assert_eq!(f[2].split(',').count(), 4, "{out:?}");
    let online = gres_plugin::cpus::online_cores().len();
    if online >= 10 {
        assert_eq!(cpu_count(f[4]), 10, "{out:?}");
    }

    // A job without a GPU: srun -n 4 starts four tasks (none sees a GPU); srun and scontrol
    // are found by sh -c and by a Python subprocess; TMPDIR is the job's own.
    let python = "import subprocess; \
                  print(subprocess.run(['scontrol', 'show', 'hostnames'], capture_output=True, \
                  text=True, check=True).stdout.strip())";
    let script = format!(
        "#!/bin/bash\n#SBATCH -n 4\n\
         srun bash -c '{task}' | sort > cpu4\n\
         sh -c 'srun -n 2 true' && echo sh-ok > sh\n\
         if command -v python3 >/dev/null; then python3 -c \"{python}\" > py; else hostname > py; fi\n\
         echo \"$TMPDIR\" > tmpdir\nstat -c %a \"$TMPDIR\" >> tmpdir\n\
         [ \"$SLURM_TMPDIR\" = \"$TMPDIR\" ] && touch \"$TMPDIR/scratch\" && echo same >> tmpdir\n"
    );
    let job = submit(&d, &dir, "cpu4.sh", &script, &[]);
    let v = d.wait_finished(job);
    let log = std::fs::read_to_string(dir.join(format!("flex-{job}.out"))).unwrap_or_default();
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{log}\n{}", d.log());
    let out = lines(&dir, "cpu4");
    assert_eq!(out.len(), 4, "{out:?}");
    for (r, l) in out.iter().enumerate() {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f[..3], [r.to_string().as_str(), "4", "none"], "{out:?}");
    }
    assert_eq!(lines(&dir, "sh"), ["sh-ok"]);
    let host = v.alloc.as_ref().unwrap().host.clone();
    assert_eq!(lines(&dir, "py"), [host]);
    let t = lines(&dir, "tmpdir");
    assert_eq!(t[1..], ["700", "same"], "{t:?}");
    assert!(t[0].starts_with(&format!("/tmp/flex-job-{job}.")), "{t:?}");
    assert!(!Path::new(&t[0]).exists(), "the job's TMPDIR outlived it");

    // Shapes the job does not hold are refused by name.
    let job = submit(
        &d,
        &dir,
        "bad.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:2\nsrun --gpus-per-task=2 -n 2 true\n",
        &[],
    );
    let v = d.wait_finished(job);
    let log = std::fs::read_to_string(dir.join(format!("flex-{job}.out"))).unwrap_or_default();
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    assert!(
        log.contains("srun: 2 tasks of 2 GPUs each need 4 GPUs; the job holds 2"),
        "{log}"
    );
}

/// Whether python3 is installed; CI=true must have it (`.ci/run` installs it).
fn python3() -> bool {
    let here = std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok();
    assert!(
        here || std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: python3 must be installed"
    );
    here
}

#[test]
fn a_job_requeues_itself_through_scontrol_and_knows_its_restart_count() {
    if !python3() {
        return;
    }
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("requeue");
    // As PyTorch Lightning's auto-requeue does on its --signal: scontrol requeue from Python.
    let script = "#!/bin/bash\n#SBATCH --gres=gpu:1 --signal=SIGUSR1@90 --open-mode=append\n\
                  echo \"run ${SLURM_RESTART_COUNT:-0}\" >> runs\n\
                  if [ -z \"$SLURM_RESTART_COUNT\" ]; then\n\
                  python3 -c 'import os, subprocess; subprocess.run([\"scontrol\", \"requeue\", os.environ[\"SLURM_JOB_ID\"]], check=True)'\n\
                  sleep 60\nfi\n";
    let job = submit(&d, &dir, "requeue.sh", script, &[]);
    let v = wait_for("the requeued job to complete", || {
        let v = d.job(job)?;
        (v.state == JobState::Completed).then_some(v)
    });
    assert_eq!(v.state, JobState::Completed);
    assert_eq!(lines(&dir, "runs"), ["run 0", "run 1"]);
}

#[test]
fn an_mmcv_style_slurm_launcher_finds_its_variables() {
    if !python3() {
        return;
    }
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("mmcv");
    // What mmcv's `_init_dist_slurm` reads, and how it asks scontrol (through a shell).
    let launcher = "import os, subprocess\n\
                    proc_id = int(os.environ['SLURM_PROCID'])\n\
                    ntasks = int(os.environ['SLURM_NTASKS'])\n\
                    node_list = os.environ['SLURM_NODELIST']\n\
                    addr = subprocess.getoutput(f'scontrol show hostname {node_list} | head -n1')\n\
                    gpus = len(os.environ['CUDA_VISIBLE_DEVICES'].split(','))\n\
                    with open(f'mmcv-{proc_id}', 'w') as f:\n\
                    \x20   f.write(f'{proc_id} {ntasks} {addr} {proc_id % gpus} {gpus}\\n')\n";
    std::fs::write(dir.join("launch.py"), launcher).unwrap();
    let script = "#!/bin/bash\n#SBATCH --ntasks-per-node=2 --gpus-per-task=1 -c 1\n\
                  srun python3 -u launch.py --launcher=slurm\n";
    let job = submit(&d, &dir, "mmcv.sh", script, &[]);
    let v = d.wait_finished(job);
    let out = std::fs::read_to_string(dir.join(format!("flex-{job}.out"))).unwrap_or_default();
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{out}\n{}", d.log());
    let host = v.alloc.as_ref().unwrap().host.clone();
    for r in 0..2 {
        // Each task sees its own leaf, so its local rank among its GPUs is 0.
        assert_eq!(
            lines(&dir, &format!("mmcv-{r}")),
            [format!("{r} 2 {host} 0 1")],
            "{out}"
        );
    }
}

#[test]
fn sacctmgr_and_sshare_show_the_users_account_and_qos() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("accounts");
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap();
    let account = nix::unistd::Group::from_gid(me.gid)
        .unwrap()
        .map_or_else(|| me.gid.to_string(), |g| g.name);
    let job = submit(&d, &dir, "one.sh", "#!/bin/sh\ntrue\n", &[]);
    assert_eq!(d.wait_finished(job).account, account);
    // `flex-slurm NAME ARGS` is the command NAME.
    let slurm = |args: &[&str]| {
        let o = cmd(&d, "flex-slurm").args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        text(&o.stdout)
    };
    assert_eq!(
        slurm(&["sshare", "-U", "-P", "-h", "-o", "Account,User"]),
        format!("{account}|{}\n", me.name)
    );
    assert_eq!(
        slurm(&["sshare", "-U", "--format", "Account%12", "--noheader"]),
        format!("{account:>12}\n")
    );
    let user = format!("user={}", me.name);
    assert_eq!(
        slurm(&[
            "sacctmgr",
            "-nP",
            "show",
            "assoc",
            "where",
            &user,
            "format=cluster,account,user,qos,defaultqos",
        ]),
        format!("flex|{account}|{}|normal|normal\n", me.name)
    );
    let out = slurm(&["sacctmgr", "show", "qos", "format=name,maxwall%8"]);
    assert_eq!(
        out,
        "      Name  MaxWall\n---------- --------\n    normal         \n"
    );
    // Changes are flexd.toml's, and another cluster is not this host.
    for bad in [
        &["sacctmgr", "-i", "add", "user", "bob", "account=lab"][..],
        &["sacctmgr", "show", "user", "cluster=elsewhere"],
        &["sacctmgr", "show", "qos", "format=name,colour"],
    ] {
        let o = cmd(&d, "flex-slurm").args(bad).output().unwrap();
        assert!(!o.status.success(), "{bad:?}: {o:?}");
        assert!(!text(&o.stderr).is_empty(), "{bad:?}: {o:?}");
    }
}

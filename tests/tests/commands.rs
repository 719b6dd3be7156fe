//! The user commands end to end: the real flexsub, flexq, flexcancel and flexrun binaries
//! against the real flexd on the simulated a100-40gb-x2 topology (two A100-40GB, GPU 0 on NUMA
//! node 0 with cores 0-15, GPU 1 on node 1 with cores 16-31; six 1g.5gb and one 1g.10gb leaf
//! each). Jobs really run, as the submitting user.
//!
//! The Slurm side (squeue's formats, sbatch scripts, srun and torchrun lines): `commands_slurm.rs`.

use flex_proto::{JobState, WouldStart};
use flex_tests::cli::{cmd, flexq_json, submit, text, wait_running};
use flex_tests::{wait_for, Daemon};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

const TOPOLOGY: &str = "a100-40gb-x2.toml";

/// The NUMA node's cores on the a100 testbed.
fn numa_cores(gpu: u32) -> std::ops::RangeInclusive<u32> {
    match gpu {
        0 => 0..=15,
        _ => 16..=31,
    }
}

#[test]
fn a_four_leaf_job_gives_each_rank_its_leaf_rank_port_and_numa_cores() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("ddp");
    let job = submit(
        &d,
        &dir,
        "ddp.sh",
        "#!/bin/sh\n#FLEX --leaves 4 --cpus-per-gpu 2 --time 5:00\n#FLEX -o ddp-%j.out\n\
         flexrun --label sh -c 'echo $RANK $CUDA_VISIBLE_DEVICES $MASTER_PORT $FLEX_RANK_CPUS'\n",
        &[],
    );
    let view = d.wait_finished(job);
    let out = std::fs::read_to_string(dir.join(format!("ddp-{job}.out"))).unwrap_or_default();
    assert_eq!(
        view.state,
        JobState::Completed,
        "{view:?}\n{out}\n{}",
        d.log()
    );
    let alloc = view.alloc.expect("a finished job keeps its allocation");
    let gpu_of: BTreeMap<&str, u32> = alloc
        .leaves
        .iter()
        .map(|l| (l.uuid.as_str(), l.gpu))
        .collect();
    let mut ranks = BTreeSet::new();
    let mut uuids = BTreeSet::new();
    let mut ports = BTreeSet::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [label, rank, uuid, port, cpus] = w[..] else {
            panic!("unexpected line {line:?} in\n{out}");
        };
        assert_eq!(label, format!("{rank}:"));
        assert!(uuid.starts_with("MIG-"), "{line}");
        ranks.insert(rank.parse::<u32>().unwrap());
        uuids.insert(uuid.to_string());
        ports.insert(port.to_string());
        let gpu = gpu_of[uuid];
        let cores = gres_plugin::topology::parse_cpu_list(cpus).unwrap();
        assert_eq!(cores.len(), 2, "{line}");
        assert!(
            cores.iter().all(|c| numa_cores(gpu).contains(c)),
            "rank {rank} on GPU {gpu} got cores {cpus}"
        );
    }
    assert_eq!(ranks, (0..4).collect(), "{out}");
    assert_eq!(uuids.len(), 4, "{out}");
    assert_eq!(ports.len(), 1, "{out}");
}

#[test]
fn a_six_leaf_job_spreads_three_and_three_and_flexq_shows_it() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("six");
    let job = submit(
        &d,
        &dir,
        "six.sh",
        "#!/bin/sh\nsleep 600\n",
        &["--leaves", "6"],
    );
    wait_running(&d, job);
    let jobs = flexq_json(&d, &[]);
    let v = jobs
        .iter()
        .find(|j| j.id == job)
        .expect("flexq lists the job");
    let alloc = v.alloc.as_ref().expect("a running job has an allocation");
    let mut per_gpu: BTreeMap<u32, usize> = BTreeMap::new();
    for l in &alloc.leaves {
        *per_gpu.entry(l.gpu).or_default() += 1;
    }
    assert_eq!(
        per_gpu.into_values().collect::<Vec<_>>(),
        [3, 3],
        "{alloc:?}"
    );

    let out = cmd(&d, "flexq").output().unwrap();
    let table = text(&out.stdout);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "JOBID",
            "NAME",
            "USER",
            "ST",
            "TIME",
            "TIME_LIMIT",
            "LEAVES",
            "START",
            "NODELIST(REASON)"
        ]
    );
    let row: Vec<&str> = lines
        .next()
        .expect("one job row")
        .split_whitespace()
        .collect();
    assert_eq!(row[0], job.to_string());
    assert_eq!(row[1], "six.sh");
    assert_eq!(row[3], "R");
    assert_eq!(row[5], "1:00:00");
    assert_eq!(row[6], "6");
    assert_eq!(row[8], alloc.host);
    let noheader = text(&cmd(&d, "flexq").arg("-h").output().unwrap().stdout);
    assert_eq!(noheader.lines().count(), 1, "{noheader}");
    // Into a pipe nobody reads (`flexq | head` once head is done): gone quietly, as squeue.
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    let out = cmd(&d, "flexq").stdout(w).output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    let leaves = text(&cmd(&d, "flexq").arg("--leaves").output().unwrap().stdout);
    let held = leaves
        .lines()
        .filter(|l| l.ends_with(&format!(" {job}")))
        .count();
    assert_eq!(leaves.lines().count(), 1 + 14, "{leaves}");
    assert_eq!(held, 6, "{leaves}");

    let out = cmd(&d, "flexcancel").arg(job.to_string()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
}

#[test]
fn flexsub_wait_returns_with_the_jobs_exit_code() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("wait");
    let run = |script: &str, args: &[&str]| {
        std::fs::write(dir.join("w.sh"), script).unwrap();
        cmd(&d, "flexsub")
            .current_dir(&dir)
            .args(args)
            .arg("w.sh")
            .output()
            .unwrap()
    };
    let out = run(
        "#!/bin/sh\nsleep 1\necho done > done\nexit 3\n",
        &["--wait"],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // It returned after the job ended, not when it was queued.
    assert!(dir.join("done").exists());
    assert!(
        text(&out.stdout).starts_with("Submitted batch job "),
        "{out:?}"
    );
    let out = run("#!/bin/sh\ntrue\n", &["-W", "--parsable"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run("#!/bin/sh\nsleep 30\n", &["--wait", "--time", "0:02"]);
    assert_eq!(out.status.code(), Some(1), "a timeout is exit 1: {out:?}");
    assert!(
        !text(&out.stderr).contains("note:"),
        "a given --time needs no note: {out:?}"
    );
}

#[test]
fn signal_warns_the_job_before_its_time_limit() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("warn");
    // A checkpointing script, as Lightning's SLURMEnvironment expects: USR1 to the batch shell
    // 4 s before a 6 s limit; it saves and exits cleanly.
    let script = "#!/bin/bash\n#SBATCH --time=0:06\n#SBATCH --signal=B:USR1@4\n\
                  trap 'echo checkpoint > saved; exit 0' USR1\n\
                  for i in $(seq 100); do sleep 0.1; done\necho too-late > late\n";
    let job = submit(&d, &dir, "ckpt.sh", script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(
        (v.state, v.exit_code),
        (JobState::Completed, Some(0)),
        "{v:?}\n{}",
        d.log()
    );
    assert!(dir.join("saved").exists() && !dir.join("late").exists());
    // Without B: the whole job gets it (here a child that traps it).
    let script = "#!/bin/bash\n#SBATCH --time=0:06\n#SBATCH --signal=USR2@5\n\
                  bash -c 'trap \"echo child > child; exit 0\" USR2; while :; do sleep 0.1; done'\n";
    let job = submit(&d, &dir, "group.sh", script, &[]);
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    assert!(dir.join("child").exists());
    // A bad one is refused with the line named.
    std::fs::write(
        dir.join("bad.sh"),
        "#!/bin/sh\n#SBATCH --signal=R:USR1@60\ntrue\n",
    )
    .unwrap();
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .arg("bad.sh")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("bad.sh:2: #SBATCH --signal=R:USR1@60"),
        "{out:?}"
    );
}

#[test]
fn a_job_over_its_time_limit_ends_in_timeout() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("timeout");
    let job = submit(
        &d,
        &dir,
        "slow.sh",
        "#!/bin/sh\n#SBATCH --time=0:02\nsleep 600\n",
        &[],
    );
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Timeout, "{v:?}");
    let out = cmd(&d, "flexq").args(["-t", "TO", "-h"]).output().unwrap();
    let row: Vec<String> = text(&out.stdout)
        .lines()
        .next()
        .expect("flexq -t TO shows the job")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(
        (row[0].as_str(), row[3].as_str(), row[5].as_str()),
        (job.to_string().as_str(), "TO", "0:02")
    );
}

#[test]
fn flexcancel_cancels_own_jobs_and_refuses_other_users() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("cancel");
    let script =
        "#!/bin/sh\ntrap 'echo usr1 >> usr1.log' USR1\ntouch ready\nwhile true; do sleep 1; done\n";
    let job = submit(&d, &dir, "c.sh", script, &[]);
    wait_running(&d, job);
    // The tests run as root (see .ci/run); `nobody` stands in for another user.
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the end-to-end tests run as root"
    );
    let out = cmd(&d, "flexcancel")
        .arg(job.to_string())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("job {job}")) && err.contains("permission denied"),
        "{err}"
    );
    assert_eq!(d.job(job).unwrap().state, JobState::Running);

    wait_for("the job's trap", || {
        dir.join("ready").exists().then_some(())
    });
    // flexd may answer "still starting" until the job's supervisor has reported in.
    wait_for("flexcancel -s USR1 to succeed", || {
        let out = cmd(&d, "flexcancel")
            .args(["-s", "USR1", &job.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success() || text(&out.stderr).contains("still starting"),
            "{out:?}"
        );
        out.status.success().then_some(())
    });
    wait_for("the job's USR1 trap", || {
        std::fs::read_to_string(dir.join("usr1.log"))
            .ok()
            .filter(|l| l.contains("usr1"))
    });
    assert_eq!(d.job(job).unwrap().state, JobState::Running);
    let out = cmd(&d, "flexcancel").arg(job.to_string()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(d.wait_finished(job).state, JobState::Cancelled);
    let out = cmd(&d, "flexcancel").arg("9999").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("job 9999"), "{out:?}");
}

#[test]
fn malformed_scripts_are_rejected_with_line_numbers_and_nothing_is_queued() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("bad");
    let cases = [
        (
            "t.sh",
            "#!/bin/sh\n#SBATCH -J t\n\n#SBATCH --time=abc\ntrue\n",
            "t.sh:4: #SBATCH --time=abc: invalid time \"abc\"",
        ),
        (
            "l.sh",
            "#!/bin/sh\n#FLEX --leaves=two\n",
            "l.sh:2: #FLEX --leaves=two: invalid leaves \"two\"",
        ),
        (
            "f.sh",
            "#!/bin/sh\n#FLEX --gpu-fraction NaN\n",
            "f.sh:2: #FLEX --gpu-fraction NaN: invalid GPU fraction \"NaN\"",
        ),
        (
            "u.sh",
            "#!/bin/sh\n#SBATCH --frobnicate=1\n",
            "u.sh:2: #SBATCH --frobnicate=1: unknown option \"--frobnicate\"",
        ),
        (
            "m.sh",
            "#!/bin/sh\n#SBATCH --mem=16X\n",
            "m.sh:2: #SBATCH --mem=16X: invalid size \"16X\"",
        ),
    ];
    for (name, script, want) in cases {
        std::fs::write(dir.join(name), script).unwrap();
        let out = cmd(&d, "flexsub")
            .current_dir(&dir)
            .arg(name)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            text(&out.stderr).starts_with(&format!("flexsub: {want}")),
            "{out:?}"
        );
    }
    // Every bad line at once, each on its own line of the error.
    let all =
        "#!/bin/sh\n#SBATCH --time=abc\n#SBATCH -J fine\n#FLEX --leaves=-1\n#SBATCH --mem=16X\n";
    std::fs::write(dir.join("all.sh"), all).unwrap();
    let out = cmd(&d, "flexsub")
        .current_dir(&dir)
        .arg("all.sh")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    for (line, at) in lines.iter().zip(["all.sh:2:", "all.sh:4:", "all.sh:5:"]) {
        assert!(line.starts_with(&format!("flexsub: {at}")), "{err}");
    }
    let out = cmd(&d, "flexsub")
        .args(["--leaves", "15", "--wrap", "true"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a request larger than the host: {out:?}"
    );
    assert!(!text(&out.stderr).trim().is_empty());
    assert!(
        flexq_json(&d, &["-t", "all"]).is_empty(),
        "something was queued"
    );
}

#[test]
fn test_only_prints_the_placement_and_queues_nothing() {
    let d = Daemon::start(TOPOLOGY);
    let out = cmd(&d, "flexsub")
        .args(["--test-only", "--leaves", "4", "-c", "2", "--wrap", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}\n{}", d.log());
    let s = text(&out.stdout);
    assert!(
        s.contains("job would start now on") && s.contains("using 4 leaves"),
        "{s}"
    );
    assert_eq!(s.matches("MIG-").count(), 4, "{s}");
    let out = cmd(&d, "flexsub")
        .args([
            "--test-only",
            "--json",
            "--gres=gpu:1g.10gb:1",
            "--wrap",
            "true",
        ])
        .output()
        .unwrap();
    let ws: WouldStart = serde_json::from_slice(&out.stdout).expect("--json is a WouldStart");
    let alloc = ws.alloc.expect("an idle host starts it now");
    assert_eq!(alloc.leaves.len(), 1);
    assert_eq!(alloc.leaves[0].profile, "1g.10gb");
    assert!(flexq_json(&d, &["-t", "all"]).is_empty());
}

/// The working directory and the output pattern reach the job.
#[test]
fn chdir_and_output_patterns_apply() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("out");
    let work: PathBuf = d.scratch("work");
    let job = submit(
        &d,
        &dir,
        "pwd.sh",
        "#!/bin/sh\n#FLEX -J named -o %x-%j-%u.log\npwd\necho $FLEX_JOB_NAME\n",
        &["-D", work.to_str().unwrap()],
    );
    assert_eq!(d.wait_finished(job).state, JobState::Completed);
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::effective())
        .unwrap()
        .unwrap()
        .name;
    let log = std::fs::read_to_string(work.join(format!("named-{job}-{user}.log"))).unwrap();
    let mut lines = log.lines();
    assert_eq!(
        Path::new(lines.next().unwrap()).canonicalize().unwrap(),
        work.canonicalize().unwrap()
    );
    assert_eq!(lines.next().unwrap().trim(), "named");
}

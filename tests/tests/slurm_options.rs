//! sbatch's options as Slurm scripts give them, end to end with the real binaries against the
//! real flexd on the simulated a100-40gb-x2 topology (two A100-40GB, 14 leaves, 32 cores):
//! what is honoured, what is ignored with one warning, what is refused and why, and the
//! options flexd itself carries out (`--comment`, `--begin`, `--exclusive`, `--open-mode`,
//! `--constraint`, `--mail-type`).

use flex_proto::JobState;
use flex_tests::cli::{cmd, flexq_json, submit, text};
use flex_tests::{wait_for, Daemon};
use std::os::unix::fs::PermissionsExt;

const TOPOLOGY: &str = "a100-40gb-x2.toml";

fn hostname() -> String {
    nix::unistd::gethostname().unwrap().into_string().unwrap()
}

/// Run flexsub on `script` (written as `name` in `dir`) and return its output.
fn flexsub(d: &Daemon, dir: &std::path::Path, name: &str, script: &str) -> std::process::Output {
    std::fs::write(dir.join(name), script).unwrap();
    cmd(d, "flexsub")
        .current_dir(dir)
        .args(["--parsable", name])
        .output()
        .unwrap()
}

#[test]
fn a_slurm_script_with_host_options_runs_with_one_warning_per_ignored_option() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("opts");
    let script = format!(
        "#!/bin/bash\n\
         #SBATCH --job-name=tuned\n\
         #SBATCH --nodes=1 --ntasks=1 --cpus-per-task=8\n\
         #SBATCH --gres=gpu:4\n\
         #SBATCH --mem-per-cpu=4G --hint=nomultithread\n\
         #SBATCH --nodelist={host} --exclude=other-node[01-04]\n\
         #SBATCH --comment=\"lr sweep 3/9\"\n\
         #SBATCH --constraint=a100&40gb\n\
         echo \"$SLURM_JOB_ID $FLEX_LEAVES $FLEX_CPUS_PER_LEAF\" > env.txt\n",
        host = hostname()
    );
    let out = flexsub(&d, &dir, "job.sh", &script);
    assert!(out.status.success(), "{out:?}\n{}", d.log());
    let err = text(&out.stderr);
    assert!(
        !err.contains("--mem-per-cpu"),
        "host memory is honoured: {err}"
    );
    assert_eq!(err.matches("--hint is ignored").count(), 1, "{err}");
    let job: u64 = text(&out.stdout).trim().parse().unwrap();
    let v = d.wait_finished(gres_plugin::JobId(job));
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    // One task of 8 cores over 4 leaves: 2 cores per leaf (Slurm's -c), not 8 per leaf; 4G
    // of host memory for each of the 8.
    assert_eq!(v.request.cpus, 8);
    let alloc = v.alloc.as_ref().unwrap();
    assert_eq!((alloc.cores.len(), alloc.mem_bytes), (8, 32 << 30));
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    assert_eq!(env.trim(), format!("{job} 4 2"));
    let comment = text(
        &cmd(&d, "flexq")
            .args(["-t", "all", "-h", "-o", "%i|%k"])
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(comment, format!("{job}|lr sweep 3/9\n"));
    let show = cmd(&d, "flexcontrol")
        .args(["show", "job", &job.to_string()])
        .output()
        .unwrap();
    let shown = text(&show.stdout);
    assert!(shown.contains("Comment=lr sweep 3/9"), "{show:?}");
    // Where the job ran and wrote, as scontrol shows it: the script's path, the directory and
    // the output paths with the job's id filled in.
    let dir = dir.canonicalize().unwrap();
    let dir = dir.display();
    for line in [
        format!("   Command={dir}/job.sh\n"),
        format!("   WorkDir={dir}\n"),
        format!("   StdErr={dir}/flex-{job}.out\n"),
        "   StdIn=/dev/null\n".to_string(),
        format!("   StdOut={dir}/flex-{job}.out"),
    ] {
        assert!(shown.contains(&line), "{line:?} in {shown}");
    }
}

#[test]
fn options_flex_cannot_honour_are_refused_naming_the_line() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("refused");
    let out = flexsub(
        &d,
        &dir,
        "job.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3\n\
         #SBATCH -w elsewhere01\n#SBATCH --uid=0\ntrue\n",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("job.sh:3: #SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3: --container-image is refused"), "{err}");
    assert!(
        err.contains("job.sh:4: #SBATCH -w elsewhere01: --nodelist names elsewhere01"),
        "{err}"
    );
    assert!(
        err.contains("job.sh:5: #SBATCH --uid=0: --uid is refused"),
        "{err}"
    );
    // A constraint no feature of this host meets: flexd refuses it, naming the option.
    let out = flexsub(&d, &dir, "h100.sh", "#!/bin/bash\n#SBATCH -C h100\ntrue\n");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("--constraint=h100"), "{err}");
    assert!(err.contains("a100") && err.contains("1g.5gb"), "{err}");
    assert!(flexq_json(&d, &["-t", "all"]).is_empty());
}

#[test]
fn begin_exclusive_and_open_mode() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("begin");
    let later = submit(
        &d,
        &dir,
        "later.sh",
        "#!/bin/sh\n#SBATCH --begin=now+3\ntrue\n",
        &[],
    );
    let v = d.job(later).unwrap();
    assert_eq!(
        (v.state, v.reason.as_deref()),
        (JobState::Pending, Some("BeginTime"))
    );
    let v = d.wait_finished(later);
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    // flexsub's clock read `now` at most a second before flexd's did.
    assert!(v.start_time.unwrap() >= v.submit_time + 2, "{v:?}");

    // --exclusive: the whole host, every leaf, core and byte of memory.
    let whole = submit(
        &d,
        &dir,
        "whole.sh",
        "#!/bin/sh\n#SBATCH --exclusive --gres=gpu:1\necho $FLEX_LEAVES > whole.txt\n",
        &[],
    );
    let v = d.wait_finished(whole);
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    assert!(v.request.exclusive);
    let alloc = v.alloc.as_ref().unwrap();
    assert_eq!((alloc.leaves.len(), alloc.cores.len()), (14, 32));
    let leaves = std::fs::read_to_string(dir.join("whole.txt")).unwrap();
    assert_eq!(leaves.trim(), "14");

    // A GPU by its model: one leaf of an A100, whatever its profile (a GPU is one leaf).
    let a100 = submit(
        &d,
        &dir,
        "a100.sh",
        "#!/bin/sh\n#SBATCH --gpus-per-node=a100:1\necho $FLEX_LEAVES > a100.txt\n",
        &[],
    );
    let v = d.wait_finished(a100);
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{}", d.log());
    assert_eq!(
        (v.request.leaves, v.request.leaf_type.as_deref()),
        (Some(1), None)
    );
    let leaves = std::fs::read_to_string(dir.join("a100.txt")).unwrap();
    assert_eq!(leaves.trim(), "1");

    // --open-mode: append keeps what the file held, truncate (the default) does not.
    for (mode, kept) in [("append", true), ("truncate", false)] {
        let out = dir.join(format!("{mode}.log"));
        std::fs::write(&out, "before\n").unwrap();
        let script = format!("#!/bin/sh\n#SBATCH -o {mode}.log --open-mode={mode}\necho after\n");
        let job = submit(&d, &dir, "mode.sh", &script, &[]);
        assert_eq!(d.wait_finished(job).state, JobState::Completed);
        let want = if kept { "before\nafter\n" } else { "after\n" };
        assert_eq!(std::fs::read_to_string(&out).unwrap(), want, "{mode}");
    }
}

#[test]
fn mail_goes_through_the_configured_sendmail() {
    let spool = tempfile::tempdir().unwrap();
    let fake = spool.path().join("sendmail");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" > {dir}/args\ncat > {dir}/mail.$$.tmp\nmv {dir}/mail.$$.tmp {dir}/mail.$$\n",
            dir = spool.path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(spool.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = Daemon::start_with(TOPOLOGY, &format!("sendmail = \"{}\"", fake.display()));
    let dir = d.scratch("mail");
    let ok = submit(
        &d,
        &dir,
        "ok.sh",
        "#!/bin/sh\n#SBATCH --mail-type=BEGIN,END --mail-user=ana@example.org\ntrue\n",
        &[],
    );
    let bad = submit(
        &d,
        &dir,
        "bad.sh",
        "#!/bin/sh\n#SBATCH --mail-type=FAIL\nexit 3\n",
        &[],
    );
    d.wait_finished(ok);
    d.wait_finished(bad);
    let mails = wait_for("three mails", || {
        let mut m: Vec<String> = std::fs::read_dir(spool.path())
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name()?.to_str()?.to_string();
                (name.starts_with("mail.") && !name.ends_with(".tmp"))
                    .then(|| std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        m.sort();
        (m.len() == 3).then_some(m)
    });
    let args = std::fs::read_to_string(spool.path().join("args")).unwrap();
    assert_eq!(args.trim(), "-t");
    let find = |what: &str| {
        mails
            .iter()
            .find(|m| m.contains(what))
            .unwrap_or_else(|| panic!("no mail with {what:?}: {mails:?}"))
    };
    let began = find(&format!("Job_id={ok} Name=ok.sh Began"));
    assert!(
        began.starts_with("To: ana@example.org\nSubject: Flex Job_id="),
        "{began}"
    );
    let ended = find(&format!("Job_id={ok} Name=ok.sh Ended"));
    assert!(ended.contains("COMPLETED, ExitCode 0"), "{ended}");
    let failed = find(&format!("Job_id={bad} Name=bad.sh Failed"));
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    assert!(failed.starts_with(&format!("To: {user}\n")), "{failed}");
    assert!(failed.contains("FAILED, ExitCode 3"), "{failed}");

    // Without a sendmail, flexsub says that no mail will come.
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("nomail");
    let out = flexsub(
        &d,
        &dir,
        "job.sh",
        "#!/bin/sh\n#SBATCH --mail-type=ALL\ntrue\n",
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stderr).contains("names no sendmail program"),
        "{out:?}"
    );
}

#[test]
fn flexacct_gives_the_fields_scripts_read_with_max_rss() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("acct");
    // dd fills a 64 MiB buffer: the job's peak resident memory is at least that.
    let job = submit(
        &d,
        &dir,
        "mem.sh",
        "#!/bin/sh\ndd if=/dev/zero of=/dev/null bs=64M count=2 2>/dev/null\nexit 2\n",
        &[],
    );
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Failed, "{v:?}");
    let id = job.to_string();
    let row = wait_for("the peak memory recorded", || {
        let out = cmd(&d, "flexacct")
            .args(["-n", "-P", "-X", "-j", &id])
            .arg("--format=JobID,State,ExitCode,Elapsed,MaxRSS")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let row = text(&out.stdout);
        (!row.trim_end().ends_with('|')).then_some(row)
    });
    let f: Vec<&str> = row.trim_end().split('|').collect();
    assert_eq!(f[..3], [&*id, "FAILED", "2:0"], "{row}");
    assert!(f[3].starts_with("00:00:0"), "{row}");
    let kib: u64 = f[4].strip_suffix('K').unwrap().parse().unwrap();
    assert!(kib >= 64 * 1024, "{row}");
}

#[test]
fn max_rss_is_kept_for_an_end_flexd_reads_from_the_status_file() {
    let mut d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("acct-down");
    let gate = dir.join("go");
    let script = format!(
        "#!/bin/sh\nwhile [ ! -e {} ]; do sleep 0.1; done\n\
         dd if=/dev/zero of=/dev/null bs=64M count=2 2>/dev/null\nexit 2\n",
        gate.display()
    );
    let job = submit(&d, &dir, "mem.sh", &script, &[]);
    d.wait_state(job, &[JobState::Running]);
    // flexd is down when the job ends: its supervisor leaves the end in its status file.
    d.stop();
    std::fs::write(&gate, "").unwrap();
    let status = d.state_dir().join("run").join(format!("{job}.status"));
    wait_for("the status file", || status.exists().then_some(()));
    d.restart();
    assert_eq!(d.wait_finished(job).state, JobState::Failed);
    let out = cmd(&d, "flexacct")
        .args([
            "-n",
            "-P",
            "-X",
            "-j",
            &job.to_string(),
            "--format=State,MaxRSS",
        ])
        .output()
        .unwrap();
    let row = text(&out.stdout);
    let f: Vec<&str> = row.trim_end().split('|').collect();
    assert_eq!(f[0], "FAILED", "{row}");
    let kib: u64 = f[1]
        .strip_suffix('K')
        .unwrap_or_else(|| panic!("{row}"))
        .parse()
        .unwrap();
    assert!(kib >= 64 * 1024, "{row}");
}

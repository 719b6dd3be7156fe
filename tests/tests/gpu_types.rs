//! GPU types and features from other clusters' scripts, and refusals that name the script's
//! line: end to end with the real flexsub against the real flexd on the simulated
//! a100-40gb-x2 topology (two A100-40GB: 1g.5gb and 1g.10gb leaves). `--test-only` checks all
//! a submission checks, so it never says "would start" for a job the queue then refuses.

use flex_proto::JobState;
use flex_tests::cli::{cmd, text};
use flex_tests::Daemon;
use std::path::Path;

const TOPOLOGY: &str = "a100-40gb-x2.toml";

/// flexsub `args` on `script` (written as `name` in `dir`): exit code and stderr.
fn flexsub(
    d: &Daemon,
    dir: &Path,
    name: &str,
    script: &str,
    args: &[&str],
) -> (i32, String, String) {
    std::fs::write(dir.join(name), script).unwrap();
    let o = cmd(d, "flexsub")
        .current_dir(dir)
        .args(args)
        .arg(name)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        text(&o.stdout),
        text(&o.stderr),
    )
}

#[test]
fn a_gpu_type_the_host_lacks_is_refused_naming_the_line_and_the_hosts_types() {
    let d = Daemon::start(TOPOLOGY);
    let dir = d.scratch("types");
    let script = "#!/bin/bash\n#SBATCH -J t\n#SBATCH --gres=gpu:v100:1\ntrue\n";
    for args in [&["--parsable"][..], &["--test-only"]] {
        let (code, _, err) = flexsub(&d, &dir, "v100.sh", script, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("v100.sh:3: #SBATCH --gres=gpu:v100:1: unsatisfiable: GPU type v100"),
            "{err}"
        );
        assert!(
            err.contains("1g.10gb, 1g.5gb (MIG profiles) and 40gb, a100, pcie (models and features of its GPUs)"),
            "{err}"
        );
        assert!(err.contains("[aliases]"), "{err}");
    }
    // sbatch's -G TYPE:N, with this host's model in another case: any one leaf of it.
    let (code, out, err) = flexsub(
        &d,
        &dir,
        "a100.sh",
        "#!/bin/bash\n#SBATCH --gpus=A100:1\ntrue\n",
        &["--parsable"],
    );
    assert_eq!(code, 0, "{err}");
    let job = gres_plugin::JobId(out.trim().parse().unwrap());
    let v = d.wait_finished(job);
    assert_eq!(v.state, JobState::Completed);
    assert_eq!((v.request.leaves, v.request.leaf_type), (Some(1), None));
    // A MIG profile in another case is the host's profile.
    let (code, out, err) = flexsub(
        &d,
        &dir,
        "prof.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1G.10GB:1\ntrue\n",
        &["--parsable"],
    );
    assert_eq!(code, 0, "{err}");
    let v = d.wait_finished(gres_plugin::JobId(out.trim().parse().unwrap()));
    assert_eq!(v.request.leaf_type.as_deref(), Some("1g.10gb"));
}

#[test]
fn a_sites_aliases_map_other_clusters_names_or_accept_them_with_a_warning() {
    let d = Daemon::start_with(
        TOPOLOGY,
        "[aliases]\nA100_40GB = \"a100\"\nv100 = \"1g.10gb\"\nrtx8000 = \"\"\nhaswell = \"\"\nbogus = \"h100\"\n",
    );
    let dir = d.scratch("aliases");
    let run = |name: &str, directive: &str| {
        let script = format!("#!/bin/bash\n{directive}\ntrue\n");
        flexsub(&d, &dir, name, &script, &["--parsable"])
    };
    let (code, out, err) = run("m.sh", "#SBATCH --gres=gpu:A100_40GB:2");
    assert_eq!(code, 0, "{err}");
    let v = d.wait_finished(gres_plugin::JobId(out.trim().parse().unwrap()));
    assert_eq!((v.request.leaves, v.request.leaf_type), (Some(2), None));
    let (code, out, err) = run("v.sh", "#SBATCH --gpus-per-node=v100:1");
    assert_eq!(code, 0, "{err}");
    let v = d.wait_finished(gres_plugin::JobId(out.trim().parse().unwrap()));
    assert_eq!(v.request.leaf_type.as_deref(), Some("1g.10gb"));
    // Accepted and ignored, with a warning that names the line.
    let (code, _, err) = run("r.sh", "#SBATCH --gres=gpu:rtx8000:1");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: r.sh:2: #SBATCH --gres=gpu:rtx8000:1: GPU type rtx8000 is accepted and ignored"),
        "{err}"
    );
    let (code, _, err) = run("c.sh", "#SBATCH --constraint=haswell&a100");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("c.sh:2: #SBATCH --constraint=haswell&a100: --constraint feature haswell is accepted and ignored"),
        "{err}"
    );
    // A feature neither the host's nor mapped names the line and the host's features.
    let (code, _, err) = run("x.sh", "#SBATCH --constraint=skylake");
    assert_eq!(code, 1);
    assert!(
        err.contains("x.sh:2: #SBATCH --constraint=skylake: unsatisfiable: --constraint=skylake: this host's features are"),
        "{err}"
    );
    // An alias to something the host does not have says so.
    let (code, _, err) = run("b.sh", "#SBATCH --gres=gpu:bogus:1");
    assert_eq!(code, 1);
    assert!(err.contains("maps it to h100"), "{err}");
}

#[test]
fn test_only_checks_the_qos_and_limits_a_submission_checks() {
    let d = Daemon::start_with(
        TOPOLOGY,
        "[qos.short]\nmax_time_limit = \"10m\"\n[qos.mine]\nusers = [\"nobody-else\"]\n",
    );
    let dir = d.scratch("testonly");
    let script =
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --qos=short\n#SBATCH -t 1:00:00\ntrue\n";
    let (code, _, test) = flexsub(&d, &dir, "q.sh", script, &["--test-only"]);
    let (code2, _, real) = flexsub(&d, &dir, "q.sh", script, &["--parsable"]);
    assert_eq!((code, code2), (1, 1), "{test}\n{real}");
    assert!(test.contains("q.sh:3: #SBATCH --qos=short: "), "{test}");
    assert_eq!(test, real, "--test-only and a submission refuse alike");
    let script = "#!/bin/bash\n#SBATCH --qos=mine\ntrue\n";
    let (code, _, err) = flexsub(&d, &dir, "m.sh", script, &["--test-only"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("m.sh:2: #SBATCH --qos=mine: "), "{err}");
    // An output directory that does not exist: --test-only says so, and the job makes it.
    let script = "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH -o logs/%x-%j.out\ntrue\n";
    let (code, _, err) = flexsub(&d, &dir, "o.sh", script, &["--test-only"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "note: o.sh:3: #SBATCH -o logs/%x-%j.out: the directory logs does not exist yet"
        ),
        "{err}"
    );
    let (code, out, err) = flexsub(&d, &dir, "o.sh", script, &["--parsable"]);
    assert_eq!(code, 0, "{err}");
    let job: u64 = out.trim().parse().unwrap();
    let v = d.wait_finished(gres_plugin::JobId(job));
    assert_eq!(v.state, JobState::Completed, "{v:?}");
    assert!(dir.join(format!("logs/o.sh-{job}.out")).is_file());
    // And a job that may run still says where.
    let (code, out, err) = flexsub(
        &d,
        &dir,
        "ok.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n",
        &["--test-only"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("would start"), "{out}");
}

//! Slurm scripts as people write them (`tests/slurm-scripts/`) and the shipped examples
//! (`etc/examples/`), each submitted unchanged through the real flexsub to the real flexd on
//! the simulated a100-40gb-x2 topology, run, and their environment checked. The programs they
//! start (`python`, `nvidia-smi`) are stand-ins first on PATH that write down their arguments
//! and the environment they got, one file per process: the scripts themselves are the test.

use flex_proto::{JobState, JobView};
use flex_tests::cli::{cmd, flexq_json, text};
use flex_tests::Daemon;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const TOPOLOGY: &str = "a100-40gb-x2.toml";

/// `python` writes `py-<job>-<array task>-<rank>.env` in its working directory: its arguments,
/// then the variables a training program reads; `nvidia-smi` says there is no GPU.
fn stand_ins(dir: &Path) -> PathBuf {
    let bin = dir.join("stand-ins");
    std::fs::create_dir_all(&bin).unwrap();
    let python = "#!/bin/sh\n\
        f=\"py-${SLURM_JOB_ID:-none}-${SLURM_ARRAY_TASK_ID:-none}-${RANK:-none}.env\"\n\
        { echo \"ARGS=$*\"; env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|\
        CUDA_VISIBLE_DEVICES|MASTER_ADDR|MASTER_PORT|OMP_NUM_THREADS|SLURM_[A-Z_]*)=' | sort; } > \"$f\"\n";
    let smi = "#!/bin/sh\necho 'No devices were found'\nexit 6\n";
    for (name, body) in [("python", python), ("nvidia-smi", smi)] {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// Submit `script` as `name` from `dir` with the stand-ins first on PATH; returns the id and
/// what flexsub said on stderr.
fn submit(d: &Daemon, dir: &Path, name: &str, script: &str, args: &[&str]) -> (u64, String) {
    std::fs::write(dir.join(name), script).unwrap();
    let mut c = cmd(d, "flexsub");
    let path = c
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v)
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = c
        .env("PATH", format!("{}:{path}", stand_ins(dir).display()))
        .current_dir(dir)
        .args(args)
        .args(["--parsable", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {out:?}\n{}", d.log());
    let id = text(&out.stdout)
        .trim()
        .parse()
        .expect("flexsub --parsable");
    (id, text(&out.stderr))
}

/// Every `py-*.env` file `python` left in `dir` for `job`, by rank, each as its variables.
fn ranks(dir: &Path, job: u64) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&format!("py-{job}-")) else {
            continue;
        };
        let vars = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        out.insert(rest.trim_end_matches(".env").to_string(), vars);
    }
    out
}

fn corpus(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("slurm-scripts")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../etc/examples")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn completed(d: &Daemon, dir: &Path, job: u64) -> JobView {
    let v = d.wait_finished(gres_plugin::JobId(job));
    let logs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let n = p.file_name()?.to_str()?.to_string();
            (n.ends_with(".out") || n.ends_with(".err") || n.ends_with(".log"))
                .then(|| format!("{n}: {}", std::fs::read_to_string(&p).unwrap_or_default()))
        })
        .collect();
    assert_eq!(v.state, JobState::Completed, "{v:?}\n{logs:?}\n{}", d.log());
    v
}

fn uuids(v: &JobView) -> Vec<String> {
    v.alloc
        .as_ref()
        .unwrap()
        .leaves
        .iter()
        .map(|l| l.uuid.clone())
        .collect()
}

#[test]
fn single_gpu_ddp_and_torchrun_scripts_run_unchanged() {
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("corpus");

    let (job, warned) = submit(&d, &dir, "single_gpu.sh", &corpus("single_gpu.sh"), &[]);
    assert!(warned.contains("--partition is ignored"), "{warned}");
    let v = completed(&d, &dir, job);
    assert_eq!((v.name.as_str(), v.request.cpus), ("finetune-bert", 4));
    // --mem=32G is host memory, held by the job.
    assert_eq!(v.alloc.as_ref().unwrap().mem_bytes, 32 << 30);
    let r = ranks(&dir, job);
    let py = &r["none-none"];
    assert_eq!(
        py["ARGS"],
        "finetune.py --model bert-base-uncased --epochs 3 --lr 2e-5"
    );
    assert_eq!(py["CUDA_VISIBLE_DEVICES"], uuids(&v)[0]);
    assert_eq!(
        (py["SLURM_JOB_ID"].as_str(), py["OMP_NUM_THREADS"].as_str()),
        (&*job.to_string(), "4")
    );
    let log = std::fs::read_to_string(dir.join(format!("finetune-bert-{job}.out"))).unwrap();
    assert!(log.starts_with(&format!("Job {job} on ")), "{log}");

    // srun: the job's four tasks, each seeing all four leaves (as in Slurm, without
    // --gpus-per-task), Slurm's task variables and the world size.
    // Its output goes to logs/, which must exist when the job starts, as with sbatch.
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let (job, _) = submit(&d, &dir, "ddp_srun.sh", &corpus("ddp_srun.sh"), &[]);
    let v = completed(&d, &dir, job);
    assert_eq!(v.request.cpus, 8, "4 tasks of 2 cores on 4 leaves");
    let alloc = v.alloc.as_ref().unwrap();
    assert_eq!(
        (alloc.cores.len(), alloc.mem_bytes),
        (8, 32 << 30),
        "4G per core"
    );
    let r = ranks(&dir, job);
    let leaves = uuids(&v);
    assert_eq!(r.len(), 4, "{r:?}");
    for i in 0..leaves.len() {
        let py = &r[&format!("none-{i}")];
        assert_eq!(py["CUDA_VISIBLE_DEVICES"], leaves.join(","));
        assert_eq!(
            (py["SLURM_PROCID"].as_str(), py["WORLD_SIZE"].as_str()),
            (&*i.to_string(), "4")
        );
        assert_eq!(py["ARGS"], "train.py --arch resnet50 --batch-size 256");
    }
    let log = std::fs::read_to_string(dir.join(format!("logs/ddp-resnet-{job}.out"))).unwrap();
    assert!(log.contains("WORLD_SIZE=4"), "{log}");

    // torchrun: each worker alone on its node (LOCAL_RANK 0), on its own leaf, started as
    // torchrun starts it (python -u).
    let (job, warned) = submit(&d, &dir, "torchrun.sh", &corpus("torchrun.sh"), &[]);
    assert!(warned.contains("--exclusive=user is ignored"), "{warned}");
    let v = completed(&d, &dir, job);
    let r = ranks(&dir, job);
    for (i, leaf) in uuids(&v).iter().enumerate() {
        let py = &r[&format!("none-{i}")];
        assert_eq!(py["CUDA_VISIBLE_DEVICES"], *leaf);
        assert_eq!(
            (py["LOCAL_RANK"].as_str(), py["WORLD_SIZE"].as_str()),
            ("0", "2")
        );
        assert!(
            py["ARGS"].starts_with("-u train_lora.py --model meta-llama/Llama-2-7b-hf"),
            "{py:?}"
        );
    }
}

#[test]
fn lightning_sweep_mail_constraint_and_gpu_model_scripts_run_unchanged() {
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("corpus2");

    let (job, _) = submit(&d, &dir, "lightning.sh", &corpus("lightning.sh"), &[]);
    let v = completed(&d, &dir, job);
    assert!(v.requeue, "{v:?}");
    assert_eq!(ranks(&dir, job).len(), 2);

    // The array's tasks each get their index and their own learning rate.
    let (array, _) = submit(&d, &dir, "sweep_array.sh", &corpus("sweep_array.sh"), &[]);
    let tasks: Vec<JobView> = flexq_json(&d, &["-t", "all", "-r"])
        .into_iter()
        .filter(|t| t.array.is_some_and(|a| a.job.0 == array))
        .collect();
    assert_eq!(tasks.len(), 4);
    for (i, lr) in ["1e-3", "3e-4", "1e-4", "3e-5"].iter().enumerate() {
        let t = &tasks[i];
        completed(&d, &dir, t.id.0);
        let r = ranks(&dir, t.id.0);
        let py = &r[&format!("{i}-none")];
        assert_eq!(
            py["ARGS"],
            format!("train.py --lr {lr} --run-name sweep-{array}-{i}")
        );
        let out = std::fs::read_to_string(dir.join(format!("sweep_{array}_{i}.out"))).unwrap();
        assert_eq!(out, format!("task {i} of array {array}: lr={lr}\n"));
    }

    // No sendmail here: flexsub says so, and the job runs with its comment.
    let (job, warned) = submit(&d, &dir, "mail.sh", &corpus("mail.sh"), &[]);
    assert!(warned.contains("no mail is sent"), "{warned}");
    let v = completed(&d, &dir, job);
    assert_eq!(v.comment.as_deref(), Some("nightly eval"));

    let (job, _) = submit(&d, &dir, "constraint.sh", &corpus("constraint.sh"), &[]);
    let v = completed(&d, &dir, job);
    // One task of 8 cores on 2 GPUs, as in Slurm: 8 cores, 4 near each leaf.
    assert_eq!((v.request.leaves, v.request.cpus), (Some(2), 8));
    assert_eq!(v.alloc.as_ref().unwrap().cores.len(), 8);

    // --gres=gpu:a100:2 names the GPU model, not a MIG profile: any two leaves of the A100s.
    let (job, _) = submit(&d, &dir, "gpu_model.sh", &corpus("gpu_model.sh"), &[]);
    let v = completed(&d, &dir, job);
    assert_eq!(
        (v.request.leaves, v.request.leaf_type.as_deref()),
        (Some(2), None)
    );
    assert_eq!(ranks(&dir, job).len(), 2);
}

#[test]
fn every_shipped_example_runs_as_written() {
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("examples");
    let names: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../etc/examples"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sh"))
            .collect();
    assert_eq!(names.len(), 4, "a new example needs a case here: {names:?}");
    std::fs::write(dir.join("train.py"), example("train.py")).unwrap();

    // ddp.sh runs train.py from the submit directory, one rank per leaf.
    let (job, _) = submit(&d, &dir, "ddp.sh", &example("ddp.sh"), &[]);
    let v = completed(&d, &dir, job);
    let r = ranks(&dir, job);
    assert_eq!(r.len(), 4, "{r:?}");
    for (i, leaf) in uuids(&v).iter().enumerate() {
        let py = &r[&format!("none-{i}")];
        assert_eq!(
            (py["ARGS"].as_str(), &py["CUDA_VISIBLE_DEVICES"]),
            ("train.py --epochs 3", leaf)
        );
    }

    let (job, _) = submit(&d, &dir, "fraction.sh", &example("fraction.sh"), &[]);
    completed(&d, &dir, job);
    let out = std::fs::read_to_string(dir.join(format!("fraction-{job}.out"))).unwrap();
    assert!(out.starts_with("units: MIG-"), "{out}");

    let (job, _) = submit(&d, &dir, "sbatch-only.sh", &example("sbatch-only.sh"), &[]);
    completed(&d, &dir, job);

    // model-memory.sh names a model at /models, which this host has not: the command line
    // points --model at a model of the same shape (the command line overrides the script).
    let model = dir.join("TinyLlama-1.1B");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(
        model.join("config.json"),
        r#"{"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
            "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
            "num_key_value_heads": 4, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    let m = model.to_str().unwrap();
    let (job, _) = submit(
        &d,
        &dir,
        "model-memory.sh",
        &example("model-memory.sh"),
        &["--model", m],
    );
    let v = completed(&d, &dir, job);
    assert!(v.request.mem_bytes.is_some_and(|b| b > 2 << 30), "{v:?}");
    let r = ranks(&dir, job);
    assert_eq!(
        r["none-none"]["ARGS"],
        "-m my_server --model /models/TinyLlama-1.1B"
    );
}

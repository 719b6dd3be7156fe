//! The tools that drive Slurm, unchanged, against the real flexd on the simulated
//! a100-40gb-x2 host, with only flex-slurm's directory of Slurm-named commands first on PATH:
//! submitit (a function's result comes back, `map_array` of 3, a cancel, a job that requeues
//! itself on its checkpoint signal), dask-jobqueue (a 2-worker `SLURMCluster` computes a sum and
//! closes), Parsl (`SlurmProvider` with its default launcher runs two apps), Snakemake with
//! its slurm executor plugin (a 3-rule workflow, one rule failing and reported failed) and
//! JupyterHub's batchspawner (`SlurmSpawner` submits its script, finds its job running and its
//! host, cancels it). Nothing in the tools' configuration but what their documentation tells a
//! Slurm user (or a hub's admin) to set.
//!
//! Needs the tools: `FLEX_TEST_TOOLS_VENV` names a virtual environment that has them (`.ci/run`
//! makes one from PyPI). Without it the tests are skipped, unless CI=true: then they fail.

use flex_tests::{bin, bin_dir, Daemon};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOPOLOGY: &str = "a100-40gb-x2.toml";

fn venv() -> Option<PathBuf> {
    let v = std::env::var_os("FLEX_TEST_TOOLS_VENV").map(PathBuf::from);
    match v.filter(|v| v.join("bin/python").is_file()) {
        Some(v) => Some(v),
        None => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true: FLEX_TEST_TOOLS_VENV must name a virtual environment with submitit, \
                 dask-jobqueue, parsl, snakemake-executor-plugin-slurm, batchspawner and \
                 jupyterhub"
            );
            eprintln!("skipped: FLEX_TEST_TOOLS_VENV names no virtual environment with the tools");
            None
        }
    }
}

/// A flexd, and the directory of Slurm-named commands flex-slurm makes.
fn setup(name: &str) -> Option<(Daemon, PathBuf, PathBuf)> {
    let venv = venv()?;
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch(name);
    let names = dir.join("slurm-bin");
    let o = Command::new(bin("flex-slurm"))
        .arg("links")
        .arg(&names)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::fs::create_dir_all(dir.join("work")).unwrap();
    Some((d, dir, venv.join("bin")))
}

/// `program args` in `dir/work` with Slurm's commands first on PATH, then the tools' own
/// scripts, then Flex's commands.
fn run(d: &Daemon, dir: &Path, tools: &Path, program: &str, args: &[&str]) -> Output {
    let path = std::env::var("PATH").unwrap_or_default();
    Command::new(tools.join(program))
        .args(args)
        .current_dir(dir.join("work"))
        .env("FLEX_SOCKET", d.socket())
        .env("FLEX_CONFIG", d.config_path())
        .env(
            "PATH",
            format!(
                "{}:{}:{}:{path}",
                dir.join("slurm-bin").display(),
                tools.display(),
                bin_dir().display()
            ),
        )
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn submitit_runs_maps_cancels_and_requeues_on_its_checkpoint_signal() {
    let Some((d, dir, tools)) = setup("submitit") else {
        return;
    };
    let script = r#"
import os, time, submitit

def add(a, b):
    return a + b

class Counter(submitit.helpers.Checkpointable):
    def __call__(self, path):
        if os.path.exists(path):
            return "done after " + open(path).read()
        time.sleep(600)
    def checkpoint(self, path):
        with open(path, "w") as f:
            f.write("a requeue")
        return super().checkpoint(path)

ex = submitit.AutoExecutor(folder="logs/%j")
ex.update_parameters(timeout_min=5, slurm_gres="gpu:1")
print("result", ex.submit(add, 2, 3).result())
print("map", [j.result() for j in ex.map_array(add, [1, 2, 3], [10, 20, 30])])
slow = ex.submit(time.sleep, 300)
while slow.state not in ("RUNNING",):
    time.sleep(0.5)
slow.cancel()
while slow.state not in ("CANCELLED",) and not slow.state.startswith("CANCELLED"):
    time.sleep(0.5)
print("cancelled", slow.state)
ex.update_parameters(timeout_min=1, slurm_signal_delay_s=55)
print("requeued", ex.submit(Counter(), os.path.abspath("ckpt")).result())
"#;
    std::fs::write(dir.join("work/t.py"), script).unwrap();
    let o = run(&d, &dir, &tools, "python", &["t.py"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}\n{}", d.log());
    assert!(out.contains("result 5"), "{out}");
    assert!(out.contains("map [11, 22, 33]"), "{out}");
    assert!(out.contains("cancelled CANCELLED"), "{out}");
    assert!(out.contains("requeued done after a requeue"), "{out}");
}

#[test]
fn dask_jobqueue_slurmcluster_computes_and_closes() {
    let Some((d, dir, tools)) = setup("dask") else {
        return;
    };
    let script = format!(
        r#"
from dask_jobqueue import SLURMCluster
from dask.distributed import Client
import dask.array as da
cluster = SLURMCluster(cores=1, memory="1GB", walltime="00:10:00", python="{}")
cluster.scale(2)
client = Client(cluster)
client.wait_for_workers(2, timeout=120)
print("sum", da.ones((1000, 1000), chunks=(100, 100)).sum().compute())
client.close()
cluster.close()
print("closed")
"#,
        tools.join("python").display()
    );
    std::fs::write(dir.join("work/t.py"), script).unwrap();
    let o = run(&d, &dir, &tools, "python", &["t.py"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}\n{}", d.log());
    assert!(
        out.contains("sum 1000000.0") && out.contains("closed"),
        "{out}"
    );
}

#[test]
fn parsl_slurmprovider_runs_two_apps() {
    let Some((d, dir, tools)) = setup("parsl") else {
        return;
    };
    let script = format!(
        r#"
import parsl
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.providers import SlurmProvider
from parsl.app.app import python_app
parsl.load(Config(executors=[HighThroughputExecutor(label="slurm", max_workers_per_node=1,
    provider=SlurmProvider(nodes_per_block=1, init_blocks=1, max_blocks=1,
        walltime="00:10:00", worker_init="export PATH={}:$PATH"))]))
@python_app
def double(x):
    return 2 * x
print("apps", [f.result() for f in [double(1), double(2)]])
parsl.dfk().cleanup()
"#,
        tools.display()
    );
    std::fs::write(dir.join("work/t.py"), script).unwrap();
    let o = run(&d, &dir, &tools, "python", &["t.py"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}\n{}", d.log());
    assert!(out.contains("apps [2, 4]"), "{out}");
}

#[test]
fn snakemake_slurm_executor_runs_a_workflow_and_reports_the_failed_rule() {
    let Some((d, dir, tools)) = setup("snakemake") else {
        return;
    };
    let snakefile = "rule all:\n    input: \"c.txt\", \"bad.txt\"\n\
                     rule a:\n    output: \"a.txt\"\n    shell: \"echo a > {output}\"\n\
                     rule c:\n    input: \"a.txt\"\n    output: \"c.txt\"\n    shell: \"cat {input} > {output}; echo c >> {output}\"\n\
                     rule bad:\n    output: \"bad.txt\"\n    shell: \"exit 3\"\n";
    std::fs::write(dir.join("work/Snakefile"), snakefile).unwrap();
    let o = run(
        &d,
        &dir,
        &tools,
        "snakemake",
        &[
            "--executor",
            "slurm",
            "--jobs",
            "3",
            "--keep-going",
            "--latency-wait",
            "5",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--seconds-between-status-checks",
            "2",
        ],
    );
    let out = text(&o);
    assert!(!o.status.success(), "the failing rule fails the run\n{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("work/c.txt")).unwrap_or_default(),
        "a\nc\n",
        "{out}\n{}",
        d.log()
    );
    assert!(
        out.contains("Error in rule bad") && out.contains("SLURM status is: 'FAILED'"),
        "{out}"
    );
    assert!(!dir.join("work/bad.txt").exists());
}

#[test]
fn batchspawner_slurmspawner_submits_finds_its_host_and_cancels() {
    let Some((d, dir, tools)) = setup("batchspawner") else {
        return;
    };
    // SlurmSpawner's own methods and templates (its script, `sbatch --parsable`, `squeue -h -j
    // ID -o '%T %B'` and its state and host patterns, `scancel ID`) on a spawner made as a hub
    // makes one, without the hub's database and proxy; `exec_prefix` (sudo -u USER) is left out
    // as the test runs as the user. The prologue keeps the job running until it is cancelled.
    // JupyterHub 6 passes the commands no PATH unless `env_keep` names it, as a site whose
    // Slurm commands are not in /usr/bin sets it; FLEX_SOCKET and FLEX_CONFIG name the test's
    // flexd.
    let script = r#"
import asyncio, os
from batchspawner import SlurmSpawner, JobStatus
from jupyterhub.objects import Hub

class User:
    name = os.environ.get("USER") or "root"
    escaped_name = name
    url = "/user/" + name + "/"
    server = None
    spawners = {}

async def until(sp, want):
    for _ in range(1200):
        st = await sp.query_job_status()
        if st in want:
            return st
        await asyncio.sleep(0.1)
    raise SystemExit(f"still {st} ({sp.job_status!r}), not {want}")

async def main():
    sp = SlurmSpawner(
        user=User(),
        hub=Hub(ip="127.0.0.1", port=8081, base_url="/hub/"),
        api_token="token",
        oauth_client_id="jupyterhub-user-" + User.name,
        exec_prefix="",
        env_keep=["PATH", "LANG", "FLEX_SOCKET", "FLEX_CONFIG"],
        req_homedir=os.getcwd(),
        req_prologue="sleep 300",
    )
    job = await sp.submit_batch_script()
    print("submitted", job)
    print("first", (await until(sp, (JobStatus.PENDING, JobStatus.RUNNING))).name)
    await until(sp, (JobStatus.RUNNING,))
    print("running on", sp.state_gethost())
    await sp.cancel_batch_job()
    print("after cancel", (await until(sp, (JobStatus.NOTFOUND,))).name)

asyncio.run(main())
"#;
    std::fs::write(dir.join("work/spawn.py"), script).unwrap();
    let o = run(&d, &dir, &tools, "python", &["spawn.py"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}\n{}", d.log());
    let job: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("submitted "))
        .and_then(|id| id.trim().parse().ok())
        .unwrap_or_else(|| panic!("no job id: {out}"));
    let v = d.wait_finished(flex_proto::JobId(job));
    assert_eq!(v.state, flex_proto::JobState::Cancelled, "{out}");
    let host = v.alloc.as_ref().map(|a| a.host.clone()).unwrap_or_default();
    assert!(out.contains(&format!("running on {host}\n")), "{out}");
    assert!(out.contains("after cancel NOTFOUND"), "{out}");
    assert_eq!(v.name, "spawner-jupyterhub");
    // Its output file is where the template puts it, in the user's home.
    assert!(
        dir.join(format!("work/jupyterhub_slurmspawner_{job}.log"))
            .is_file(),
        "{out}"
    );
}

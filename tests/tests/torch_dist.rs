//! PyTorch's own launchers in a Flex job, with a real gloo `torch.distributed` all-reduce:
//! `torchrun`, `python -m torch.distributed.run` and `python -m torch.distributed.launch`, from
//! a script that activates a virtual environment, as Slurm users write them. Each worker runs
//! on its own leaf of the simulated a100-40gb-x2 host, alone on its node (`LOCAL_RANK=0`), with
//! the global rank and world size; the launcher's `--local-rank=0` reaches the script of
//! `torch.distributed.launch`.
//!
//! Needs a Python with PyTorch: `FLEX_TEST_TORCH_VENV` names a virtual environment that has it
//! (`.ci/run` makes one from PyPI). Without it the test is skipped, unless CI=true: then it
//! fails.

use flex_proto::JobState;
use flex_tests::cli::submit;
use flex_tests::Daemon;
use std::path::PathBuf;

const TOPOLOGY: &str = "a100-40gb-x2.toml";

const DIST_PY: &str = r#"
import argparse, os, sys
import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--local-rank", "--local_rank", type=int, default=None)
p.add_argument("tag")
a = p.parse_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
with open(f"{a.tag}-{rank}", "w") as f:
    f.write(" ".join(str(x) for x in [
        rank, world, os.environ["LOCAL_RANK"], a.local_rank,
        os.environ.get("CUDA_VISIBLE_DEVICES", ""), int(t.item()),
    ]) + "\n")
dist.destroy_process_group()
"#;

fn venv() -> Option<PathBuf> {
    let v = std::env::var_os("FLEX_TEST_TORCH_VENV").map(PathBuf::from);
    match v.filter(|v| v.join("bin/python").is_file()) {
        Some(v) => Some(v),
        None => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true: FLEX_TEST_TORCH_VENV must name a virtual environment with PyTorch"
            );
            eprintln!("skipped: FLEX_TEST_TORCH_VENV names no virtual environment with PyTorch");
            None
        }
    }
}

#[test]
fn pytorchs_launchers_run_a_gloo_all_reduce_one_worker_per_leaf() {
    let Some(venv) = venv() else {
        return;
    };
    let d = Daemon::start_with(TOPOLOGY, "srun_in_jobs = \"flexrun\"");
    let dir = d.scratch("torch");
    std::fs::write(dir.join("dist.py"), DIST_PY).unwrap();
    let script = format!(
        "#!/bin/bash\n#SBATCH --gres=gpu:2 -t 10\nset -e\nsource {}/bin/activate\n\
         export GLOO_SOCKET_IFNAME=lo\n\
         torchrun --standalone --nnodes=1 --nproc_per_node=2 dist.py torchrun\n\
         python -m torch.distributed.run --nproc-per-node=2 dist.py run\n\
         python3 -m torch.distributed.launch --nproc_per_node=2 dist.py launch\n",
        venv.display()
    );
    let job = submit(&d, &dir, "ddp.sh", &script, &[]);
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
    for (tag, local_rank_arg) in [("torchrun", "None"), ("run", "None"), ("launch", "0")] {
        for (r, leaf) in leaves.iter().enumerate() {
            let line = std::fs::read_to_string(dir.join(format!("{tag}-{r}")))
                .unwrap_or_else(|e| panic!("{tag} rank {r}: {e}\n{out}"));
            let f: Vec<&str> = line.split_whitespace().collect();
            // rank, world, LOCAL_RANK, --local-rank, its leaf, the all-reduced sum 1 + 2.
            assert_eq!(
                f,
                [&*r.to_string(), "2", "0", local_rank_arg, leaf, "3"],
                "{tag}: {line}"
            );
        }
    }
}

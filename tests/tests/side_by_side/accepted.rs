//! The one list of the ways Flex may differ from Slurm in the side-by-side test, each with its
//! reason; docs/commands.md ("Differences from Slurm, pinned by the side-by-side test") shows
//! the same rows. An entry matches the differences (`observe::differences`) of the scripts
//! its glob names; one that matches none fails the test, so the list stays true.

/// A difference the test accepts.
pub(super) struct Accepted {
    /// Which scripts (a glob over their file names).
    pub(super) scripts: &'static str,
    /// Which difference (a glob): `outcome`, `jobs`, `state`, `exit`, `file only in slurm: NAME`,
    /// `file only in flex: NAME`, `tasks PROGRAM`, `env PROGRAM VARIABLE` (`env batch ...` for
    /// the batch step; `gpus` and `cores` count devices and allowed CPUs).
    pub(super) fact: &'static str,
    pub(super) reason: &'static str,
}

const OUTPUT_DIR: &str = "Slurm 22.05 fails a job whose output file's directory does not exist (exit code 0:53, nothing runs); Flex makes the directory, as Slurm 23.02 and later do, and runs the job";

const fn a(scripts: &'static str, fact: &'static str, reason: &'static str) -> Accepted {
    Accepted {
        scripts,
        fact,
        reason,
    }
}

pub(super) const ACCEPTED: &[Accepted] = &[
    a(
        "*",
        "file only in slurm: slurm-*.out",
        "Flex names the default output file flex-%j.out (flex-%A_%a.out in an array) where Slurm writes slurm-%j.out (slurm-%A_%a.out)",
    ),
    a(
        "*",
        "file only in flex: flex-*.out",
        "Flex names the default output file flex-%j.out (flex-%A_%a.out in an array) where Slurm writes slurm-%j.out (slurm-%A_%a.out)",
    ),
    a(
        "*",
        "env * SLURM_JOB_ID",
        "In an array Flex gives the array's own id to its first task, Slurm to its last (the record left when the others are split off); SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID agree",
    ),
    a(
        "gpu_model.sh",
        "outcome",
        "Flex takes a GPU model the host has (a100) as a gres type; this Slurm node's types are its MIG profiles, as AutoDetect=nvml names them, so sbatch refuses the job",
    ),
    a(
        "opt-timeout.sh",
        "exit",
        "A job killed at its time limit: flexacct's ExitCode is 0:15 (the SIGTERM that ended the script), sacct's job line 0:0 (only its batch step says 0:15)",
    ),
    a(
        "ddp_srun.sh",
        "state",
        OUTPUT_DIR,
    ),
    a(
        "ddp_srun.sh",
        "exit",
        OUTPUT_DIR,
    ),
    a(
        "ddp_srun.sh",
        "file only in flex: logs/*",
        OUTPUT_DIR,
    ),
    a(
        "ddp_srun.sh",
        "tasks *",
        OUTPUT_DIR,
    ),
    a(
        "fname-subdir.sh",
        "state",
        OUTPUT_DIR,
    ),
    a(
        "fname-subdir.sh",
        "exit",
        OUTPUT_DIR,
    ),
    a(
        "fname-subdir.sh",
        "file only in flex: logs/*",
        OUTPUT_DIR,
    ),
    a(
        "fname-subdir.sh",
        "tasks *",
        OUTPUT_DIR,
    ),
    a(
        "*",
        "env * SLURM_JOB_PARTITION",
        "Flex has one partition, flex: -p gpu is ignored with a warning and SLURM_JOB_PARTITION says flex",
    ),
    a(
        "*",
        "env * *RANK",
        "Flex's srun also gives each task torch's RANK and LOCAL_RANK (as flex-spank does under Slurm); a plain Slurm sets neither",
    ),
    a(
        "*",
        "env * *WORLD_SIZE",
        "Flex's srun also gives each task torch's WORLD_SIZE and LOCAL_WORLD_SIZE (as flex-spank does under Slurm); a plain Slurm sets neither",
    ),
    a(
        "*torchrun*.sh",
        "tasks python",
        "Flex's torchrun starts each worker as python -u SCRIPT (unbuffered), the test's stand-in torchrun as python SCRIPT",
    ),
    a(
        "opt-exclusive.sh",
        "env * *GPUS*",
        "--exclusive: Flex holds the whole host and the job sees every leaf; Slurm gives the node's CPUs and memory but no GPU the job did not ask for",
    ),
    a(
        "*",
        "env * SLURM_*CPUS_*NODE",
        "Flex gives each leaf at least default_cpus_per_leaf (1) core, so a job of N leaves holds at least N cores; Slurm gives one CPU per task",
    ),
    a(
        "*",
        "env * SLURM_*TASKS_PER_NODE",
        "In the batch step of a job without -n, both count the tasks its CPUs would hold; Flex gives each leaf at least one core (default_cpus_per_leaf), so a job of N leaves and no -c holds N CPUs where Slurm's holds 1",
    ),
    a(
        "*",
        "env * gpus",
        "A job without GPUs sees an empty CUDA_VISIBLE_DEVICES, where Slurm leaves it unset: Flex puts jobs in no device cgroup, so an unset CUDA_VISIBLE_DEVICES would show a job that asked for no GPU every GPU of the host",
    ),
];

//! The differences from Slurm 22.05 the test accepts, each with its reason; docs/slurm-tools.md
//! shows the same rows. An entry that matches no difference fails the test, so the list stays
//! true.

/// A difference the test accepts.
pub(super) struct Accepted {
    /// Which forms (a glob over the command line as `compare::shown` writes it).
    pub(super) form: &'static str,
    /// What differs (a glob over `compare::Difference::part`).
    pub(super) part: &'static str,
    pub(super) reason: &'static str,
}

const fn a(form: &'static str, part: &'static str, reason: &'static str) -> Accepted {
    Accepted { form, part, reason }
}

const ONLY_JOB_STATE: &str = "Slurm 22.05 has no --only-job-state (24.05 adds it; Nextflow passes it when onlyJobState is set); Flex takes it";
const EXC_NODES: &str = "Slurm 22.05 does not know the field ExcNodes (later versions do): it says so on stderr and prints an empty column without a header; Flex prints its header, EXC_NODES, over the same empty value";
const NO_ACCOUNTING: &str = "The private Slurm runs without slurmdbd, so its jobs have no account and no QOS, (null); a Flex job has its account (the user's primary group unless given) and its QOS (normal unless given)";
const PRIORITY: &str = "The private Slurm's priority/basic numbers jobs down from 2^32 in submission order; Flex's priority is its multifactor sum, 0 with the default weights";
const TIME_LIMIT: &str = "A job submitted without --time gets flexd's default_time_limit (squeue's time limit and time left show it); the private Slurm's partition sets no DefaultTime, so its jobs have UNLIMITED";
const MAX_TIME: &str = "flexd's max_time_limit (7 days unless set) is the partition's MaxTime; the private Slurm's partition sets none, UNLIMITED";
const DEFAULT_TIME: &str = "flexd's default_time_limit is the partition's DefaultTime; the private Slurm's partition sets none, NONE";
const DEF_MEM: &str = "flexd's default_mem_per_cpu (auto: the host's memory over its cores) is the partition's DefMemPerCPU; the private Slurm sets no DefMemPerCPU, so it prints DefMemPerNode=UNLIMITED";
const TRES: &str = "The private Slurm does not account GPUs (no gres/gpu in AccountingStorageTRES), so its TRES has none; Flex's TRES counts its leaves as gres/gpu, as a Slurm that accounts them does";

pub(super) const ACCEPTED: &[Accepted] = &[
    a("squeue * --only-job-state", "exit", ONLY_JOB_STATE),
    a("squeue * --only-job-state", "stdout", ONLY_JOB_STATE),
    a("squeue --all --states=all --noconvert -O *", "header ExcNodes", EXC_NODES),
    a("squeue --all --states=all --noconvert -*", "field Account", NO_ACCOUNTING),
    a("squeue --all --states=all --noconvert -*", "field %a", NO_ACCOUNTING),
    a("squeue --all --states=all --noconvert -*", "field QOS", NO_ACCOUNTING),
    a("squeue --all --states=all --noconvert -*", "field %q", NO_ACCOUNTING),
    a("squeue --all --states=all --noconvert -*", "field PriorityLong", PRIORITY),
    a("squeue --all --states=all --noconvert -*", "field %Q", PRIORITY),
    a("squeue -j {run} -o *", "field %p", PRIORITY),
    a("squeue --all --states=all --noconvert -*", "field TimeL*", TIME_LIMIT),
    a("squeue --all --states=all --noconvert -*", "field %l", TIME_LIMIT),
    a("squeue --all --states=all --noconvert -*", "field %L", TIME_LIMIT),
    a(
        "sinfo -o '%P'",
        "stdout",
        "The private Slurm has a second partition, gpu (the side-by-side scripts name it); Flex has one, flex*, and Snakemake reads only the starred default",
    ),
    a(
        "sinfo -ahNO *",
        "stdout",
        "The private Slurm's node is in both its partitions, so -N lists it twice, and its host name is this machine's; Flex's one node is its simulated host, a100-testbed (the GRES fields are the same)",
    ),
    a(
        "sinfo -ho *",
        "*",
        "Flex's node is its simulated host, a100-testbed, where the private Slurm's node has this machine's name",
    ),
    a("scontrol show part*", "key MaxTime", MAX_TIME),
    a("scontrol show part*", "key DefaultTime", DEFAULT_TIME),
    a("scontrol show part*", "key DefMemPer*", DEF_MEM),
    a("scontrol show part*", "key TRES", TRES),
];

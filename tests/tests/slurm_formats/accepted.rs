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

const ARRAY_ROW: &str = "A pending array is one row: Slurm writes its id as N_[0-2%3] and orders rows by state, then priority; Flex's squeue -o writes the first pending task (N_0) and orders rows by id";
const ONLY_JOB_STATE: &str = "Slurm 22.05 has no --only-job-state (24.05 adds it; Nextflow passes it when onlyJobState is set); Flex takes it";
const OOD_FIELDS: &str = "Flex's squeue -O lacks MinCpus, MinTmpDisk, Dependency, Feature, GroupName, GroupID, OverSubscribe, Sockets, Cores, Threads, MinMemory, ReqNodes, Command, Contiguous, PriorityLong, UserID, Reservation, WCKey, Licenses, ExcNodes, CoreSpec, Nice, SCT, WorkDir and tres-alloc, so it refuses the whole format (Slurm 22.05 itself lacks ExcNodes: it says so and prints the rest)";
const OOD_PERCENT: &str = "Flex's squeue -o lacks %c %d %E %f %g %G %h %H %I %J %m %n %o %O %U %v %w %W %x %y %z %Z, so it refuses the whole format";
const PARTITIONS: &str = "Flex's scontrol shows jobs and config, not partitions";

pub(super) const ACCEPTED: &[Accepted] = &[
    a("squeue --noheader -o '%i %t' -t all -p flex -u {user}", "stdout", ARRAY_ROW),
    a("squeue --noheader '--format=%i %t' --job *", "stdout", ARRAY_ROW),
    a("squeue * --only-job-state", "exit", ONLY_JOB_STATE),
    a("squeue * --only-job-state", "stdout", ONLY_JOB_STATE),
    a("squeue --all --states=all --noconvert -O *", "exit", OOD_FIELDS),
    a("squeue --all --states=all --noconvert -O *", "lines", OOD_FIELDS),
    a("squeue --all --states=all --noconvert -o *", "exit", OOD_PERCENT),
    a("squeue --all --states=all --noconvert -o *", "lines", OOD_PERCENT),
    a(
        "sinfo -o '%P'",
        "stdout",
        "The private Slurm has a second partition, gpu (the side-by-side scripts name it); Flex has one, flex*, and Snakemake reads only the starred default",
    ),
    a("sinfo -ahNO *", "*", "Flex's sinfo lacks -O (its long format)"),
    a(
        "sinfo -ho *",
        "*",
        "Flex's node is its simulated host, a100-testbed, where the private Slurm's node has this machine's name",
    ),
    a("scontrol show part*", "*", PARTITIONS),
];

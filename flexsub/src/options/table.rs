//! The option table: every job option's names, value and help.

/// What an option sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    JobName,
    Time,
    Output,
    Error,
    Chdir,
    /// `-c`: cores per task (see `Settings::request` for how tasks map to leaves).
    CpusPerTask,
    Gres,
    /// `-G/--gpus [TYPE:]N`: N GPUs, one leaf each (Slurm's meaning on a MIG node).
    Gpus,
    /// `--gpu-fraction F`: Flex's share of GPU compute.
    GpuFraction,
    /// `--mem`, `--mem-per-cpu`, `--mem-per-gpu`: host memory, as in Slurm.
    Mem,
    MemPerCpu,
    MemPerGpu,
    /// `--gpu-mem`: Flex's GPU-memory request.
    GpuMem,
    Account,
    Qos,
    Nice,
    Leaves,
    LeafType,
    Placement,
    Model,
    BatchSize,
    SeqLen,
    Dtype,
    Train,
    Infer,
    Array,
    Dependency,
    Hold,
    Requeue,
    NoRequeue,
    /// `-n` and `--ntasks-per-node`: how many tasks, for `-c` and `--gpus-per-task`.
    Ntasks,
    NtasksPerNode,
    /// `--gpus-per-node [TYPE:]N`: `--gpus N` on the one node.
    GpusPerNode,
    /// `--gpus-per-task N`: N GPUs for each task.
    GpusPerTask,
    /// `--cpus-per-gpu N`: N cores per leaf.
    CpusPerGpu,
    /// `-w/--nodelist` and `-x/--exclude`: only this host may be named, and it may not be
    /// excluded.
    Nodelist,
    Exclude,
    /// Slurm options that change what runs in ways Flex cannot honour; refused with why.
    Refused,
    /// `--comment TEXT`, `--begin TIME`, `--exclusive`, `--open-mode`, `--constraint`,
    /// `--mail-type`, `--mail-user`.
    Comment,
    Begin,
    Exclusive,
    OpenMode,
    Constraint,
    MailType,
    MailUser,
    /// Slurm's node count: Flex runs a job on one host.
    Nodes,
    /// Slurm's `--export`: which of the submitting environment the job gets.
    Export,
    /// Slurm's `-M/--clusters`: this host's cluster, or all.
    Clusters,
    /// sbatch's `--signal=[B:]SIG[@SECONDS]`.
    Signal,
    /// Slurm options with no meaning on one Flex host; accepted with a warning.
    Ignored,
}

/// One option: its names, whether it takes a value (the value's name), and its help.
#[derive(Clone, Copy, Debug)]
pub struct OptSpec {
    pub key: Key,
    pub long: &'static str,
    pub short: Option<char>,
    /// None for a flag.
    pub value: Option<&'static str>,
    pub help: &'static str,
}

impl OptSpec {
    /// A flag that may also be given a value with `=` (sbatch's `--exclusive[=user]`,
    /// `--get-user-env[=60L]`).
    pub fn optional_value(&self) -> bool {
        self.value.is_none() && matches!(self.key, Key::Exclusive | Key::Refused | Key::Ignored)
    }
}

pub(super) const fn opt(
    key: Key,
    long: &'static str,
    short: Option<char>,
    value: Option<&'static str>,
    help: &'static str,
) -> OptSpec {
    OptSpec {
        key,
        long,
        short,
        value,
        help,
    }
}

/// Every job option, for directives and the command line alike.
pub const OPTIONS: &[OptSpec] = &[
    opt(
        Key::JobName,
        "job-name",
        Some('J'),
        Some("NAME"),
        "Job name (default: the script's file name)",
    ),
    opt(
        Key::Time,
        "time",
        Some('t'),
        Some("TIME"),
        "Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or 30s, 2h, 1h30m (default: flexd's default_time_limit)",
    ),
    opt(
        Key::Output,
        "output",
        Some('o'),
        Some("PATTERN"),
        "stdout file; %j job id, %x job name, %u user, %A array job id, %a array task index, %N host, %J %s %n %t as sbatch, %% a percent sign; %3a pads with zeros",
    ),
    opt(
        Key::Error,
        "error",
        Some('e'),
        Some("PATTERN"),
        "stderr file (default: with stdout)",
    ),
    opt(
        Key::Chdir,
        "chdir",
        Some('D'),
        Some("DIR"),
        "Working directory of the job (default: the current one)",
    ),
    opt(
        Key::CpusPerTask,
        "cpus-per-task",
        Some('c'),
        Some("N"),
        "CPU cores per task, as in Slurm: the job gets N x ntasks cores (at least flexd's default_cpus_per_leaf per leaf)",
    ),
    opt(
        Key::Gres,
        "gres",
        None,
        Some("gpu[:TYPE]:N"),
        "N leaves, of leaf type TYPE if given (Slurm form)",
    ),
    opt(
        Key::Gpus,
        "gpus",
        Some('G'),
        Some("[TYPE:]N"),
        "N GPUs, as in Slurm: on MIG a GPU is one leaf (TYPE: a MIG profile or the host's GPU model)",
    ),
    opt(
        Key::GpuFraction,
        "gpu-fraction",
        None,
        Some("F"),
        "A share of GPU compute: 0.25 of one GPU, or 1.5 GPUs; on MIG, ceil(F x 7) slices' worth of leaves",
    ),
    opt(
        Key::Mem,
        "mem",
        None,
        Some("SIZE"),
        "Host memory (RAM) for the job, as in Slurm: 512M, 16G; a bare number is megabytes; 0 is all of the host's",
    ),
    opt(
        Key::MemPerCpu,
        "mem-per-cpu",
        None,
        Some("SIZE"),
        "Host memory per allocated core, as in Slurm",
    ),
    opt(
        Key::MemPerGpu,
        "mem-per-gpu",
        None,
        Some("SIZE"),
        "Host memory per allocated leaf (GPU), as in Slurm",
    ),
    opt(
        Key::GpuMem,
        "gpu-mem",
        None,
        Some("SIZE"),
        "GPU memory: as many leaves as hold 16G, 1.5GiB; a bare number is megabytes",
    ),
    opt(
        Key::Account,
        "account",
        Some('A'),
        Some("ACCOUNT"),
        "Account to charge",
    ),
    opt(
        Key::Leaves,
        "leaves",
        None,
        Some("N"),
        "Number of leaves (MIG instances, or whole GPUs without MIG)",
    ),
    opt(
        Key::LeafType,
        "leaf-type",
        None,
        Some("PROFILE"),
        "Only leaves of this MIG profile (1g.10gb)",
    ),
    opt(
        Key::Placement,
        "placement",
        None,
        Some("STRATEGY"),
        "Shares of whole GPUs: fill-first, balance-load or memory-optimized",
    ),
    opt(
        Key::Model,
        "model",
        None,
        Some("PATH"),
        "Size GPU memory from this model (directory, .safetensors or config.json)",
    ),
    opt(
        Key::BatchSize,
        "batch-size",
        None,
        Some("B"),
        "Batch size for --model",
    ),
    opt(
        Key::SeqLen,
        "seq-len",
        None,
        Some("S"),
        "Sequence length for --model",
    ),
    opt(
        Key::Dtype,
        "dtype",
        None,
        Some("DTYPE"),
        "Element type for --model: fp32, fp16, bf16, int8, fp8, int4",
    ),
    opt(
        Key::Train,
        "train",
        None,
        None,
        "--model is trained (gradients, optimizer state)",
    ),
    opt(
        Key::Infer,
        "infer",
        None,
        None,
        "--model only runs inference (KV cache)",
    ),
    opt(
        Key::Qos,
        "qos",
        Some('q'),
        Some("QOS"),
        "Quality of service, as flexd.toml's [qos.NAME] defines it (default: its default_qos)",
    ),
    opt(
        Key::Nice,
        "nice",
        None,
        Some("N"),
        "Lower the job's priority by N (-10000 to 10000; below 0 only for root)",
    ),
    opt(
        Key::Array,
        "array",
        Some('a'),
        Some("INDEXES"),
        "A job array, a task per index: 0-15, 1,3,7, 1-9:2, combined; %N runs at most N tasks at once (0-99%4)",
    ),
    opt(
        Key::Dependency,
        "dependency",
        Some('d'),
        Some("LIST"),
        "Start after other jobs: after, afterany, afterok, afternotok, aftercorr:ID[:ID...], singleton; ',' all of them, '?' any",
    ),
    opt(
        Key::Hold,
        "hold",
        Some('H'),
        None,
        "Submit held (JobHeldUser) until `flexcontrol release`",
    ),
    opt(
        Key::Requeue,
        "requeue",
        None,
        None,
        "The job may be requeued (the default)",
    ),
    opt(
        Key::NoRequeue,
        "no-requeue",
        None,
        None,
        "The job may not be requeued",
    ),
    opt(
        Key::Signal,
        "signal",
        None,
        Some("[B:]SIG[@SECONDS]"),
        "Send SIG (a name or number) SECONDS (default 60) before the time limit; with B: to the batch shell only, else to the whole job",
    ),
];

/// Every job option: Flex's own and the Slurm ones of [`super::slurm::SLURM_OPTIONS`].
pub fn all() -> impl Iterator<Item = &'static OptSpec> {
    OPTIONS.iter().chain(super::slurm::SLURM_OPTIONS)
}

/// Find an option by its long name (without `--`).
pub fn by_long(name: &str) -> Option<&'static OptSpec> {
    all().find(|o| o.long == name)
}

/// Find an option by its short letter.
pub fn by_short(c: char) -> Option<&'static OptSpec> {
    all().find(|o| o.short == Some(c))
}

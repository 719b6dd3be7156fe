//! Every command form the tools that drive Slurm run, as they run it, in the order the test runs
//! them: the submissions that make the jobs, the queries that read them, then the actions that
//! change them. docs/slurm-tools.md has the same table with what each tool parses; the test
//! checks that every form here is a row there.
//!
//! Words may hold `{done}`, `{fail}`, `{run}`, `{pend}`, `{arr}` (the jobs' ids), `{user}` and
//! `{start}` (sacct's start time as Snakemake writes it), filled in on both sides alike.

/// One command as a tool runs it.
pub(crate) struct Form {
    /// Which tools run it.
    pub(crate) tools: &'static str,
    /// The command and its arguments.
    pub(crate) args: &'static [&'static str],
    /// A script on stdin (the tools that submit through a pipe), with the same placeholders.
    pub(crate) stdin: Option<&'static str>,
    /// Environment the tool sets for it.
    pub(crate) env: &'static [(&'static str, &'static str)],
    /// How the two sides' answers are compared.
    pub(crate) compare: Compare,
}

/// What of an answer a tool reads, so what the test compares.
#[derive(Clone, Copy)]
pub(crate) enum Compare {
    /// The exit status and stdout, normalised (times, this machine's host name).
    Output,
    /// The exit status only: the tool reads nothing else.
    Status,
    /// The exit status, and stdout's lines split at the separator, field by field (each named
    /// by its format field), normalised.
    Fields(char),
    /// The values of these keys in the first record of `Key=Value` (or `Key = Value`) text.
    Keys(&'static [&'static str]),
    /// As `Keys`, with every digit read as `N`: the form the tool parses, not the setting.
    KeyShapes(&'static [&'static str]),
    /// sacct: the private Slurm has no slurmdbd, so its sacct only says accounting is
    /// disabled; Flex's answer must succeed and give each job the state Slurm's squeue gives it.
    Accounting,
    /// sacctmgr and sshare, which need slurmdbd too: Slurm's must still answer nothing (fail,
    /// or print nothing: it has no associations), and Flex's answer, its words joined by single
    /// blanks, must be this text (with the placeholders, `{account}` the user's default
    /// account).
    WithoutDbd(&'static str),
}

const fn form(tools: &'static str, args: &'static [&'static str], compare: Compare) -> Form {
    Form {
        tools,
        args,
        stdin: None,
        env: &[],
        compare,
    }
}

const fn piped(
    tools: &'static str,
    args: &'static [&'static str],
    stdin: &'static str,
    env: &'static [(&'static str, &'static str)],
) -> Form {
    Form {
        tools,
        args,
        stdin: Some(stdin),
        env,
        compare: Compare::Output,
    }
}

/// Scripts the file-based submissions name, written into each side's working directory.
pub(crate) const SCRIPTS: &[(&str, &str)] = &[
    ("done.sh", "#!/bin/sh\ntrue\n"),
    ("fail.sh", "#!/bin/sh\nexit 3\n"),
    (
        "arr.sh",
        "#!/bin/sh\n#SBATCH --array=0-2%3\n#SBATCH --dependency=afterok:{run}\ntrue\n",
    ),
];

/// JupyterHub's batchspawner 1.3.0: SlurmSpawner's `batch_script` as its jinja2 template renders
/// it (the trailing newline dropped, as jinja2 does), for a user whose home is `{workdir}`,
/// with the environment it passes to sbatch as `keepvars`, srun and its default command, and
/// `req_options` (its setting for any other sbatch option) `--dependency=afterok:{run}`, which
/// keeps the job pending. It runs `sbatch --parsable` with the script on stdin
/// (`batch_submit_cmd`; `exec_prefix`, `sudo -E -u {username}`, left out: the test runs as
/// the user).
const BATCHSPAWNER_SCRIPT: &str = "#!/bin/bash
#SBATCH --output={workdir}/jupyterhub_slurmspawner_%j.log
#SBATCH --job-name=spawner-jupyterhub
#SBATCH --chdir={workdir}
#SBATCH --export=PATH,LANG,JUPYTERHUB_API_TOKEN,JUPYTERHUB_USER
#SBATCH --get-user-env=L
#SBATCH --dependency=afterok:{run}

set -euo pipefail

trap 'echo SIGTERM received' TERM

srun batchspawner-singleuser jupyterhub-singleuser
echo \"jupyterhub-singleuser ended gracefully\"
";

/// The submissions, in order: their ids are `{done}`, `{fail}`, `{run}`, `{pend}`, `{arr}`.
pub(crate) const SUBMIT: &[Form] = &[
    form(
        "submitit, Parsl, Nextflow, dask-jobqueue",
        &["sbatch", "-J", "done", "done.sh"],
        Compare::Output,
    ),
    form(
        "Snakemake, Open OnDemand, batchspawner",
        &["sbatch", "--parsable", "-J", "fail", "fail.sh"],
        Compare::Output,
    ),
    piped(
        "Snakemake",
        &[
            "sbatch",
            "--parsable",
            "--job-name",
            "run",
            "--output",
            "run.log",
            "--export=ALL",
            "--comment",
            "rule_run",
            "-t",
            "10",
            "--mem",
            "1000",
            "--ntasks=1",
            "--cpus-per-task=1",
        ],
        "#!/bin/sh\nsleep 300\n",
        &[],
    ),
    piped(
        "batchspawner",
        &["sbatch", "--parsable"],
        BATCHSPAWNER_SCRIPT,
        &[
            ("JUPYTERHUB_API_TOKEN", "token"),
            ("JUPYTERHUB_USER", "{user}"),
        ],
    ),
    form(
        "submitit (map_array)",
        &["sbatch", "-J", "arr", "arr.sh"],
        Compare::Output,
    ),
];

/// What a side submits in place of a submission it refuses, so that the forms after it still
/// find a job of that name: the same job without the options refused.
pub(crate) const STAND_INS: &[(&str, Form)] = &[
    (
        "{pend}",
        form(
            "",
            &[
                "sbatch",
                "--parsable",
                "-J",
                "pend",
                "--dependency=afterok:{run}",
                "--wrap",
                "true",
            ],
            Compare::Output,
        ),
    ),
    (
        "{arr}",
        form(
            "",
            &[
                "sbatch",
                "--parsable",
                "-J",
                "arr",
                "--array=0-2%3",
                "--dependency=afterok:{run}",
                "--wrap",
                "true",
            ],
            Compare::Output,
        ),
    ),
];

/// Open OnDemand's squeue fields (ood_core's slurm adapter, `-O` with a unit separator after
/// each).
const OOD_FIELDS: &str = "Account:\u{1f},JobID:\u{1f},BatchHost:\u{1f},MinCpus:\u{1f},\
NumCPUs:\u{1f},MinTmpDisk:\u{1f},NumNodes:\u{1f},EndTime:\u{1f},Dependency:\u{1f},\
Feature:\u{1f},ArrayJobID:\u{1f},GroupName:\u{1f},GroupID:\u{1f},OverSubscribe:\u{1f},\
Sockets:\u{1f},JobArrayID:\u{1f},Cores:\u{1f},Name:\u{1f},Threads:\u{1f},Comment:\u{1f},\
ArrayTaskID:\u{1f},TimeLimit:\u{1f},TimeLeft:\u{1f},MinMemory:\u{1f},TimeUsed:\u{1f},\
ReqNodes:\u{1f},NodeList:\u{1f},Command:\u{1f},Contiguous:\u{1f},QOS:\u{1f},\
Partition:\u{1f},PriorityLong:\u{1f},Reason:\u{1f},StartTime:\u{1f},StateCompact:\u{1f},\
State:\u{1f},UserName:\u{1f},UserID:\u{1f},Reservation:\u{1f},SubmitTime:\u{1f},\
WCKey:\u{1f},Licenses:\u{1f},ExcNodes:\u{1f},CoreSpec:\u{1f},Nice:\u{1f},SchedNodes:\u{1f},\
SCT:\u{1f},WorkDir:\u{1f},tres-alloc:\u{1f},tres-per-node:\u{1f},";

/// ood_core's earlier squeue format: every `%` field, `;` between them.
const OOD_PERCENT: &str = "%a;%A;%b;%B;%c;%C;%d;%D;%e;%E;%f;%F;%g;%G;%h;%H;%i;%I;%j;%J;%k;\
%K;%l;%L;%m;%M;%n;%N;%o;%O;%q;%P;%Q;%r;%S;%t;%T;%u;%U;%v;%V;%w;%W;%x;%X;%y;%Y;%z;%Z";

/// Partition keys Snakemake's partition query and Open OnDemand's queue list read.
const PARTITION_KEYS: &[&str] = &[
    "PartitionName",
    "MaxTime",
    "MaxNodes",
    "TotalCPUs",
    "TotalNodes",
    "DefMemPerCPU",
    "DefMemPerNode",
    "MaxMemPerNode",
    "MaxCPUsPerNode",
    "DefaultTime",
    "Default",
    "State",
    "Nodes",
    "OverSubscribe",
    "QoS",
    "AllowAccounts",
    "TRES",
];

/// The queries, run once the first two jobs have ended, the third runs and the rest wait on it.
pub(crate) const QUERY: &[Form] = &[
    form(
        "Nextflow",
        &[
            "squeue",
            "--noheader",
            "-o",
            "%i %t",
            "-t",
            "all",
            "-p",
            "flex",
            "-u",
            "{user}",
        ],
        Compare::Output,
    ),
    form(
        "Nextflow (onlyJobState)",
        &[
            "squeue",
            "--noheader",
            "-o",
            "%i %t",
            "-t",
            "all",
            "--only-job-state",
        ],
        Compare::Output,
    ),
    form(
        "Parsl (without sacct)",
        &[
            "squeue",
            "--noheader",
            "--format=%i %t",
            "--job",
            "{done},{fail},{run},{pend},{arr}",
        ],
        Compare::Output,
    ),
    form(
        "Snakemake (squeue status)",
        &[
            "squeue",
            "--format=%i|%T",
            "--states=all",
            "--noheader",
            "--name",
            "run",
        ],
        Compare::Output,
    ),
    form(
        "people (`-r`: each task of a pending array on its own row)",
        &[
            "squeue",
            "-r",
            "--noheader",
            "-o",
            "%i %A %F %K %t",
            "-j",
            "{arr}",
        ],
        Compare::Output,
    ),
    form(
        "people (a pending array's one row)",
        &[
            "squeue",
            "--noheader",
            "-o",
            "%i %A %F %K %t",
            "-j",
            "{arr}",
        ],
        Compare::Output,
    ),
    form(
        "people (the fields Open OnDemand's list leaves out)",
        &["squeue", "-j", "{run}", "-o", "%s|%c|%m|%p|%y|%E|%h"],
        Compare::Fields('|'),
    ),
    form(
        "people (the fields Open OnDemand's list leaves out)",
        &[
            "squeue",
            "-j",
            "{run}",
            "-O",
            "EligibleTime:|,NumTasks:|,Requeue:|,RestartCnt:|,cpus-per-task:|,STDOUT:|,\
             STDERR:|,STDIN:|,BatchFlag:|,Deadline:|",
        ],
        Compare::Fields('|'),
    ),
    form(
        "batchspawner",
        &["squeue", "-h", "-j", "{run}", "-o", "%T %B"],
        Compare::Output,
    ),
    form(
        "batchspawner",
        &["squeue", "-h", "-j", "{pend}", "-o", "%T %B"],
        Compare::Output,
    ),
    form(
        "Open OnDemand",
        &[
            "squeue",
            "--all",
            "--states=all",
            "--noconvert",
            "-O",
            OOD_FIELDS,
            "-j",
            "{run}",
        ],
        Compare::Fields('\u{1f}'),
    ),
    form(
        "Open OnDemand",
        &[
            "squeue",
            "--all",
            "--states=all",
            "--noconvert",
            "-O",
            OOD_FIELDS,
            "-j",
            "{arr}",
        ],
        Compare::Fields('\u{1f}'),
    ),
    form(
        "Open OnDemand (earlier ood_core)",
        &[
            "squeue",
            "--all",
            "--states=all",
            "--noconvert",
            "-o",
            OOD_PERCENT,
            "-j",
            "{pend}",
        ],
        Compare::Fields(';'),
    ),
    form("Snakemake", &["sinfo", "-o", "%P"], Compare::Output),
    form("Open OnDemand", &["sinfo", "-aho %F/%C"], Compare::Output),
    form(
        "Open OnDemand",
        &[
            "sinfo",
            "-ahNO",
            "nodehost:100,gres:512,gresused:512,statelong",
        ],
        Compare::Output,
    ),
    form(
        "Open OnDemand",
        &["sinfo", "-ho", "\u{1e}%c\u{1f}%n\u{1f}%f"],
        Compare::Output,
    ),
    form(
        "Snakemake",
        &["scontrol", "show", "config"],
        Compare::KeyShapes(&["MinJobAge"]),
    ),
    form(
        "Snakemake (partition query)",
        &["scontrol", "show", "partition"],
        Compare::Keys(PARTITION_KEYS),
    ),
    form(
        "Open OnDemand",
        &["scontrol", "show", "part", "-o"],
        Compare::Keys(PARTITION_KEYS),
    ),
    form(
        "submitit",
        &[
            "sacct",
            "-o",
            "JobID,State,NodeList",
            "--parsable2",
            "-j",
            "{done}",
            "-j",
            "{fail}",
            "-j",
            "{run}",
        ],
        Compare::Accounting,
    ),
    form(
        "Snakemake",
        &[
            "sacct",
            "-X",
            "--parsable2",
            "--noheader",
            "--format=JobIdRaw,State",
            "--starttime",
            "{start}",
            "--endtime",
            "now",
            "--name",
            "run",
        ],
        Compare::Accounting,
    ),
    form(
        "Snakemake (efficiency report)",
        &[
            "sacct",
            "--name=run",
            "--parsable2",
            "--noheader",
            "--format=JobID,JobName,Comment,Elapsed,TotalCPU,NNodes,NCPUS,MaxRSS,ReqMem",
        ],
        Compare::Accounting,
    ),
    form("Parsl (probe)", &["sacct", "-X"], Compare::Accounting),
    form(
        "Parsl",
        &[
            "sacct",
            "-X",
            "--noheader",
            "--format=jobid,state%20",
            "--job",
            "{done},{fail},{run}",
        ],
        Compare::Accounting,
    ),
    form(
        "Open OnDemand",
        &[
            "sacct",
            "-P",
            "--delimiter",
            "\u{1f}",
            "-n",
            "--units",
            "G",
            "--allocations",
            "-o",
            "JobId,State,User,Group,JobName,Elapsed,ReqMem,AllocCPUS,ReqCPUS,Timelimit,\
             TotalCPU,MaxRSS,Partition,Submit,Start,End,ReqTRES",
            "-j",
            "{done},{fail}",
        ],
        Compare::Accounting,
    ),
];

/// The account and QOS queries, which need slurmdbd in Slurm: Flex's own answers are checked.
pub(crate) const ACCOUNTS: &[Form] = &[
    form(
        "Snakemake (account check)",
        &[
            "sacctmgr",
            "-n",
            "-s",
            "list",
            "user",
            "{user}",
            "format=account%256",
        ],
        Compare::WithoutDbd("{account}"),
    ),
    form(
        "Snakemake (account guess)",
        &["sshare", "-U", "--format", "Account%256", "--noheader"],
        Compare::WithoutDbd("{account}"),
    ),
    form(
        "Open OnDemand",
        &[
            "sacctmgr",
            "-nP",
            "show",
            "users",
            "withassoc",
            "format=account,qos",
            "where",
            "user={user}",
            "cluster=flex",
        ],
        Compare::WithoutDbd("{account}|normal"),
    ),
    form(
        "people (QOS limits)",
        &[
            "sacctmgr",
            "-P",
            "show",
            "qos",
            "format=name,priority,maxwall",
        ],
        Compare::WithoutDbd("Name|Priority|MaxWall normal|0|"),
    ),
];

/// The actions, last, as they change the jobs.
pub(crate) const ACT: &[Form] = &[
    form(
        "submitit, Parsl, dask-jobqueue, Snakemake, Nextflow, Open OnDemand, batchspawner",
        &["scancel", "{done}"],
        Compare::Output,
    ),
    form(
        "Parsl, dask-jobqueue",
        &["scancel", "99999"],
        Compare::Status,
    ),
    form(
        "Open OnDemand",
        &["scontrol", "hold", "{pend}"],
        Compare::Output,
    ),
    form(
        "Open OnDemand",
        &["scontrol", "release", "{pend}"],
        Compare::Output,
    ),
    form(
        "submitit",
        &["scontrol", "requeue", "{run}"],
        Compare::Output,
    ),
    form(
        "Parsl, dask-jobqueue, Snakemake",
        &["scancel", "{run}", "{pend}", "{arr}"],
        Compare::Output,
    ),
];

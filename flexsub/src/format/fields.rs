//! squeue's fields: each `-o` letter and `-O` name with its header, and its value for a job as
//! Slurm 22.05 prints it (`N/A`, `(null)`, `*`, sizes in MB with their unit). Fields that
//! describe what a Flex host never has (reservations, licenses, wckeys, sockets per node, core
//! specialisation) print what Slurm prints for a job that asked for none.

use super::PARTITION;
use crate::units::push_duration;
use crate::when;
use flex_proto::{JobState, JobView};
use gres_plugin::HostMem;
use jiff::tz::TimeZone;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    /// `%i`: the job id, an array task's `N_I` (a collapsed pending array's `N_[0-2%3]`).
    JobId,
    Name,
    User,
    UserId,
    Group,
    GroupId,
    StateCompact,
    State,
    TimeUsed,
    TimeLimit,
    TimeLeft,
    Nodes,
    ReasonList,
    Partition,
    Cpus,
    MinCpus,
    MinMemory,
    MinTmpDisk,
    Gres,
    TresAlloc,
    StartTime,
    SubmitTime,
    EndTime,
    Reason,
    Account,
    NodeList,
    SchedNodes,
    ReqNodes,
    ExcNodes,
    ExitCode,
    /// `%p`: the priority as a fraction of 2^32.
    Priority,
    /// `%Q`: the priority as a number.
    PriorityLong,
    Nice,
    Qos,
    Comment,
    Dependency,
    Features,
    Command,
    WorkDir,
    OverSubscribe,
    Contiguous,
    Sockets,
    Cores,
    Threads,
    Sct,
    CoreSpec,
    Reservation,
    WcKey,
    Licenses,
    /// `%A`: the job id, the array's for its pending tasks.
    ArrayJobId,
    /// `%F`: the array job id (the job id outside an array).
    ArrayJob,
    /// `%K`: the task index (`N/A` outside an array, `0-2%3` for a collapsed row).
    ArrayTaskId,
    /// `%B`: the host the batch script runs on.
    BatchHost,
    /// `%s`: the node selection plugin's data, none with Slurm's cons_tres.
    SelectJobInfo,
    EligibleTime,
    NumTasks,
    CpusPerTask,
    Requeue,
    RestartCnt,
    BatchFlag,
    Stdout,
    Stderr,
    Stdin,
    Deadline,
}

/// Each field: its `-o` letter (`\0`: only by name), its `-O` names, its header.
pub(super) const FIELDS: &[(Field, char, &[&str], &str)] = &[
    (Field::JobId, 'i', &["jobarrayid"], "JOBID"),
    (Field::ArrayJobId, 'A', &["jobid", "jobidraw"], "JOBID"),
    (Field::Name, 'j', &["name"], "NAME"),
    (Field::User, 'u', &["username", "user"], "USER"),
    (Field::UserId, 'U', &["userid"], "UID"),
    (Field::Group, 'g', &["groupname"], "GROUP"),
    (Field::GroupId, 'G', &["groupid"], "GROUP"),
    (Field::StateCompact, 't', &["statecompact"], "ST"),
    (Field::State, 'T', &["state"], "STATE"),
    (Field::TimeUsed, 'M', &["timeused"], "TIME"),
    (Field::TimeLimit, 'l', &["timelimit"], "TIME_LIMIT"),
    (Field::TimeLeft, 'L', &["timeleft"], "TIME_LEFT"),
    (Field::Nodes, 'D', &["numnodes"], "NODES"),
    (Field::ReasonList, 'R', &["reasonlist"], "NODELIST(REASON)"),
    (Field::Partition, 'P', &["partition"], "PARTITION"),
    (Field::Cpus, 'C', &["numcpus"], "CPUS"),
    (Field::MinCpus, 'c', &["mincpus"], "MIN_CPUS"),
    (Field::MinMemory, 'm', &["minmemory"], "MIN_MEMORY"),
    (Field::MinTmpDisk, 'd', &["mintmpdisk"], "MIN_TMP_DISK"),
    (
        Field::Gres,
        'b',
        &["tres-per-node", "gres", "tres-per-job"],
        "TRES_PER_NODE",
    ),
    (Field::TresAlloc, '\0', &["tres-alloc"], "TRES_ALLOC"),
    (Field::StartTime, 'S', &["starttime"], "START_TIME"),
    (Field::SubmitTime, 'V', &["submittime"], "SUBMIT_TIME"),
    (Field::EndTime, 'e', &["endtime"], "END_TIME"),
    (Field::Reason, 'r', &["reason"], "REASON"),
    (Field::Account, 'a', &["account"], "ACCOUNT"),
    (Field::NodeList, 'N', &["nodelist"], "NODELIST"),
    (Field::SchedNodes, 'Y', &["schednodes"], "SCHEDNODES"),
    (Field::ReqNodes, 'n', &["reqnodes"], "REQ_NODES"),
    (Field::ExcNodes, 'x', &["excnodes"], "EXC_NODES"),
    (Field::ExitCode, '\0', &["exitcode"], "EXIT_CODE"),
    (Field::Priority, 'p', &["priority"], "PRIORITY"),
    (Field::PriorityLong, 'Q', &["prioritylong"], "PRIORITY"),
    (Field::Nice, 'y', &["nice"], "NICE"),
    (Field::Qos, 'q', &["qos"], "QOS"),
    (Field::Comment, 'k', &["comment"], "COMMENT"),
    (Field::Dependency, 'E', &["dependency"], "DEPENDENCY"),
    (Field::Features, 'f', &["feature"], "FEATURES"),
    (Field::Command, 'o', &["command"], "COMMAND"),
    (Field::WorkDir, 'Z', &["workdir"], "WORK_DIR"),
    (
        Field::OverSubscribe,
        'h',
        &["oversubscribe"],
        "OVER_SUBSCRIBE",
    ),
    (Field::Contiguous, 'O', &["contiguous"], "CONTIGUOUS"),
    (Field::Sockets, 'H', &["sockets"], "SOCKETS_PER_NODE"),
    (Field::Cores, 'I', &["cores"], "CORES_PER_SOCKET"),
    (Field::Threads, 'J', &["threads"], "THREADS_PER_CORE"),
    (Field::Sct, 'z', &["sct"], "S:C:T"),
    (Field::CoreSpec, 'X', &["corespec"], "CORE_SPEC"),
    (Field::Reservation, 'v', &["reservation"], "RESERVATION"),
    (Field::WcKey, 'w', &["wckey"], "WCKEY"),
    (Field::Licenses, 'W', &["licenses"], "LICENSES"),
    (Field::ArrayJob, 'F', &["arrayjobid"], "ARRAY_JOB_ID"),
    (Field::ArrayTaskId, 'K', &["arraytaskid"], "ARRAY_TASK_ID"),
    (Field::BatchHost, 'B', &["batchhost"], "EXEC_HOST"),
    (Field::SelectJobInfo, 's', &["selectjobinfo"], ""),
    (
        Field::EligibleTime,
        '\0',
        &["eligibletime"],
        "ELIGIBLE_TIME",
    ),
    (Field::NumTasks, '\0', &["numtasks"], "TASKS"),
    (
        Field::CpusPerTask,
        '\0',
        &["cpus-per-task"],
        "CPUS_PER_TASK",
    ),
    (Field::Requeue, '\0', &["requeue"], "REQUEUE"),
    (Field::RestartCnt, '\0', &["restartcnt"], "RESTART_COUNT"),
    (Field::BatchFlag, '\0', &["batchflag"], "BATCH_FLAG"),
    (Field::Stdout, '\0', &["stdout"], "STDOUT"),
    (Field::Stderr, '\0', &["stderr"], "STDERR"),
    (Field::Stdin, '\0', &["stdin"], "STDIN"),
    (Field::Deadline, '\0', &["deadline"], "DEADLINE"),
];

impl Field {
    /// Whether its value comes from the submission's details, which flexd reads from its
    /// database only when asked ([`flex_proto::QueueFilter::details`]).
    pub(super) fn needs_details(self) -> bool {
        matches!(
            self,
            Field::Group
                | Field::GroupId
                | Field::Command
                | Field::WorkDir
                | Field::Features
                | Field::NumTasks
                | Field::CpusPerTask
                | Field::Stdout
                | Field::Stderr
        )
    }
}

fn duration(secs: u64) -> String {
    let mut s = String::new();
    push_duration(&mut s, secs);
    s
}

fn elapsed(j: &JobView, now: u64) -> u64 {
    j.start_time
        .map_or(0, |s| j.end_time.unwrap_or(now).saturating_sub(s))
}

fn time_or(t: Option<u64>, tz: &TimeZone, none: &str) -> String {
    t.map_or_else(|| none.to_string(), |t| when::format(t, tz))
}

fn leaves(j: &JobView) -> u32 {
    match &j.alloc {
        Some(a) => a.leaves.len() as u32,
        None => j.request.leaves.unwrap_or(0),
    }
}

fn cpus(j: &JobView) -> u32 {
    match &j.alloc {
        Some(a) => a.cores.len() as u32,
        None => (j.request.cores_per_leaf * leaves(j))
            .max(j.request.cpus)
            .max(1),
    }
}

/// Megabytes as Slurm's sizes print them: `1000M`, `4G` (whole gigabytes), `0`.
fn mb(m: u64) -> String {
    match m {
        0 => "0".into(),
        m if m.is_multiple_of(1 << 20) => format!("{}T", m >> 20),
        m if m.is_multiple_of(1024) => format!("{}G", m >> 10),
        m => format!("{m}M"),
    }
}

/// The host memory a job holds, or asked for (per node), in MB.
fn mem_mb(j: &JobView) -> u64 {
    match (&j.alloc, &j.request.host_mem) {
        (Some(a), _) if a.mem_bytes > 0 => a.mem_bytes >> 20,
        (_, Some(m)) => m.bytes(cpus(j), leaves(j), 0) >> 20,
        _ => 0,
    }
}

/// The group's name (its number when it has none), looked up once per group.
fn group_name(gid: u32) -> String {
    thread_local! {
        static NAMES: std::cell::RefCell<std::collections::HashMap<u32, String>> =
            Default::default();
    }
    NAMES.with(|n| {
        n.borrow_mut()
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map_or_else(|| gid.to_string(), |g| g.name)
            })
            .clone()
    })
}

/// Slurm's text for none.
const NULL: &str = "(null)";

pub(super) fn value(f: Field, j: &JobView, now: u64, tz: &TimeZone) -> String {
    let pending = j.state == JobState::Pending;
    let reason = || j.reason.clone().unwrap_or_else(|| "None".into());
    let host = || j.alloc.as_ref().map(|a| a.host.clone()).unwrap_or_default();
    let details = j.details.as_deref();
    let limit = j.request.time_limit_s;
    let array_job = j.array.map_or(j.id, |a| a.job);
    match f {
        Field::JobId => match (&j.pending_tasks, j.array) {
            (Some(t), Some(a)) => format!("{}_[{t}]", a.job),
            (_, Some(a)) => a.to_string(),
            (_, None) => j.id.to_string(),
        },
        Field::Name => j.name.clone(),
        Field::User => j.user.clone(),
        Field::UserId => j.uid.to_string(),
        Field::Group => details.map_or_else(|| NULL.into(), |d| group_name(d.gid)),
        Field::GroupId => details.map_or_else(|| NULL.into(), |d| d.gid.to_string()),
        Field::StateCompact => j.state.code().into(),
        Field::State => j.state.name().into(),
        Field::TimeUsed => duration(elapsed(j, now)),
        Field::TimeLimit => duration(limit),
        Field::TimeLeft => duration(limit.saturating_sub(elapsed(j, now))),
        Field::Nodes => "1".into(),
        Field::ReasonList if pending => format!("({})", reason()),
        Field::ReasonList | Field::NodeList => host(),
        Field::Partition => PARTITION.into(),
        Field::Cpus => cpus(j).to_string(),
        // The cores each node must have: a Flex job's one host gives it all of them.
        Field::MinCpus => cpus(j).to_string(),
        Field::MinMemory => mb(match j.request.host_mem {
            Some(HostMem::PerCpu(b)) => b >> 20,
            Some(HostMem::PerGpu(b)) => b >> 20,
            _ => mem_mb(j),
        }),
        Field::MinTmpDisk => "0".into(),
        // As squeue for a job without a GPU.
        Field::Gres if leaves(j) == 0 && !j.request.wants_gpu() => "N/A".into(),
        Field::Gres => format!("gres/gpu:{}", leaves(j)),
        Field::TresAlloc => {
            let n = cpus(j);
            let mut t = format!("cpu={n},mem={},node=1,billing={n}", mb(mem_mb(j)));
            if leaves(j) > 0 {
                t.push_str(&format!(",gres/gpu={}", leaves(j)));
            }
            t
        }
        Field::StartTime if pending => time_or(j.estimated_start, tz, "N/A"),
        Field::StartTime => time_or(j.start_time, tz, "N/A"),
        Field::SubmitTime => time_or(Some(j.submit_time), tz, "N/A"),
        Field::EndTime if pending || j.state == JobState::Running => j
            .start_time
            .or(j.estimated_start)
            .map_or_else(|| "N/A".into(), |s| when::format(s + limit, tz)),
        Field::EndTime => time_or(j.end_time, tz, "N/A"),
        Field::Reason => reason(),
        Field::Account => j.account.clone(),
        Field::SchedNodes => NULL.into(),
        Field::ReqNodes | Field::ExcNodes => String::new(),
        Field::ExitCode => j.state.exit_code_text(j.exit_code, j.signal),
        Field::Priority => format!("{:16.14}", j.priority.max(0) as f64 / u32::MAX as f64),
        // A pending job's priority as of flexd's last pass; 0 for the others, as squeue.
        Field::PriorityLong => j.priority.to_string(),
        Field::Nice => j.nice.to_string(),
        Field::Qos => j.qos.clone().unwrap_or_else(|| "normal".into()),
        Field::Comment => j.comment.clone().unwrap_or_else(|| NULL.into()),
        // What is left to wait for: nothing once the job may start.
        Field::Dependency => match &j.dependency {
            Some(d) if pending => format!("{d}(unfulfilled)"),
            _ => NULL.into(),
        },
        Field::Features => details
            .and_then(|d| d.constraint.clone())
            .unwrap_or_else(|| NULL.into()),
        Field::Command => details
            .and_then(|d| d.command.clone())
            .unwrap_or_else(|| NULL.into()),
        Field::WorkDir => details.map_or_else(|| NULL.into(), |d| d.workdir.display().to_string()),
        Field::OverSubscribe if j.request.exclusive => "NO".into(),
        Field::OverSubscribe => "OK".into(),
        Field::Contiguous => "0".into(),
        Field::Sockets | Field::Cores | Field::Threads => "*".into(),
        Field::Sct => "*:*:*".into(),
        Field::CoreSpec => "N/A".into(),
        Field::Reservation | Field::WcKey | Field::Licenses => NULL.into(),
        // Slurm gives an array's tasks ids of their own as they start; until then they are
        // the array's job.
        Field::ArrayJobId if pending => array_job.to_string(),
        Field::ArrayJobId => j.id.to_string(),
        Field::ArrayJob => array_job.to_string(),
        Field::ArrayTaskId => match (&j.pending_tasks, j.array) {
            (Some(t), _) => t.clone(),
            (None, Some(a)) => a.index.to_string(),
            (None, None) => "N/A".into(),
        },
        // squeue's word for a job that has no host yet.
        Field::BatchHost if pending => "n/a".into(),
        Field::BatchHost => host(),
        Field::SelectJobInfo => String::new(),
        Field::EligibleTime => time_or(Some(j.submit_time), tz, "N/A"),
        Field::NumTasks => details.and_then(|d| d.ntasks).unwrap_or(1).to_string(),
        Field::CpusPerTask => details
            .and_then(|d| d.cpus_per_task)
            .unwrap_or(1)
            .to_string(),
        Field::Requeue => u8::from(j.requeue).to_string(),
        Field::RestartCnt => j.restarts.to_string(),
        Field::BatchFlag => "1".into(),
        // The patterns as given, in the job's directory, unexpanded (as squeue shows them).
        Field::Stdout | Field::Stderr => details.map_or_else(
            || NULL.into(),
            |d| output_pattern(j, d, matches!(f, Field::Stderr)),
        ),
        Field::Stdin => "/dev/null".into(),
        Field::Deadline => "N/A".into(),
    }
}

/// A job's `-o` (or with `stderr`, `-e`) pattern in its directory, unexpanded: flexd's default
/// when none was given, and stderr goes with stdout unless given.
pub fn output_pattern(j: &JobView, d: &flex_proto::JobDetails, stderr: bool) -> String {
    let default = if j.array.is_some() {
        "flex-%A_%a.out"
    } else {
        "flex-%j.out"
    };
    let out = d.stdout.as_deref().unwrap_or(default);
    let p = match stderr {
        true => d.stderr.as_deref().unwrap_or(out),
        false => out,
    };
    d.workdir.join(p).display().to_string()
}

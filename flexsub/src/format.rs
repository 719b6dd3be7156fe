//! squeue's output formats for flexq, as scripts that parse squeue expect them: `-o/--format`
//! (`%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`) and `-O/--Format` (`JobID:10,Name,State`), over
//! the full job views.
//!
//! In `-o`, each field is `%[.][size]type`: `.` right-justifies, `size` is the column's width
//! (longer values are cut to it, as squeue does); other text is printed as it is, and `%%` is a
//! `%`. In `-O`, fields are comma-separated `name[:[.][size]][suffix]`, 20 wide by default.

use crate::units::push_duration;
use crate::when;
use flex_proto::text::escape_controls;
use flex_proto::{JobState, JobView};
use jiff::tz::TimeZone;

/// The partition every job of a Flex host is in, for scripts that print or filter on it.
pub const PARTITION: &str = gres_plugin::env::PARTITION;

/// squeue's default format, `-l`'s and `--start`'s.
pub const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
pub const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %.20Y %R";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    JobId,
    Name,
    User,
    StateCompact,
    State,
    TimeUsed,
    TimeLimit,
    TimeLeft,
    Nodes,
    ReasonList,
    Partition,
    Cpus,
    Gres,
    StartTime,
    SubmitTime,
    EndTime,
    Reason,
    Account,
    NodeList,
    SchedNodes,
    ExitCode,
    Priority,
    Qos,
    Comment,
    /// `%A`: the job id, an array task's array job id.
    ArrayJobId,
    /// `%F`, `%K`: the array job id and task index (`N/A` outside an array).
    ArrayJob,
    ArrayTaskId,
    /// `%B`: the host the batch script runs on.
    BatchHost,
}

/// Each field: its `-o` letter, its `-O` name (and aliases), its header.
const FIELDS: &[(Field, char, &[&str], &str)] = &[
    (Field::JobId, 'i', &["jobid", "jobarrayid"], "JOBID"),
    (Field::Name, 'j', &["name"], "NAME"),
    (Field::User, 'u', &["username", "user"], "USER"),
    (Field::StateCompact, 't', &["statecompact"], "ST"),
    (Field::State, 'T', &["state"], "STATE"),
    (Field::TimeUsed, 'M', &["timeused"], "TIME"),
    (Field::TimeLimit, 'l', &["timelimit"], "TIME_LIMIT"),
    (Field::TimeLeft, 'L', &["timeleft"], "TIME_LEFT"),
    (Field::Nodes, 'D', &["numnodes"], "NODES"),
    (Field::ReasonList, 'R', &["reasonlist"], "NODELIST(REASON)"),
    (Field::Partition, 'P', &["partition"], "PARTITION"),
    (Field::Cpus, 'C', &["numcpus"], "CPUS"),
    (
        Field::Gres,
        'b',
        &["tres-per-node", "gres", "tres-per-job"],
        "TRES_PER_NODE",
    ),
    (Field::StartTime, 'S', &["starttime"], "START_TIME"),
    (Field::SubmitTime, 'V', &["submittime"], "SUBMIT_TIME"),
    (Field::EndTime, 'e', &["endtime"], "END_TIME"),
    (Field::Reason, 'r', &["reason"], "REASON"),
    (Field::Account, 'a', &["account"], "ACCOUNT"),
    (Field::NodeList, 'N', &["nodelist"], "NODELIST"),
    (Field::SchedNodes, 'Y', &["schednodes"], "SCHEDNODES"),
    (Field::ExitCode, 'X', &["exitcode"], "EXIT_CODE"),
    (Field::Priority, 'Q', &["priority"], "PRIORITY"),
    (Field::Qos, 'q', &["qos"], "QOS"),
    (Field::Comment, 'k', &["comment"], "COMMENT"),
    (Field::ArrayJobId, 'A', &["jobidraw"], "JOBID"),
    (Field::ArrayJob, 'F', &["arrayjobid"], "ARRAY_JOB_ID"),
    (Field::ArrayTaskId, 'K', &["arraytaskid"], "ARRAY_TASK_ID"),
    (Field::BatchHost, 'B', &["batchhost"], "EXEC_HOST"),
];

#[derive(Clone, Debug, PartialEq)]
struct Column {
    field: Field,
    width: Option<usize>,
    right: bool,
    suffix: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Column(Column),
}

/// A parsed format.
#[derive(Clone, Debug, PartialEq)]
pub struct Format(Vec<Piece>);

fn letters() -> String {
    FIELDS.iter().map(|f| f.1).collect()
}

impl Format {
    /// `-o/--format`: `%[.][size]type` fields among other text.
    pub fn short(fmt: &str) -> Result<Format, String> {
        let mut out = Vec::new();
        let mut text = String::new();
        let mut chars = fmt.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            if chars.peek() == Some(&'%') {
                chars.next();
                text.push('%');
                continue;
            }
            let right = chars.next_if_eq(&'.').is_some();
            let mut digits = String::new();
            while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
                digits.push(d);
            }
            let Some(letter) = chars.next() else {
                return Err(format!("format {fmt:?} ends inside a field"));
            };
            let Some(f) = FIELDS.iter().find(|f| f.1 == letter) else {
                return Err(format!(
                    "unknown field %{letter} in format {fmt:?} (flexq knows %{})",
                    letters()
                        .chars()
                        .map(String::from)
                        .collect::<Vec<_>>()
                        .join(" %")
                ));
            };
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Column(Column {
                field: f.0,
                width: digits.parse().ok(),
                right,
                suffix: String::new(),
            }));
        }
        if !text.is_empty() {
            out.push(Piece::Text(text));
        }
        Ok(Format(out))
    }

    /// `-O/--Format`: `name[:[.][size]][suffix]`, comma-separated; 20 wide unless given.
    pub fn long(fmt: &str) -> Result<Format, String> {
        let mut out = Vec::new();
        for item in fmt.split(',').filter(|s| !s.is_empty()) {
            let (name, rest) = item.split_once(':').unwrap_or((item, ""));
            let Some(f) = FIELDS
                .iter()
                .find(|f| f.2.iter().any(|n| n.eq_ignore_ascii_case(name.trim())))
            else {
                let names: Vec<&str> = FIELDS.iter().map(|f| f.2[0]).collect();
                return Err(format!(
                    "unknown field {name:?} in --Format (flexq knows {})",
                    names.join(", ")
                ));
            };
            let right = rest.starts_with('.');
            let rest = rest.trim_start_matches('.');
            let split = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push(Piece::Column(Column {
                field: f.0,
                width: Some(rest[..split].parse().unwrap_or(20)),
                right,
                suffix: rest[split..].to_string(),
            }));
        }
        if out.is_empty() {
            return Err("--Format names no field".into());
        }
        Ok(Format(out))
    }

    /// The header line (no trailing newline).
    pub fn header(&self) -> String {
        self.line(|f| {
            FIELDS
                .iter()
                .find(|x| x.0 == f)
                .map_or("", |x| x.3)
                .to_string()
        })
    }

    /// One job's line (no trailing newline); `now` for elapsed and remaining times.
    pub fn row(&self, j: &JobView, now: u64, tz: &TimeZone) -> String {
        self.line(|f| value(f, j, now, tz))
    }

    fn line(&self, mut cell: impl FnMut(Field) -> String) -> String {
        let mut s = String::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) => s.push_str(t),
                Piece::Column(c) => {
                    let cell = cell(c.field);
                    let v = escape_controls(&cell);
                    let v: String = match c.width {
                        Some(w) => cut(&v, w),
                        None => v.into_owned(),
                    };
                    let pad = c.width.unwrap_or(0).saturating_sub(v.chars().count());
                    if c.right {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(&v);
                    } else {
                        s.push_str(&v);
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                    s.push_str(&c.suffix);
                }
            }
        }
        s.trim_end().to_string()
    }
}

/// The first `n` characters of `s` (a cell of a fixed-width column).
pub fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
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

fn value(f: Field, j: &JobView, now: u64, tz: &TimeZone) -> String {
    let pending = j.state == JobState::Pending;
    let reason = || j.reason.clone().unwrap_or_else(|| "None".into());
    let host = || j.alloc.as_ref().map(|a| a.host.clone()).unwrap_or_default();
    let limit = j.request.time_limit_s;
    match f {
        Field::JobId => j.array.map_or_else(|| j.id.to_string(), |a| a.to_string()),
        Field::Name => j.name.clone(),
        Field::User => j.user.clone(),
        Field::StateCompact => j.state.code().into(),
        Field::State => j.state.name().into(),
        Field::TimeUsed => duration(elapsed(j, now)),
        Field::TimeLimit => duration(limit),
        Field::TimeLeft => duration(limit.saturating_sub(elapsed(j, now))),
        Field::Nodes => "1".into(),
        Field::ReasonList if pending => format!("({})", reason()),
        Field::ReasonList | Field::NodeList => host(),
        Field::Partition => PARTITION.into(),
        Field::Cpus => match &j.alloc {
            Some(a) => a.cores.len().to_string(),
            None => (j.request.cores_per_leaf * leaves(j))
                .max(j.request.cpus)
                .max(1)
                .to_string(),
        },
        // As squeue for a job without a GPU.
        Field::Gres if leaves(j) == 0 && !j.request.wants_gpu() => "N/A".into(),
        Field::Gres => format!("gres/gpu:{}", leaves(j)),
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
        Field::SchedNodes => "(null)".into(),
        Field::ExitCode => j.state.exit_code_text(j.exit_code, j.signal),
        // A pending job's priority as of flexd's last pass; 0 for the others, as squeue.
        Field::Priority => j.priority.to_string(),
        Field::Qos => j.qos.clone().unwrap_or_else(|| "normal".into()),
        // squeue's word for none.
        Field::Comment => j.comment.clone().unwrap_or_else(|| "(null)".into()),
        Field::ArrayJobId => j.array.map_or(j.id, |a| a.job).to_string(),
        Field::ArrayJob => j.array.map_or(j.id, |a| a.job).to_string(),
        Field::ArrayTaskId => j
            .array
            .map_or_else(|| "N/A".into(), |a| a.index.to_string()),
        // squeue's word for a job that has no host yet.
        Field::BatchHost if pending => "n/a".into(),
        Field::BatchHost => host(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_proto::{AllocView, LeafView};
    use gres_plugin::{JobId, Request};

    fn job(state: JobState) -> JobView {
        JobView {
            id: JobId(42),
            name: "a-rather-long-name".into(),
            user: "ann".into(),
            uid: 1000,
            account: "lab".into(),
            state,
            submit_time: 1_000,
            start_time: (state != JobState::Pending).then_some(1_100),
            end_time: None,
            request: Request::leaves(4, 3600),
            alloc: (state != JobState::Pending).then(|| AllocView {
                host: "gpu1".into(),
                leaves: vec![
                    LeafView {
                        uuid: "MIG-a".into(),
                        profile: "1g.5gb".into(),
                        gpu: 0,
                        share: 1000,
                    };
                    4
                ],
                cores: vec![0, 1, 2, 3, 4, 5, 6, 7],
                mem_bytes: 0,
            }),
            reason: (state == JobState::Pending).then(|| "Resources".into()),
            estimated_start: None,
            exit_code: None,
            signal: None,
            array: None,
            dependency: None,
            restarts: 0,
            comment: None,
            requeue: true,
            priority: 0,
            nice: 0,
            qos: None,
        }
    }

    #[test]
    fn squeue_short_formats_justify_and_cut() {
        let f = Format::short("%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R").unwrap();
        let tz = TimeZone::UTC;
        assert_eq!(
            f.header(),
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
        );
        assert_eq!(
            f.row(&job(JobState::Running), 1_165, &tz),
            "                42      flex a-rather      ann  R       1:05      1 gpu1"
        );
        assert_eq!(
            f.row(&job(JobState::Pending), 1_165, &tz),
            "                42      flex a-rather      ann PD       0:00      1 (Resources)"
        );
        let f = Format::short("%i|%C|%b|%l|%L|%a|%%").unwrap();
        assert_eq!(
            f.row(&job(JobState::Running), 1_165, &tz),
            "42|8|gres/gpu:4|1:00:00|58:55|lab|%"
        );
        assert_eq!(
            f.header(),
            "JOBID|CPUS|TRES_PER_NODE|TIME_LIMIT|TIME_LEFT|ACCOUNT|%"
        );
    }

    #[test]
    fn squeue_long_formats_take_names_widths_and_suffixes() {
        let f = Format::long("JobID:6,State:.9|,name").unwrap();
        let tz = TimeZone::UTC;
        assert_eq!(
            f.row(&job(JobState::Running), 1_165, &tz),
            "42      RUNNING|a-rather-long-name"
        );
    }

    #[test]
    fn priority_and_qos_columns() {
        let tz = TimeZone::UTC;
        let mut j = job(JobState::Pending);
        j.priority = 10500;
        j.qos = Some("high".into());
        let f = Format::short("%i %Q %q").unwrap();
        assert_eq!(f.header(), "JOBID PRIORITY QOS");
        assert_eq!(f.row(&j, 1_165, &tz), "42 10500 high");
        let f = Format::long("JobID:4,Priority:.8").unwrap();
        assert_eq!(f.row(&j, 1_165, &tz), "42     10500");
        assert_eq!(f.row(&job(JobState::Running), 1_165, &tz), "42         0");
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let e = Format::short("%i %Z").unwrap_err();
        assert!(e.contains("%Z"), "{e}");
        let e = Format::long("jobid,colour").unwrap_err();
        assert!(e.contains("\"colour\""), "{e}");
        assert!(Format::short("%.8").is_err());
    }
}

//! squeue's output formats for flexq, as scripts that parse squeue expect them: `-o/--format`
//! (`%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`) and `-O/--Format` (`JobID:10,Name,State`), over
//! the full job views.
//!
//! In `-o`, each field is `%[.][size]type`: `.` right-justifies, `size` is the column's width
//! (longer values are cut to it, as squeue does); other text is printed as it is, and `%%` is a
//! `%`. In `-O`, fields are comma-separated `name[:[.][size]][suffix]`, 20 wide by default.

mod fields;
pub use fields::output_pattern;

use fields::{value, Field, FIELDS};
use flex_proto::text::escape_controls;
use flex_proto::JobView;
use jiff::tz::TimeZone;

/// The partition every job of a Flex host is in, for scripts that print or filter on it.
pub const PARTITION: &str = gres_plugin::env::PARTITION;

/// squeue's default format, `-l`'s and `--start`'s.
pub const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
pub const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %.20Y %R";

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
    FIELDS.iter().map(|f| f.1).filter(|c| *c != '\0').collect()
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
            let Some(f) = FIELDS.iter().find(|f| f.1 == letter && letter != '\0') else {
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

    /// `-O/--Format`: `name[:[.][size]][suffix]`, comma-separated; 20 wide without a `:`,
    /// and as wide as its value with a `:` and no size (`Name:|`), as squeue reads them.
    pub fn long(fmt: &str) -> Result<Format, String> {
        let mut out = Vec::new();
        for item in fmt.split(',').filter(|s| !s.is_empty()) {
            let (name, rest, sized) = match item.split_once(':') {
                Some((name, rest)) => (name, rest, true),
                None => (item, "", false),
            };
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
            let (right, size, suffix) = long_size(rest);
            out.push(Piece::Column(Column {
                field: f.0,
                width: match size {
                    Some(0) => None,
                    Some(w) => Some(w),
                    None if sized => None,
                    None => Some(20),
                },
                right,
                suffix: suffix.to_string(),
            }));
        }
        if out.is_empty() {
            return Err("--Format names no field".into());
        }
        Ok(Format(out))
    }

    /// Whether a field needs the jobs' submission details ([`flex_proto::QueueFilter::details`]).
    pub fn needs_details(&self) -> bool {
        self.0
            .iter()
            .any(|p| matches!(p, Piece::Column(c) if c.field.needs_details()))
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

/// The part of a `--Format` item after its `:`, `[.][size][suffix]`, as squeue and sinfo read
/// it: right-justified or not, the size when one is given, and the suffix.
pub fn long_size(rest: &str) -> (bool, Option<usize>, &str) {
    let right = rest.starts_with('.');
    let rest = rest.trim_start_matches('.');
    let split = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    (right, rest[..split].parse().ok(), &rest[split..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_proto::{AllocView, ArrayTask, JobDetails, JobState, LeafView};
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
            pending_tasks: None,
            details: None,
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
        let f = Format::long("JobID:4,PriorityLong:.8 ,Priority:").unwrap();
        assert_eq!(f.row(&j, 1_165, &tz), "42     10500 0.00000244472176");
        assert_eq!(
            f.row(&job(JobState::Running), 1_165, &tz),
            "42         0 0.00000000000000"
        );
    }

    #[test]
    fn fields_of_the_submission_and_what_slurm_prints_for_none() {
        let tz = TimeZone::UTC;
        let mut j = job(JobState::Pending);
        let f = Format::long("GroupID:|,WorkDir:|,Command:|,Feature:|,UserID:|").unwrap();
        assert!(f.needs_details());
        // Without details (an older flexd), Slurm's word for none.
        assert_eq!(f.row(&j, 1_165, &tz), "(null)|(null)|(null)|(null)|1000|");
        j.details = Some(Box::new(JobDetails {
            gid: 4242,
            workdir: "/home/ann/exp".into(),
            command: Some("/home/ann/exp/train.sh".into()),
            constraint: Some("a100".into()),
            stderr: Some("err-%j.txt".into()),
            ntasks: Some(2),
            ..JobDetails::default()
        }));
        assert_eq!(
            f.row(&j, 1_165, &tz),
            "4242|/home/ann/exp|/home/ann/exp/train.sh|a100|1000|"
        );
        let f =
            Format::long("STDOUT:|,STDERR:|,STDIN:|,NumTasks:|,cpus-per-task:|,Requeue:").unwrap();
        assert_eq!(
            f.row(&j, 1_165, &tz),
            "/home/ann/exp/flex-%j.out|/home/ann/exp/err-%j.txt|/dev/null|2|1|1"
        );
        let f = Format::short("%c;%d;%h;%H;%I;%J;%z;%X;%v;%w;%W;%x;%n;%O;%y").unwrap();
        assert!(!f.needs_details());
        assert_eq!(
            f.row(&j, 1_165, &tz),
            "4;0;OK;*;*;*;*:*:*;N/A;(null);(null);(null);;;0;0"
        );
        assert_eq!(
            f.header(),
            "MIN_CPUS;MIN_TMP_DISK;OVER_SUBSCRIBE;SOCKETS_PER_NODE;CORES_PER_SOCKET;\
             THREADS_PER_CORE;S:C:T;CORE_SPEC;RESERVATION;WCKEY;LICENSES;EXC_NODES;REQ_NODES;\
             CONTIGUOUS;NICE"
        );
        let mut r = job(JobState::Running);
        r.request.host_mem = Some(gres_plugin::HostMem::PerNode(1000 << 20));
        r.alloc.as_mut().unwrap().mem_bytes = 1000 << 20;
        let f = Format::short("%m|%E").unwrap();
        assert_eq!(f.row(&r, 1_165, &tz), "1000M|(null)");
        let f = Format::long("tres-alloc:").unwrap();
        assert_eq!(
            f.row(&r, 1_165, &tz),
            "cpu=8,mem=1000M,node=1,billing=8,gres/gpu=4"
        );
    }

    #[test]
    fn a_collapsed_pending_array_is_one_row() {
        let tz = TimeZone::UTC;
        let mut j = job(JobState::Pending);
        j.id = JobId(1004);
        j.array = Some(ArrayTask {
            job: JobId(1004),
            index: 0,
        });
        j.pending_tasks = Some("0-2%3".into());
        let f = Format::short("%i %A %F %K").unwrap();
        assert_eq!(f.row(&j, 1_165, &tz), "1004_[0-2%3] 1004 1004 0-2%3");
        j.pending_tasks = None;
        j.id = JobId(1005);
        j.array = Some(ArrayTask {
            job: JobId(1004),
            index: 1,
        });
        assert_eq!(f.row(&j, 1_165, &tz), "1004_1 1004 1004 1");
        j.state = JobState::Running;
        assert_eq!(f.row(&j, 1_165, &tz), "1004_1 1005 1004 1");
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let e = Format::short("%i %!").unwrap_err();
        assert!(e.contains("%!"), "{e}");
        let e = Format::long("jobid,colour").unwrap_err();
        assert!(e.contains("\"colour\""), "{e}");
        assert!(Format::short("%.8").is_err());
    }
}

//! flexacct's columns: every field --format takes, how each reads a record, and the three
//! ways rows are printed (sacct's fixed-width columns, delimited text, CSV).

use crate::error::Error;
use crate::usage;
use crate::when;
use flex_proto::text::escape_controls;
use flex_proto::AcctRecord;
use gres_plugin::topology::format_cpu_list;
use jiff::tz::TimeZone;

/// What --format shows when not given (sacct's default, with leaves and cores for its
/// partition and CPU count).
pub const DEFAULT_FORMAT: &str = "JobID,JobName,User,Account,NLeaves,NCPUS,State,ExitCode";

/// A field of --format: its name, default width and what it says.
pub struct Field {
    pub name: &'static str,
    pub width: usize,
    pub help: &'static str,
    value: fn(&AcctRecord, &Ctx) -> String,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What values need besides the record.
pub struct Ctx {
    pub now: u64,
    pub tz: TimeZone,
}

fn time(t: Option<u64>, c: &Ctx) -> String {
    t.map_or_else(|| "Unknown".into(), |t| when::format(t, &c.tz))
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(",")
}

/// A number with at most `places` decimals, trailing zeros dropped (`4`, `0.571`).
pub fn decimal(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The cores the job asked for, where the request alone says (not for a GPU fraction or
/// GPU memory, whose leaf count flexd chose).
fn req_cpus(r: &AcctRecord) -> Option<u64> {
    let q = &r.request;
    let per_leaf = |n: u32| u64::from(n) * u64::from(q.cores_per_leaf);
    match q.leaves {
        _ if q.exclusive => None,
        Some(n) if n > 0 => Some(per_leaf(n).max(q.cpus.into())),
        _ if !q.wants_gpu() => Some(u64::from(q.cpus).max(1)),
        _ => (q.cpus > 0).then_some(q.cpus.into()),
    }
}

/// Host memory the job asked for in bytes: what it was given once it started, else what its
/// request works out to where the request alone says.
pub fn req_mem(r: &AcctRecord) -> Option<u64> {
    use gres_plugin::HostMem;
    if r.mem_bytes > 0 {
        return Some(r.mem_bytes);
    }
    match r.request.host_mem? {
        HostMem::PerNode(b) => Some(b),
        HostMem::PerCpu(b) => Some(b.saturating_mul(req_cpus(r)?)),
        HostMem::PerGpu(b) => Some(b.saturating_mul(r.request.leaves?.into())),
        HostMem::All => None,
    }
}

/// What the job asked for, as TRES (`cpu=8,mem=20G,node=1,gres/leaf=4,gres/gpumem=16G`).
pub fn req_tres(r: &AcctRecord) -> String {
    let q = &r.request;
    let mut parts = Vec::new();
    if let Some(n) = req_cpus(r) {
        parts.push(format!("cpu={n}"));
    }
    if let Some(m) = req_mem(r) {
        parts.push(format!("mem={}", crate::units::format_size(m)));
    }
    parts.push("node=1".into());
    if let Some(n) = q.leaves.filter(|&n| n > 0) {
        parts.push(format!("gres/leaf={n}"));
    }
    if let Some(g) = q.gpus {
        parts.push(format!("gres/gpu={g}"));
    }
    if let Some(m) = q.mem_bytes {
        parts.push(format!("gres/gpumem={}", crate::units::format_size(m)));
    }
    parts.join(",")
}

/// What the job held, as TRES (`cpu=8,mem=20G,node=1,gres/leaf=4,gres/gpu=0.571,
/// gres/gpumem=20G`: `mem` is host memory, `gres/gpumem` its leaves' memory); empty when it
/// never started.
pub fn alloc_tres(r: &AcctRecord) -> String {
    if r.leaves.is_empty() && r.cores.is_empty() {
        return String::new();
    }
    let mut parts = vec![format!("cpu={}", r.cores.len())];
    if r.mem_bytes > 0 {
        parts.push(format!("mem={}", crate::units::format_size(r.mem_bytes)));
    }
    parts.push("node=1".into());
    if !r.leaves.is_empty() {
        parts.push(format!("gres/leaf={}", decimal(usage::leaves(r), 3)));
        parts.push(format!(
            "gres/gpu={}",
            decimal(usage::gpu_equivalents(r), 3)
        ));
        parts.push(format!(
            "gres/gpumem={}",
            crate::units::format_size(usage::memory_bytes(r) as u64)
        ));
    }
    parts.join(",")
}

macro_rules! field {
    ($name:literal, $width:literal, $help:literal, $f:expr) => {
        Field {
            name: $name,
            width: $width,
            help: $help,
            value: $f,
        }
    };
}

/// Every field, in --helpformat's order.
pub static FIELDS: &[Field] = &[
    field!("JobID", 12, "job id", |r, _| r
        .array
        .map_or_else(|| r.id.to_string(), |a| a.to_string())),
    field!(
        "JobIDRaw",
        12,
        "job id as a number (an array task's own id)",
        |r, _| r.id.to_string()
    ),
    field!("JobName", 10, "job name", |r, _| r.name.clone()),
    field!("Comment", 10, "the job's --comment", |r, _| r
        .comment
        .clone()
        .unwrap_or_default()),
    field!("User", 9, "user name", |r, _| r.user.clone()),
    field!("Group", 9, "group name of the submission", |r, _| {
        nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(r.gid))
            .ok()
            .flatten()
            .map_or_else(|| r.gid.to_string(), |g| g.name)
    }),
    field!("Partition", 10, "partition (a Flex host's one)", |_, _| {
        gres_plugin::env::PARTITION.to_string()
    }),
    field!("UID", 6, "user id", |r, _| r.uid.to_string()),
    field!("GID", 6, "group id of the submission", |r, _| r
        .gid
        .to_string()),
    field!(
        "Account",
        10,
        "account (--account, else the user's primary group)",
        |r, _| r.account.clone()
    ),
    field!(
        "State",
        10,
        "PENDING RUNNING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY",
        |r, _| r.state.name().to_string()
    ),
    field!("ExitCode", 8, "exit code:signal", |r, _| r
        .state
        .exit_code_text(r.exit_code, r.signal)),
    field!(
        "Restarts",
        8,
        "times it was requeued (flexcontrol requeue; its latest run is shown)",
        |r, _| r.restarts.to_string()
    ),
    field!("Reason", 20, "why it failed or was not run", |r, _| r
        .reason
        .clone()
        .unwrap_or_else(|| "None".into())),
    field!("Submit", 19, "submit time", |r, c| time(
        Some(r.submit_time),
        c
    )),
    field!("Eligible", 19, "time it could first start", |r, c| time(
        Some(r.eligible_time),
        c
    )),
    field!("Start", 19, "start time", |r, c| time(r.start_time, c)),
    field!("End", 19, "end time", |r, c| time(r.end_time, c)),
    field!("Elapsed", 10, "run time [D-]HH:MM:SS", |r, c| {
        when::format_elapsed(usage::elapsed(r, c.now))
    }),
    field!("ElapsedRaw", 10, "run time in seconds", |r, c| {
        usage::elapsed(r, c.now).to_string()
    }),
    field!("Timelimit", 10, "time limit [D-]HH:MM:SS", |r, _| {
        when::format_elapsed(r.request.time_limit_s)
    }),
    field!("TimelimitRaw", 12, "time limit in seconds", |r, _| r
        .request
        .time_limit_s
        .to_string()),
    field!("Reserved", 10, "wait from eligible to start", |r, c| {
        when::format_elapsed(usage::wait(r, c.now))
    }),
    field!("Wait", 10, "same as Reserved", |r, c| when::format_elapsed(
        usage::wait(r, c.now)
    )),
    field!("WaitRaw", 10, "wait in seconds", |r, c| usage::wait(
        r, c.now
    )
    .to_string()),
    field!("ReqTRES", 30, "requested resources", |r, _| req_tres(r)),
    field!("AllocTRES", 40, "held resources", |r, _| alloc_tres(r)),
    field!("ReqLeaves", 9, "leaves requested", |r, _| r
        .request
        .leaves
        .map_or_else(String::new, |n| n.to_string())),
    field!("ReqGPUs", 7, "GPU fraction requested", |r, _| r
        .request
        .gpus
        .map_or_else(String::new, |g| g.to_string())),
    field!(
        "ReqMem",
        8,
        "host memory requested (what it was given once it started)",
        |r, _| req_mem(r).map_or_else(String::new, crate::units::format_size)
    ),
    field!("ReqGPUMem", 9, "GPU memory requested", |r, _| r
        .request
        .mem_bytes
        .map_or_else(String::new, crate::units::format_size)),
    field!("CPUsPerLeaf", 11, "cores requested per leaf", |r, _| r
        .request
        .cores_per_leaf
        .to_string()),
    field!(
        "NLeaves",
        8,
        "leaves held (a share of a whole GPU counts its fraction)",
        |r, _| { decimal(usage::leaves(r), 3) }
    ),
    field!("NCPUS", 6, "cores held", |r, _| r.cores.len().to_string()),
    field!("AllocCPUS", 9, "cores held (as NCPUS)", |r, _| r
        .cores
        .len()
        .to_string()),
    field!("ReqCPUS", 7, "cores asked for (tasks x -c; at least 1)", |r, _| r
        .request
        .cpus
        .max(1)
        .to_string()),
    field!("NNodes", 8, "hosts (1)", |_, _| "1".to_string()),
    field!(
        "MaxRSS",
        10,
        "peak resident memory of its latest run, in KiB as sacct prints it (1234K)",
        |r, _| r
            .max_rss
            .map_or_else(String::new, |b| format!("{}K", b.div_ceil(1024)))
    ),
    field!(
        "TotalCPU",
        10,
        "CPU time of its latest run [D-]HH:MM:SS (its cgroup's cpu.stat)",
        |r, _| r.cpu_usec.map_or_else(String::new, |us| {
            crate::when::format_elapsed((us as f64 / 1e6).round() as u64)
        })
    ),
    field!(
        "TRESUsageInMax",
        40,
        "peak use of its latest run: cpu (time), mem (MaxRSS), gres/gpumem, gres/gpuutil (percent of one leaf, summed over its leaves)",
        |r, _| usage::tres_usage(r, true)
    ),
    field!(
        "TRESUsageInAve",
        40,
        "mean use of its latest run, as TRESUsageInMax",
        |r, _| usage::tres_usage(r, false)
    ),
    field!(
        "ConsumedEnergy",
        14,
        "GPU energy of its latest run in joules: each sample, its GPUs' power times the part of each it held (flexd's telemetry)",
        |r, _| r
            .gpu_usage
            .as_ref()
            .and_then(|g| g.energy_j)
            .map_or_else(String::new, |j| format!("{}", j.round()))
    ),
    field!(
        "GPUTelemetry",
        12,
        "where its GPU figures come from: nvml, or simulated (FILE) or simulated (seed N)",
        |r, _| r
            .gpu_usage
            .as_ref()
            .map_or_else(String::new, |g| g.source.clone())
    ),
    field!("NodeList", 15, "host", |r, _| r
        .host
        .clone()
        .unwrap_or_else(|| "None assigned".into())),
    field!(
        "AllocLeaves",
        40,
        "UUIDs of the leaves held, in rank order",
        |r, _| list(&r.leaves, |l| l.uuid.clone())
    ),
    field!("Profiles", 20, "profile of each leaf held", |r, _| list(
        &r.leaves,
        |l| l.profile.clone()
    )),
    field!("GPUs", 10, "GPU of each leaf held", |r, _| list(
        &r.leaves,
        |l| l.gpu.to_string()
    )),
    field!("CPUs", 15, "cores held (a CPU list)", |r, _| {
        format_cpu_list(&r.cores)
    }),
];

/// One column of the output.
#[derive(Debug)]
pub struct Column {
    pub field: &'static Field,
    pub width: usize,
    pub left: bool,
}

/// Parse --format (`JobID,User%20,JobName%-30`); names are case-insensitive.
pub fn parse_format(spec: &str) -> Result<Vec<Column>, Error> {
    let mut cols = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, Some(w)),
            None => (item, None),
        };
        let field = FIELDS
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::Input(format!(
                    "unknown field {name:?} in --format; valid fields: {}",
                    list(FIELDS, |f| f.name.to_string())
                ))
            })?;
        let (width, left) = match width {
            None => (field.width, false),
            Some(w) => {
                let left = w.starts_with('-');
                let n = w
                    .trim_start_matches('-')
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0);
                let n = n.ok_or_else(|| {
                    Error::Input(format!(
                        "invalid width {w:?} of field {name} in --format: expected a number \
                         of at least 1"
                    ))
                })?;
                (n, left)
            }
        };
        cols.push(Column { field, width, left });
    }
    if cols.is_empty() {
        return Err(Error::Input("--format names no field".into()));
    }
    Ok(cols)
}

/// Fit a value into a column as sacct does: padded, or cut with a `+` at the end.
fn fit(v: &str, width: usize, left: bool) -> String {
    let n = v.chars().count();
    if n > width {
        let mut s: String = v.chars().take(width.saturating_sub(1)).collect();
        s.push('+');
        s
    } else if left {
        format!("{v:<width$}")
    } else {
        format!("{v:>width$}")
    }
}

/// How to print the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    Columns,
    Parsable(String),
    Csv,
}

/// The rows in `style`.
pub fn render(
    cols: &[Column],
    recs: &[AcctRecord],
    ctx: &Ctx,
    style: &Style,
    header: bool,
) -> Result<String, Error> {
    let rows: Vec<Vec<String>> = recs
        .iter()
        .map(|r| {
            cols.iter()
                .map(|c| escape_controls(&(c.field.value)(r, ctx)).into_owned())
                .collect()
        })
        .collect();
    let names = cols.iter().map(|c| c.field.name.to_string());
    match style {
        Style::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let fail = |e: csv::Error| Error::Input(format!("cannot write CSV: {e}"));
            if header {
                w.write_record(names).map_err(fail)?;
            }
            for r in &rows {
                w.write_record(r).map_err(fail)?;
            }
            let bytes = w
                .into_inner()
                .map_err(|e| Error::Input(format!("cannot write CSV: {e}")))?;
            Ok(String::from_utf8(bytes).expect("the fields are UTF-8"))
        }
        Style::Parsable(d) => {
            let mut out = String::new();
            let mut line = |cells: Vec<String>| {
                out.push_str(&cells.join(d));
                out.push('\n');
            };
            if header {
                line(names.collect());
            }
            rows.into_iter().for_each(line);
            Ok(out)
        }
        Style::Columns => {
            let mut out = String::new();
            let mut line = |cells: Vec<String>| {
                let cells: Vec<String> = cells
                    .iter()
                    .zip(cols)
                    .map(|(v, c)| fit(v, c.width, c.left))
                    .collect();
                out.push_str(cells.join(" ").trim_end());
                out.push('\n');
            };
            if header {
                line(names.collect());
                line(cols.iter().map(|c| "-".repeat(c.width)).collect());
            }
            rows.into_iter().for_each(line);
            Ok(out)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::usage::tests::record;
    use flex_proto::{AcctLeaf, JobState};

    pub(crate) fn ctx() -> Ctx {
        Ctx {
            now: 20_000,
            tz: TimeZone::UTC,
        }
    }

    pub(crate) fn rec() -> AcctRecord {
        let mut r = record(
            Some(3700),
            Some(3700 + 90_061),
            (0..2)
                .map(|i| AcctLeaf {
                    uuid: format!("MIG-{i}"),
                    profile: "1g.5gb".into(),
                    gpu: i,
                    share: 1000,
                    sm_slices: 1,
                    memory_bytes: Some(5 << 30),
                })
                .collect(),
        );
        r.state = JobState::Failed;
        r.exit_code = Some(3);
        r.max_rss = Some(5 << 20);
        r
    }

    #[test]
    fn max_rss_is_kib_as_sacct_prints_it_and_empty_when_unknown() {
        let cols = parse_format("JobID,State,ExitCode,Elapsed,MaxRSS").unwrap();
        let recs = [rec(), record(None, None, vec![])];
        let out = render(&cols, &recs, &ctx(), &Style::Parsable("|".into()), false).unwrap();
        assert_eq!(
            out,
            "1|FAILED|3:0|1-01:01:01|5120K\n1|PENDING|0:0|00:00:00|\n"
        );
    }

    #[test]
    fn fields_say_what_happened() {
        let cols = parse_format(
            "jobid,State,ExitCode,Submit,Start,End,Elapsed,Reserved,AllocTRES,ReqTRES,\
             AllocLeaves,Profiles,GPUs,CPUs,NodeList,Timelimit",
        )
        .unwrap();
        let out = render(&cols, &[rec()], &ctx(), &Style::Parsable("|".into()), true).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "JobID|State|ExitCode|Submit|Start|End|Elapsed|Reserved|AllocTRES|ReqTRES|\
             AllocLeaves|Profiles|GPUs|CPUs|NodeList|Timelimit"
        );
        assert_eq!(
            lines[1],
            "1|FAILED|3:0|1970-01-01T00:01:40|1970-01-01T01:01:40|1970-01-02T02:02:41|\
             1-01:01:01|01:00:00|cpu=4,node=1,gres/leaf=2,gres/gpu=0.286,gres/gpumem=10G|\
             cpu=2,node=1,gres/leaf=2|MIG-0,MIG-1|1g.5gb,1g.5gb|0,1|0-3|h|01:00:00"
        );
        let pending = record(None, None, vec![]);
        let out = render(
            &cols,
            &[pending],
            &ctx(),
            &Style::Parsable(";".into()),
            false,
        )
        .unwrap();
        assert_eq!(
            out,
            "1;PENDING;0:0;1970-01-01T00:01:40;Unknown;Unknown;00:00:00;05:31:40;;\
             cpu=2,node=1,gres/leaf=2;;;;;None assigned;01:00:00\n"
        );
    }

    #[test]
    fn columns_are_padded_and_cut_like_sacct() {
        let cols = parse_format("JobID%4,JobName%-6,State%5").unwrap();
        let mut r = rec();
        r.name = "a-long-name".into();
        let out = render(&cols, &[r], &ctx(), &Style::Columns, true).unwrap();
        // Headers are cut too, as sacct cuts them.
        assert_eq!(
            out,
            "Job+ JobNa+ State\n---- ------ -----\n   1 a-lon+ FAIL+\n"
        );
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let cols = parse_format("JobID,JobName,AllocLeaves").unwrap();
        let mut r = rec();
        r.name = "say \"hi\", twice".into();
        let out = render(&cols, &[r], &ctx(), &Style::Csv, true).unwrap();
        let mut rd = csv::Reader::from_reader(out.as_bytes());
        let headers = rd.headers().unwrap().clone();
        assert_eq!(
            headers.iter().collect::<Vec<_>>(),
            ["JobID", "JobName", "AllocLeaves"]
        );
        let row = rd.records().next().unwrap().unwrap();
        assert_eq!(&row[1], "say \"hi\", twice");
        assert_eq!(&row[2], "MIG-0,MIG-1");
    }

    #[test]
    fn bad_formats_list_the_valid_fields() {
        let e = parse_format("JobID,Bogus").unwrap_err().to_string();
        assert!(e.contains("\"Bogus\"") && e.contains("AllocTRES"), "{e}");
        let e = parse_format("JobID%x").unwrap_err().to_string();
        assert!(e.contains("\"x\""), "{e}");
        assert!(parse_format(" , ").is_err());
        assert!(parse_format(DEFAULT_FORMAT).is_ok());
    }
}

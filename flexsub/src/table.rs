//! Text for people: flexq's job table and leaf map, and flexsub's `--test-only` and
//! `--estimate-only` reports, in squeue's borderless columns. Pure functions of the protocol's
//! views and the current time.

use crate::units::{format_duration, push_duration, push_u64};
use flex_proto::text::escape_controls;
use flex_proto::{thousandths, AllocView, HostLeaves, JobState, QueueRow, WouldStart};
use gres_plugin::topology::format_cpu_list;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

/// A timestamp (seconds since the epoch) as `2026-04-01T12:00:00Z`; one past the year 9999,
/// which RFC 3339 cannot write (a damaged or hostile answer), as `@SECONDS` (`date -d @N`).
pub fn fmt_time(secs: u64) -> String {
    /// The first second of the year 10000.
    const YEAR_10000: u64 = 253_402_300_800;
    if secs >= YEAR_10000 {
        return format!("@{secs}");
    }
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// squeue-style columns: left-aligned cells, two spaces between columns, no borders and no
/// trailing blanks. Cells are kept in one buffer, so that a table of 100,000 jobs costs a
/// handful of allocations (prettytable takes half a second for it). Displays as its lines.
struct Columns {
    /// The cells, row after row, each followed by [`END`].
    text: String,
    /// The next cell's column.
    col: usize,
    /// Whether every cell is ASCII, each then as wide as it is long.
    ascii: bool,
    widths: Vec<usize>,
}

/// What ends a cell in [`Columns::text`]: a control character, which cells never hold (they
/// are escaped), so that a table of 100,000 rows needs no list of where its cells end.
const END: char = '\0';

fn width(cell: &str) -> usize {
    if cell.is_ascii() {
        cell.len()
    } else {
        unicode_width::UnicodeWidthStr::width(cell)
    }
}

impl Columns {
    fn new(header: Option<&[&str]>, n: usize) -> Columns {
        let mut c = Columns {
            text: String::new(),
            col: 0,
            ascii: true,
            widths: vec![0; n],
        };
        for cell in header.into_iter().flatten() {
            c.cell(cell);
        }
        c
    }

    /// The next cell, left to right and row after row.
    fn cell(&mut self, v: &str) {
        self.text.push_str(v);
        self.close(v.len());
    }

    /// The next cell, written by `f`.
    fn cell_with(&mut self, f: impl FnOnce(&mut String)) {
        let from = self.text.len();
        f(&mut self.text);
        self.close(self.text.len() - from);
    }

    /// The next cell, formatted.
    fn cell_fmt(&mut self, v: std::fmt::Arguments<'_>) {
        self.cell_with(|s| {
            let _ = s.write_fmt(v);
        });
    }

    /// End the cell of the last `len` bytes; control characters in it are escaped (a job
    /// name must not forge a line or drive the terminal).
    fn close(&mut self, len: usize) {
        let from = self.text.len() - len;
        let cell = &self.text[from..];
        // Printable ASCII, the usual cell, is as wide as it is long and has nothing to escape.
        let w = if cell.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            len
        } else {
            if let std::borrow::Cow::Owned(safe) = escape_controls(cell) {
                self.text.truncate(from);
                self.text.push_str(&safe);
            }
            self.ascii &= self.text[from..].is_ascii();
            width(&self.text[from..])
        };
        let col = self.col;
        self.widths[col] = self.widths[col].max(w);
        self.text.push(END);
        self.col = (col + 1) % self.widths.len();
    }

    /// Write the lines to `out`, a piece of [`Columns::PIECE`] bytes at a time: a table of
    /// 100,000 jobs written cell by cell through a formatter took longer than making it, and
    /// a copy of it whole was 10 MB more to allocate. Padding is written only before a cell
    /// with text, so that no line ends in blanks.
    fn write_to<E>(&self, mut out: impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
        const BLANKS: &str = "                                                                ";
        let n = self.widths.len();
        let mut piece = String::with_capacity(Self::PIECE + 256);
        let (mut pad, mut col) = (0, 0);
        for cell in self.text.split_terminator(END) {
            if !cell.is_empty() {
                while pad > 0 {
                    let k = pad.min(BLANKS.len());
                    piece.push_str(&BLANKS[..k]);
                    pad -= k;
                }
                piece.push_str(cell);
            }
            if col == n - 1 {
                piece.push('\n');
                (pad, col) = (0, 0);
                if piece.len() >= Self::PIECE {
                    out(&piece)?;
                    piece.clear();
                }
            } else {
                let w = if self.ascii { cell.len() } else { width(cell) };
                pad += self.widths[col] - w + 2;
                col += 1;
            }
        }
        out(&piece)
    }

    const PIECE: usize = 1 << 16;
}

impl std::fmt::Display for Columns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_to(|s| f.write_str(s))
    }
}

/// flexq's table, a row at a time.
pub struct QueueTable(Columns);

impl QueueTable {
    pub fn new(header: bool) -> QueueTable {
        let h = [
            "JOBID",
            "NAME",
            "USER",
            "ST",
            "TIME",
            "TIME_LIMIT",
            "LEAVES",
            "START",
            "NODELIST(REASON)",
        ];
        QueueTable(Columns::new(header.then_some(&h[..]), h.len()))
    }

    pub fn push(&mut self, j: &QueueRow<'_>) {
        let t = &mut self.0;
        t.cell_with(|s| {
            push_u64(s, j.id.0);
            if let Some(a) = &j.array {
                s.push('_');
                s.push_str(a);
            }
        });
        t.cell(&j.name);
        t.cell(&j.user);
        t.cell(j.state.code());
        t.cell_with(|s| push_duration(s, j.elapsed_s));
        t.cell_with(|s| push_duration(s, j.time_limit_s));
        t.cell(&j.units);
        match j.start {
            Some(s) => t.cell(&fmt_time(s)),
            None => t.cell("N/A"),
        }
        let paren = |t: &mut Columns, r: &str| {
            t.cell_with(|s| {
                s.push('(');
                s.push_str(r);
                s.push(')');
            })
        };
        match (j.state, &j.host, &j.reason) {
            (JobState::Pending, _, r) => paren(t, r.as_deref().unwrap_or("None")),
            (_, Some(h), _) => t.cell(h),
            (_, None, Some(r)) => paren(t, r),
            (_, None, None) => t.cell(""),
        }
    }

    /// Write the table's lines to `out`.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        self.0.write_to(|s| out.write_all(s.as_bytes()))
    }
}

impl std::fmt::Display for QueueTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// flexq --leaves: every leaf, its GPU, profile, free share and holders.
pub fn leaf_map(hosts: &[HostLeaves], header: bool) -> String {
    let h = [
        "HOST", "GPU", "GPU_NAME", "NUMA", "PROFILE", "UUID", "FREE", "JOBS",
    ];
    let mut t = Columns::new(header.then_some(&h[..]), h.len());
    for host in hosts {
        for l in &host.leaves {
            t.cell_fmt(format_args!("{}", host.host));
            t.cell_fmt(format_args!("{}", l.gpu));
            t.cell_fmt(format_args!("{}", l.gpu_name));
            t.cell_fmt(format_args!("{}", l.numa_node));
            t.cell_fmt(format_args!("{}", l.profile));
            t.cell_fmt(format_args!("{}", l.uuid));
            t.cell_fmt(format_args!("{}%", thousandths(l.free * 100)));
            if l.jobs.is_empty() {
                t.cell("-");
            } else {
                let jobs: Vec<String> = l.jobs.iter().map(|j| j.to_string()).collect();
                t.cell_fmt(format_args!("{}", jobs.join(",")));
            }
        }
    }
    t.to_string()
}

/// One row per allocated unit, in rank order, with that rank's cores.
fn alloc_rows(a: &AllocView) -> String {
    let per = a.cores.len().checked_div(a.leaves.len()).unwrap_or(0);
    let h = ["RANK", "GPU", "PROFILE", "SHARE", "UUID", "CORES"];
    let mut t = Columns::new(Some(&h), h.len());
    for (r, l) in a.leaves.iter().enumerate() {
        let cores = a.cores.get(r * per..(r + 1) * per).unwrap_or(&[]);
        t.cell_fmt(format_args!("{r}"));
        t.cell_fmt(format_args!("{}", l.gpu));
        t.cell_fmt(format_args!("{}", l.profile));
        t.cell_fmt(format_args!("{}", thousandths(l.share)));
        t.cell_fmt(format_args!("{}", l.uuid));
        t.cell_fmt(format_args!("{}", format_cpu_list(cores)));
    }
    t.to_string()
}

fn gpus_of(a: &AllocView) -> String {
    let mut g: Vec<u32> = a.leaves.iter().map(|l| l.gpu).collect();
    g.sort_unstable();
    g.dedup();
    g.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn when(ws: &WouldStart, now: u64) -> String {
    let reason = ws.reason.as_deref().unwrap_or("Resources");
    match ws.estimated_start {
        Some(t) if t > now => format!(
            "at {} (in {}), waiting for {reason}",
            fmt_time(t),
            format_duration(t - now)
        ),
        Some(_) => format!("soon, waiting for {reason}"),
        None => format!("at an unknown time, waiting for {reason}"),
    }
}

/// flexsub --test-only.
pub fn would_start(ws: &WouldStart, now: u64) -> String {
    let mut out = String::new();
    match &ws.alloc {
        Some(a) => {
            let _ = writeln!(
                out,
                "flexsub: job would start now on {} using {} leaves on GPUs {}, cores {}",
                a.host,
                a.leaves.len(),
                gpus_of(a),
                format_cpu_list(&a.cores)
            );
            out.push_str(&alloc_rows(a));
        }
        None => {
            let _ = writeln!(out, "flexsub: job would start {}", when(ws, now));
        }
    }
    out
}

/// The host part of flexsub --estimate-only.
pub fn estimate_fit(ws: &WouldStart, now: u64) -> String {
    let mut out = String::new();
    match &ws.alloc {
        Some(a) if a.leaves.iter().all(|l| l.share >= 1000) => {
            let mut profiles: Vec<&str> = a.leaves.iter().map(|l| l.profile.as_str()).collect();
            profiles.sort_unstable();
            profiles.dedup();
            let _ = writeln!(
                out,
                "on {}: needs {} leaves ({}) on GPUs {}",
                a.host,
                a.leaves.len(),
                profiles.join(", "),
                gpus_of(a)
            );
        }
        Some(a) => {
            let share: u32 = a.leaves.iter().map(|l| l.share).sum();
            let _ = writeln!(
                out,
                "on {}: needs a {} share of GPU {}",
                a.host,
                thousandths(share),
                gpus_of(a)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "on this host: the job would start {}; its leaves are chosen when it starts",
                when(ws, now)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_proto::LeafView;
    use gres_plugin::JobId;

    fn table(rows: Vec<QueueRow<'_>>, header: bool) -> String {
        let mut t = QueueTable::new(header);
        rows.iter().for_each(|r| t.push(r));
        t.to_string()
    }

    fn row(id: u64, state: JobState) -> QueueRow<'static> {
        QueueRow {
            id: JobId(id),
            name: "train".into(),
            user: "ann".into(),
            state,
            elapsed_s: 0,
            time_limit_s: 3600,
            units: "4".into(),
            start: None,
            host: None,
            reason: None,
            array: None,
        }
    }

    /// Found by fuzzing flexq's rows: a start time past the year 9999 (or past what a
    /// SystemTime holds) panicked while the table was laid out.
    #[test]
    fn start_times_past_the_year_9999_are_shown_as_seconds() {
        assert_eq!(fmt_time(1_795_512_600), "2026-11-24T09:30:00Z");
        assert_eq!(fmt_time(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(fmt_time(253_402_300_800), "@253402300800");
        assert_eq!(fmt_time(u64::MAX), format!("@{}", u64::MAX));
        let mut r = row(7, JobState::Pending);
        r.start = Some(17_955_126_000_000_000_000);
        assert!(table(vec![r], false).contains("@17955126000000000000"));
    }

    fn alloc() -> AllocView {
        AllocView {
            host: "a100".into(),
            leaves: (0..2)
                .map(|i| LeafView {
                    uuid: format!("MIG-{i}"),
                    profile: "1g.5gb".into(),
                    gpu: i,
                    share: 1000,
                })
                .collect(),
            cores: vec![0, 16],
            mem_bytes: 0,
        }
    }

    #[test]
    fn queue_rows() {
        let mut r = row(7, JobState::Running);
        r.elapsed_s = 65;
        r.start = Some(100);
        r.host = Some("a100".into());
        r.units = "2".into();
        let mut p = row(8, JobState::Pending);
        p.reason = Some("Resources".into());
        p.start = Some(3700);
        let mut f = row(9, JobState::NodeFail);
        f.reason = Some("supervisor gone".into());
        let text = table(vec![r, p, f], true);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("JOBID  NAME   USER  ST  TIME"),
            "{text}"
        );
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "7",
                "train",
                "ann",
                "R",
                "1:05",
                "1:00:00",
                "2",
                "1970-01-01T00:01:40Z",
                "a100"
            ]
        );
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells[6..], ["4", "1970-01-01T01:01:40Z", "(Resources)"]);
        let start_col = lines[0].find("START").unwrap();
        assert_eq!(&lines[3][start_col..start_col + 3], "N/A", "{text}");
        assert!(lines[3].ends_with("  (supervisor gone)"), "{text}");
        assert_eq!(table(vec![], false), "");
    }

    #[test]
    fn columns_align_by_display_width_without_trailing_blanks() {
        let mut wide = row(10, JobState::Pending);
        wide.name = "训练".into();
        let mut long = row(11, JobState::Pending);
        long.name = "a-long-name".into();
        let text = table(vec![wide, long], false);
        let lines: Vec<&str> = text.lines().collect();
        // "训练" is 4 columns wide: both users start in the same column.
        let col = |l: &str| unicode_width::UnicodeWidthStr::width(&l[..l.find("ann").unwrap()]);
        assert_eq!(col(lines[0]), col(lines[1]), "{text}");
        assert_eq!(col(lines[1]), "11  a-long-name  ".len());
        assert!(text.lines().all(|l| l == l.trim_end()), "{text:?}");
        // A last column that is empty leaves no blanks behind.
        let mut done = row(12, JobState::Completed);
        done.name = "x".into();
        assert_eq!(
            table(vec![done], false),
            "12  x  ann  CD  0:00  1:00:00  4  N/A\n"
        );
    }

    #[test]
    fn a_long_table_is_written_in_pieces_as_it_displays() {
        let mut t = QueueTable::new(true);
        for id in 0..5000 {
            let mut r = row(id, JobState::Pending);
            if id % 1000 == 7 {
                // Escaped in its cell: no line is forged, and no cell is ended early.
                r.name = "a\nb\0c".into();
            }
            t.push(&r);
        }
        let mut out = Vec::new();
        t.write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.len() > 4 * Columns::PIECE);
        assert_eq!(text, t.to_string());
        assert_eq!(text.lines().count(), 5001);
        let line = text.lines().nth(8).unwrap();
        assert!(line.starts_with("7      a\\nb\\x00c  ann"), "{line}");
    }

    #[test]
    fn test_only_reports_ranks_and_cores() {
        let ws = WouldStart {
            alloc: Some(alloc()),
            estimated_start: Some(5),
            reason: None,
            warnings: Vec::new(),
        };
        let text = would_start(&ws, 5);
        assert!(
            text.contains("now on a100 using 2 leaves on GPUs 0,1, cores 0,16"),
            "{text}"
        );
        assert!(text.contains("MIG-1"), "{text}");
        let waits = WouldStart {
            alloc: None,
            estimated_start: Some(65),
            reason: Some("Resources".into()),
            warnings: Vec::new(),
        };
        assert!(would_start(&waits, 5).contains("(in 1:00), waiting for Resources"));
        assert!(estimate_fit(&ws, 5).contains("needs 2 leaves (1g.5gb) on GPUs 0,1"));
    }
}

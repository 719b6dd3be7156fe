//! sinfo: the host as the one node of the one partition `flex` (see [`crate::commands::host`]),
//! in sinfo's `-o` (`%P %a %l ...`, with widths) and `-O` (`NodeHost:100,Gres:512,...`)
//! formats. Like sinfo, neither trims a line's trailing blanks.

use super::{check_cluster, slurm_parse};
use crate::client::Client;
use crate::commands::host::{self, HostInfo, Partition, PARTITION};
use crate::error::{exit, Error};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;

/// sinfo's options.
#[derive(Debug, Parser)]
#[command(name = "sinfo", infer_long_args = true, disable_help_flag = true)]
struct Sinfo {
    /// No header.
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    /// sinfo's format: `%P %a %l %D %t %T %N %c %m %G %C`, with widths.
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// sinfo's long format: `name[:[.][size][suffix]]`, comma-separated.
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    /// Node-oriented listing.
    #[arg(short = 'N', long = "Node")]
    node: bool,
    /// Only these partitions.
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    /// This host's cluster, or `all`.
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    /// Summarize (accepted).
    #[arg(short = 's', long = "summarize")]
    summarize: bool,
    /// All partitions (there is one).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// sinfo: each host a line.
pub(super) fn sinfo(args: Vec<OsString>) -> Result<i32, Error> {
    let a: Sinfo = slurm_parse("sinfo", args);
    check_cluster(a.clusters.as_deref())?;
    let fmt = match (&a.format, &a.format_long, a.node) {
        (Some(f), _, _) => short(f)?,
        (None, Some(f), _) => long(f)?,
        (None, None, true) => short("%N %.6D %P %.6t")?,
        (None, None, false) => short("%9P %.5a %.10l %.6D %.6t %N")?,
    };
    let mut p = host::gather(&mut Client::connect("sinfo")?)?;
    if let Some(want) = &a.partition {
        if want.split(',').all(|w| w != PARTITION) {
            p.hosts.clear();
        }
    }
    let _ = (a.summarize, a.help, a.all);
    let mut out = String::new();
    if !a.noheader {
        out.push_str(&line(&fmt, &p, None));
        out.push('\n');
    }
    for h in &p.hosts {
        out.push_str(&line(&fmt, &p, Some(h)));
        out.push('\n');
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(Error::output)?;
    Ok(exit::OK)
}

/// Each field: its `-o` letter (`\0`: by name only), its `-O` names, its header.
const FIELDS: &[(char, &[&str], &str)] = &[
    ('P', &["partition"], "PARTITION"),
    ('R', &["partitionname"], "PARTITION"),
    ('a', &["available"], "AVAIL"),
    ('l', &["time"], "TIMELIMIT"),
    ('L', &["defaulttime"], "DEFAULTTIME"),
    ('D', &["nodes"], "NODES"),
    ('t', &["statecompact"], "STATE"),
    ('T', &["statelong"], "STATE"),
    ('N', &["nodelist"], "NODELIST"),
    ('n', &["nodehost"], "HOSTNAMES"),
    ('o', &["nodeaddr"], "NODE_ADDR"),
    ('f', &["features"], "AVAIL_FEATURES"),
    ('b', &["features_act"], "ACTIVE_FEATURES"),
    ('F', &["nodeaiot"], "NODES(A/I/O/T)"),
    ('A', &["nodeai"], "NODES(A/I)"),
    ('c', &["cpus"], "CPUS"),
    ('C', &["cpusstate"], "CPUS(A/I/O/T)"),
    ('m', &["memory"], "MEMORY"),
    ('G', &["gres"], "GRES"),
    ('\0', &["gresused"], "GRES_USED"),
    ('\0', &["allocmem"], "ALLOCMEM"),
    ('d', &["disk"], "TMP_DISK"),
    ('E', &["reason"], "REASON"),
    ('h', &["oversubscribe"], "OVERSUBSCRIBE"),
    ('z', &["socketcorethread"], "S:C:T"),
    ('s', &["size"], "JOB_SIZE"),
    ('w', &["weight"], "WEIGHT"),
];

/// A piece of a format: text, or a field (its index in [`FIELDS`]) with its width,
/// justification and the text after it.
enum Piece {
    Text(String),
    Field {
        field: usize,
        width: Option<usize>,
        right: bool,
        suffix: String,
    },
}

/// `-o`: `%[.][size]type` among other text.
fn short(fmt: &str) -> Result<Vec<Piece>, Error> {
    let mut out = Vec::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(Piece::Text(c.to_string()));
            continue;
        }
        let right = chars.next_if_eq(&'.').is_some();
        let mut digits = String::new();
        while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
            digits.push(d);
        }
        let Some(letter) = chars.next() else {
            return Err(Error::Input(format!(
                "invalid sinfo format {fmt:?}: ends in %"
            )));
        };
        if letter == '%' {
            out.push(Piece::Text("%".into()));
            continue;
        }
        let Some(field) = FIELDS.iter().position(|f| f.0 == letter && letter != '\0') else {
            let known: Vec<String> = FIELDS
                .iter()
                .filter(|f| f.0 != '\0')
                .map(|f| format!("%{}", f.0))
                .collect();
            return Err(Error::Input(format!(
                "invalid sinfo format field %{letter}: Flex knows {}",
                known.join(" ")
            )));
        };
        out.push(Piece::Field {
            field,
            width: digits.parse().ok(),
            right,
            suffix: String::new(),
        });
    }
    Ok(out)
}

/// `-O`: `name[:[.][size][suffix]]`, comma-separated; 20 wide without a size.
fn long(fmt: &str) -> Result<Vec<Piece>, Error> {
    let mut out = Vec::new();
    for item in fmt.split(',').filter(|s| !s.is_empty()) {
        let (name, rest) = item.split_once(':').unwrap_or((item, ""));
        let Some(field) = FIELDS
            .iter()
            .position(|f| f.1.iter().any(|n| n.eq_ignore_ascii_case(name.trim())))
        else {
            let known: Vec<&str> = FIELDS.iter().map(|f| f.1[0]).collect();
            return Err(Error::Input(format!(
                "invalid sinfo --Format field {name:?}: Flex knows {}",
                known.join(", ")
            )));
        };
        let (right, size, suffix) = crate::format::long_size(rest);
        out.push(Piece::Field {
            field,
            width: Some(size.unwrap_or(20)),
            right,
            suffix: suffix.to_string(),
        });
    }
    if out.is_empty() {
        return Err(Error::Input("sinfo --Format names no field".into()));
    }
    Ok(out)
}

/// One line: the header when `h` is None.
fn line(fmt: &[Piece], p: &Partition, h: Option<&HostInfo>) -> String {
    let mut out = String::new();
    for piece in fmt {
        let (field, width, right, suffix) = match piece {
            Piece::Text(t) => {
                out.push_str(t);
                continue;
            }
            Piece::Field {
                field,
                width,
                right,
                suffix,
            } => (*field, *width, *right, suffix),
        };
        let (letter, names, header) = FIELDS[field];
        let text = match h {
            None => header.to_string(),
            Some(h) => value(letter, names[0], p, h),
        };
        match width {
            Some(w) if right => out.push_str(&format!("{:>w$}", crate::format::cut(&text, w))),
            Some(w) => out.push_str(&format!("{:<w$}", crate::format::cut(&text, w))),
            None => out.push_str(&text),
        }
        out.push_str(suffix);
    }
    out
}

/// One field of a host.
fn value(letter: char, name: &str, p: &Partition, h: &HostInfo) -> String {
    match (letter, name) {
        ('P', _) => format!("{PARTITION}*"),
        ('R', _) => PARTITION.into(),
        ('a', _) => "up".into(),
        ('l', _) => host::slurm_time(p.max_time_s, "infinite"),
        ('L', _) => host::slurm_time(p.default_time_s, "n/a"),
        ('D', _) => "1".into(),
        ('t', _) => h.state(true).into(),
        ('T', _) => h.state(false).into(),
        ('N' | 'n' | 'o', _) => h.name.clone(),
        ('f' | 'b', _) => h.features.clone(),
        ('F', _) => {
            let busy = usize::from(h.running_jobs > 0);
            format!("{busy}/{}/0/1", 1 - busy)
        }
        ('A', _) => {
            let busy = usize::from(h.running_jobs > 0);
            format!("{busy}/{}", 1 - busy)
        }
        ('c', _) => h.cpus.to_string(),
        ('C', _) => {
            let a = h.alloc_cpus.min(h.cpus);
            format!("{a}/{}/0/{}", h.cpus - a, h.cpus)
        }
        ('m', _) => h.mem_mb.to_string(),
        ('G', _) => h.gres_text(),
        (_, "gresused") => h.gres_used_text(),
        (_, "allocmem") => h.alloc_mem_mb.to_string(),
        ('d', _) => "0".into(),
        ('E', _) => "none".into(),
        ('h', _) => "NO".into(),
        ('z', _) => format!("1:{}:1", h.cpus),
        ('s', _) => "1".into(),
        ('w', _) => "1".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::host::Gres;

    fn part(running: usize) -> Partition {
        Partition {
            hosts: vec![HostInfo {
                name: "gpu01".into(),
                cpus: 32,
                mem_mb: 256 * 1024,
                leaves: 14,
                busy_leaves: running * 3,
                running_jobs: running,
                alloc_cpus: running * 3,
                alloc_mem_mb: 0,
                features: "a100,mig".into(),
                gres: vec![Gres {
                    profile: "1g.5gb".into(),
                    count: 14,
                    used: running * 3,
                    numa: vec![0, 1],
                }],
            }],
            max_time_s: 365 * 86400,
            default_time_s: 0,
            def_mem_per_cpu_mb: 0,
        }
    }

    fn text(fmt: &[Piece], p: &Partition) -> (String, String) {
        (line(fmt, p, None), line(fmt, p, Some(&p.hosts[0])))
    }

    #[test]
    fn sinfo_prints_the_host_as_slurm_does() {
        let f = short("%9P %.5a %.10l %.6D %.6t %N").unwrap();
        let p = part(1);
        assert_eq!(
            text(&f, &p),
            (
                "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST".into(),
                "flex*        up   infinite      1    mix gpu01".into()
            )
        );
        let idle = Partition {
            max_time_s: 2 * 86400 + 3600,
            ..part(0)
        };
        let f = short("%l %T %c %G %F/%C").unwrap();
        assert_eq!(
            text(&f, &idle).1,
            "2-01:00:00 idle 32 gpu:1g.5gb:14(S:0-1) 0/1/0/1/0/32/0/32"
        );
        assert!(short("%Z").is_err());
    }

    #[test]
    fn long_formats_pad_every_field_and_keep_trailing_blanks() {
        let f = long("nodehost:10,gresused:30,statelong").unwrap();
        let (h, row) = text(&f, &part(1));
        assert_eq!(
            h,
            format!("{:<10}{:<30}{:<20}", "HOSTNAMES", "GRES_USED", "STATE")
        );
        assert_eq!(
            row,
            format!(
                "{:<10}{:<30}{:<20}",
                "gpu01", "gpu:1g.5gb:3(IDX:N/A)", "mixed"
            )
        );
        assert!(long("nodehost,colour").is_err());
    }
}

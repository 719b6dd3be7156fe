//! The sbatch options that exist for Slurm scripts: what each means on one Flex host. Some are
//! honoured (task counts, GPUs per node or task, cores per GPU), some only with the value Flex
//! behaves as (`-N 1`, `--export=ALL`, a node list naming this host), some are accepted and
//! ignored with a warning (they mean nothing on one host), and some are refused with why (they
//! change what runs, and Flex cannot honour them).

use super::table::{opt, Key, OptSpec};
use super::Settings;
use crate::units::{self, SizeUnit};

const fn ignored(
    long: &'static str,
    short: Option<char>,
    value: Option<&'static str>,
    why: &'static str,
) -> OptSpec {
    opt(Key::Ignored, long, short, value, why)
}

const fn refused(
    long: &'static str,
    short: Option<char>,
    value: Option<&'static str>,
    why: &'static str,
) -> OptSpec {
    opt(Key::Refused, long, short, value, why)
}

const HOST_MEMORY: &str =
    "Accepted and ignored: Flex reserves host memory per host, not per NUMA node";
const CORES: &str =
    "Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf's NUMA node";
const ONE_HOST: &str = "Accepted and ignored: a Flex job runs on one host";
const CONTAINER: &str = "Refused: Flex runs no pyxis/enroot containers; start the container \
                         from the script (enroot start, apptainer exec, docker run)";

/// The Slurm options, after Flex's own in `--help` (the ignored and refused ones are hidden).
pub const SLURM_OPTIONS: &[OptSpec] = &[
    opt(
        Key::Nodes,
        "nodes",
        Some('N'),
        Some("1"),
        "Node count; Flex runs a job on one host, so only 1",
    ),
    opt(
        Key::Export,
        "export",
        None,
        Some("[ALL|NONE][,VAR[=VALUE]...]"),
        "Environment to export, as sbatch: ALL (the default), NONE, or only the VARs named (with ALL: all and these), VAR=VALUE setting one",
    ),
    opt(
        Key::Ntasks,
        "ntasks",
        Some('n'),
        Some("N"),
        "Number of tasks, for -c and --gpus-per-task (flexrun still starts one rank per leaf)",
    ),
    opt(
        Key::NtasksPerNode,
        "ntasks-per-node",
        None,
        Some("N"),
        "Tasks on the one node: as --ntasks",
    ),
    opt(
        Key::NtasksPerNode,
        "tasks-per-node",
        None,
        Some("N"),
        "sbatch's other name for --ntasks-per-node",
    ),
    opt(
        Key::GpusPerNode,
        "gpus-per-node",
        None,
        Some("[TYPE:]N"),
        "GPUs on the one node: as --gpus [TYPE:]N (a GPU is one leaf)",
    ),
    opt(
        Key::GpusPerTask,
        "gpus-per-task",
        None,
        Some("[TYPE:]N"),
        "GPUs (leaves) per task: N x ntasks leaves (ntasks from -n, --ntasks-per-node, else 1), each task srun starts sees its own",
    ),
    opt(
        Key::CpusPerGpu,
        "cpus-per-gpu",
        None,
        Some("N"),
        "CPU cores per leaf (overrides -c)",
    ),
    opt(
        Key::Nodelist,
        "nodelist",
        Some('w'),
        Some("HOSTS"),
        "Hosts to run on: must name this host (short name or FQDN)",
    ),
    opt(
        Key::Exclude,
        "exclude",
        Some('x'),
        Some("HOSTS"),
        "Hosts not to run on: must not name this host",
    ),
    opt(
        Key::Comment,
        "comment",
        None,
        Some("TEXT"),
        "A comment, shown by flexq -o %k and flexcontrol show job",
    ),
    opt(
        Key::Begin,
        "begin",
        Some('b'),
        Some("TIME"),
        "Start no earlier: now+60 (seconds), now+1hour, 16:00, 2026-12-01T10:00, tomorrow",
    ),
    opt(
        Key::Exclusive,
        "exclusive",
        None,
        None,
        "The whole host: every leaf and every core (=user, =mcs, =topo: ignored with a warning)",
    ),
    opt(
        Key::OpenMode,
        "open-mode",
        None,
        Some("append|truncate"),
        "How output files are opened (default truncate)",
    ),
    opt(
        Key::Constraint,
        "constraint",
        Some('C'),
        Some("FEATURES"),
        "Host features the job needs (a100, h100, 80gb, 1g.10gb), with & and |",
    ),
    opt(
        Key::MailType,
        "mail-type",
        None,
        Some("TYPES"),
        "Mail on BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT[_90|_80|_50], when flexd has a sendmail",
    ),
    opt(
        Key::MailUser,
        "mail-user",
        None,
        Some("USER"),
        "Whom the mail goes to (default: the submitting user)",
    ),
    ignored(
        "partition",
        Some('p'),
        Some("NAME"),
        "Accepted and ignored: one Flex host has no partitions",
    ),
    ignored("mincpus", None, Some("N"), CORES),
    ignored("threads-per-core", None, Some("N"), CORES),
    ignored("sockets-per-node", None, Some("N"), CORES),
    ignored("cores-per-socket", None, Some("N"), CORES),
    ignored("hint", None, Some("TYPE"), CORES),
    ignored("ntasks-per-core", None, Some("N"), CORES),
    ignored("ntasks-per-socket", None, Some("N"), CORES),
    ignored(
        "ntasks-per-gpu",
        None,
        Some("N"),
        "Accepted and ignored: flexrun starts one rank per leaf",
    ),
    ignored("mem-bind", None, Some("TYPE"), HOST_MEMORY),
    ignored(
        "cpu-freq",
        None,
        Some("FREQ"),
        "Accepted and ignored: Flex does not set clock frequencies",
    ),
    ignored(
        "gpu-freq",
        None,
        Some("FREQ"),
        "Accepted and ignored: Flex does not set clock frequencies",
    ),
    ignored(
        "no-kill",
        Some('k'),
        None,
        "Accepted and ignored: a Flex job has one node, so it never loses one and carries on",
    ),
    ignored(
        "kill-on-invalid-dep",
        None,
        Some("yes|no"),
        "Accepted and ignored: flexd.toml's kill_invalid_depend decides",
    ),
    ignored(
        "quiet",
        Some('Q'),
        None,
        "Accepted and ignored: flexsub prints only the job id and warnings",
    ),
    ignored(
        "gres-flags",
        None,
        Some("FLAGS"),
        "Accepted and ignored: each leaf's cores are on its GPU's NUMA node already",
    ),
    ignored(
        "gpu-bind",
        None,
        Some("TYPE"),
        "Accepted and ignored: flexrun gives each rank its own leaf as CUDA device 0",
    ),
    ignored(
        "distribution",
        Some('m'),
        Some("TYPE"),
        "Accepted and ignored: flexrun starts one rank per leaf",
    ),
    ignored(
        "tmp",
        None,
        Some("SIZE"),
        "Accepted and ignored: Flex does not allocate disk",
    ),
    ignored(
        "oversubscribe",
        Some('s'),
        None,
        "Accepted and ignored: sharing follows the request (a --gpu-fraction below 1 shares a GPU)",
    ),
    ignored(
        "spread-job",
        None,
        None,
        "Accepted and ignored: a Flex job runs on one host",
    ),
    ignored(
        "profile",
        None,
        Some("TYPE"),
        "Accepted and ignored: Flex gathers no profiles",
    ),
    ignored(
        "acctg-freq",
        None,
        Some("FREQ"),
        "Accepted and ignored: flexacct keeps each job's totals",
    ),
    ignored(
        "licenses",
        Some('L'),
        Some("LICENSES"),
        "Accepted and ignored: Flex has no licenses",
    ),
    ignored(
        "reservation",
        None,
        Some("NAME"),
        "Accepted and ignored: Flex has no reservations",
    ),
    ignored(
        "wckey",
        None,
        Some("KEY"),
        "Accepted and ignored: Flex keeps no workload keys",
    ),
    ignored(
        "cluster-constraint",
        None,
        Some("FEATURES"),
        "Accepted and ignored: a Flex host is one cluster",
    ),
    ignored("contiguous", None, None, ONE_HOST),
    ignored("core-spec", Some('S'), Some("N"), CORES),
    ignored("thread-spec", None, Some("N"), CORES),
    ignored("extra-node-info", Some('B'), Some("S[:C[:T]]"), CORES),
    ignored("overcommit", Some('O'), None, CORES),
    ignored("switches", None, Some("COUNT[@TIME]"), ONE_HOST),
    ignored("use-min-nodes", None, None, ONE_HOST),
    ignored("relative", Some('r'), Some("N"), ONE_HOST),
    ignored(
        "network",
        None,
        Some("TYPE"),
        "Accepted and ignored: Flex sets up no interconnect; ranks meet on the host",
    ),
    ignored(
        "delay-boot",
        None,
        Some("MINUTES"),
        "Accepted and ignored: Flex boots and powers no nodes",
    ),
    ignored(
        "reboot",
        None,
        None,
        "Accepted and ignored: Flex boots and powers no nodes",
    ),
    ignored(
        "power",
        None,
        Some("FLAGS"),
        "Accepted and ignored: Flex boots and powers no nodes",
    ),
    ignored(
        "mcs-label",
        None,
        Some("LABEL"),
        "Accepted and ignored: Flex has no MCS labels; jobs are their users' own",
    ),
    ignored(
        "ignore-pbs",
        None,
        None,
        "Accepted and ignored: Flex reads #FLEX and #SBATCH lines only",
    ),
    ignored(
        "time-min",
        None,
        Some("TIME"),
        "Accepted and ignored: the time limit is what backfill plans with",
    ),
    ignored(
        "priority",
        None,
        Some("VALUE"),
        "Accepted and ignored: flexd computes priorities (root lowers one with --nice or flexcontrol update)",
    ),
    ignored(
        "propagate",
        None,
        Some("LIMITS"),
        "Accepted and ignored: a job's limits are its cgroup's, not the submitting shell's rlimits",
    ),
    ignored(
        "verbose",
        Some('v'),
        None,
        "Accepted and ignored: flexsub prints the job id, warnings and notes",
    ),
    refused(
        "bb",
        None,
        Some("SPEC"),
        "Refused: Flex has no burst buffers; stage data in the script",
    ),
    refused(
        "bbf",
        None,
        Some("FILE"),
        "Refused: Flex has no burst buffers; stage data in the script",
    ),
    refused(
        "deadline",
        None,
        Some("TIME"),
        "Refused: Flex does not cancel jobs that cannot end by a deadline; give a --time and --begin instead",
    ),
    refused(
        "export-file",
        None,
        Some("FILE"),
        "Refused: the job gets the submitting environment; set variables with --export=ALL,VAR=VALUE",
    ),
    refused(
        "gpus-per-socket",
        None,
        Some("N"),
        "Refused: Flex places leaves by NUMA node, not socket; ask --gpus (or --gres=gpu:N)",
    ),
    refused(
        "input",
        Some('i'),
        Some("FILE"),
        "Refused: a batch script's standard input is /dev/null; redirect within the script",
    ),
    refused(
        "nodefile",
        Some('F'),
        Some("FILE"),
        "Refused: a Flex job runs on this host; -w names it",
    ),
    refused("container", None, Some("PATH"), CONTAINER),
    refused("container-image", None, Some("IMAGE"), CONTAINER),
    refused("container-mounts", None, Some("MOUNTS"), CONTAINER),
    refused("container-workdir", None, Some("DIR"), CONTAINER),
    refused("container-name", None, Some("NAME"), CONTAINER),
    refused(
        "uid",
        None,
        Some("USER"),
        "Refused: a job runs as the user who submits it",
    ),
    refused(
        "gid",
        None,
        Some("GROUP"),
        "Refused: a job runs with the submitting user's groups",
    ),
    ignored(
        "get-user-env",
        None,
        None,
        "Accepted and ignored: the job gets the submitting environment (as --export gives it), not a login shell's",
    ),
    opt(
        Key::Clusters,
        "clusters",
        Some('M'),
        Some("NAMES"),
        "Clusters to submit to: this host's (flex) or all; Flex is one host",
    ),
];

/// Apply one of [`SLURM_OPTIONS`]; returns a warning to show, if any.
pub(super) fn apply(s: &mut Settings, spec: &OptSpec, v: &str) -> Result<Option<String>, String> {
    let count = |what| units::parse_count(what, v).map_err(|e| e.to_string());
    match spec.key {
        Key::Nodes if !matches!(v.trim(), "1" | "1-1") => {
            return Err(format!(
                "invalid node count {v:?}: a Flex job runs on one host, so only 1"
            ))
        }
        Key::Export => s.export = Some(super::Export::parse(v)?),
        Key::Clusters => check_clusters(v)?,
        Key::Ntasks => s.ntasks = Some(count("task count")?),
        Key::NtasksPerNode => s.ntasks_per_node = Some(count("task count")?),
        Key::GpusPerNode => {
            let (n, kind) = super::parse_gpus(v, true)?;
            s.set_leaves(n, kind);
            s.gpus_per_node_spec = Some(v.trim().to_string());
        }
        Key::GpusPerTask => {
            let (n, kind) = super::parse_gpus(v, false)?;
            s.gpus_per_task = Some(n);
            if kind.is_some() {
                s.leaf_type = kind;
            }
        }
        Key::CpusPerGpu => s.cpus_per_gpu = Some(count("cores per GPU")?),
        // sbatch takes an empty comment: none.
        Key::Comment => s.options.comment = (!v.trim().is_empty()).then(|| v.to_string()),
        Key::Begin => s.queue.begin = Some(parse_begin(v, &crate::when::local_now())?),
        Key::Exclusive => match v.trim() {
            "" => s.options.exclusive = true,
            "user" | "mcs" | "topo" => {
                return Ok(Some(format!(
                    "--exclusive={v} is ignored: Flex shares the host among all users' jobs \
                     unless --exclusive alone asks for the whole of it"
                )))
            }
            _ => return Err(format!("invalid exclusive {v:?}: user, mcs or topo")),
        },
        Key::OpenMode => {
            s.options.append = match v.trim().to_ascii_lowercase().as_str() {
                "append" | "a" => true,
                "truncate" | "t" => false,
                _ => return Err(format!("invalid open mode {v:?}: append or truncate")),
            }
        }
        Key::Constraint => {
            s.options.constraint = Some(flex_proto::Constraint::parse(v)?.to_string());
        }
        Key::MailType => {
            let events = flex_proto::MailEvents::parse(v)?;
            s.options.mail.get_or_insert_with(Default::default).events = events;
        }
        Key::MailUser => {
            let user = super::non_empty("mail user", v)?;
            s.options.mail.get_or_insert_with(Default::default).user = Some(user);
        }
        Key::Nodelist => check_hosts(spec, v, &this_host(), true)?,
        Key::Exclude => check_hosts(spec, v, &this_host(), false)?,
        Key::Refused => {
            return Err(format!(
                "--{} is refused: {}",
                spec.long,
                spec.help.trim_start_matches("Refused: ")
            ))
        }
        Key::Ignored => {
            // Ignored, but a count or size must still be one (sbatch refuses `--mincpus=abc`).
            match spec.value {
                Some("N") => drop(count("count")?),
                // 0 is Slurm's "all of it".
                Some("SIZE") if v.trim() != "0" => {
                    units::parse_size(v, SizeUnit::Mebibytes).map_err(|e| e.to_string())?;
                }
                _ => {}
            }
            return Ok(Some(format!(
                "--{} is ignored: {}",
                spec.long,
                spec.help.trim_start_matches("Accepted and ignored: ")
            )));
        }
        _ => {}
    }
    Ok(None)
}

/// Slurm's `-M/--clusters` list, for every command that takes it: each name this host's cluster
/// or `all`.
pub fn check_clusters(list: &str) -> Result<(), String> {
    match list
        .split(',')
        .map(str::trim)
        .find(|c| !c.is_empty() && *c != "all" && *c != gres_plugin::env::CLUSTER)
    {
        Some(c) => Err(format!(
            "invalid cluster {c:?}: this host is cluster {} (or give all); other clusters are \
             reached on their own hosts",
            gres_plugin::env::CLUSTER
        )),
        None => Ok(()),
    }
}

/// sbatch's `--begin`: the forms flexacct's times take ([`crate::when::parse`]); a bare time
/// of day already past today is tomorrow's, as sbatch has it.
pub(super) fn parse_begin(v: &str, now: &jiff::Zoned) -> Result<u64, String> {
    let t = crate::when::parse(v, now).map_err(|e| e.to_string())?;
    let time_of_day = v.trim().bytes().all(|b| b.is_ascii_digit() || b == b':');
    let t = if time_of_day && v.contains(':') && t < *now {
        t.checked_add(jiff::Span::new().days(1))
            .map_err(|e| format!("invalid begin time {v:?}: {e}"))?
    } else {
        t
    };
    Ok(crate::when::secs(&t))
}

/// This host's name, as gethostname(2) gives it.
fn this_host() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// `-w` must name `host` (and nothing else); `-x` must not. Names compare by their first label,
/// so the short name and the FQDN are the same host.
fn check_hosts(spec: &OptSpec, v: &str, host: &str, wanted: bool) -> Result<(), String> {
    let names = expand_hostlist(v)?;
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_ascii_lowercase();
    let me = short(host);
    let (mine, others): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| short(n) == me);
    if wanted {
        if let Some(other) = others.first() {
            return Err(format!(
                "--{} names {other}: a Flex job runs on this host only ({host})",
                spec.long
            ));
        }
        if mine.is_empty() {
            return Err(format!("--{} names no host", spec.long));
        }
    } else if !mine.is_empty() {
        return Err(format!(
            "--{} excludes this host ({host}), the only one a Flex job runs on",
            spec.long
        ));
    }
    Ok(())
}

/// Slurm's host list: names separated by commas, `node[1-3,7]` for node1, node2, node3, node7
/// (a range keeps its zero padding: `gpu[08-10]`).
pub fn expand_hostlist(v: &str) -> Result<Vec<String>, String> {
    let bad = |why: &str| format!("invalid host list {v:?}: {why}");
    let mut out = Vec::new();
    let mut rest = v.trim();
    while !rest.is_empty() {
        let end = match (rest.find(','), rest.find('[')) {
            (Some(c), Some(b)) if b < c => rest[b..].find(']').map(|e| b + e + 1),
            (None, Some(b)) => rest[b..].find(']').map(|e| b + e + 1),
            (Some(c), _) => Some(c),
            (None, None) => Some(rest.len()),
        }
        .ok_or_else(|| bad("unclosed ["))?;
        let (item, tail) = rest.split_at(end);
        // `node[1-2]suffix` is not a Slurm form Flex needs: a name ends at its bracket.
        if item.ends_with(']') && tail.starts_with(|c: char| c != ',') {
            return Err(bad("text after ]"));
        }
        rest = tail.strip_prefix(',').unwrap_or(tail);
        match item.split_once('[') {
            None if item.is_empty() => return Err(bad("an empty name")),
            None => out.push(item.to_string()),
            Some((prefix, ranges)) => {
                for r in ranges.trim_end_matches(']').split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let (lo, hi) = (a.parse::<u64>(), b.parse::<u64>());
                    let (Ok(lo), Ok(hi)) = (lo, hi) else {
                        return Err(bad("a range is not N or N-M"));
                    };
                    if hi < lo || hi - lo > 4096 {
                        return Err(bad("a range runs backwards or is too long"));
                    }
                    out.extend((lo..=hi).map(|n| format!("{prefix}{n:0w$}", w = a.len())));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(bad("no host named"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_expand() {
        assert_eq!(
            expand_hostlist("a,b.example.com").unwrap(),
            ["a", "b.example.com"]
        );
        assert_eq!(
            expand_hostlist("gpu[08-10,3],x").unwrap(),
            ["gpu08", "gpu09", "gpu10", "gpu3", "x"]
        );
        for bad in ["", "gpu[1-", "gpu[a-b]", "gpu[3-1]", "a,,b", "n[1]x"] {
            assert!(expand_hostlist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_this_host_may_be_named_and_it_may_not_be_excluded() {
        let w = super::super::by_long("nodelist").unwrap();
        let x = super::super::by_long("exclude").unwrap();
        let host = "gpu01.lab.example.org";
        assert!(check_hosts(w, "gpu01", host, true).is_ok());
        assert!(check_hosts(w, "GPU01.lab.example.org", host, true).is_ok());
        assert!(check_hosts(w, "gpu[00-01]", host, true)
            .unwrap_err()
            .contains("names gpu00"));
        assert!(check_hosts(w, "gpu02", host, true).is_err());
        assert!(check_hosts(x, "gpu02,gpu03", host, false).is_ok());
        assert!(check_hosts(x, "gpu[01-03]", host, false)
            .unwrap_err()
            .contains("excludes this host"));
    }
}

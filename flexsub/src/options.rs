//! The job options flexsub understands, in one table shared by `#FLEX`/`#SBATCH` directives and
//! the command line, and the settings they build up. Later settings override earlier ones, so
//! the command line (applied last) overrides the script.

use crate::estimate::{Dtype, Mode};
use crate::units::{self, SizeUnit};
use gres_plugin::request::Strategy;
use gres_plugin::Request;
use std::path::PathBuf;

/// What an option sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    JobName,
    Time,
    Output,
    Error,
    Chdir,
    CoresPerLeaf,
    Gres,
    Gpus,
    Mem,
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
    /// Slurm's node count: Flex runs a job on one host.
    Nodes,
    /// Slurm's `--export`: Flex always exports the whole environment.
    Export,
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

const fn opt(
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
        "stdout file; %j job id, %x job name, %u user, %A array job id, %a array task index, %% a percent sign",
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
        Key::CoresPerLeaf,
        "cpus-per-task",
        Some('c'),
        Some("N"),
        "CPU cores per leaf (default: flexd's default_cpus_per_leaf)",
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
        Some("F"),
        "GPU fraction (0.25) or count (2): on MIG, ceil(F x 7) slices' worth of leaves",
    ),
    opt(
        Key::Mem,
        "mem",
        None,
        Some("SIZE"),
        "GPU memory: 512M, 16G, 1.5GiB; a bare number is megabytes, as in Slurm",
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
        Some("ALL"),
        "Environment to export; Flex always exports all of it, so only ALL",
    ),
    opt(
        Key::Ignored,
        "partition",
        Some('p'),
        Some("NAME"),
        "Accepted and ignored: one Flex host has no partitions",
    ),
    opt(
        Key::Ignored,
        "ntasks",
        Some('n'),
        Some("N"),
        "Accepted and ignored: flexrun starts one rank per leaf",
    ),
    opt(
        Key::Ignored,
        "ntasks-per-node",
        None,
        Some("N"),
        "Accepted and ignored: flexrun starts one rank per leaf",
    ),
    opt(
        Key::Signal,
        "signal",
        None,
        Some("[B:]SIG[@SECONDS]"),
        "Send SIG (a name or number) SECONDS (default 60) before the time limit; with B: to the batch shell only, else to the whole job",
    ),
    opt(
        Key::Ignored,
        "mail-type",
        None,
        Some("TYPE"),
        "Accepted and ignored: Flex sends no mail",
    ),
    opt(
        Key::Ignored,
        "mail-user",
        None,
        Some("USER"),
        "Accepted and ignored: Flex sends no mail",
    ),
];

/// Find an option by its long name (without `--`).
pub fn by_long(name: &str) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|o| o.long == name)
}

/// Find an option by its short letter.
pub fn by_short(c: char) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|o| o.short == Some(c))
}

/// What the options asked for so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub name: Option<String>,
    pub time_limit_s: Option<u64>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub chdir: Option<PathBuf>,
    pub cores_per_leaf: Option<u32>,
    pub leaves: Option<u32>,
    pub leaf_type: Option<String>,
    pub gpus: Option<f64>,
    pub mem_bytes: Option<u64>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub nice: Option<i32>,
    pub placement: Option<Strategy>,
    pub model: Option<PathBuf>,
    pub batch_size: Option<u32>,
    pub seq_len: Option<u32>,
    pub dtype: Option<Dtype>,
    pub mode: Option<Mode>,
    pub queue: flex_proto::QueueOptions,
    pub signal: Option<flex_proto::WarnSignal>,
}

/// `[B:]SIG[@SECONDS]`, as sbatch's `--signal` (R:, a reservation's end, means nothing here).
pub fn parse_warn_signal(v: &str) -> Result<flex_proto::WarnSignal, String> {
    let (batch_only, rest) = match v.split_once(':') {
        Some(("B", r)) => (true, r),
        Some((p, _)) => {
            return Err(format!(
                "invalid signal spec {v:?}: prefix {p}: is not B: (R: has no meaning without reservations)"
            ))
        }
        None => (false, v),
    };
    let (sig, secs) = match rest.split_once('@') {
        Some((sig, t)) => (
            sig,
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|&t| t <= 65535)
                .ok_or_else(|| {
                    format!(
                        "invalid signal spec {v:?}: {t:?} is not a number of seconds (0 to 65535)"
                    )
                })?,
        ),
        None => (rest, 60),
    };
    let signal = units::parse_signal(sig).map_err(|e| e.to_string())?;
    Ok(flex_proto::WarnSignal {
        signal,
        before_s: secs,
        batch_only,
    })
}

fn non_empty(what: &str, v: &str) -> Result<String, String> {
    if v.trim().is_empty() {
        Err(format!("{what} is empty"))
    } else {
        Ok(v.to_string())
    }
}

/// `gpu`, `gpu:N`, `gpu:TYPE` or `gpu:TYPE:N` → (leaves, type).
fn parse_gres(v: &str) -> Result<(u32, Option<String>), String> {
    let mut parts = v.split(':');
    if parts.next() != Some("gpu") || v.contains(',') {
        return Err(format!(
            "invalid gres {v:?}: Flex knows only gpu[:TYPE]:N (one gres, of GPUs)"
        ));
    }
    let rest: Vec<&str> = parts.collect();
    let count = |s: &str| units::parse_count("GPU count", s).map_err(|e| e.to_string());
    match rest.as_slice() {
        [] => Ok((1, None)),
        [n] if n.bytes().all(|b| b.is_ascii_digit() || b == b'-') => Ok((count(n)?, None)),
        [t] if !t.is_empty() => Ok((1, Some(t.to_string()))),
        [t, n] if !t.is_empty() => Ok((count(n)?, Some(t.to_string()))),
        _ => Err(format!("invalid gres {v:?}: expected gpu[:TYPE]:N")),
    }
}

impl Settings {
    /// Apply one option. `value` is None only for flags. Returns a warning to show, if any.
    pub fn apply(&mut self, spec: &OptSpec, value: Option<&str>) -> Result<Option<String>, String> {
        let v = value.unwrap_or_default();
        let e = |err: units::ValueError| err.to_string();
        match spec.key {
            Key::JobName => self.name = Some(non_empty("job name", v)?),
            Key::Time => self.time_limit_s = Some(units::parse_time(v).map_err(e)?),
            Key::Output => self.stdout = Some(units::parse_output_pattern(v).map_err(e)?),
            Key::Error => self.stderr = Some(units::parse_output_pattern(v).map_err(e)?),
            Key::Chdir => self.chdir = Some(PathBuf::from(non_empty("directory", v)?)),
            Key::CoresPerLeaf => {
                self.cores_per_leaf = Some(units::parse_count("cores per leaf", v).map_err(e)?)
            }
            Key::Gres => {
                let (n, t) = parse_gres(v)?;
                self.leaves = Some(n);
                if t.is_some() {
                    self.leaf_type = t;
                }
            }
            Key::Gpus => self.gpus = Some(units::parse_fraction(v).map_err(e)?),
            Key::Mem => {
                self.mem_bytes = Some(units::parse_size(v, SizeUnit::Mebibytes).map_err(e)?)
            }
            Key::Account => self.account = Some(non_empty("account", v)?),
            Key::Qos => self.qos = Some(non_empty("qos", v)?),
            Key::Nice => {
                self.nice = Some(
                    v.trim()
                        .parse()
                        .ok()
                        .filter(|n: &i32| (-10000..=10000).contains(n))
                        .ok_or_else(|| {
                            format!("invalid nice {v:?}: an integer from -10000 to 10000")
                        })?,
                )
            }
            Key::Leaves => self.leaves = Some(units::parse_count("leaves", v).map_err(e)?),
            Key::LeafType => self.leaf_type = Some(non_empty("leaf type", v)?),
            Key::Placement => {
                self.placement = Some(Strategy::parse(v).ok_or_else(|| {
                    format!(
                        "invalid placement {v:?}: expected one of {}",
                        Strategy::NAMES.join(", ")
                    )
                })?)
            }
            Key::Model => self.model = Some(PathBuf::from(non_empty("model path", v)?)),
            Key::BatchSize => {
                self.batch_size = Some(units::parse_count("batch size", v).map_err(e)?)
            }
            Key::SeqLen => {
                self.seq_len = Some(units::parse_count("sequence length", v).map_err(e)?)
            }
            Key::Dtype => {
                self.dtype = Some(
                    v.parse()
                        .map_err(|err: crate::estimate::ParseDtypeError| err.to_string())?,
                )
            }
            Key::Array => self.queue.array = Some(flex_proto::ArraySpec::parse(v)?),
            Key::Dependency => {
                self.queue.dependency = Some(flex_proto::Dependency::parse(v)?);
            }
            Key::Signal => self.signal = Some(parse_warn_signal(v)?),
            Key::Hold => self.queue.hold = true,
            Key::Requeue => self.queue.requeue = Some(true),
            Key::NoRequeue => self.queue.requeue = Some(false),
            Key::Train => self.mode = Some(Mode::Train),
            Key::Infer => self.mode = Some(Mode::Infer),
            Key::Nodes => {
                if !matches!(v.trim(), "1" | "1-1") {
                    return Err(format!(
                        "invalid node count {v:?}: a Flex job runs on one host, so only 1"
                    ));
                }
            }
            Key::Export => {
                if !v.trim().eq_ignore_ascii_case("all") {
                    return Err(format!(
                        "invalid export {v:?}: Flex exports the whole environment, so only ALL"
                    ));
                }
            }
            Key::Ignored => {
                // Ignored, but a count must still be one (sbatch refuses `--ntasks=abc`).
                if spec.value == Some("N") {
                    units::parse_count("count", v).map_err(e)?;
                }
                return Ok(Some(format!(
                    "--{} is ignored: {}",
                    spec.long,
                    spec.help.trim_start_matches("Accepted and ignored: ")
                )));
            }
        }
        Ok(None)
    }

    /// The model-memory estimate the options ask for, if any.
    pub fn estimate_input(&self) -> Result<Option<crate::estimate::EstimateInput>, String> {
        let Some(model) = &self.model else {
            if self.batch_size.is_some()
                || self.seq_len.is_some()
                || self.mode.is_some()
                || self.dtype.is_some()
            {
                return Err(
                    "--batch-size, --seq-len, --dtype, --train and --infer need --model".into(),
                );
            }
            return Ok(None);
        };
        if self.mem_bytes.is_some() {
            return Err("--mem and --model both size GPU memory: give one".into());
        }
        let Some(mode) = self.mode else {
            return Err("--model needs --train or --infer".into());
        };
        Ok(Some(crate::estimate::EstimateInput {
            model: model.clone(),
            batch_size: self.batch_size.unwrap_or(1),
            seq_len: self.seq_len,
            dtype: self.dtype,
            mode,
            margin: crate::estimate::DEFAULT_MARGIN,
        }))
    }

    /// The resource request: 1 leaf when nothing asks for a GPU resource, `mem_bytes` from the
    /// options or the model estimate. A time limit or core count left unset is sent as 0, which
    /// flexd replaces with its configured default (`default_time_limit`,
    /// `default_cpus_per_leaf`).
    pub fn request(&self, estimated_mem: Option<u64>) -> Result<Request, String> {
        let mut r = Request {
            leaves: self.leaves,
            leaf_type: self.leaf_type.clone(),
            gpus: self.gpus,
            mem_bytes: self.mem_bytes.or(estimated_mem),
            cores_per_leaf: self.cores_per_leaf.unwrap_or(0),
            time_limit_s: self.time_limit_s.unwrap_or(0),
            placement: self.placement,
        };
        if r.leaves.is_none() && r.gpus.is_none() && r.mem_bytes.is_none() {
            r.leaves = Some(1);
        }
        // The defaults are flexd's; check the rest as if they were filled in.
        Request {
            cores_per_leaf: r.cores_per_leaf.max(1),
            time_limit_s: r.time_limit_s.max(1),
            ..r.clone()
        }
        .validate()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &mut Settings, long: &str, v: &str) -> Result<Option<String>, String> {
        s.apply(by_long(long).unwrap(), Some(v))
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in OPTIONS.iter().enumerate() {
            for b in &OPTIONS[i + 1..] {
                assert_ne!(a.long, b.long);
                assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
            }
        }
    }

    #[test]
    fn ignored_counts_must_still_be_counts() {
        let mut s = Settings::default();
        assert!(set(&mut s, "ntasks", "4")
            .unwrap()
            .is_some_and(|n| n.contains("ignored")));
        let err = set(&mut s, "ntasks", "abc").unwrap_err();
        assert!(err.contains("\"abc\""), "{err}");
        assert!(set(&mut s, "ntasks-per-node", "0").is_err());
        // Ignored options with other values take any text.
        assert!(set(&mut s, "partition", "gpu-long").is_ok());
    }

    #[test]
    fn gres_forms() {
        assert_eq!(parse_gres("gpu"), Ok((1, None)));
        assert_eq!(parse_gres("gpu:4"), Ok((4, None)));
        assert_eq!(parse_gres("gpu:1g.10gb"), Ok((1, Some("1g.10gb".into()))));
        assert_eq!(parse_gres("gpu:1g.5gb:3"), Ok((3, Some("1g.5gb".into()))));
        for bad in [
            "gpu:0",
            "gpu:-1",
            "shard:2",
            "gpu:2,shard:1",
            "gpu:a:b:c",
            "gpu::2",
        ] {
            assert!(parse_gres(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_request_is_one_leaf_with_the_daemons_defaults() {
        let r = Settings::default().request(None).unwrap();
        assert_eq!(r.leaves, Some(1));
        assert_eq!((r.cores_per_leaf, r.time_limit_s), (0, 0));
        let mut s = Settings::default();
        set(&mut s, "gpus", "0.5").unwrap();
        let r = s.request(None).unwrap();
        assert_eq!((r.leaves, r.gpus), (None, Some(0.5)));
        let r = Settings::default().request(Some(7 << 30)).unwrap();
        assert_eq!((r.leaves, r.mem_bytes), (None, Some(7 << 30)));
    }

    #[test]
    fn values_are_checked() {
        let mut s = Settings::default();
        assert!(set(&mut s, "gpus", "NaN").unwrap_err().contains("\"NaN\""));
        assert!(set(&mut s, "leaves", "0").unwrap_err().contains("\"0\""));
        assert!(set(&mut s, "placement", "random")
            .unwrap_err()
            .contains("fill-first"));
        assert!(set(&mut s, "nodes", "2").unwrap_err().contains("one host"));
        assert!(set(&mut s, "export", "ALL").unwrap().is_none());
        assert!(set(&mut s, "export", "NONE")
            .unwrap_err()
            .contains("only ALL"));
        assert!(set(&mut s, "dtype", "fp7").unwrap_err().contains("fp7"));
        assert!(set(&mut s, "partition", "gpu")
            .unwrap()
            .unwrap()
            .contains("ignored"));
        set(&mut s, "mem", "100").unwrap();
        assert_eq!(s.mem_bytes, Some(100 << 20));
        assert!(Settings {
            gpus: Some(5000.0),
            ..Settings::default()
        }
        .request(None)
        .is_err());
    }

    #[test]
    fn model_options_need_each_other() {
        let mut s = Settings::default();
        set(&mut s, "batch-size", "8").unwrap();
        assert!(s.estimate_input().unwrap_err().contains("need --model"));
        set(&mut s, "model", "/m").unwrap();
        assert!(s
            .estimate_input()
            .unwrap_err()
            .contains("--train or --infer"));
        s.apply(by_long("train").unwrap(), None).unwrap();
        // Without --seq-len, the model's own context length (found when the model is read).
        let i = s.estimate_input().unwrap().unwrap();
        assert_eq!((i.batch_size, i.seq_len), (8, None));
        set(&mut s, "seq-len", "128").unwrap();
        let i = s.estimate_input().unwrap().unwrap();
        assert_eq!(
            (i.batch_size, i.seq_len, i.mode),
            (8, Some(128), Mode::Train)
        );
        let mut d = Settings::default();
        set(&mut d, "model", "/m").unwrap();
        d.apply(by_long("infer").unwrap(), None).unwrap();
        assert_eq!(d.estimate_input().unwrap().unwrap().batch_size, 1);
        set(&mut s, "mem", "1G").unwrap();
        assert!(s.estimate_input().unwrap_err().contains("give one"));
    }
}

//! The job options flexsub understands, in one table shared by `#FLEX`/`#SBATCH` directives and
//! the command line, and the settings they build up. Later settings override earlier ones, so
//! the command line (applied last) overrides the script.

use crate::estimate::{Dtype, Mode};
use crate::units::{self, SizeUnit};
use gres_plugin::request::Strategy;
use gres_plugin::{HostMem, Request};
use std::path::PathBuf;

mod slurm;
mod table;
pub use slurm::{check_clusters, expand_hostlist, SLURM_OPTIONS};
pub use table::{all, by_long, by_short, Key, OptSpec, OPTIONS};

/// What the options asked for so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub name: Option<String>,
    pub time_limit_s: Option<u64>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub chdir: Option<PathBuf>,
    /// `-c`: cores per task.
    pub cpus_per_task: Option<u32>,
    /// `--cpus-per-gpu`: cores per leaf.
    pub cpus_per_gpu: Option<u32>,
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub gpus_per_task: Option<u32>,
    /// `--gpus` and `--gpus-per-node` as given, for the job's `SLURM_GPUS`/`_PER_NODE`.
    pub gpus_spec: Option<String>,
    pub gpus_per_node_spec: Option<String>,
    pub leaves: Option<u32>,
    pub leaf_type: Option<String>,
    /// `--gpu-fraction`: a share of GPU compute, in GPUs.
    pub gpu_fraction: Option<f64>,
    /// `--gpu-mem`: GPU memory.
    pub mem_bytes: Option<u64>,
    /// `--mem`, `--mem-per-cpu`, `--mem-per-gpu`: host memory.
    pub host_mem: Option<HostMem>,
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
    /// `--export`.
    pub export: Option<Export>,
    pub signal: Option<flex_proto::WarnSignal>,
    pub options: flex_proto::JobOptions,
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

/// sbatch's `--export`: all of the submitting environment or only the variables named, and
/// values to set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Export {
    pub all: bool,
    /// Named variables: taken from the submitting environment (None), or set.
    pub vars: Vec<(String, Option<String>)>,
}

impl Export {
    /// `ALL`, `NONE`, `ALL,A=1,B`, `A,B=2` (sbatch's forms).
    pub fn parse(v: &str) -> Result<Export, String> {
        let mut e = Export::default();
        for (i, item) in v.split(',').map(str::trim).enumerate() {
            match item {
                "ALL" | "all" if i == 0 => e.all = true,
                "NONE" | "none" if i == 0 => {}
                "" => return Err(format!("invalid export {v:?}: an empty name")),
                _ => {
                    let (name, value) = match item.split_once('=') {
                        Some((n, val)) => (n, Some(val.to_string())),
                        None => (item, None),
                    };
                    let ok = name
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !ok {
                        return Err(format!(
                            "invalid export {v:?}: {name:?} is not a variable name"
                        ));
                    }
                    e.vars.push((name.to_string(), value));
                }
            }
        }
        Ok(e)
    }

    /// The job's environment from the submitting one: all of it or the variables named (Flex's
    /// own client settings, FLEX_SOCKET and FLEX_CONFIG, always, so the job's commands reach
    /// flexd), then the values set.
    pub fn apply(&self, env: Vec<(String, String)>) -> Vec<(String, String)> {
        let named = |k: &str| self.vars.iter().any(|(n, _)| n == k);
        let mut out: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| self.all || named(k) || k == "FLEX_SOCKET" || k == "FLEX_CONFIG")
            .collect();
        for (name, value) in &self.vars {
            if let Some(v) = value {
                out.retain(|(k, _)| k != name);
                out.push((name.clone(), v.clone()));
            }
        }
        out
    }
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
    match rest.as_slice() {
        [] => Ok((1, None)),
        [n] if n.bytes().all(|b| b.is_ascii_digit() || b == b'-') => {
            Ok((gpu_count(n, true)?, None))
        }
        [t] if !t.is_empty() => Ok((1, Some(t.to_string()))),
        [t, n] if !t.is_empty() => Ok((gpu_count(n, true)?, Some(t.to_string()))),
        _ => Err(format!("invalid gres {v:?}: expected gpu[:TYPE]:N")),
    }
}

/// A count of GPUs (leaves); 0, Slurm's "no GPU", where `zero` allows it. A number that is
/// not whole is the one mistake Flex's own spelling explains: a share is `--gpu-fraction`.
fn gpu_count(n: &str, zero: bool) -> Result<u32, String> {
    if zero && n.trim() == "0" {
        return Ok(0);
    }
    if n.trim().parse::<f64>().is_ok_and(|f| f.fract() != 0.0) {
        return Err(format!(
            "invalid GPU count {n:?}: Slurm counts whole GPUs (on MIG, leaves); \
             a share of a GPU's compute is --gpu-fraction {}",
            n.trim()
        ));
    }
    units::parse_count("GPU count", n).map_err(|e| e.to_string())
}

/// `--gpus`, `--gpus-per-node`, `--gpus-per-task`: `[TYPE:]N` → (N, TYPE), TYPE a MIG profile
/// or a GPU model (see `--gres`).
fn parse_gpus(v: &str, zero: bool) -> Result<(u32, Option<String>), String> {
    match v.rsplit_once(':') {
        Some((t, n)) if !t.trim().is_empty() => {
            Ok((gpu_count(n, zero)?, Some(t.trim().to_string())))
        }
        Some(_) => Err(format!("invalid GPU count {v:?}: expected [TYPE:]N")),
        None => Ok((gpu_count(v, zero)?, None)),
    }
}

/// `--nice`: an integer from -10000 to 10000.
fn parse_nice(v: &str) -> Result<i32, String> {
    v.trim()
        .parse()
        .ok()
        .filter(|n: &i32| (-10000..=10000).contains(n))
        .ok_or_else(|| format!("invalid nice {v:?}: an integer from -10000 to 10000"))
}

/// `--placement`: one of the placement strategies' names.
fn parse_placement(v: &str) -> Result<Strategy, String> {
    Strategy::parse(v).ok_or_else(|| {
        format!(
            "invalid placement {v:?}: expected one of {}",
            Strategy::NAMES.join(", ")
        )
    })
}

/// `--dtype`: an element type for `--model`.
fn parse_dtype(v: &str) -> Result<Dtype, String> {
    v.parse()
        .map_err(|err: crate::estimate::ParseDtypeError| err.to_string())
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
            Key::CpusPerTask => {
                self.cpus_per_task = Some(units::parse_count("cores per task", v).map_err(e)?)
            }
            Key::Gres => {
                let (n, t) = parse_gres(v)?;
                self.set_leaves(n, t);
            }
            Key::Gpus => {
                let (n, t) = parse_gpus(v, true)?;
                self.set_leaves(n, t);
                self.gpus_spec = Some(v.trim().to_string());
            }
            Key::GpuFraction => self.gpu_fraction = Some(units::parse_fraction(v).map_err(e)?),
            Key::Mem | Key::MemPerCpu | Key::MemPerGpu => {
                let n = if v.trim() == "0" {
                    0
                } else {
                    units::parse_size(v, SizeUnit::Mebibytes).map_err(e)?
                };
                self.host_mem = Some(match spec.key {
                    Key::Mem if n == 0 => HostMem::All,
                    Key::Mem => HostMem::PerNode(n),
                    // Slurm's 0 per core or GPU is also "all of the node's memory".
                    _ if n == 0 => HostMem::All,
                    Key::MemPerCpu => HostMem::PerCpu(n),
                    _ => HostMem::PerGpu(n),
                });
            }
            Key::GpuMem => {
                self.mem_bytes = Some(units::parse_size(v, SizeUnit::Mebibytes).map_err(e)?)
            }
            Key::Account => self.account = Some(non_empty("account", v)?),
            Key::Qos => self.qos = Some(non_empty("qos", v)?),
            Key::Nice => self.nice = Some(parse_nice(v)?),
            Key::Leaves => {
                self.leaves = Some(match v.trim() {
                    "0" => 0,
                    _ => units::parse_count("leaves", v).map_err(e)?,
                })
            }
            Key::LeafType => self.leaf_type = Some(non_empty("leaf type", v)?),
            Key::Placement => self.placement = Some(parse_placement(v)?),
            Key::Model => self.model = Some(PathBuf::from(non_empty("model path", v)?)),
            Key::BatchSize => {
                self.batch_size = Some(units::parse_count("batch size", v).map_err(e)?)
            }
            Key::SeqLen => {
                self.seq_len = Some(units::parse_count("sequence length", v).map_err(e)?)
            }
            Key::Dtype => self.dtype = Some(parse_dtype(v)?),
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
            Key::Nodes
            | Key::Export
            | Key::Clusters
            | Key::Ntasks
            | Key::NtasksPerNode
            | Key::GpusPerNode
            | Key::GpusPerTask
            | Key::CpusPerGpu
            | Key::Nodelist
            | Key::Exclude
            | Key::Refused
            | Key::Comment
            | Key::Begin
            | Key::Exclusive
            | Key::OpenMode
            | Key::Constraint
            | Key::MailType
            | Key::MailUser
            | Key::Ignored => return slurm::apply(self, spec, v),
        }
        Ok(None)
    }

    /// N GPUs (leaves) of type `kind` if given; 0 is Slurm's "no GPU".
    fn set_leaves(&mut self, n: u32, kind: Option<String>) {
        self.leaves = Some(n);
        if kind.is_some() {
            self.leaf_type = kind;
        }
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
            return Err("--gpu-mem and --model both size GPU memory: give one".into());
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

    /// The tasks Slurm would start: `-n`, else `--ntasks-per-node` (one node), if either.
    pub(crate) fn tasks(&self) -> Option<u32> {
        self.ntasks.or(self.ntasks_per_node)
    }

    /// The job's cores as Slurm counts them: tasks (`-n`, else 1) × `-c` (else 1); 0 when
    /// neither is given (the core then gives a CPU-only job one core).
    fn cpus(&self) -> Result<u32, String> {
        if self.tasks().is_none() && self.cpus_per_task.is_none() {
            return Ok(0);
        }
        let (t, c) = (self.tasks().unwrap_or(1), self.cpus_per_task.unwrap_or(1));
        u32::try_from(u64::from(t) * u64::from(c))
            .map_err(|_| format!("{t} tasks of {c} cores are more than any host has"))
    }

    /// The resource request: GPU units when an option asks for them (none, as in Slurm, when
    /// nothing does), `mem_bytes` from `--gpu-mem` or the model estimate, the cores of the
    /// tasks and the host memory. A time limit or cores per leaf left unset is sent as 0, which
    /// flexd replaces with its configured default (`default_time_limit`,
    /// `default_cpus_per_leaf`); so is host memory (`default_mem_per_cpu`).
    pub fn request(&self, estimated_mem: Option<u64>) -> Result<Request, String> {
        let leaves = match self.gpus_per_task {
            Some(g) => Some(
                g.checked_mul(self.tasks().unwrap_or(1))
                    .ok_or("--gpus-per-task times the task count is more GPUs than any host has")?,
            ),
            None => self.leaves,
        };
        let r = Request {
            // `--gres=gpu:0`, `--gpus=0` or `--leaves 0`: no GPU.
            leaves: leaves.filter(|&n| n > 0),
            leaf_type: self.leaf_type.clone().filter(|_| leaves != Some(0)),
            gpus: self.gpu_fraction,
            mem_bytes: self.mem_bytes.or(estimated_mem),
            cores_per_leaf: self.cpus_per_gpu.unwrap_or(0),
            cpus: self.cpus()?,
            host_mem: self.host_mem,
            exclusive: self.options.exclusive,
            time_limit_s: self.time_limit_s.unwrap_or(0),
            placement: self.placement,
        };
        if leaves == Some(0) && r.wants_gpu() {
            return Err(
                "--gres=gpu:0 (or --gpus=0, --leaves 0) asks for no GPU, but a GPU fraction or GPU memory is also given"
                    .into(),
            );
        }
        if r.leaf_type.is_some() && !r.wants_gpu() {
            return Err(format!(
                "a leaf type ({}) is given for a job that asks for no GPU",
                r.leaf_type.as_deref().unwrap_or_default()
            ));
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
mod tests;

//! flexd's settings: the commented `etc/flexd.toml` compiled in as the defaults, a config file
//! over it, command-line flags over both. Unknown keys are warnings, bad values errors that
//! name the key, the value and where it came from.

use flex_sched::{Policy, PolicyKeys};
use gres_plugin::env::NcclMode;
use gres_plugin::request::Strategy;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

mod source;
pub(crate) use source::shown;
use source::{merge, parse, Source};

/// The defaults, and the documentation of every key.
pub(crate) use flex_proto::config::DEFAULT_CONFIG;

/// Per-user and per-request limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_script_bytes: u64,
    pub max_directives: u32,
    pub max_queued_per_user: u32,
    /// Bytes of distinct scripts and environments one user's pending and running jobs hold.
    pub max_queued_bytes_per_user: u64,
    pub max_frame_bytes: u64,
    pub max_array_size: u32,
    /// Most jobs one `--dependency` may name.
    pub max_dependencies: u32,
    /// Connections one uid may hold open at once.
    pub max_connections_per_user: u32,
    /// File descriptors kept free of connections (for supervisors, the store, the launcher).
    pub reserved_fds: u32,
    /// A connection that sends nothing this long is closed.
    pub idle_timeout: Duration,
    /// A frame must arrive whole within this long of its first byte.
    pub frame_timeout: Duration,
    /// Longest job name flexd accepts, in bytes.
    pub max_name_bytes: u32,
    /// Bytes of request frames still arriving that flexd holds for all connections together.
    pub max_buffered_bytes: u64,
}

/// Everything flexd is configured with (paths as written; [`crate::paths::Paths`] resolves
/// them).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub topology: PathBuf,
    pub policy: Policy,
    pub default_time_limit: Duration,
    pub max_time_limit: Duration,
    pub kill_grace: Duration,
    /// How long a job's first process may take from its creation to running the script.
    pub batch_start_timeout: Duration,
    pub default_cpus_per_leaf: u32,
    /// Host memory per allocated core for jobs that name none (Slurm's `DefMemPerCPU`).
    pub default_mem_per_cpu: MemPerCpu,
    /// Host memory kept back from jobs for the system and flexd.
    pub reserved_memory: u64,
    /// The most processes and threads one job may have (its cgroup's `pids.max`).
    pub job_pids_max: u32,
    /// Where each job's private temporary directory (`TMPDIR`) is made; None: none is.
    pub job_tmpdir: Option<PathBuf>,
    /// `propagate_resource_limits`: the submitter's limits (by Slurm's names) a job gets.
    pub propagate_limits: Vec<String>,
    /// Deny each job the GPU device nodes it was not given (Slurm's `ConstrainDevices`).
    pub constrain_devices: bool,
    /// `[aliases]`: other clusters' GPU type and feature names (lowercase) and this host's
    /// name for each ("" accepts and ignores it).
    pub aliases: Vec<(String, String)>,
    pub nccl: NcclMode,
    pub slurm_aliases: bool,
    /// Whether bash job scripts get an `srun` that runs flexrun (see [`SrunInJobs`]).
    pub srun_in_jobs: SrunInJobs,
    /// Whether bash job scripts get a `torchrun` that runs flexrun's torchrun personality.
    pub torchrun_in_jobs: bool,
    pub placement: Strategy,
    pub round_up_fractions: bool,
    pub keep_finished: Duration,
    /// How often running jobs' leaves are sampled for GPU telemetry.
    pub telemetry_period: Duration,
    /// Cancel jobs whose dependency can no longer be satisfied.
    pub kill_invalid_depend: bool,
    /// Where to serve Prometheus metrics (None: nowhere).
    pub metrics_listen: Option<SocketAddr>,
    /// The program mail goes through (`sendmail -t`); None: jobs' `--mail-type` sends nothing.
    pub sendmail: Option<PathBuf>,
    pub limits: Limits,
    /// Multifactor priority, fair share and QOS.
    pub priority: crate::fairshare::PriorityConfig,
}

/// `propagate_resource_limits`: ALL, NONE or a list of Slurm's limit names.
fn parse_propagate(v: &str) -> Result<Vec<String>, String> {
    let names = flex_proto::RLIMIT_NAMES;
    match v.trim().to_ascii_uppercase().as_str() {
        "ALL" => Ok(names.iter().map(|n| n.to_string()).collect()),
        "NONE" | "" => Ok(Vec::new()),
        list => {
            list.split(',')
                .map(|n| {
                    let n = n.trim();
                    names.contains(&n).then(|| n.to_string()).ok_or_else(|| {
                        format!("{n:?} is not one of ALL, NONE, {}", names.join(", "))
                    })
                })
                .collect()
        }
    }
}

/// `[aliases]`: names to strings, lowercased.
fn aliases(src: &Source) -> Result<Vec<(String, String)>, ConfigError> {
    let table = src.table.get("aliases").and_then(toml::Value::as_table);
    let mut out = Vec::new();
    for (k, v) in table.into_iter().flatten() {
        let key = format!("aliases.{k}");
        match v {
            toml::Value::String(to) => {
                out.push((k.to_ascii_lowercase(), to.trim().to_string()));
            }
            v => {
                return Err(src.bad(
                    &key,
                    &source::shown(v),
                    "must be a string: this host's MIG profile or feature, or \"\"",
                ))
            }
        }
    }
    Ok(out)
}

/// `default_mem_per_cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemPerCpu {
    /// The host's schedulable memory over its cores: a host full by cores is full by memory.
    Auto,
    /// This many bytes per core; 0: jobs that name no memory reserve none.
    Bytes(u64),
}

/// `srun_in_jobs`: whether a bash job script's `srun` runs flexrun's Slurm personality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrunInJobs {
    /// Where no Slurm `srun` is installed (the host's PATH and /usr/bin, /usr/local/bin).
    Auto,
    /// Always: a host with Slurm installed whose jobs still run under Flex.
    Flexrun,
    /// Never.
    Off,
}

impl SrunInJobs {
    fn parse(s: &str) -> Result<SrunInJobs, String> {
        match s {
            "auto" => Ok(SrunInJobs::Auto),
            "flexrun" => Ok(SrunInJobs::Flexrun),
            "off" => Ok(SrunInJobs::Off),
            _ => Err("must be \"auto\", \"flexrun\" or \"off\"".into()),
        }
    }
}

/// Command-line values that override the files.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub topology: Option<PathBuf>,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {origin}: invalid TOML: {message}")]
    Syntax { origin: String, message: String },
    #[error("config file {origin}: {key} = {value}: {message}")]
    Value {
        origin: String,
        key: String,
        value: String,
        message: String,
    },
}

const BUILT_IN: &str = "(built-in defaults)";

impl Settings {
    #[cfg(test)]
    /// The compiled-in defaults.
    pub(crate) fn defaults() -> Settings {
        Self::from_text(None, &Overrides::default())
            .expect("the compiled-in etc/flexd.toml is valid")
            .0
    }

    /// Load the defaults, then `file` (if any), then the overrides. Returns the settings and
    /// one warning per unknown key.
    pub fn load(
        file: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<(Settings, Vec<String>), ConfigError> {
        let text = match file {
            None => None,
            Some(p) => Some((
                p.display().to_string(),
                std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.to_path_buf(),
                    source,
                })?,
            )),
        };
        Self::from_text(
            text.as_ref().map(|(o, t)| (o.as_str(), t.as_str())),
            overrides,
        )
    }

    /// Like [`Settings::load`] with the file's text given (origin, text).
    pub fn from_text(
        file: Option<(&str, &str)>,
        overrides: &Overrides,
    ) -> Result<(Settings, Vec<String>), ConfigError> {
        // The built-in defaults are parsed once per process: they are compiled in, so they
        // cannot change, and reparsing them cost more than most files laid over them.
        // (A failure is not kept: it is parsed again to be reported.)
        static DEFAULTS: OnceLock<Option<toml::Table>> = OnceLock::new();
        let mut table = match DEFAULTS.get_or_init(|| parse(BUILT_IN, DEFAULT_CONFIG).ok()) {
            Some(t) => t.clone(),
            None => parse(BUILT_IN, DEFAULT_CONFIG)?,
        };
        let mut warnings = Vec::new();
        let mut from_file = BTreeSet::new();
        let origin = file.map_or(BUILT_IN, |(o, _)| o);
        if let Some((origin, text)) = file {
            let user = parse(origin, text)?;
            merge(&mut table, user, "", origin, &mut warnings, &mut from_file);
        }
        let src = Source {
            table: &table,
            origin,
            from_file: &from_file,
        };
        Ok((Self::from_source(&src, overrides)?, warnings))
    }

    /// The settings from the merged table, the overrides laid over its paths.
    fn from_source(src: &Source, overrides: &Overrides) -> Result<Settings, ConfigError> {
        let path = |key: &str, o: &Option<PathBuf>| -> Result<PathBuf, ConfigError> {
            match o {
                Some(p) => Ok(p.clone()),
                None => src.string(key).map(PathBuf::from),
            }
        };
        let policy = policy(src)?;
        let max_time_limit = src.duration("max_time_limit", secs(365 * 86400))?;
        let default_time_limit = src.duration("default_time_limit", max_time_limit)?;
        let nccl = nccl(src)?;
        let settings = Settings {
            socket: path("socket", &overrides.socket)?,
            state_dir: path("state_dir", &overrides.state_dir)?,
            topology: path("topology", &overrides.topology)?,
            policy,
            default_time_limit,
            max_time_limit,
            kill_grace: src.duration("kill_grace", secs(3600))?,
            batch_start_timeout: src.duration("batch_start_timeout", secs(3600))?,
            default_cpus_per_leaf: src.int("default_cpus_per_leaf", 1, 1024)? as u32,
            default_mem_per_cpu: match src.size_or_word(
                "default_mem_per_cpu",
                1 << 50,
                &["auto"],
            )? {
                Ok(n) => MemPerCpu::Bytes(n),
                Err(_) => MemPerCpu::Auto,
            },
            reserved_memory: src
                .size_or_word("reserved_memory", 1 << 50, &[])?
                .unwrap_or(0),
            job_pids_max: src.int("job_pids_max", 16, 4_194_304)? as u32,
            aliases: aliases(src)?,
            propagate_limits: src.parsed("propagate_resource_limits", parse_propagate)?,
            constrain_devices: src.bool("constrain_devices")?,
            job_tmpdir: Some(src.string("job_tmpdir")?)
                .filter(|s| !s.trim().is_empty())
                .map(PathBuf::from),
            nccl,
            slurm_aliases: src.bool("slurm_aliases")?,
            srun_in_jobs: src.parsed("srun_in_jobs", SrunInJobs::parse)?,
            torchrun_in_jobs: src.bool("torchrun_in_jobs")?,
            placement: src.parsed("placement", |s| {
                Strategy::parse(s).ok_or_else(|| format!("must be one of {:?}", Strategy::NAMES))
            })?,
            round_up_fractions: src.bool("round_up_fractions")?,
            keep_finished: src.duration("keep_finished", secs(30 * 86400))?,
            telemetry_period: src.duration("telemetry_period", secs(3600))?,
            kill_invalid_depend: src.bool("kill_invalid_depend")?,
            metrics_listen: metrics_listen(src)?,
            sendmail: Some(src.string("sendmail")?)
                .filter(|s| !s.trim().is_empty())
                .map(PathBuf::from),
            limits: limits(src)?,
            priority: crate::fairshare::PriorityConfig::from_table(src.table, src.origin)?,
        };
        for (key, p) in [
            ("socket", &settings.socket),
            ("state_dir", &settings.state_dir),
            ("topology", &settings.topology),
        ] {
            if p.as_os_str().is_empty() {
                return Err(src.bad(key, "\"\"", "must not be empty"));
            }
        }
        Ok(settings)
    }

    /// The placement settings of the scheduler core.
    pub fn cluster_config(&self) -> flex_sched::ClusterConfig {
        flex_sched::ClusterConfig {
            default_strategy: self.placement,
            round_up_fractions: self.round_up_fractions,
            reserved_memory: self.reserved_memory,
        }
    }

    /// What differs between two settings, one line per key, for the log after a reload.
    pub(crate) fn changes(&self, new: &Settings) -> Vec<String> {
        self.shown()
            .into_iter()
            .zip(new.shown())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((key, a), (_, b))| format!("{key}: {a} -> {b}"))
            .collect()
    }

    /// Each key (or group of keys) and its value as [`Settings::changes`] shows it.
    pub(crate) fn shown(&self) -> Vec<(&'static str, String)> {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        vec![
            ("socket", show(&self.socket)),
            ("state_dir", show(&self.state_dir)),
            ("topology", show(&self.topology)),
            ("policy", format!("{:?}", self.policy.kind)),
            ("backfill_window", self.policy.window.to_string()),
            ("queue_order", self.policy.order.to_string()),
            ("aging_pct", self.policy.aging_pct.to_string()),
            ("default_time_limit", d(self.default_time_limit)),
            ("max_time_limit", d(self.max_time_limit)),
            ("kill_grace", d(self.kill_grace)),
            ("batch_start_timeout", d(self.batch_start_timeout)),
            ("keep_finished", d(self.keep_finished)),
            ("telemetry_period", d(self.telemetry_period)),
            ("kill_invalid_depend", self.kill_invalid_depend.to_string()),
            ("metrics_listen", format!("{:?}", self.metrics_listen)),
            ("sendmail", format!("{:?}", self.sendmail)),
            (
                "default_cpus_per_leaf",
                self.default_cpus_per_leaf.to_string(),
            ),
            (
                "default_mem_per_cpu",
                match self.default_mem_per_cpu {
                    MemPerCpu::Auto => "auto".into(),
                    MemPerCpu::Bytes(n) => n.to_string(),
                },
            ),
            ("reserved_memory", self.reserved_memory.to_string()),
            ("job_pids_max", self.job_pids_max.to_string()),
            ("propagate_resource_limits", self.propagate_limits.join(",")),
            ("constrain_devices", self.constrain_devices.to_string()),
            (
                "job_tmpdir",
                self.job_tmpdir
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string()),
            ),
            ("nccl_mode", format!("{:?}", self.nccl)),
            ("slurm_aliases", self.slurm_aliases.to_string()),
            ("srun_in_jobs", format!("{:?}", self.srun_in_jobs)),
            ("torchrun_in_jobs", self.torchrun_in_jobs.to_string()),
            ("placement", self.placement.to_string()),
            ("round_up_fractions", self.round_up_fractions.to_string()),
            ("limits", format!("{:?}", self.limits)),
            (
                "priority, fairshare and qos",
                format!("{:?}", self.priority),
            ),
        ]
    }
}

/// The policy keys: types and ranges checked here, meaning from the core's PolicyKeys, which
/// flexsim --flexd-config shares.
fn policy(src: &Source) -> Result<Policy, ConfigError> {
    let policy_text = src.string("policy")?;
    let order_text = src.string("queue_order")?;
    PolicyKeys {
        policy: Some(&policy_text),
        backfill_window: Some(src.int("backfill_window", 0, PolicyKeys::WINDOW_MAX)?),
        queue_order: Some(&order_text),
        aging_pct: Some(src.int("aging_pct", 0, PolicyKeys::AGING_MAX)?),
    }
    .policy()
    .map_err(|(key, why)| {
        let v = if key == "policy" {
            &policy_text
        } else {
            &order_text
        };
        src.bad(key, &format!("{v:?}"), &why)
    })
}

/// `nccl_mode`, and `nccl_lib_dir` for the patched NCCL.
fn nccl(src: &Source) -> Result<NcclMode, ConfigError> {
    match src.string("nccl_mode")?.as_str() {
        "patched" => Ok(NcclMode::Patched {
            lib_dir: src.string("nccl_lib_dir")?.into(),
        }),
        "upstream" => Ok(NcclMode::Upstream),
        "none" => Ok(NcclMode::None),
        other => Err(src.bad(
            "nccl_mode",
            other,
            "must be \"patched\", \"upstream\" or \"none\"",
        )),
    }
}

/// The `[limits]` table.
fn limits(src: &Source) -> Result<Limits, ConfigError> {
    Ok(Limits {
        max_script_bytes: src.size("limits.max_script_bytes", 64 << 20)?,
        max_directives: src.int("limits.max_directives", 1, 100_000)? as u32,
        max_queued_per_user: src.int("limits.max_queued_per_user", 1, 10_000_000)? as u32,
        max_queued_bytes_per_user: src.size("limits.max_queued_bytes_per_user", 1 << 40)?,
        max_frame_bytes: src.size("limits.max_frame_bytes", 1 << 30)?,
        max_array_size: src.int("limits.max_array_size", 1, 1_000_000)? as u32,
        max_dependencies: src.int("limits.max_dependencies", 1, 1_000_000)? as u32,
        max_connections_per_user: src.int("limits.max_connections_per_user", 1, 1_000_000)? as u32,
        reserved_fds: src.int("limits.reserved_fds", 16, 1_000_000)? as u32,
        idle_timeout: src.duration("limits.idle_timeout", secs(86400))?,
        frame_timeout: src.duration("limits.frame_timeout", secs(3600))?,
        max_name_bytes: src.int("limits.max_name_bytes", 1, 65536)? as u32,
        max_buffered_bytes: src.size("limits.max_buffered_bytes", 16 << 30)?,
    })
}

/// `metrics_listen`: empty for none; a non-loopback address only with `metrics_allow_remote`.
fn metrics_listen(src: &Source) -> Result<Option<SocketAddr>, ConfigError> {
    let text = src.string("metrics_listen")?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let addr: SocketAddr = text.trim().parse().map_err(|_| {
        src.bad(
            "metrics_listen",
            &format!("{text:?}"),
            "must be an IP address and port such as \"127.0.0.1:9464\", or \"\"",
        )
    })?;
    if !addr.ip().is_loopback() && !src.bool("metrics_allow_remote")? {
        return Err(src.bad(
            "metrics_listen",
            &format!("{text:?}"),
            "is not a loopback address; set metrics_allow_remote = true to serve metrics \
             to other hosts",
        ));
    }
    Ok(Some(addr))
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[cfg(test)]
mod tests;

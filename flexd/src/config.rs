//! flexd's settings: the commented `etc/flexd.toml` compiled in as the defaults, a config file
//! over it, command-line flags over both. Unknown keys are warnings, bad values errors that
//! name the key, the value and where it came from.

use flex_proto::config::size_value;
use flex_sched::{Policy, PolicyKeys};
use gres_plugin::env::NcclMode;
use gres_plugin::request::Strategy;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The defaults, and the documentation of every key.
pub(crate) use flex_proto::config::DEFAULT_CONFIG;

/// Per-user and per-request limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_script_bytes: u64,
    pub max_directives: u32,
    pub max_queued_per_user: u32,
    pub max_frame_bytes: u64,
    pub max_array_size: u32,
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
    pub default_cpus_per_leaf: u32,
    pub nccl: NcclMode,
    pub slurm_aliases: bool,
    /// Whether bash job scripts get an `srun` that runs flexrun (see [`SrunInJobs`]).
    pub srun_in_jobs: SrunInJobs,
    /// Whether bash job scripts get a `torchrun` that runs flexrun's torchrun personality.
    pub torchrun_in_jobs: bool,
    pub placement: Strategy,
    pub round_up_fractions: bool,
    pub keep_finished: Duration,
    /// Cancel jobs whose dependency can no longer be satisfied.
    pub kill_invalid_depend: bool,
    /// Where to serve Prometheus metrics (None: nowhere).
    pub metrics_listen: Option<SocketAddr>,
    pub limits: Limits,
    /// Multifactor priority, fair share and QOS.
    pub priority: crate::fairshare::PriorityConfig,
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
    pub(crate) fn from_text(
        file: Option<(&str, &str)>,
        overrides: &Overrides,
    ) -> Result<(Settings, Vec<String>), ConfigError> {
        let mut table = parse(BUILT_IN, DEFAULT_CONFIG)?;
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
        let path = |key: &str, o: &Option<PathBuf>| -> Result<PathBuf, ConfigError> {
            match o {
                Some(p) => Ok(p.clone()),
                None => src.string(key).map(PathBuf::from),
            }
        };
        // The policy keys: types and ranges checked here, meaning from the core's PolicyKeys,
        // which flexsim --flexd-config shares.
        let policy_text = src.string("policy")?;
        let order_text = src.string("queue_order")?;
        let policy = PolicyKeys {
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
        })?;
        let max_time_limit = src.duration("max_time_limit", secs(365 * 86400))?;
        let default_time_limit = src.duration("default_time_limit", max_time_limit)?;
        let nccl = match src.string("nccl_mode")?.as_str() {
            "patched" => NcclMode::Patched {
                lib_dir: src.string("nccl_lib_dir")?.into(),
            },
            "upstream" => NcclMode::Upstream,
            "none" => NcclMode::None,
            other => {
                return Err(src.bad(
                    "nccl_mode",
                    other,
                    "must be \"patched\", \"upstream\" or \"none\"",
                ))
            }
        };
        let settings = Settings {
            socket: path("socket", &overrides.socket)?,
            state_dir: path("state_dir", &overrides.state_dir)?,
            topology: path("topology", &overrides.topology)?,
            policy,
            default_time_limit,
            max_time_limit,
            kill_grace: src.duration("kill_grace", secs(3600))?,
            default_cpus_per_leaf: src.int("default_cpus_per_leaf", 1, 1024)? as u32,
            nccl,
            slurm_aliases: src.bool("slurm_aliases")?,
            srun_in_jobs: src.parsed("srun_in_jobs", SrunInJobs::parse)?,
            torchrun_in_jobs: src.bool("torchrun_in_jobs")?,
            placement: src.parsed("placement", |s| {
                Strategy::parse(s).ok_or_else(|| format!("must be one of {:?}", Strategy::NAMES))
            })?,
            round_up_fractions: src.bool("round_up_fractions")?,
            keep_finished: src.duration("keep_finished", secs(30 * 86400))?,
            kill_invalid_depend: src.bool("kill_invalid_depend")?,
            metrics_listen: metrics_listen(&src)?,
            limits: Limits {
                max_script_bytes: src.size("limits.max_script_bytes", 64 << 20)?,
                max_directives: src.int("limits.max_directives", 1, 100_000)? as u32,
                max_queued_per_user: src.int("limits.max_queued_per_user", 1, 10_000_000)? as u32,
                max_frame_bytes: src.size("limits.max_frame_bytes", 1 << 30)?,
                max_array_size: src.int("limits.max_array_size", 1, 1_000_000)? as u32,
                max_connections_per_user: src.int(
                    "limits.max_connections_per_user",
                    1,
                    1_000_000,
                )? as u32,
                reserved_fds: src.int("limits.reserved_fds", 16, 1_000_000)? as u32,
                idle_timeout: src.duration("limits.idle_timeout", secs(86400))?,
                frame_timeout: src.duration("limits.frame_timeout", secs(3600))?,
                max_name_bytes: src.int("limits.max_name_bytes", 1, 65536)? as u32,
                max_buffered_bytes: src.size("limits.max_buffered_bytes", 16 << 30)?,
            },
            priority: crate::fairshare::PriorityConfig::from_table(&table, origin)?,
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
        Ok((settings, warnings))
    }

    /// What differs between two settings, one line per key, for the log after a reload.
    pub(crate) fn changes(&self, new: &Settings) -> Vec<String> {
        let mut out = Vec::new();
        let mut diff = |key: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{key}: {a} -> {b}"));
            }
        };
        diff("socket", show(&self.socket), show(&new.socket));
        diff("state_dir", show(&self.state_dir), show(&new.state_dir));
        diff("topology", show(&self.topology), show(&new.topology));
        diff(
            "policy",
            format!("{:?}", self.policy.kind),
            format!("{:?}", new.policy.kind),
        );
        diff(
            "backfill_window",
            self.policy.window.to_string(),
            new.policy.window.to_string(),
        );
        diff(
            "queue_order",
            self.policy.order.to_string(),
            new.policy.order.to_string(),
        );
        diff(
            "aging_pct",
            self.policy.aging_pct.to_string(),
            new.policy.aging_pct.to_string(),
        );
        let d = |d: Duration| humantime::format_duration(d).to_string();
        diff(
            "default_time_limit",
            d(self.default_time_limit),
            d(new.default_time_limit),
        );
        diff(
            "max_time_limit",
            d(self.max_time_limit),
            d(new.max_time_limit),
        );
        diff("kill_grace", d(self.kill_grace), d(new.kill_grace));
        diff("keep_finished", d(self.keep_finished), d(new.keep_finished));
        diff(
            "kill_invalid_depend",
            self.kill_invalid_depend.to_string(),
            new.kill_invalid_depend.to_string(),
        );
        diff(
            "metrics_listen",
            format!("{:?}", self.metrics_listen),
            format!("{:?}", new.metrics_listen),
        );
        diff(
            "default_cpus_per_leaf",
            self.default_cpus_per_leaf.to_string(),
            new.default_cpus_per_leaf.to_string(),
        );
        diff(
            "nccl_mode",
            format!("{:?}", self.nccl),
            format!("{:?}", new.nccl),
        );
        diff(
            "slurm_aliases",
            self.slurm_aliases.to_string(),
            new.slurm_aliases.to_string(),
        );
        diff(
            "srun_in_jobs",
            format!("{:?}", self.srun_in_jobs),
            format!("{:?}", new.srun_in_jobs),
        );
        diff(
            "torchrun_in_jobs",
            self.torchrun_in_jobs.to_string(),
            new.torchrun_in_jobs.to_string(),
        );
        diff(
            "placement",
            self.placement.to_string(),
            new.placement.to_string(),
        );
        diff(
            "round_up_fractions",
            self.round_up_fractions.to_string(),
            new.round_up_fractions.to_string(),
        );
        diff(
            "limits",
            format!("{:?}", self.limits),
            format!("{:?}", new.limits),
        );
        diff(
            "priority, fairshare and qos",
            format!("{:?}", self.priority),
            format!("{:?}", new.priority),
        );
        out
    }
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

fn parse(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })
}

/// Lay `user` over `base`: known keys replace, tables merge, unknown keys become warnings.
fn merge(
    base: &mut toml::Table,
    user: toml::Table,
    prefix: &str,
    origin: &str,
    warnings: &mut Vec<String>,
    from_file: &mut BTreeSet<String>,
) {
    for (k, v) in user {
        let full = format!("{prefix}{k}");
        let open = crate::fairshare::OPEN_TABLES.contains(&prefix.trim_end_matches('.'));
        match (base.get_mut(&k), v) {
            // A site-named entry (a user, an account, a QOS) replaces the default's whole.
            (_, v) if open => {
                from_file.insert(full);
                base.insert(k, v);
            }
            (None, _) => warnings.push(format!("{origin}: unknown key `{full}` is ignored")),
            (Some(toml::Value::Table(b)), toml::Value::Table(u)) => {
                merge(b, u, &format!("{full}."), origin, warnings, from_file)
            }
            (Some(toml::Value::Table(_)), _) => warnings.push(format!(
                "{origin}: `{full}` must be a table ([{full}]); ignored"
            )),
            (Some(slot), v) => {
                from_file.insert(full);
                *slot = v;
            }
        }
    }
}

/// Typed lookups into the merged table, with errors naming the key's origin.
struct Source<'a> {
    table: &'a toml::Table,
    origin: &'a str,
    from_file: &'a BTreeSet<String>,
}

impl Source<'_> {
    fn get(&self, key: &str) -> &toml::Value {
        let mut t = self.table;
        let mut parts = key.split('.').peekable();
        while let Some(p) = parts.next() {
            let v = t
                .get(p)
                .unwrap_or_else(|| panic!("etc/flexd.toml documents `{key}`"));
            if parts.peek().is_none() {
                return v;
            }
            t = v
                .as_table()
                .unwrap_or_else(|| panic!("etc/flexd.toml: `{p}` is a table"));
        }
        unreachable!("keys are not empty")
    }

    fn bad(&self, key: &str, value: &str, message: &str) -> ConfigError {
        let origin = if self.from_file.contains(key) {
            self.origin
        } else {
            BUILT_IN
        };
        ConfigError::Value {
            origin: origin.to_string(),
            key: key.to_string(),
            value: value.to_string(),
            message: message.to_string(),
        }
    }

    fn string(&self, key: &str) -> Result<String, ConfigError> {
        match self.get(key) {
            toml::Value::String(s) => Ok(s.clone()),
            v => Err(self.bad(key, &v.to_string(), "must be a string")),
        }
    }

    fn parsed<T>(
        &self,
        key: &str,
        f: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let s = self.string(key)?;
        f(&s).map_err(|m| self.bad(key, &format!("{s:?}"), &m))
    }

    fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        match self.get(key) {
            toml::Value::Boolean(b) => Ok(*b),
            v => Err(self.bad(key, &v.to_string(), "must be true or false")),
        }
    }

    fn int(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        match self.get(key) {
            toml::Value::Integer(i) if (min..=max).contains(i) => Ok(*i),
            toml::Value::Integer(i) => Err(self.bad(
                key,
                &i.to_string(),
                &format!("must be between {min} and {max}"),
            )),
            v => Err(self.bad(key, &v.to_string(), "must be an integer")),
        }
    }

    fn duration(&self, key: &str, max: Duration) -> Result<Duration, ConfigError> {
        let d = self.parsed(key, |s| {
            humantime::parse_duration(s).map_err(|e| format!("not a duration ({e})"))
        })?;
        if d.is_zero() || d > max {
            return Err(self.bad(
                key,
                &format!("{:?}", humantime::format_duration(d).to_string()),
                &format!(
                    "must be more than 0 and at most {}",
                    humantime::format_duration(max)
                ),
            ));
        }
        Ok(d)
    }

    fn size(&self, key: &str, max: u64) -> Result<u64, ConfigError> {
        let v = self.get(key);
        let n = match size_value(v) {
            Ok(Some(n)) => n,
            Ok(None) => {
                return Err(self.bad(
                    key,
                    &v.to_string(),
                    "must be a number of bytes or a size such as \"4 MiB\"",
                ))
            }
            Err(m) => return Err(self.bad(key, &v.to_string(), &m)),
        };
        if n == 0 || n > max {
            return Err(self.bad(
                key,
                &v.to_string(),
                &format!("must be more than 0 and at most {max} bytes"),
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_sched::{Order, PolicyKind};

    #[test]
    fn compiled_in_defaults_are_the_documented_ones() {
        let s = Settings::defaults();
        assert_eq!(s.socket, PathBuf::from("/tmp/flexd.sock"));
        assert_eq!(s.state_dir, PathBuf::from("flex-state"));
        assert_eq!(s.topology, PathBuf::from("a100-40gb-x2.toml"));
        // EASY with the adaptive order: docs/flexsim.md's sweep chose it.
        let shipped = Policy {
            order: Order::Adaptive,
            ..Policy::backfill(14)
        };
        assert_eq!(s.policy, shipped);
        assert_eq!(s.kill_grace, Duration::from_secs(30));
        assert_eq!(s.default_cpus_per_leaf, 1);
        assert_eq!(s.nccl, NcclMode::Upstream);
        assert_eq!(s.placement, Strategy::BestFit);
        assert_eq!(s.limits.max_script_bytes, 4 << 20);
        assert_eq!(s.limits.max_frame_bytes, 16 << 20);
    }

    #[test]
    fn a_file_overrides_keys_and_unknown_keys_warn() {
        let file = "policy = \"fifo\"\nbogus = 1\nnccl_mode = \"patched\"\n\
                    nccl_lib_dir = \"/x\"\n[limits]\nmax_queued_per_user = 5\nwhat = 2\n";
        let (s, w) =
            Settings::from_text(Some(("/etc/f.toml", file)), &Overrides::default()).unwrap();
        assert_eq!(s.policy.kind, PolicyKind::Fifo);
        assert_eq!(s.limits.max_queued_per_user, 5);
        assert_eq!(
            s.nccl,
            NcclMode::Patched {
                lib_dir: "/x".into()
            }
        );
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("/etc/f.toml") && w[0].contains("`bogus`"));
        assert!(w[1].contains("`limits.what`"));
    }

    /// The same text gives flexsim --flexd-config the same policy
    /// (flexd/sim/src/cli/flexd_config.rs tests this very file text): both go through the core's
    /// PolicyKeys.
    #[test]
    fn policy_keys_conservative_adaptive() {
        let file = "policy = \"conservative\"\nbackfill_window = 0\nqueue_order = \"adaptive\"\naging_pct = 50\n";
        let (s, w) = Settings::from_text(Some(("f", file)), &Overrides::default()).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            s.policy,
            Policy {
                kind: PolicyKind::Conservative,
                window: 0,
                order: Order::Adaptive,
                aging_pct: 50,
            }
        );
        let e = Settings::from_text(
            Some(("f", "queue_order = \"random\"")),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("queue_order") && e.contains("unknown order"),
            "{e}"
        );
    }

    #[test]
    fn flags_override_the_file() {
        let o = Overrides {
            socket: Some("/s".into()),
            ..Overrides::default()
        };
        let (s, _) = Settings::from_text(Some(("f", "socket = \"/t\"")), &o).unwrap();
        assert_eq!(s.socket, PathBuf::from("/s"));
    }

    #[test]
    fn bad_values_name_key_value_and_file() {
        let cases = [
            ("kill_grace = \"soon\"", "kill_grace"),
            ("kill_grace = \"2h\"", "at most 1h"),
            ("backfill_window = -1", "between 0 and 1000000"),
            ("policy = \"lottery\"", "unknown policy"),
            ("placement = \"random\"", "memory-optimized"),
            (
                "[limits]\nmax_frame_bytes = \"2 GiB\"",
                "limits.max_frame_bytes",
            ),
            ("slurm_aliases = \"yes\"", "true or false"),
            ("default_time_limit = \"400days\"", "default_time_limit"),
        ];
        for (text, want) in cases {
            let e = Settings::from_text(Some(("/c.toml", text)), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("/c.toml") && e.contains(want), "{text}: {e}");
        }
        let e = Settings::from_text(Some(("/c.toml", "x = ")), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid TOML"), "{e}");
    }

    #[test]
    fn metrics_listen_is_off_by_default_and_loopback_unless_allowed() {
        let load = |text: &str| Settings::from_text(Some(("/m.toml", text)), &Overrides::default());
        assert_eq!(Settings::defaults().metrics_listen, None);
        let (s, _) = load("metrics_listen = \"127.0.0.1:9464\"").unwrap();
        assert_eq!(s.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        let (s, _) = load("metrics_listen = \"[::1]:9464\"").unwrap();
        assert!(s.metrics_listen.unwrap().ip().is_loopback());
        let e = load("metrics_listen = \"0.0.0.0:9464\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metrics_listen") && e.contains("metrics_allow_remote"),
            "{e}"
        );
        let (s, _) =
            load("metrics_listen = \"0.0.0.0:9464\"\nmetrics_allow_remote = true").unwrap();
        assert_eq!(s.metrics_listen, Some("0.0.0.0:9464".parse().unwrap()));
        let e = load("metrics_listen = \"localhost\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("127.0.0.1:9464"), "{e}");
    }

    #[test]
    fn sizes_parse() {
        use flex_proto::config::parse_size;
        assert_eq!(parse_size("4 MiB"), Ok(4 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("4 parsecs").is_err());
    }

    #[test]
    fn changes_list_what_a_reload_changed() {
        let a = Settings::defaults();
        let mut b = a.clone();
        b.policy = Policy {
            order: a.policy.order,
            ..Policy::fifo()
        };
        b.kill_grace = Duration::from_secs(5);
        let c = a.changes(&b);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0].starts_with("policy: Backfill -> Fifo"));
    }
}

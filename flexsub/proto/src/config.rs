//! The keys of flexd's configuration that the commands read (where the socket is, the script
//! limits flexsub checks before it sends a job), and the one parser of sizes as flexd.toml
//! writes them, shared with flexd's own reader of the file.

use std::path::{Path, PathBuf};

/// The configuration every host has when `FLEX_CONFIG` names none.
pub const SYSTEM_CONFIG: &str = "/etc/flex/flexd.toml";

/// flexd's commented default configuration, compiled in: its `socket` key is the default.
pub const DEFAULT_CONFIG: &str = include_str!("../../../etc/flexd.toml");

/// A configuration that cannot be read or holds a bad value; the message names the file and key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The socket of the compiled-in default configuration, and its script limits: the values
/// etc/flexd.toml sets (a unit test checks that they agree), kept here so that a command does
/// not parse the whole commented file each time it starts.
pub const DEFAULT_SOCKET: &str = "/tmp/flexd.sock";
const DEFAULT_LIMITS: Limits = Limits {
    max_script_bytes: 4 << 20,
    max_directives: 1000,
    default_time_limit_s: 3600,
    sendmail: false,
};

fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_SOCKET)
}

fn parse_table(text: &str, origin: &Path) -> Result<toml::Table, ConfigError> {
    text.parse()
        .map_err(|e| ConfigError(format!("{}: invalid TOML: {e}", origin.display())))
}

/// The `socket` key at the top level of a flexd configuration, if it has one.
fn socket_key(text: &str, origin: &Path) -> Result<Option<PathBuf>, ConfigError> {
    match parse_table(text, origin)?.get("socket") {
        None => Ok(None),
        Some(toml::Value::String(s)) if !s.is_empty() => Ok(Some(PathBuf::from(s))),
        Some(_) => Err(ConfigError(format!(
            "{}: `socket` must be a non-empty path",
            origin.display()
        ))),
    }
}

/// Where flexd listens: `FLEX_SOCKET`; else the `socket` key of the file `FLEX_CONFIG` names,
/// or of /etc/flex/flexd.toml when that exists; else the compiled-in default. `get` reads the
/// environment.
pub fn socket_path(get: impl Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    if let Some(s) = get("FLEX_SOCKET").filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(s));
    }
    if let Some((path, text)) = config_file(&get)? {
        if let Some(socket) = socket_key(&text, &path)? {
            return Ok(socket);
        }
    }
    Ok(default_socket())
}

/// The `flexd_user` of the configuration [`socket_path`] reads ("" when none is set): the
/// user besides root whose flexd the commands talk to.
pub fn flexd_user(get: impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let mut user = String::new();
    let texts = [(PathBuf::from("etc/flexd.toml"), DEFAULT_CONFIG.to_string())]
        .into_iter()
        .chain(config_file(&get)?);
    for (path, text) in texts {
        match parse_table(&text, &path)?.get("flexd_user") {
            None => {}
            Some(toml::Value::String(s)) => user = s.clone(),
            Some(v) => {
                return Err(ConfigError(format!(
                    "{}: flexd_user = {v} must be a user name",
                    path.display()
                )))
            }
        }
    }
    Ok(user)
}

/// flexd's configuration file as the commands find it: `FLEX_CONFIG`, else
/// /etc/flex/flexd.toml when that exists. Its path and text.
fn config_file(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<(PathBuf, String)>, ConfigError> {
    let config = match get("FLEX_CONFIG").filter(|s| !s.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from(SYSTEM_CONFIG)).filter(|p| p.exists()),
    };
    let Some(path) = config else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ConfigError(format!(
            "cannot read flexd's configuration {}: {e}",
            path.display()
        ))
    })?;
    Ok(Some((path, text)))
}

/// The limits of flexd's `[limits]` table that flexsub checks before it sends a job (flexd
/// checks the script's size again; the directives never reach it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_script_bytes: u64,
    pub max_directives: u32,
    /// `default_time_limit` (top level): what a job without `--time` gets, for flexsub's note.
    pub default_time_limit_s: u64,
    /// Whether `sendmail` (top level) names a program: without one, flexsub warns that
    /// `--mail-type` sends nothing.
    pub sendmail: bool,
}

/// The limits of the configuration [`socket_path`] reads, over the compiled-in defaults.
pub fn limits(get: impl Fn(&str) -> Option<String>) -> Result<Limits, ConfigError> {
    let mut l = DEFAULT_LIMITS;
    if let Some((path, text)) = config_file(&get)? {
        limits_in(&text, &path, &mut l)?;
    }
    Ok(l)
}

/// Take the limits a configuration sets into `l`.
fn limits_in(text: &str, origin: &Path, l: &mut Limits) -> Result<(), ConfigError> {
    let table = parse_table(text, origin)?;
    if let Some(v) = table.get("default_time_limit") {
        l.default_time_limit_s = v
            .as_str()
            .and_then(|s| humantime::parse_duration(s).ok())
            .map(|d| d.as_secs())
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                ConfigError(format!(
                    "{}: default_time_limit = {v} is not valid",
                    origin.display()
                ))
            })?;
    }
    l.sendmail = table
        .get("sendmail")
        .and_then(|v| v.as_str())
        .is_some_and(|s| !s.trim().is_empty());
    let Some(limits) = table.get("limits").and_then(|v| v.as_table()) else {
        return Ok(());
    };
    let bad = |key: &str, v: &toml::Value| {
        ConfigError(format!(
            "{}: limits.{key} = {v} is not valid",
            origin.display()
        ))
    };
    if let Some(v) = limits.get("max_script_bytes") {
        l.max_script_bytes = size_value(v)
            .ok()
            .flatten()
            .ok_or_else(|| bad("max_script_bytes", v))?;
    }
    if let Some(v) = limits.get("max_directives") {
        l.max_directives = v
            .as_integer()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| bad("max_directives", v))?;
    }
    Ok(())
}

/// A size value of flexd.toml: an integer (bytes) or a string [`parse_size`] reads. None for
/// a value of another type or a negative integer.
pub fn size_value(v: &toml::Value) -> Result<Option<u64>, String> {
    match v {
        toml::Value::Integer(i) => Ok(u64::try_from(*i).ok()),
        toml::Value::String(s) => parse_size(s).map(Some),
        _ => Ok(None),
    }
}

/// A size as flexd's configuration writes it: "4 MiB", "512KiB", "1GB", "100" (bytes). KB, MB
/// and GB are powers of 1000; KiB, MiB and GiB powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (a number and a unit such as MiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1000 * 1000,
        "mib" => 1 << 20,
        "g" | "gb" => 1000 * 1000 * 1000,
        "gib" => 1 << 30,
        u => {
            return Err(format!(
                "unknown size unit {u:?} (B, KB, KiB, MB, MiB, GB, GiB)"
            ))
        }
    };
    let n = (num * mult as f64).round();
    if !n.is_finite() || n >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(env: &[(&str, &str)]) -> Result<PathBuf, ConfigError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        socket_path(|k| env.get(k).cloned())
    }

    #[test]
    fn limits_come_from_the_config_over_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("flexd.toml");
        let get = |k: &str| (k == "FLEX_CONFIG").then(|| cfg.to_str().unwrap().to_string());
        std::fs::write(&cfg, "socket = \"/x\"\n").unwrap();
        let d = limits(get).unwrap();
        assert_eq!((d.max_script_bytes, d.max_directives), (4 << 20, 1000));
        std::fs::write(&cfg, "[limits]\nmax_script_bytes = \"1.5 KB\"\n").unwrap();
        assert_eq!(limits(get).unwrap().max_script_bytes, 1500);
        std::fs::write(
            &cfg,
            "[limits]\nmax_script_bytes = 70\nmax_directives = 3\n",
        )
        .unwrap();
        assert_eq!(
            limits(get).unwrap(),
            Limits {
                max_script_bytes: 70,
                max_directives: 3,
                default_time_limit_s: 3600,
                sendmail: false,
            }
        );
        std::fs::write(&cfg, "sendmail = \"/usr/sbin/sendmail\"\n").unwrap();
        assert!(limits(get).unwrap().sendmail);
        std::fs::write(&cfg, "[limits]\nmax_directives = \"many\"\n").unwrap();
        let e = limits(get).unwrap_err().to_string();
        assert!(e.contains("limits.max_directives = \"many\""), "{e}");
    }

    #[test]
    fn socket_comes_from_env_then_config_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("flexd.toml");
        std::fs::write(
            &cfg,
            "# comment\nsocket = \"/run/x.sock\"\n[limits]\nsocket = 3\n",
        )
        .unwrap();
        let cfg_s = cfg.to_str().unwrap();
        assert_eq!(
            resolve(&[("FLEX_SOCKET", "/a.sock"), ("FLEX_CONFIG", cfg_s)]).unwrap(),
            PathBuf::from("/a.sock")
        );
        assert_eq!(
            resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap(),
            PathBuf::from("/run/x.sock")
        );

        std::fs::write(&cfg, "[other]\nx = 1\n").unwrap();
        assert_eq!(
            resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap(),
            default_socket()
        );

        std::fs::write(&cfg, "socket = [").unwrap();
        let e = resolve(&[("FLEX_CONFIG", cfg_s)]).unwrap_err().to_string();
        assert!(
            e.contains("flexd.toml") && e.contains("invalid TOML"),
            "{e}"
        );

        let missing = dir.path().join("none.toml");
        let e = resolve(&[("FLEX_CONFIG", missing.to_str().unwrap())]).unwrap_err();
        assert!(e.to_string().contains("none.toml"), "{e}");
    }

    #[test]
    fn the_defaults_are_what_etc_flexd_toml_says() {
        let mut l = Limits {
            max_script_bytes: 0,
            max_directives: 0,
            default_time_limit_s: 0,
            sendmail: false,
        };
        limits_in(DEFAULT_CONFIG, Path::new("etc/flexd.toml"), &mut l).unwrap();
        assert_eq!(l, DEFAULT_LIMITS);
    }

    #[test]
    fn the_compiled_in_configuration_names_the_socket() {
        assert_eq!(
            socket_key(DEFAULT_CONFIG, Path::new("etc/flexd.toml")).unwrap(),
            Some(PathBuf::from(DEFAULT_SOCKET))
        );
    }
}

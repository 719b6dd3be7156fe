//! The priority keys of flexd.toml (`[priority]`, `[fairshare]`, `default_qos`, `[qos.NAME]`):
//! what the multifactor priority weighs, who holds how many shares, and each QOS with its
//! limits. The arithmetic is the core's ([`flex_sched::fairshare`]); flexd's state applies it.

use crate::config::ConfigError;
use flex_sched::fairshare::Weights;
use std::collections::BTreeMap;

/// Tables whose keys are names chosen by the site (users, accounts, QOS): their entries are
/// merged one by one and never reported as unknown keys.
pub(crate) const OPEN_TABLES: [&str; 5] = [
    "aliases",
    "fairshare.users",
    "fairshare.accounts",
    "fairshare.account_limits",
    "qos",
];

/// Largest weight, QOS priority or share.
const MAX: i64 = 1_000_000;

/// One QOS as configured; 0 is "no limit".
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Qos {
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub max_running_leaves_per_user: u32,
    #[serde(default)]
    pub max_running_jobs_per_user: u32,
    #[serde(default)]
    pub max_submit_jobs_per_user: u32,
    /// Seconds; 0 for flexd's own max_time_limit.
    #[serde(default, deserialize_with = "duration_s")]
    pub max_time_limit: u64,
    /// Who may use it; empty: everyone.
    #[serde(default)]
    pub users: Vec<String>,
}

impl Qos {
    pub fn allows(&self, user: &str) -> bool {
        self.users.is_empty() || self.users.iter().any(|u| u == user)
    }
}

fn duration_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s: String = serde::Deserialize::deserialize(d)?;
    humantime::parse_duration(&s)
        .map(|d| d.as_secs())
        .map_err(|e| serde::de::Error::custom(format!("{s:?} is not a duration ({e})")))
}

/// Everything the multifactor priority and the QOS limits are configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct PriorityConfig {
    pub weights: Weights,
    /// Usage halves every this many seconds.
    pub half_life_s: u64,
    pub default_shares: u32,
    pub user_shares: BTreeMap<String, u32>,
    pub account_shares: BTreeMap<String, u32>,
    /// Most leaves an account's running jobs hold together.
    pub account_limits: BTreeMap<String, u32>,
    pub default_qos: String,
    pub qos: BTreeMap<String, Qos>,
}

impl PriorityConfig {
    pub fn user_shares(&self, user: &str) -> u32 {
        self.user_shares
            .get(user)
            .copied()
            .unwrap_or(self.default_shares)
    }

    pub fn account_shares(&self, account: &str) -> u32 {
        self.account_shares
            .get(account)
            .copied()
            .unwrap_or(self.default_shares)
    }

    /// The largest QOS priority (what the QOS factor divides by).
    pub fn max_qos_priority(&self) -> u32 {
        self.qos.values().map(|q| q.priority).max().unwrap_or(0)
    }

    /// The QOS a submission gets, or why it may not have it (with its time limit).
    pub fn qos_for(
        &self,
        asked: Option<&str>,
        user: &str,
        time_limit_s: u64,
    ) -> Result<(&str, &Qos), String> {
        let name = asked.unwrap_or(&self.default_qos);
        let (name, q) = self.qos.get_key_value(name).ok_or_else(|| {
            let known: Vec<&str> = self.qos.keys().map(String::as_str).collect();
            format!("invalid qos {name:?} (known: {})", known.join(", "))
        })?;
        if !q.allows(user) {
            return Err(format!("user {user} may not use qos {name}"));
        }
        if q.max_time_limit > 0 && time_limit_s > q.max_time_limit {
            return Err(format!(
                "time limit {}s is over qos {name}'s max_time_limit {}s (QOSMaxWallDurationPerJobLimit)",
                time_limit_s, q.max_time_limit
            ));
        }
        Ok((name, q))
    }

    /// Read the keys from the merged table (defaults under the file).
    pub(crate) fn from_table(t: &toml::Table, origin: &str) -> Result<Self, ConfigError> {
        let bad = |key: &str, value: &toml::Value, message: &str| ConfigError::Value {
            origin: origin.to_string(),
            key: key.to_string(),
            value: crate::config::shown(value),
            message: message.to_string(),
        };
        let get = |key: &str| lookup(t, key);
        let int = |key: &str, min: i64| -> Result<u32, ConfigError> {
            match get(key) {
                toml::Value::Integer(i) if (min..=MAX).contains(i) => Ok(*i as u32),
                v => Err(bad(
                    key,
                    v,
                    &format!("must be an integer from {min} to {MAX}"),
                )),
            }
        };
        let dur = |key: &str| -> Result<u64, ConfigError> {
            let v = get(key);
            v.as_str()
                .and_then(|s| humantime::parse_duration(s).ok())
                .map(|d| d.as_secs())
                .ok_or_else(|| bad(key, v, "must be a duration such as \"7days\""))
        };
        let names = |key: &str, min: i64| -> Result<BTreeMap<String, u32>, ConfigError> {
            let table = get(key).as_table().expect("a table in etc/flexd.toml");
            table
                .iter()
                .map(|(k, _)| Ok((k.clone(), int(&format!("{key}.{k}"), min)?)))
                .collect()
        };
        let mut qos = BTreeMap::new();
        for (name, v) in get("qos").as_table().expect("[qos] in etc/flexd.toml") {
            let q: Qos = v
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| bad(&format!("qos.{name}"), v, e.message()))?;
            if i64::from(q.priority) > MAX {
                return Err(bad(
                    &format!("qos.{name}.priority"),
                    &toml::Value::Integer(q.priority.into()),
                    "too large",
                ));
            }
            qos.insert(name.clone(), q);
        }
        let default_qos = match get("priority.default_qos") {
            toml::Value::String(s) if qos.contains_key(s) => s.clone(),
            v => {
                return Err(bad(
                    "priority.default_qos",
                    v,
                    "must name a [qos.NAME] table",
                ))
            }
        };
        Ok(PriorityConfig {
            weights: Weights {
                age: int("priority.weight_age", 0)?,
                fairshare: int("priority.weight_fairshare", 0)?,
                job_size: int("priority.weight_job_size", 0)?,
                qos: int("priority.weight_qos", 0)?,
                max_age_s: dur("priority.max_age")?,
            },
            half_life_s: dur("fairshare.half_life")?,
            default_shares: int("fairshare.default_shares", 1)?,
            user_shares: names("fairshare.users", 0)?,
            account_shares: names("fairshare.accounts", 0)?,
            account_limits: names("fairshare.account_limits", 0)?,
            default_qos,
            qos,
        })
    }
}

/// A key documented in etc/flexd.toml (so always present in the merged table).
fn lookup<'a>(t: &'a toml::Table, key: &str) -> &'a toml::Value {
    let mut parts = key.split('.').peekable();
    let mut t = t;
    loop {
        let p = parts.next().expect("keys are not empty");
        let v = t
            .get(p)
            .unwrap_or_else(|| panic!("etc/flexd.toml documents `{key}`"));
        if parts.peek().is_none() {
            return v;
        }
        t = v.as_table().expect("a table in etc/flexd.toml");
    }
}

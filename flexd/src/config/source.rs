//! Reading the TOML: parsing a file, laying it over the defaults, and typed lookups into the
//! result.

use super::{ConfigError, BUILT_IN};
use flex_proto::config::size_value;
use std::collections::BTreeSet;
use std::time::Duration;

pub(super) fn parse(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })
}

/// Lay `user` over `base`: known keys replace, tables merge, unknown keys become warnings.
pub(super) fn merge(
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
pub(super) struct Source<'a> {
    pub(super) table: &'a toml::Table,
    pub(super) origin: &'a str,
    pub(super) from_file: &'a BTreeSet<String>,
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

    pub(super) fn bad(&self, key: &str, value: &str, message: &str) -> ConfigError {
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

    pub(super) fn string(&self, key: &str) -> Result<String, ConfigError> {
        match self.get(key) {
            toml::Value::String(s) => Ok(s.clone()),
            v => Err(self.bad(key, &shown(v), "must be a string")),
        }
    }

    pub(super) fn parsed<T>(
        &self,
        key: &str,
        f: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let s = self.string(key)?;
        f(&s).map_err(|m| self.bad(key, &format!("{s:?}"), &m))
    }

    pub(super) fn bool(&self, key: &str) -> Result<bool, ConfigError> {
        match self.get(key) {
            toml::Value::Boolean(b) => Ok(*b),
            v => Err(self.bad(key, &shown(v), "must be true or false")),
        }
    }

    pub(super) fn int(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        match self.get(key) {
            toml::Value::Integer(i) if (min..=max).contains(i) => Ok(*i),
            toml::Value::Integer(i) => Err(self.bad(
                key,
                &i.to_string(),
                &format!("must be between {min} and {max}"),
            )),
            v => Err(self.bad(key, &shown(v), "must be an integer")),
        }
    }

    pub(super) fn duration(&self, key: &str, max: Duration) -> Result<Duration, ConfigError> {
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

    /// A size that may be 0, or a word from `words` (returned as Err(word)).
    pub(super) fn size_or_word(
        &self,
        key: &str,
        max: u64,
        words: &[&'static str],
    ) -> Result<Result<u64, &'static str>, ConfigError> {
        let v = self.get(key);
        if let Some(w) = v.as_str().and_then(|s| words.iter().find(|w| **w == s)) {
            return Ok(Err(w));
        }
        let words = words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" or ");
        match size_value(v) {
            Ok(Some(n)) if n <= max => Ok(Ok(n)),
            Ok(Some(_)) => Err(self.bad(key, &shown(v), &format!("must be at most {max} bytes"))),
            Ok(None) => Err(self.bad(
                key,
                &shown(v),
                &format!("must be {words}, a number of bytes or a size such as \"4 GiB\""),
            )),
            Err(m) => Err(self.bad(key, &shown(v), &m)),
        }
    }

    pub(super) fn size(&self, key: &str, max: u64) -> Result<u64, ConfigError> {
        let v = self.get(key);
        let n = match size_value(v) {
            Ok(Some(n)) => n,
            Ok(None) => {
                return Err(self.bad(
                    key,
                    &shown(v),
                    "must be a number of bytes or a size such as \"4 MiB\"",
                ))
            }
            Err(m) => return Err(self.bad(key, &shown(v), &m)),
        };
        if n == 0 || n > max {
            return Err(self.bad(
                key,
                &shown(v),
                &format!("must be more than 0 and at most {max} bytes"),
            ));
        }
        Ok(n)
    }
}

/// A value as an error shows it: strings quoted and escaped as Rust does, the rest as TOML
/// writes it. (toml's own writer of strings overflows a counter on 256 quotes in a row.)
pub(crate) fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(shown).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k:?} = {}", shown(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        other => other.to_string(),
    }
}

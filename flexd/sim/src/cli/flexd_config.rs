//! `--flexd-config`: the scheduling policy a flexd.toml gives flexd.

use crate::SimError;
use flex_sched::{Policy, PolicyKeys};
use std::path::Path;

/// The policy a flexd.toml gives flexd: its policy keys over the compiled-in etc/flexd.toml,
/// through the core's [`PolicyKeys`], as flexd reads them.
pub fn flexd_policy(path: &Path) -> Result<Policy, SimError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SimError::Config(format!("cannot read {}: {e}", path.display())))?;
    policy_from_flexd_toml(&text, &path.display().to_string()).map_err(SimError::Config)
}

/// flexd's own defaults, for the keys a site file leaves out.
const FLEXD_DEFAULTS: &str = include_str!("../../../../etc/flexd.toml");

/// [`flexd_policy`] on a file's text; `origin` names it in errors.
pub fn policy_from_flexd_toml(text: &str, origin: &str) -> Result<Policy, String> {
    let parse = |t: &str, o: &str| {
        t.parse::<toml::Table>()
            .map_err(|e| format!("{o}: {}", e.to_string().trim_end()))
    };
    let defaults = parse(FLEXD_DEFAULTS, "etc/flexd.toml")?;
    let file = parse(text, origin)?;
    let get = |k: &str| file.get(k).or_else(|| defaults.get(k));
    let string = |k: &'static str| match get(k) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(format!("{origin}: {k} = {v}: must be a string")),
    };
    let int = |k: &'static str| match get(k) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) => Ok(Some(*i)),
        Some(v) => Err(format!("{origin}: {k} = {v}: must be an integer")),
    };
    PolicyKeys {
        policy: string("policy")?,
        backfill_window: int("backfill_window")?,
        queue_order: string("queue_order")?,
        aging_pct: int("aging_pct")?,
    }
    .policy()
    .map_err(|(k, why)| format!("{origin}: {k}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_policy;
    use flex_sched::{Order, PolicyKind};

    /// flexd's compiled-in defaults and a site file give the policies flexd's config tests
    /// assert for the same text (flexd/src/config.rs): both go through the core's PolicyKeys.
    #[test]
    fn flexd_config_gives_flexds_policy() {
        let shipped = Policy {
            order: flex_sched::Order::Adaptive,
            ..Policy::backfill(14)
        };
        assert_eq!(policy_from_flexd_toml("", "f").unwrap(), shipped);
        let file = "policy = \"conservative\"\nbackfill_window = 0\nqueue_order = \"adaptive\"\naging_pct = 50\n";
        assert_eq!(
            policy_from_flexd_toml(file, "f").unwrap(),
            Policy {
                kind: PolicyKind::Conservative,
                window: 0,
                order: Order::Adaptive,
                aging_pct: 50,
            }
        );
        // flexd's other keys are not errors here
        assert!(
            policy_from_flexd_toml("nccl_mode = \"none\"\n[limits]\nmax_directives = 3", "f")
                .is_ok()
        );
        let e = policy_from_flexd_toml("backfill_window = -1", "site.toml").unwrap_err();
        assert_eq!(
            e,
            "site.toml: backfill_window: -1 must be between 0 and 1000000"
        );
        assert!(policy_from_flexd_toml("policy = 3", "f")
            .unwrap_err()
            .contains("must be a string"));
        assert_eq!(
            parse_policy("backfill:shortest").unwrap(),
            Policy::backfill(14).ordered(Order::Shortest)
        );
        assert!(parse_policy("lottery").is_err());
    }
}

//! The execution-time model: a job's run time under an allocation model, from its one-to-one
//! duration. The parameters, their meaning and their sources are in `etc/flexsim.toml`, which
//! is compiled in as the defaults.

use super::models::ModelKind;
use serde::{Deserialize, Serialize};

/// The commented defaults (etc/flexsim.toml).
pub const DEFAULT_TOML: &str = include_str!("../../../etc/flexsim.toml");

/// Run-time factors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecModel {
    /// Calibrated interference factor (Flex-MIG §5.2: 1.06).
    pub interference: f64,
    /// Models the interference factor applies to.
    pub interference_models: Vec<ModelKind>,
    pub one_to_many: OneToMany,
}

/// Flex-MIG's one-to-many overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneToMany {
    pub even_overhead: f64,
    pub concentration_overhead: f64,
    pub max_overhead: f64,
}

impl Default for ExecModel {
    fn default() -> Self {
        Self::from_toml("", "defaults").expect("the compiled-in etc/flexsim.toml is valid")
    }
}

impl ExecModel {
    /// The defaults overlaid with `text` (a TOML document); `origin` names it in messages.
    /// Unknown keys are reported with a warning and ignored.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, String> {
        let parse = |t: &str, o: &str| {
            t.parse::<toml::Table>()
                .map_err(|e| format!("{o}: {}", e.to_string().trim_end()))
        };
        let mut merged = parse(DEFAULT_TOML, "etc/flexsim.toml")?;
        for (k, v) in parse(text, origin)? {
            match (merged.get_mut(&k), v) {
                (Some(toml::Value::Table(base)), toml::Value::Table(over)) => {
                    for (k2, v2) in over {
                        if base.contains_key(&k2) {
                            base.insert(k2, v2);
                        } else {
                            tracing::warn!("{origin}: ignoring unknown key {k}.{k2}");
                        }
                    }
                }
                (Some(slot), v) => *slot = v,
                (None, _) => tracing::warn!("{origin}: ignoring unknown key {k}"),
            }
        }
        let m: ExecModel = toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| format!("{origin}: {}", e.message()))?;
        m.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), String> {
        if !(1.0..=2.0).contains(&self.interference) {
            return Err(format!(
                "interference {} must be between 1.0 and 2.0",
                self.interference
            ));
        }
        let o = &self.one_to_many;
        for (name, v) in [
            ("even_overhead", o.even_overhead),
            ("concentration_overhead", o.concentration_overhead),
            ("max_overhead", o.max_overhead),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!(
                    "one_to_many.{name} {v} must be between 0.0 and 1.0"
                ));
            }
        }
        Ok(())
    }

    /// The interference factor of a model.
    pub fn interference(&self, model: ModelKind) -> f64 {
        if self.interference_models.contains(&model) {
            self.interference
        } else {
            1.0
        }
    }

    /// The one-to-many factor (1 + overhead) of a job with `per_gpu[i]` leaves on the host's
    /// GPUs (`host_gpus` of them).
    pub fn one_to_many(&self, per_gpu: &[u32], host_gpus: usize) -> f64 {
        let n: u32 = per_gpu.iter().sum();
        if n <= 1 {
            return 1.0;
        }
        let c = per_gpu.iter().copied().max().unwrap_or(0);
        let c_min = n.div_ceil(host_gpus.max(1) as u32);
        let imbalance = if n > c_min {
            c.saturating_sub(c_min) as f64 / (n - c_min) as f64
        } else {
            0.0
        };
        let o = &self.one_to_many;
        1.0 + (o.even_overhead + o.concentration_overhead * imbalance).min(o.max_overhead)
    }
}

/// Whole seconds of a run: the duration times the factor, rounded up.
pub fn run_time(duration_s: u64, factor: f64) -> u64 {
    // The small margin keeps 1000 × 1.1 at 1100 despite binary rounding.
    ((duration_s as f64 * factor) - 1e-6)
        .ceil()
        .max(duration_s as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_in_defaults_are_the_paper_values() {
        let m = ExecModel::default();
        assert_eq!(m.interference, 1.06);
        assert_eq!(m.interference(ModelKind::Dm), 1.06);
        assert_eq!(m.one_to_many.max_overhead, 0.10);
    }

    #[test]
    fn overrides_merge_and_bad_values_are_refused() {
        let m = ExecModel::from_toml(
            "interference_models = [\"fm\"]\n[one_to_many]\neven_overhead = 0.02\nbogus = 1\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(m.interference(ModelKind::Sm), 1.0);
        assert_eq!(m.one_to_many.even_overhead, 0.02);
        assert_eq!(m.one_to_many.concentration_overhead, 0.05);
        let e = ExecModel::from_toml("interference = 0.9", "x.toml").unwrap_err();
        assert_eq!(e, "x.toml: interference 0.9 must be between 1.0 and 2.0");
        assert!(ExecModel::from_toml("interference = \"a\"", "x.toml").is_err());
        assert!(ExecModel::from_toml("interference_models = [\"xm\"]", "x.toml").is_err());
    }

    #[test]
    fn concentration_costs_more_and_is_clamped() {
        let m = ExecModel::default();
        let f = |v: &[u32]| m.one_to_many(v, 2);
        assert_eq!(f(&[1, 0]), 1.0);
        assert!((f(&[3, 3]) - 1.05).abs() < 1e-12);
        assert!(f(&[3, 3]) < f(&[4, 2]) && f(&[4, 2]) < f(&[5, 1]) && f(&[5, 1]) < f(&[6, 0]));
        assert!((f(&[6, 0]) - 1.10).abs() < 1e-12);
        assert!((f(&[7, 1]) - (1.0 + 0.05 + 0.05 * 3.0 / 4.0)).abs() < 1e-12);
        assert_eq!(run_time(1000, 1.1), 1100);
        assert_eq!(run_time(1000, 1.06 * 1.05), 1113);
        assert_eq!(run_time(7, 1.0), 7);
    }
}

//! `flexsim sweep`: policies × models over many seeds, size categories, kinds and trace shapes,
//! summarized in one table: per (shape, category, model, policy) the mean and min–max over the
//! runs of makespan, mean wait, mean JCT and makespan ÷ release-aware bound, and the makespan
//! and wait relative to a baseline (Flex-MIG under the first policy) on the same traces.
//!
//! Shapes other than the paper's generator, so a policy is not chosen for that generator alone
//! (each is a deterministic change of the paper's trace of the same seed):
//! - `paper`: the paper's trace (§5.1).
//! - `short`: three times the jobs, mostly short (duration mix 6:1:0), same load.
//! - `heavy`: durations × a Pareto factor (shape 1.5, capped at 20): a heavy tail of very
//!   long jobs; limits scale with them.
//! - `burst`: submissions rounded down to the hour at twice the load: jobs arrive in bursts.

use super::compare::{spread, Spread};
use super::gen::{generate, Category, GenSpec, KindMix};
use super::metrics::{policy_name, ratio, Metrics};
use super::models::{Hardware, ModelKind};
use super::trace::{user_limit, Trace, LIMIT_GRANULARITY_S};
use super::{ExecModel, SimConfig, SimError};
use flex_sched::Policy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// A family of traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    Paper,
    Short,
    Heavy,
    Burst,
}

impl Shape {
    pub const ALL: [Shape; 4] = [Shape::Paper, Shape::Short, Shape::Heavy, Shape::Burst];

    /// The trace of this shape for a paper spec.
    pub fn trace(self, spec: &GenSpec) -> Result<Trace, String> {
        match self {
            Shape::Paper => generate(spec),
            Shape::Short => {
                let base = generate(&GenSpec {
                    jobs: None,
                    ..spec.clone()
                })?
                .jobs
                .len();
                generate(&GenSpec {
                    jobs: Some(3 * base),
                    duration_mix: [6.0, 1.0, 0.0],
                    ..spec.clone()
                })
            }
            Shape::Heavy => {
                let mut t = generate(spec)?;
                let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x0068_6561_7679);
                for j in &mut t.jobs {
                    let u: f64 = rng.gen();
                    let f = (1.0 - u).powf(-1.0 / 1.5).min(20.0);
                    let over = j.limit_s() as f64 / j.duration_s as f64;
                    j.duration_s = (j.duration_s as f64 * f).ceil() as u64;
                    j.time_limit_s = Some(user_limit(j.duration_s, over, LIMIT_GRANULARITY_S));
                }
                Ok(t)
            }
            Shape::Burst => {
                let mut t = generate(&GenSpec {
                    load: spec.load * 2.0,
                    ..spec.clone()
                })?;
                for j in &mut t.jobs {
                    j.submit_s = j.submit_s / 3600 * 3600;
                }
                Ok(t)
            }
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shape::Paper => "paper",
            Shape::Short => "short",
            Shape::Heavy => "heavy",
            Shape::Burst => "burst",
        })
    }
}

/// What to sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepSpec {
    pub seeds: usize,
    pub seed: u64,
    pub shapes: Vec<Shape>,
    pub categories: Vec<Category>,
    pub kinds: Vec<KindMix>,
    /// Policies with their windows; the first is the baseline (with Flex-MIG).
    pub policies: Vec<Policy>,
    pub models: Vec<ModelKind>,
    pub max_size: Option<u32>,
    pub load: f64,
    pub drain_s: u64,
    #[serde(skip)]
    pub exec: ExecModel,
}

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRun {
    pub shape: Shape,
    pub category: Category,
    pub kind: KindMix,
    pub seed: u64,
    pub metrics: Metrics,
    /// Makespan and mean wait ÷ those of the baseline on the same trace.
    pub makespan_vs_base: f64,
    pub wait_vs_base: f64,
    /// The baseline's mean wait on the same trace.
    pub base_avg_wait_s: f64,
}

/// One row of the table: a shape and category (or `all`), a model and a policy.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    pub shape: String,
    pub category: String,
    pub model: ModelKind,
    pub policy: String,
    pub makespan_s: Spread,
    pub avg_wait_s: Spread,
    pub avg_jct_s: Spread,
    pub makespan_over_bound: Spread,
    pub makespan_vs_base: Spread,
    /// Σ mean wait ÷ Σ the baseline's mean wait over the same traces.
    pub wait_vs_base: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub spec: SweepSpec,
    pub baseline: String,
    pub rows: Vec<SweepRow>,
    pub runs: Vec<SweepRun>,
}

/// Run the sweep; `tick` after each run.
pub fn run(spec: &SweepSpec, hw: &Hardware, tick: impl FnMut()) -> Result<Sweep, SimError> {
    let base_policy = *spec
        .policies
        .first()
        .ok_or_else(|| SimError::Usage("no policy to sweep".into()))?;
    let runs = sweep_runs(spec, hw, base_policy, tick)?;
    let rows = summarize(spec, &runs);
    Ok(Sweep {
        spec: spec.clone(),
        baseline: format!("fm {}", policy_name(&base_policy)),
        rows,
        runs,
    })
}

/// Every model under every policy on every trace of the sweep, each compared with Flex-MIG
/// under `base_policy` on the same trace; `tick` after each run.
fn sweep_runs(
    spec: &SweepSpec,
    hw: &Hardware,
    base_policy: Policy,
    mut tick: impl FnMut(),
) -> Result<Vec<SweepRun>, SimError> {
    let mut runs = Vec::new();
    for &shape in &spec.shapes {
        for &category in &spec.categories {
            for &kind in &spec.kinds {
                for i in 0..spec.seeds {
                    let seed = spec.seed.wrapping_add(i as u64);
                    let g = GenSpec {
                        max_size: spec.max_size,
                        load: spec.load,
                        ..GenSpec::paper(category, kind, seed, hw.total_leaves())
                    };
                    let trace = shape.trace(&g).map_err(SimError::Usage)?;
                    let one = |policy: Policy, model| -> Result<Metrics, SimError> {
                        let cfg = SimConfig {
                            drain_s: spec.drain_s,
                            exec: spec.exec.clone(),
                            ..SimConfig::new(policy)
                        };
                        let r = hw.run(model, &trace, &cfg).map_err(SimError::Topology)?;
                        Ok(Metrics::of(&r))
                    };
                    let base = one(base_policy, ModelKind::Fm)?;
                    for &model in &spec.models {
                        for &policy in &spec.policies {
                            let m = one(policy, model)?;
                            runs.push(SweepRun {
                                shape,
                                category,
                                kind,
                                seed,
                                makespan_vs_base: ratio(
                                    m.makespan_s as f64,
                                    base.makespan_s as f64,
                                ),
                                wait_vs_base: ratio(m.avg_wait_s, base.avg_wait_s),
                                base_avg_wait_s: base.avg_wait_s,
                                metrics: m,
                            });
                            tick();
                        }
                    }
                }
            }
        }
    }
    Ok(runs)
}

/// The table's rows: per shape, per category and then all categories together, per model and
/// policy, the spread of the runs; combinations without runs have no row.
fn summarize(spec: &SweepSpec, runs: &[SweepRun]) -> Vec<SweepRow> {
    let mut rows = Vec::new();
    for &shape in &spec.shapes {
        let cats = spec
            .categories
            .iter()
            .map(|c| (c.to_string(), Some(*c)))
            .chain(std::iter::once(("all".to_string(), None)));
        for (cat_name, cat) in cats {
            for &model in &spec.models {
                for &policy in &spec.policies {
                    let name = policy_name(&policy);
                    let sel: Vec<&SweepRun> = runs
                        .iter()
                        .filter(|r| {
                            r.shape == shape
                                && cat.is_none_or(|c| r.category == c)
                                && r.metrics.model == model
                                && r.metrics.policy == name
                        })
                        .collect();
                    rows.extend(row(&sel, shape, &cat_name, model, name));
                }
            }
        }
    }
    rows
}

/// One row over the selected runs; None when there are none.
fn row(
    sel: &[&SweepRun],
    shape: Shape,
    category: &str,
    model: ModelKind,
    policy: String,
) -> Option<SweepRow> {
    let s =
        |f: &dyn Fn(&SweepRun) -> f64| spread(&mut sel.iter().map(|r| f(r)).collect::<Vec<_>>());
    let makespan_s = s(&|r| r.metrics.makespan_s as f64)?;
    let waits: f64 = sel.iter().map(|r| r.metrics.avg_wait_s).sum();
    let base_waits: f64 = sel.iter().map(|r| r.base_avg_wait_s).sum();
    Some(SweepRow {
        shape: shape.to_string(),
        category: category.to_string(),
        model,
        policy,
        makespan_s,
        avg_wait_s: s(&|r| r.metrics.avg_wait_s).expect("same runs"),
        avg_jct_s: s(&|r| r.metrics.avg_jct_s).expect("same runs"),
        makespan_over_bound: s(&|r| r.metrics.makespan_over_bound).expect("same runs"),
        makespan_vs_base: s(&|r| r.makespan_vs_base).expect("same runs"),
        wait_vs_base: ratio(waits, base_waits),
    })
}

impl Sweep {
    /// The table: mean (min–max) over the runs of each row.
    pub fn table(&self) -> prettytable::Table {
        let mut t = prettytable::Table::new();
        t.set_format(*prettytable::format::consts::FORMAT_BOX_CHARS);
        let vs = format!("÷ {}", self.baseline);
        t.set_titles(prettytable::row![
            "shape",
            "category",
            "model",
            "policy",
            "makespan s",
            "mean wait s",
            "mean JCT s",
            "makespan ÷ bound",
            format!("makespan {vs}"),
            format!("wait {vs}")
        ]);
        let mm =
            |s: &Spread, d: usize| format!("{:.d$} ({:.d$}–{:.d$})", s.mean, s.min, s.max, d = d);
        for r in &self.rows {
            t.add_row(prettytable::row![
                r.shape,
                r.category,
                r.model.to_string(),
                r.policy,
                r->mm(&r.makespan_s, 0),
                r->mm(&r.avg_wait_s, 0),
                r->mm(&r.avg_jct_s, 0),
                r->mm(&r.makespan_over_bound, 3),
                r->mm(&r.makespan_vs_base, 3),
                r->format!("{:.3}", r.wait_vs_base)
            ]);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_change_the_paper_trace_as_documented() {
        let g = GenSpec::paper(Category::Balanced, KindMix::Train, 4, 14);
        let paper = Shape::Paper.trace(&g).unwrap();
        let short = Shape::Short.trace(&g).unwrap();
        assert_eq!(short.jobs.len(), 3 * paper.jobs.len());
        let heavy = Shape::Heavy.trace(&g).unwrap();
        assert!(heavy
            .jobs
            .iter()
            .zip(&paper.jobs)
            .all(|(h, p)| h.duration_s >= p.duration_s));
        assert!(heavy.jobs.iter().any(|j| j.duration_s > 7200 * 3));
        assert!(heavy.jobs.iter().all(|j| j.limit_s() >= j.duration_s));
        let burst = Shape::Burst.trace(&g).unwrap();
        assert!(burst.jobs.iter().all(|j| j.submit_s % 3600 == 0));
    }

    #[test]
    fn the_baseline_row_is_one_against_itself() {
        let hw = Hardware::load("a100-40gb-x2", 1).unwrap();
        let spec = SweepSpec {
            seeds: 2,
            seed: 1,
            shapes: vec![Shape::Paper],
            categories: vec![Category::Small],
            kinds: vec![KindMix::Train],
            policies: vec![Policy::fifo(), Policy::conservative(14)],
            models: vec![ModelKind::Fm, ModelKind::Dm],
            max_size: Some(4),
            load: 1.0,
            drain_s: 110,
            exec: ExecModel::default(),
        };
        let s = run(&spec, &hw, || {}).unwrap();
        assert_eq!(s.runs.len(), 2 * 2 * 2);
        let base = &s.rows[0];
        assert_eq!((base.model, base.policy.as_str()), (ModelKind::Fm, "fifo"));
        assert_eq!(
            (base.makespan_vs_base.min, base.makespan_vs_base.max),
            (1.0, 1.0)
        );
        assert_eq!(base.wait_vs_base, 1.0);
        // the "all" rows follow the category rows
        assert!(s.rows.iter().any(|r| r.category == "all"));
    }
}

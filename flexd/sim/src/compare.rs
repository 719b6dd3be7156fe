//! `flexsim compare`: the paper's evaluation grid. For every kind and size category it
//! generates N traces (trace i uses seed `seed + i`, so `flexsim gen` reproduces each), runs
//! every model under every policy, and summarizes the per-trace ratios fm/dm and fm/sm of each
//! metric by their median and range, as the paper's Figures 7 and 8 do.

use super::gen::{generate, Category, GenSpec, KindMix};
use super::metrics::{policy_name, Metrics};
use super::models::{Hardware, ModelKind};
use super::{SimConfig, SimError};
use flex_sched::Policy;
use serde::Serialize;

/// The grid to run.
#[derive(Clone, Debug, Serialize)]
pub struct CompareSpec {
    pub traces_per_category: usize,
    pub seed: u64,
    pub categories: Vec<Category>,
    pub kinds: Vec<KindMix>,
    /// Policies, each with its window.
    pub policies: Vec<Policy>,
    pub models: Vec<ModelKind>,
    /// Cap on job sizes (the paper's Figure 7 uses 4, which Static-MIG needs).
    pub max_size: Option<u32>,
    pub oversize: super::gen::Oversize,
    pub load: f64,
    pub duration_mix: [f64; 3],
    pub drain_s: u64,
    #[serde(skip)]
    pub exec: super::ExecModel,
}

/// One run of the grid.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    pub kind: KindMix,
    pub category: Category,
    pub trace: usize,
    pub seed: u64,
    pub metrics: Metrics,
}

/// The spread of one ratio over a category's traces.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
    pub min: f64,
    pub max: f64,
    /// Traces that have the ratio (a zero denominator drops one).
    pub n: usize,
}

/// A ratio summary.
#[derive(Clone, Debug, Serialize)]
pub struct RatioRow {
    pub kind: KindMix,
    pub policy: Policy,
    /// A size category, or `all` for every trace of the kind.
    pub category: String,
    /// `fm/dm` or `fm/sm`.
    pub pair: String,
    pub metric: &'static str,
    pub spread: Spread,
}

/// Everything a comparison produced.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub spec: CompareSpec,
    pub topology: String,
    pub runs: Vec<RunRow>,
    pub ratios: Vec<RatioRow>,
}

/// Reads one metric of a run.
pub type Getter = fn(&Metrics) -> f64;

/// The metrics compared, by name, with their accessor.
pub const RATIO_METRICS: [(&str, Getter); 5] = [
    ("run", |m| m.avg_run_s),
    ("jct", |m| m.avg_jct_s),
    ("wait", |m| m.avg_wait_s),
    ("makespan", |m| m.makespan_s as f64),
    ("utilization", |m| m.utilization),
];

/// Run the grid; `tick` is called after every run.
pub fn run(
    spec: &CompareSpec,
    hw: &Hardware,
    mut tick: impl FnMut(),
) -> Result<Comparison, SimError> {
    let mut runs = Vec::new();
    for &kind in &spec.kinds {
        for &category in &spec.categories {
            for i in 0..spec.traces_per_category {
                let seed = spec.seed.wrapping_add(i as u64);
                let g = GenSpec {
                    max_size: spec.max_size,
                    oversize: spec.oversize,
                    load: spec.load,
                    duration_mix: spec.duration_mix,
                    ..GenSpec::paper(category, kind, seed, hw.total_leaves())
                };
                let trace = generate(&g).map_err(SimError::Usage)?;
                for &policy in &spec.policies {
                    let cfg = SimConfig {
                        policy,
                        drain_s: spec.drain_s,
                        exec: spec.exec.clone(),
                        record_rows: false,
                        fairshare: None,
                    };
                    for &model in &spec.models {
                        let r = hw.run(model, &trace, &cfg).map_err(SimError::Topology)?;
                        runs.push(RunRow {
                            kind,
                            category,
                            trace: i,
                            seed,
                            metrics: Metrics::of(&r),
                        });
                        tick();
                    }
                }
            }
        }
    }
    let ratios = ratios(spec, &runs);
    Ok(Comparison {
        spec: spec.clone(),
        topology: hw.origin.clone(),
        runs,
        ratios,
    })
}

fn ratios(spec: &CompareSpec, runs: &[RunRow]) -> Vec<RatioRow> {
    let find = |kind, cat, i, policy, model| {
        runs.iter().find(|r| {
            r.kind == kind
                && r.category == cat
                && r.trace == i
                && r.metrics.policy == policy_name(&policy)
                && r.metrics.model == model
        })
    };
    let mut out = Vec::new();
    for &kind in &spec.kinds {
        for &policy in &spec.policies {
            let scopes = spec
                .categories
                .iter()
                .map(|c| (c.to_string(), vec![*c]))
                .chain(std::iter::once((
                    "all".to_string(),
                    spec.categories.clone(),
                )));
            for (scope, cats) in scopes {
                for other in [ModelKind::Dm, ModelKind::Sm] {
                    if !spec.models.contains(&ModelKind::Fm) || !spec.models.contains(&other) {
                        continue;
                    }
                    for (metric, get) in RATIO_METRICS {
                        let traces = cats
                            .iter()
                            .flat_map(|&c| (0..spec.traces_per_category).map(move |i| (c, i)));
                        let mut v: Vec<f64> = traces
                            .filter_map(|(category, i)| {
                                let fm = find(kind, category, i, policy, ModelKind::Fm)?;
                                let o = find(kind, category, i, policy, other)?;
                                // A model that could not run every job is not comparable.
                                if o.metrics.not_run > 0 || fm.metrics.not_run > 0 {
                                    return None;
                                }
                                let d = get(&o.metrics);
                                (d > 0.0).then(|| get(&fm.metrics) / d)
                            })
                            .collect();
                        if let Some(spread) = spread(&mut v) {
                            out.push(RatioRow {
                                kind,
                                policy,
                                category: scope.clone(),
                                pair: format!("fm/{other}"),
                                metric,
                                spread,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Median, quartiles and range; None for no values.
pub fn spread(v: &mut [f64]) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let q = |p: f64| {
        let x = p * (v.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
    };
    Some(Spread {
        mean,
        median: q(0.5),
        p25: q(0.25),
        p75: q(0.75),
        min: v[0],
        max: v[v.len() - 1],
        n: v.len(),
    })
}

impl Comparison {
    /// Median of a metric over a category's runs of one model and policy.
    pub fn median(
        &self,
        kind: KindMix,
        policy: Policy,
        category: Category,
        model: ModelKind,
        get: impl Fn(&Metrics) -> f64,
    ) -> Option<f64> {
        let mut v: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| {
                r.kind == kind
                    && r.category == category
                    && r.metrics.policy == policy_name(&policy)
                    && r.metrics.model == model
            })
            .map(|r| get(&r.metrics))
            .collect();
        spread(&mut v).map(|s| s.median)
    }

    /// Text report: per kind and policy, the ratio table and the models' own numbers.
    pub fn report(&self) -> String {
        let mut s = String::new();
        for &kind in &self.spec.kinds {
            for &policy in &self.spec.policies {
                s += &format!(
                    "\n{kind} traces, {}: ratio median (min-max) over {} traces per category\n",
                    policy_name(&policy),
                    self.spec.traces_per_category
                );
                let mut t = prettytable::Table::new();
                t.set_format(*prettytable::format::consts::FORMAT_BOX_CHARS);
                let mut head = vec!["category".to_string(), "pair".to_string()];
                head.extend(RATIO_METRICS.iter().map(|(m, _)| m.to_string()));
                t.set_titles(prettytable::Row::from(head));
                let scopes = self.spec.categories.iter().map(|c| c.to_string());
                for cat in scopes.chain(std::iter::once("all".to_string())) {
                    for pair in ["fm/dm", "fm/sm"] {
                        let cells: Vec<String> = RATIO_METRICS
                            .iter()
                            .map(|(m, _)| {
                                self.ratios
                                    .iter()
                                    .find(|r| {
                                        r.kind == kind
                                            && r.policy == policy
                                            && r.category == cat
                                            && r.pair == pair
                                            && r.metric == *m
                                    })
                                    .map_or("-".into(), |r| {
                                        format!(
                                            "{:.3} ({:.2}-{:.2})",
                                            r.spread.median, r.spread.min, r.spread.max
                                        )
                                    })
                            })
                            .collect();
                        if cells.iter().all(|c| c == "-") {
                            continue;
                        }
                        let mut row = vec![cat.clone(), pair.to_string()];
                        row.extend(cells);
                        t.add_row(prettytable::Row::from(row));
                    }
                }
                s += &t.to_string();
                s += &self.absolutes(kind, policy).to_string();
            }
        }
        s
    }

    /// Medians of each model's own numbers.
    fn absolutes(&self, kind: KindMix, policy: Policy) -> prettytable::Table {
        let mut t = prettytable::Table::new();
        t.set_format(*prettytable::format::consts::FORMAT_BOX_CHARS);
        t.set_titles(prettytable::row![
            "category",
            "model",
            "not run",
            "makespan s",
            "÷ bound",
            "wait s",
            "utilization",
            "ext-frag % of makespan (avg / sum)",
            "reconfigs"
        ]);
        for &cat in &self.spec.categories {
            for &model in &self.spec.models {
                let m = |f: fn(&Metrics) -> f64| {
                    self.median(kind, policy, cat, model, f)
                        .map_or("-".into(), |v| format!("{v:.2}"))
                };
                t.add_row(prettytable::row![
                    cat.to_string(),
                    model.to_string(),
                    r->m(|x| x.not_run as f64),
                    r->m(|x| x.makespan_s as f64),
                    r->m(|x| x.makespan_over_bound),
                    r->m(|x| x.avg_wait_s),
                    r->m(|x| x.utilization),
                    r->m(|x| x.ext_frag_pct_of_makespan),
                    r->m(|x| x.reconfigurations as f64)
                ]);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_quartiles_by_interpolation() {
        let s = spread(&mut [4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(
            (s.median, s.p25, s.p75, s.min, s.max, s.n),
            (3.0, 2.0, 4.0, 1.0, 5.0, 5)
        );
        assert_eq!(s.mean, 3.0);
        assert_eq!(spread(&mut [1.0, 2.0]).unwrap().median, 1.5);
        assert!(spread(&mut []).is_none());
    }
}

//! The Flex-MIG paper's synthetic traces (§5.1), deterministic per seed (ChaCha8).
//!
//! - Sizes: the job counts of its Table 2, doubled as in its evaluation ("we double the number
//!   of workloads from Table 2"): training sizes 1/2/4/6/8, inference sizes 1/2/4. A mixed trace
//!   is one copy of the training row plus one of the inference row (the paper's 50:50 mix at
//!   the same scale). `--jobs N` repeats the category's multiset, reshuffled each round, and cuts
//!   it at N. `--max-size` caps sizes (its Figure 7 runs "with a maximum workload size of 4").
//! - Durations: short 600–1800 s, medium 1800–3600 s, long 3600–7200 s, uniform inside the
//!   class. The paper draws classes from four public traces without giving the shares; we use
//!   equal shares unless `--duration-mix` says otherwise.
//! - Arrivals: the paper runs traces open-loop and gives no rate. We use a Poisson process
//!   whose rate offers `load` times the cluster's capacity: the mean gap is the trace's total
//!   slice-seconds ÷ (jobs × total leaves × load). The first job arrives at 0.

use super::trace::{user_limit, Trace, TraceJob, LIMIT_GRANULARITY_S};
use flex_sched::JobKind;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::fmt;

/// Size distribution of a trace (Table 2 rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Small,
    Balanced,
    Large,
}

/// Job types of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KindMix {
    Train,
    Infer,
    Mixed,
}

/// What `max_size` does to larger jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Oversize {
    /// Leave them out of the trace.
    Drop,
    /// Lower their size to the cap (the default: it keeps the paper's 62–64 jobs per trace).
    #[default]
    Clamp,
}

impl Category {
    pub const ALL: [Category; 3] = [Category::Small, Category::Balanced, Category::Large];

    /// Table 2, training: jobs of size 1 / 2 / 4 / 6 / 8.
    fn train(self) -> [u32; 5] {
        match self {
            Category::Small => [16, 8, 4, 2, 1],
            Category::Balanced => [8, 8, 8, 4, 4],
            Category::Large => [4, 4, 12, 8, 4],
        }
    }

    /// Table 2, inference: jobs of size 1 / 2 / 4.
    fn infer(self) -> [u32; 3] {
        match self {
            Category::Small => [16, 8, 4],
            Category::Balanced => [10, 10, 10],
            Category::Large => [8, 8, 16],
        }
    }
}

impl KindMix {
    pub const ALL: [KindMix; 3] = [KindMix::Train, KindMix::Infer, KindMix::Mixed];
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Category::Small => "small",
            Category::Balanced => "balanced",
            Category::Large => "large",
        })
    }
}

impl fmt::Display for KindMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KindMix::Train => "train",
            KindMix::Infer => "infer",
            KindMix::Mixed => "mixed",
        })
    }
}

/// Users' overestimate of a run when they set its limit: uniform between these factors.
pub const DEFAULT_LIMIT_FACTOR: (f64, f64) = (1.0, 2.0);

const TRAIN_SIZES: [u32; 5] = [1, 2, 4, 6, 8];
const INFER_SIZES: [u32; 3] = [1, 2, 4];
/// Duration classes (§5.1): short, medium, long, in seconds.
pub const DURATION_CLASSES: [(u64, u64); 3] = [(600, 1800), (1800, 3600), (3600, 7200)];

/// What to generate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenSpec {
    pub category: Category,
    pub kind: KindMix,
    pub seed: u64,
    /// Number of jobs; None for the paper's count (Table 2 doubled).
    pub jobs: Option<usize>,
    /// Largest job size; larger jobs are dropped or clamped as `oversize` says.
    pub max_size: Option<u32>,
    pub oversize: Oversize,
    /// Offered load: 1.0 submits work as fast as perfectly packed leaves could run it.
    pub load: f64,
    /// Weights of the short / medium / long classes.
    pub duration_mix: [f64; 3],
    /// Leaves of the cluster the trace is meant for (14 on the paper's testbed).
    pub total_leaves: u32,
    /// How users set time limits: the run time times a factor drawn uniformly from this range,
    /// rounded up to `limit_granularity_s`.
    pub limit_factor: (f64, f64),
    pub limit_granularity_s: u64,
}

impl GenSpec {
    /// The paper's trace for a category and kind on `total_leaves` leaves.
    pub fn paper(category: Category, kind: KindMix, seed: u64, total_leaves: u32) -> Self {
        Self {
            category,
            kind,
            seed,
            jobs: None,
            max_size: None,
            oversize: Oversize::Clamp,
            load: 1.0,
            duration_mix: [1.0, 1.0, 1.0],
            total_leaves,
            limit_factor: DEFAULT_LIMIT_FACTOR,
            limit_granularity_s: LIMIT_GRANULARITY_S,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.load.is_finite() && self.load > 0.0) {
            return Err(format!(
                "load {} must be a number greater than 0",
                self.load
            ));
        }
        if self.duration_mix.iter().any(|w| !w.is_finite() || *w < 0.0)
            || self.duration_mix.iter().sum::<f64>() <= 0.0
        {
            return Err(format!(
                "duration mix {:?} needs weights of 0 or more, not all 0",
                self.duration_mix
            ));
        }
        if self.max_size == Some(0) {
            return Err("max size must be at least 1".into());
        }
        if self.jobs == Some(0) {
            return Err("jobs must be at least 1".into());
        }
        let (lo, hi) = self.limit_factor;
        if !(lo.is_finite() && hi.is_finite() && 1.0 <= lo && lo <= hi) {
            return Err(format!(
                "limit factor {lo}..{hi} must be a range of numbers of at least 1"
            ));
        }
        if self.limit_granularity_s == 0 {
            return Err("limit granularity must be at least 1 s".into());
        }
        if self.total_leaves == 0 {
            return Err("the topology has no leaves".into());
        }
        Ok(())
    }
}

/// The (size, kind) multiset of one round of a category.
fn multiset(category: Category, kind: KindMix) -> Vec<(u32, JobKind)> {
    let mut out = Vec::new();
    let mut add = |sizes: &[u32], counts: &[u32], copies: u32, k: JobKind| {
        for (&s, &c) in sizes.iter().zip(counts) {
            for _ in 0..c * copies {
                out.push((s, k));
            }
        }
    };
    match kind {
        KindMix::Train => add(&TRAIN_SIZES, &category.train(), 2, JobKind::Batch),
        KindMix::Infer => add(&INFER_SIZES, &category.infer(), 2, JobKind::Infer),
        KindMix::Mixed => {
            add(&TRAIN_SIZES, &category.train(), 1, JobKind::Batch);
            add(&INFER_SIZES, &category.infer(), 1, JobKind::Infer);
        }
    }
    out
}

/// Generate a trace. Same spec, same trace.
pub fn generate(spec: &GenSpec) -> Result<Trace, String> {
    spec.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let picks = pick_sizes(spec, &mut rng)?;
    let mut jobs: Vec<TraceJob> = picks
        .into_iter()
        .enumerate()
        .map(|(i, (size, kind))| TraceJob {
            id: i as u64 + 1,
            submit_s: 0,
            leaves: size,
            duration_s: draw_duration(&spec.duration_mix, &mut rng),
            kind,
            mem_gb: None,
            time_limit_s: None,
            user: None,
            after: Vec::new(),
            cpus: 0,
            host_mem: None,
        })
        .collect();
    set_limits(spec, &mut jobs);
    set_arrivals(spec, &mut jobs, &mut rng);
    Ok(Trace { jobs })
}

/// The (size, kind) of each job in trace order: rounds of the category's multiset, capped as
/// the spec says, each shuffled, cut at the spec's number of jobs.
fn pick_sizes(spec: &GenSpec, rng: &mut ChaCha8Rng) -> Result<Vec<(u32, JobKind)>, String> {
    let mut base = multiset(spec.category, spec.kind);
    if let Some(m) = spec.max_size {
        match spec.oversize {
            Oversize::Drop => base.retain(|(s, _)| *s <= m),
            Oversize::Clamp => base.iter_mut().for_each(|(s, _)| *s = (*s).min(m)),
        }
        if base.is_empty() {
            return Err(format!(
                "no job of the {} category is {m} slices or smaller",
                spec.category
            ));
        }
    }
    let n = spec.jobs.unwrap_or(base.len());
    let mut picks = Vec::with_capacity(n);
    while picks.len() < n {
        let mut round = base.clone();
        round.shuffle(rng);
        picks.extend(round.into_iter().take(n - picks.len()));
    }
    Ok(picks)
}

/// A duration: a class drawn by the mix's weights, then uniform inside the class.
fn draw_duration(mix: &[f64; 3], rng: &mut ChaCha8Rng) -> u64 {
    let total_w: f64 = mix.iter().sum();
    let mut u = rng.gen::<f64>() * total_w;
    let mut class = DURATION_CLASSES.len() - 1;
    for (c, w) in mix.iter().enumerate() {
        if u < *w {
            class = c;
            break;
        }
        u -= w;
    }
    let (lo, hi) = DURATION_CLASSES[class];
    rng.gen_range(lo..=hi)
}

/// Time limits as users set them. They come from a stream of their own, so that sizes,
/// durations and arrivals stay those of the same seed without limits.
fn set_limits(spec: &GenSpec, jobs: &mut [TraceJob]) {
    let mut limits = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x6c69_6d69_7473);
    let (lo, hi) = spec.limit_factor;
    for j in jobs {
        let f = if hi > lo {
            limits.gen_range(lo..=hi)
        } else {
            lo
        };
        j.time_limit_s = Some(user_limit(j.duration_s, f, spec.limit_granularity_s));
    }
}

/// Submission times: a Poisson process offering the spec's load, the first job at 0.
fn set_arrivals(spec: &GenSpec, jobs: &mut [TraceJob], rng: &mut ChaCha8Rng) {
    let work: f64 = jobs
        .iter()
        .map(|j| j.leaves as f64 * j.duration_s as f64)
        .sum();
    let mean_gap = work / (jobs.len() as f64 * spec.total_leaves as f64 * spec.load);
    let mut t = 0.0f64;
    for (i, j) in jobs.iter_mut().enumerate() {
        if i > 0 {
            let u: f64 = rng.gen();
            t += -(1.0 - u).ln() * mean_gap;
        }
        j.submit_s = t as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(t: &Trace, kind: JobKind) -> Vec<(u32, usize)> {
        let mut m = std::collections::BTreeMap::new();
        for j in t.jobs.iter().filter(|j| j.kind == kind) {
            *m.entry(j.leaves).or_insert(0) += 1;
        }
        m.into_iter().collect()
    }

    #[test]
    fn paper_counts_are_table_2_doubled() {
        let g = |c, k| generate(&GenSpec::paper(c, k, 3, 14)).unwrap();
        let t = g(Category::Small, KindMix::Train);
        assert_eq!(t.jobs.len(), 62);
        assert_eq!(
            counts(&t, JobKind::Batch),
            [(1, 32), (2, 16), (4, 8), (6, 4), (8, 2)]
        );
        let t = g(Category::Large, KindMix::Infer);
        assert_eq!(counts(&t, JobKind::Infer), [(1, 16), (2, 16), (4, 32)]);
        let t = g(Category::Balanced, KindMix::Mixed);
        assert_eq!(t.jobs.len(), 32 + 30);
        assert_eq!(counts(&t, JobKind::Infer), [(1, 10), (2, 10), (4, 10)]);
    }

    #[test]
    fn durations_arrivals_and_caps() {
        let mut s = GenSpec::paper(Category::Large, KindMix::Train, 9, 14);
        s.max_size = Some(4);
        s.jobs = Some(500);
        s.oversize = Oversize::Drop;
        let t = generate(&s).unwrap();
        assert_eq!(t.jobs.len(), 500);
        // dropping keeps Table 2's proportions of the smaller sizes; clamping turns 6 and 8 into 4
        let small = |t: &Trace| t.jobs.iter().filter(|j| j.leaves < 4).count();
        let clamped = generate(&GenSpec {
            oversize: Oversize::Clamp,
            ..s.clone()
        })
        .unwrap();
        assert!(
            small(&t) > 180 && small(&clamped) < 160,
            "{} {}",
            small(&t),
            small(&clamped)
        );
        let paper = generate(&GenSpec {
            jobs: None,
            oversize: Oversize::Clamp,
            ..s.clone()
        })
        .unwrap();
        assert_eq!(paper.jobs.len(), 64);
        let dropped = generate(&GenSpec {
            jobs: None,
            oversize: Oversize::Drop,
            ..s.clone()
        })
        .unwrap();
        assert_eq!(dropped.jobs.len(), 40);
        // limits: at least the duration, whole quarter hours, at most twice the run rounded up
        for j in &t.jobs {
            let l = j.time_limit_s.unwrap();
            assert!(
                l >= j.duration_s && l % 900 == 0 && l <= (2 * j.duration_s).div_ceil(900) * 900
            );
        }
        assert!(t
            .jobs
            .iter()
            .any(|j| j.time_limit_s.unwrap() < j.duration_s * 106 / 100));
        assert!(t.jobs.iter().all(|j| j.leaves <= 4));
        assert!(t.jobs.iter().all(|j| (600..=7200).contains(&j.duration_s)));
        assert_eq!(t.jobs[0].submit_s, 0);
        assert!(t.jobs.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
        // every class is drawn with equal weights
        for (lo, hi) in DURATION_CLASSES {
            let n = t
                .jobs
                .iter()
                .filter(|j| j.duration_s > lo && j.duration_s < hi)
                .count();
            assert!(n > 100, "class {lo}-{hi}: {n}");
        }
    }

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        let s = GenSpec::paper(Category::Balanced, KindMix::Mixed, 42, 14);
        assert_eq!(generate(&s).unwrap(), generate(&s).unwrap());
        let o = GenSpec { seed: 43, ..s };
        assert_ne!(generate(&s).unwrap(), generate(&o).unwrap());
    }
}

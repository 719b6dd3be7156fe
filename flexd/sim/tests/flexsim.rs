//! flexsim: a hand-computed trace under every model and policy, properties of every run over
//! generated traces, byte-identical output per seed, and trace errors with their line number.

use flex_sched::{JobKind, Order, Policy, PolicyKind};
use flexsim::gen::{generate, Category, GenSpec, KindMix, Oversize};
use flexsim::models::{Hardware, ModelKind};
use flexsim::{ExecModel, Metrics, RunResult, SimConfig, Trace};
use proptest::prelude::*;
use std::process::Command;

/// The hand-computed trace, on the Flex-MIG testbed (two A100-40GB, each six 1g.5gb leaves
/// L0-L5 / L7-L12 and one 1g.10gb leaf L6 / L13), drain 100 s, no interference, one-to-many
/// overhead 5% for an even spread (+5% more when fully concentrated, at most 10%):
///
/// ```text
/// job submit size duration kind  limit
///  1     0    4    1000   train  1100
///  2     0    1    2000   train  2000
///  3     0    6    3000   infer  3300
///  4   100    3     500   train   550
///  5   100    1     300   train   300
/// ```
///
/// (No run reaches its limit; `a_job_at_its_limit_ends_timeout` covers that.)
///
/// Flex-MIG (FIFO and backfill alike):
/// - t=0: job 1 gets L0,L1,L7,L8 (2-2, even: x1.05 = 1050 s, ends 1050); job 2 the 1g.10gb L6
///   (one leaf, one-to-one: 2000 s); job 3 L2-L4 + L9-L11 (3-3: 3150 s, ends 3150). Free: L5,
///   L12, L13.
/// - t=100: job 4 takes all three (1 on GPU 0, 2 on GPU 1, as even as 3 on 2 GPUs gets: 525 s,
///   ends 625). Job 5 waits (nothing free, no fragmentation); nothing is behind it to backfill.
/// - t=625: job 5 takes the 1g.10gb L13 (300 s, ends 925).
/// - makespan 3150; JCT 1050+2000+3150+525+825 = 7550 → 1510.0; wait 525 → 105.0; run
///   1050+2000+3150+525+300 = 7025 → 1405.0; busy 4·1050+2000+6·3150+3·525+300 = 26975 slice-s
///   over 14·3150 = 44100 → 0.6117; bound: job 3's least run on fm is its even 3-3 spread,
///   3150, so max(3150, ⌈26975/14⌉ = 1927) = 3150 → 1.0000.
///
/// Dynamic-MIG (instances start absent; small ones go to the highest free start):
/// - t=0: job 1 → GPU 0 4g@0; job 2 → GPU 0 1g@6 (the fuller GPU); job 3 (6 → 7g) → GPU 1.
/// - t=100: job 4 (3g) fits nowhere: GPU 0 has 5 SM slices in use, GPU 1 runs inference (never
///   drained). Its reservation: at 1100, job 1's limit, GPU 0 can be reconfigured. Free
///   slices 2 < 3: no fragmentation.
///   - FIFO: job 5 waits behind it.
///   - backfill: job 5 (1g@5 on GPU 0, ends 400 ≤ 1100) backfills.
/// - t=1000: job 1 ends; job 4 reconfigures GPU 0 (destroys the idle 4g, and under backfill
///   job 5's idle 1g), 3g@0 beside job 2's 1g@6: job 4 runs 1100-1600, job 2 is suspended 100 s
///   (ends 2100). One reconfiguration, 100 s of suspension.
///   - FIFO: job 5 cannot go to GPU 0 while it is reconfigured nor to GPU 1: it waits with 3
///     free slices on the host (fragmentation, 100 s) until t=1100, then 1g@5 (ends 1400).
/// - makespan 3000 (job 3); run 1000+2000+3000+500+300 = 6800 → 1360.0; drain 200 → 40.0;
///   busy 4000+2000+21000+1500+300 = 28800 over 42000 → 0.6857; bound 3000.
///   - FIFO: waits 900+1000 → 380.0; JCT 1000+2100+3000+1500+1300 = 8900 → 1780.0;
///     fragmentation 100 → 20.0 per job, 100 s of 3000 with a job so blocked: 3.33%.
///   - backfill: waits 900 → 180.0; JCT 1000+2100+3000+1500+300 = 7900 → 1580.0.
///
/// Static-MIG (each GPU 1g.10gb + 2g.10gb + 4g.20gb; FIFO and backfill alike):
/// - job 3 (6 slices) can never run. t=0: job 1 → GPU 0 4g, job 2 → GPU 0 1g. t=100: job 4
///   (3 slices) → GPU 1 4g (ends 600), job 5 → GPU 1 1g (ends 400).
/// - makespan 2000; JCT = run: 1000+2000+500+300 = 3800 → 950.0; busy 4000+2000+4·500+300 =
///   8300 over 28000 → 0.2964; bound max(2000, ⌈7800/14⌉ = 558) = 2000.
const HAND_TRACE: &str = "job_id,submit_s,leaves,duration_s,kind,time_limit_s
1,0,4,1000,train,1100
2,0,1,2000,train,2000
3,0,6,3000,infer,3300
4,100,3,500,train,550
5,100,1,300,train,300
";

const HAND_EXEC: &str = "interference = 1.0
[one_to_many]
even_overhead = 0.05
concentration_overhead = 0.05
max_overhead = 0.10
";

fn testbed() -> Hardware {
    Hardware::load("a100-40gb-x2", 1).unwrap()
}

fn run(hw: &Hardware, model: ModelKind, trace: &Trace, cfg: &SimConfig) -> RunResult {
    hw.run(model, trace, cfg).unwrap()
}

#[test]
fn hand_computed_trace_under_every_model_and_policy() {
    let trace = Trace::from_reader(HAND_TRACE.as_bytes(), "hand.csv").unwrap();
    let hw = testbed();
    // (model, policy) → the metric fields as `flexsim run --csv` prints them, from "jobs" on.
    let expected = [
        (
            ModelKind::Fm,
            PolicyKind::Fifo,
            "5,0,0,3150,3150,1.0000,1510.0,105.0,1405.0,0.0,0.0,0.00,0.6117,0,0,0",
        ),
        (
            ModelKind::Fm,
            PolicyKind::Backfill,
            "5,0,0,3150,3150,1.0000,1510.0,105.0,1405.0,0.0,0.0,0.00,0.6117,0,0,0",
        ),
        (
            ModelKind::Dm,
            PolicyKind::Fifo,
            "5,0,0,3000,3000,1.0000,1780.0,380.0,1360.0,40.0,20.0,3.33,0.6857,1,100,100",
        ),
        (
            ModelKind::Dm,
            PolicyKind::Backfill,
            "5,0,0,3000,3000,1.0000,1580.0,180.0,1360.0,40.0,0.0,0.00,0.6857,1,100,100",
        ),
        (
            ModelKind::Sm,
            PolicyKind::Fifo,
            "4,1,0,2000,2000,1.0000,950.0,0.0,950.0,0.0,0.0,0.00,0.2964,0,0,0",
        ),
        (
            ModelKind::Sm,
            PolicyKind::Backfill,
            "4,1,0,2000,2000,1.0000,950.0,0.0,950.0,0.0,0.0,0.00,0.2964,0,0,0",
        ),
    ];
    for (model, policy, want) in expected {
        let cfg = SimConfig {
            policy: Policy {
                kind: policy,
                window: 14,
                ..Policy::fifo()
            },
            drain_s: 100,
            exec: ExecModel::from_toml(HAND_EXEC, "hand.toml").unwrap(),
            record_rows: false,
            fairshare: None,
        };
        let r = run(&hw, model, &trace, &cfg);
        let m = Metrics::of(&r);
        let got: Vec<String> = m.fields().into_iter().skip(2).map(|(_, v)| v).collect();
        assert_eq!(got.join(","), want, "{model} {policy:?}");
    }

    // Per job, under Dynamic-MIG with FIFO: (id, start, end, run, drain, ext-frag).
    let cfg = SimConfig {
        policy: Policy::fifo(),
        drain_s: 100,
        exec: ExecModel::from_toml(HAND_EXEC, "hand.toml").unwrap(),
        record_rows: false,
        fairshare: None,
    };
    let r = run(&hw, ModelKind::Dm, &trace, &cfg);
    let jobs: Vec<_> = r
        .jobs
        .iter()
        .map(|j| (j.id, j.start_s, j.end_s, j.run_s, j.drain_s, j.ext_frag_s))
        .collect();
    assert_eq!(
        jobs,
        [
            (1, 0, 1000, 1000, 0, 0),
            (2, 0, 2100, 2000, 100, 0),
            (3, 0, 3000, 3000, 0, 0),
            (4, 1000, 1600, 500, 100, 0),
            (5, 1100, 1400, 300, 0, 100),
        ]
    );
    assert_eq!(r.not_run.len(), 0);
    let sm = run(&hw, ModelKind::Sm, &trace, &cfg);
    assert_eq!(sm.not_run[0].id, 3);
    assert!(
        sm.not_run[0].reason.contains("6 compute slices"),
        "{}",
        sm.not_run[0].reason
    );
}

/// A job whose run reaches its limit ends there (TIMEOUT), as flexd's supervisor ends it; one
/// that ends exactly at its limit does not time out. The limit also caps the bound's least run.
#[test]
fn a_job_at_its_limit_ends_timeout() {
    let trace = Trace::from_reader(
        "job_id,submit_s,leaves,duration_s,kind,time_limit_s\n1,0,1,1000,train,900\n\
         2,0,1,1000,train,1000\n3,0,2,1000,train,1000\n"
            .as_bytes(),
        "t.csv",
    )
    .unwrap();
    let cfg = SimConfig {
        exec: ExecModel::from_toml(HAND_EXEC, "hand.toml").unwrap(),
        ..SimConfig::new(Policy::fifo())
    };
    let r = run(&testbed(), ModelKind::Fm, &trace, &cfg);
    let got: Vec<_> = r.jobs.iter().map(|j| (j.id, j.end_s, j.timeout)).collect();
    // job 3 (two leaves, one-to-many +5%) needs 1050 s: it is ended at 1000
    assert_eq!(got, [(1, 900, true), (2, 1000, false), (3, 1000, true)]);
    let m = Metrics::of(&r);
    assert_eq!((m.timeouts, m.makespan_s, m.lower_bound_s), (2, 1000, 1000));
}

/// Every job's rows are held by no other job at the same time.
fn no_overlaps(r: &RunResult) -> Result<(), String> {
    let mut by_row: std::collections::BTreeMap<u32, Vec<(u64, u64, u64)>> = Default::default();
    for j in &r.jobs {
        for &row in &j.rows {
            by_row
                .entry(row)
                .or_default()
                .push((j.start_s, j.end_s, j.id));
        }
    }
    for (row, mut v) in by_row {
        v.sort();
        for w in v.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(format!("row {row}: jobs {} and {} overlap", w[0].2, w[1].2));
            }
        }
    }
    Ok(())
}

fn arb_case() -> impl Strategy<Value = (GenSpec, ModelKind, Policy, u64, &'static str, usize)> {
    (
        0u64..10_000,
        prop::sample::select(Category::ALL.to_vec()),
        prop::sample::select(KindMix::ALL.to_vec()),
        prop::sample::select(ModelKind::ALL.to_vec()),
        prop::sample::select(vec![
            PolicyKind::Fifo,
            PolicyKind::Backfill,
            PolicyKind::Conservative,
        ]),
        prop::sample::select(vec![0.5, 1.0, 4.0]),
        100u64..=120,
        (
            prop::sample::select(vec![0usize, 3, 14]),
            prop::sample::select(vec![
                Order::Submit,
                Order::Shortest,
                Order::Longest,
                Order::Adaptive,
            ]),
        ),
        prop::sample::select(vec![
            ("a100-40gb-x2", 1usize),
            ("a100-40gb-x2", 2),
            ("h100-80gb-x8", 1),
        ]),
        prop::option::of(prop::sample::select(vec![
            (2u32, Oversize::Drop),
            (4, Oversize::Clamp),
        ])),
    )
        .prop_map(
            |(seed, cat, kind, model, policy, load, drain, (window, order), (topo, hosts), cap)| {
                let hw = Hardware::load(topo, hosts).unwrap();
                let mut g = GenSpec::paper(cat, kind, seed, hw.total_leaves());
                g.load = load;
                if hosts > 1 || topo != "a100-40gb-x2" {
                    g.jobs = Some(150);
                }
                if let Some((m, o)) = cap {
                    g.max_size = Some(m);
                    g.oversize = o;
                }
                let policy = Policy {
                    kind: policy,
                    window,
                    order,
                    aging_pct: 100,
                };
                (g, model, policy, drain, topo, hosts)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_run_keeps_the_invariants((g, model, policy, drain, topo, hosts) in arb_case()) {
        let hw = Hardware::load(topo, hosts).unwrap();
        let trace = generate(&g).unwrap();
        let exec = ExecModel::default();
        let cfg = SimConfig {
            policy,
            drain_s: drain,
            exec: exec.clone(),
            record_rows: true,
            fairshare: None,
        };
        let r = run(&hw, model, &trace, &cfg);
        let m = Metrics::of(&r);
        prop_assert_eq!(r.jobs.len() + r.not_run.len(), trace.jobs.len());
        let too_big = trace.jobs.iter().filter(|j| j.leaves > 4).count();
        let expect_not_run = if model == ModelKind::Sm { too_big } else { 0 };
        prop_assert_eq!(r.not_run.len(), expect_not_run);
        prop_assert!(m.makespan_s >= m.lower_bound_s, "{:?}", m);
        prop_assert!((0.0..=100.0).contains(&m.ext_frag_pct_of_makespan), "{:?}", m);
        prop_assert!(m.utilization <= 1.0 + 1e-9 && m.utilization > 0.0, "{:?}", m);
        let inter = exec.interference(model);
        for j in &r.jobs {
            prop_assert!(j.start_s >= j.submit_s);
            prop_assert_eq!(j.jct_s(), j.wait_s() + j.run_s + j.drain_s);
            prop_assert!(j.run_s >= j.duration_s || (j.timeout && j.run_s == j.limit_s));
            prop_assert!(j.run_s <= j.limit_s);
            let most = j.duration_s as f64 * inter * if model == ModelKind::Fm { 1.10 } else { 1.0 };
            prop_assert!(j.run_s as f64 <= most.ceil(), "job {} runs {} of {}", j.id, j.run_s, j.duration_s);
            prop_assert!(j.ext_frag_s <= j.wait_s());
            prop_assert!(j.slices >= j.need);
            prop_assert_eq!(j.drain_s % drain, 0);
            if model != ModelKind::Dm {
                prop_assert_eq!(j.drain_s, 0);
            }
            // Inference jobs may wait for their own GPU's reconfiguration, never be suspended.
            if j.kind == JobKind::Infer {
                prop_assert!(j.drain_s <= drain);
            }
        }
        if model == ModelKind::Dm {
            prop_assert_eq!(m.reconfig_s, m.reconfigurations * drain);
        } else {
            prop_assert_eq!(m.reconfigurations, 0);
        }
        if let Err(e) = no_overlaps(&r) {
            prop_assert!(false, "{}", e);
        }
    }
}

fn flexsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flexsim"))
        .args(args)
        .output()
        .expect("flexsim runs")
}

fn ok(args: &[&str]) -> Vec<u8> {
    let out = flexsim(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn same_seed_gives_byte_identical_output() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let gen = |out: &str, seed: &str| {
        ok(&[
            "gen",
            "--category",
            "balanced",
            "--kind",
            "mixed",
            "--seed",
            seed,
            "--out",
            out,
        ]);
        std::fs::read(out).unwrap()
    };
    let a = gen(&p("a.csv"), "7");
    assert_eq!(a, gen(&p("b.csv"), "7"));
    assert_ne!(a, gen(&p("c.csv"), "8"));
    for model in ["fm", "dm", "sm"] {
        let args = ["run", "--trace", &p("a.csv"), "--model", model, "--json"];
        assert_eq!(ok(&args), ok(&args), "{model}");
    }
    let cmp = |dir: &str| {
        let out = ok(&[
            "compare",
            "--traces-per-category",
            "2",
            "--kinds",
            "train",
            "--out-dir",
            dir,
        ]);
        let files = [
            "compare.json",
            "runs.csv",
            "ratios.csv",
            "ratios-train-fifo.svg",
            "gantt-dm.svg",
        ];
        (
            out,
            files.map(|f| std::fs::read(std::path::Path::new(dir).join(f)).unwrap()),
        )
    };
    assert_eq!(cmp(&p("x")), cmp(&p("y")));
}

#[test]
fn bad_trace_rows_are_rejected_with_their_line() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("trace.csv");
    std::fs::write(
        &path,
        "job_id,submit_s,leaves,duration_s,kind\n1,0,2,600,train\n# a comment\n2,5,0,600,train\n",
    )
    .unwrap();
    let out = flexsim(&["run", "--trace", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:4: leaves \"0\" must be at least 1",
            path.display()
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    std::fs::write(
        &path,
        "job_id,submit_s,leaves,duration_s,kind\n1,0,2,600,gpu\n",
    )
    .unwrap();
    let out = flexsim(&["run", "--trace", path.to_str().unwrap(), "--model", "dm"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(":2: kind \"gpu\" must be train or infer")
    );
}

#[test]
fn jobs_static_mig_cannot_run_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("t.csv");
    std::fs::write(&path, HAND_TRACE).unwrap();
    let out = flexsim(&[
        "run",
        "--trace",
        path.to_str().unwrap(),
        "--model",
        "sm",
        "--csv",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 of 5 jobs can never run under sm: job 3"),
        "{err}"
    );
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("sm,backfill/14,4,1,"),
        "{csv}"
    );
}

#[test]
fn dependencies_in_the_after_column_order_the_jobs() {
    // Job 2 would fit beside job 1 at once, but waits for it; job 3 waits for job 9, which
    // never ends (it does not exist), and is reported as never started.
    let trace = Trace::from_reader(
        "job_id,submit_s,leaves,duration_s,kind,after\n\
         1,0,2,1000,train,\n\
         2,0,1,100,train,1\n\
         3,0,1,100,train,9\n"
            .as_bytes(),
        "deps.csv",
    )
    .unwrap();
    assert_eq!(trace.jobs[1].after, [1]);
    let cfg = SimConfig::new(Policy::backfill(14));
    let r = run(&testbed(), ModelKind::Fm, &trace, &cfg);
    let end = |id: u64| {
        r.jobs
            .iter()
            .find(|j| j.id == id)
            .map(|j| (j.start_s, j.end_s))
    };
    let (_, first_end) = end(1).unwrap();
    let (second_start, _) = end(2).unwrap();
    assert!(second_start >= first_end, "{:?}", r.jobs);
    assert!(r.not_run.iter().any(|n| n.id == 3));
    let mut out = Vec::new();
    trace.write(&mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains(",after\n"));
}

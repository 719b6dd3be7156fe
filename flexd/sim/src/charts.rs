//! SVG charts (plotters): ratio box plots in the manner of the paper's Figures 7 and 8, and a
//! per-leaf Gantt chart of one run.

use super::compare::{Comparison, RatioRow, Spread};
use super::engine::RunResult;
use super::gen::{Category, KindMix};
use super::metrics::policy_name;
use super::SimError;
use flex_sched::Policy;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const PAIRS: [(&str, RGBColor); 2] = [
    ("fm/dm", RGBColor(31, 119, 180)),
    ("fm/sm", RGBColor(214, 39, 40)),
];

fn chart_err(path: &Path) -> impl Fn(String) -> SimError + '_ {
    move |message| SimError::Chart {
        path: path.display().to_string(),
        message,
    }
}

/// Box plots of the ratios of one kind and policy: one panel per metric, one box per category
/// and model pair (box: quartiles, whiskers: range, bar: median).
/// Returns the SVG text; `path` only names it in errors.
pub fn ratio_boxes(
    c: &Comparison,
    kind: KindMix,
    policy: Policy,
    path: &Path,
) -> Result<String, SimError> {
    let mut svg = String::new();
    draw_boxes(c, kind, policy, &mut svg).map_err(chart_err(path))?;
    Ok(svg)
}

/// The chart of one box-plot panel: categories along x, ratios along y.
type BoxChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn draw_boxes(
    c: &Comparison,
    kind: KindMix,
    policy: Policy,
    svg: &mut String,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let root = SVGBackend::with_string(svg, (1100, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let title = format!(
        "Flex-MIG ratios, {kind} traces, {} (below 1: fm lower)",
        policy_name(&policy)
    );
    let root = root.titled(&title, ("sans-serif", 20)).map_err(|x| e(&x))?;
    let shown = ["run", "wait", "makespan", "utilization"];
    for (panel, metric) in root.split_evenly((2, 2)).iter().zip(shown) {
        let rows: Vec<&RatioRow> = c
            .ratios
            .iter()
            .filter(|r| r.kind == kind && r.policy == policy && r.metric == metric)
            .collect();
        draw_panel(panel, &c.spec.categories, metric, &rows)?;
    }
    root.present().map_err(|x| e(&x))
}

/// One metric's panel of [`ratio_boxes`]: axes fitted to its ratios, a line at 1, a box per
/// category and model pair, and a legend naming the pairs.
fn draw_panel(
    panel: &DrawingArea<SVGBackend, Shift>,
    cats: &[Category],
    metric: &str,
    rows: &[&RatioRow],
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let (lo, hi) = ratio_range(rows);
    let caption = match metric {
        "run" => "run time (the paper's JCT)",
        m => m,
    };
    let n = cats.len() as f64;
    let mut chart = ChartBuilder::on(panel)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5f64..n - 0.5, lo..hi)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(cats.len() + 1)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
                cats[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, 1.0), (n - 0.5, 1.0)],
            BLACK.mix(0.5),
        )))
        .map_err(|x| e(&x))?;
    for (j, (pair, color)) in PAIRS.iter().enumerate() {
        let off = (j as f64 - 0.5) * 0.3;
        let mut first = true;
        for (i, cat) in cats.iter().enumerate() {
            let cat = cat.to_string();
            let Some(r) = rows.iter().find(|r| r.category == cat && r.pair == *pair) else {
                continue;
            };
            let label = first.then_some(*pair);
            draw_box(&mut chart, i as f64 + off, &r.spread, *color, label)?;
            first = false;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))
}

/// A panel's y range: every ratio of `rows` and 1 (parity), padded, with room above the boxes
/// for the legend.
fn ratio_range(rows: &[&RatioRow]) -> (f64, f64) {
    let (lo, hi) = rows.iter().fold((1.0f64, 1.0f64), |(lo, hi), r| {
        (lo.min(r.spread.min), hi.max(r.spread.max))
    });
    let pad = ((hi - lo) * 0.1).max(0.02);
    (lo - pad, hi + 3.0 * pad)
}

/// One box at `x`: quartiles, a median bar and whiskers to the range; `label` (given for a
/// pair's first box of a panel) puts the pair in the legend once.
fn draw_box(
    chart: &mut BoxChart,
    x: f64,
    s: &Spread,
    color: RGBColor,
    label: Option<&str>,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let w = 0.12;
    let series = chart
        .draw_series([
            Rectangle::new([(x - w, s.p25), (x + w, s.p75)], color.mix(0.35).filled()),
            Rectangle::new([(x - w, s.p25), (x + w, s.p75)], color.stroke_width(1)),
        ])
        .map_err(|x| e(&x))?;
    if let Some(label) = label {
        series
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .draw_series([
            PathElement::new(
                vec![(x - w, s.median), (x + w, s.median)],
                color.stroke_width(3),
            ),
            PathElement::new(vec![(x, s.min), (x, s.p25)], color.stroke_width(1)),
            PathElement::new(vec![(x, s.p75), (x, s.max)], color.stroke_width(1)),
            PathElement::new(
                vec![(x - w / 2.0, s.min), (x + w / 2.0, s.min)],
                color.stroke_width(1),
            ),
            PathElement::new(
                vec![(x - w / 2.0, s.max), (x + w / 2.0, s.max)],
                color.stroke_width(1),
            ),
        ])
        .map_err(|x| e(&x))?;
    Ok(())
}

/// Gantt chart of one run: a row per leaf (Flex-MIG) or per memory slice (one-to-one models), a
/// bar per job from its start to its end. The run must have recorded its rows. Returns the SVG
/// text; `path` only names it in errors.
pub fn gantt(r: &RunResult, title: &str, path: &Path) -> Result<String, SimError> {
    let mut svg = String::new();
    draw_gantt(r, title, &mut svg).map_err(chart_err(path))?;
    Ok(svg)
}

fn draw_gantt(r: &RunResult, title: &str, svg: &mut String) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let rows = r.row_labels.len().max(1);
    let first = r.jobs.iter().map(|j| j.submit_s).min().unwrap_or(0);
    let end = r
        .jobs
        .iter()
        .map(|j| j.end_s)
        .max()
        .unwrap_or(1)
        .max(first + 1);
    let hours = |t: u64| (t - first) as f64 / 3600.0;
    let root = SVGBackend::with_string(svg, (1200, 120 + 26 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..hours(end), 0f64..rows as f64)
        .map_err(|x| e(&x))?;
    let labels = &r.row_labels;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows * 2 + 1)
        .y_label_formatter(&|v| {
            let i = v - 0.5;
            if (i - i.round()).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .x_desc("hours since the first submission")
        .draw()
        .map_err(|x| e(&x))?;
    for j in &r.jobs {
        let color = Palette99::pick(j.id as usize);
        let (a, b) = (hours(j.start_s), hours(j.end_s));
        chart
            .draw_series(j.rows.iter().flat_map(|&row| {
                let y = row as f64;
                [
                    Rectangle::new([(a, y + 0.1), (b, y + 0.9)], color.mix(0.8).filled()),
                    Rectangle::new([(a, y + 0.1), (b, y + 0.9)], BLACK.mix(0.6).stroke_width(1)),
                ]
            }))
            .map_err(|x| e(&x))?;
        if let Some(&row) = j.rows.first() {
            chart
                .draw_series(std::iter::once(Text::new(
                    j.id.to_string(),
                    (a + (b - a) * 0.05, row as f64 + 0.75),
                    ("sans-serif", 11),
                )))
                .map_err(|x| e(&x))?;
        }
    }
    root.present().map_err(|x| e(&x))
}

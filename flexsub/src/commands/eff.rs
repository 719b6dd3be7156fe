//! flexeff: how well a job used what it held, in the shape of Slurm's `seff` (CPU and memory
//! efficiency, run time against the limit), with the GPU rows from flexd's telemetry and a
//! right-size note for each request the job could shrink, with the figure it comes from.
//! [`report`] is a pure function of the accounting record; [`render`] prints it.

use crate::commands::acct::{fetch, parse_jobs};
use crate::error::{exit, Error};
use crate::usage;
use crate::when::{format_elapsed, local_now, secs};
use clap::Parser;
use flex_proto::{AcctQuery, AcctRecord, GpuUsage, JobState};
use std::fmt::Write as _;
use std::io::Write;

/// Show how well a finished job used its cores, memory, time and GPU leaves (like seff), and
/// what to ask for next time.
///
/// GPU figures come from flexd's telemetry samples (NVML, or a simulated topology's samples
/// file or seeded generator, labelled simulated); a figure the device does not report is "not
/// reported".
///
/// Exit codes: 0 success, 1 unknown job or bad id, 2 usage error, 3 flexd unreachable,
/// 4 permission denied, 5 protocol version mismatch, 6 flexd internal error.
#[derive(Debug, Parser)]
#[command(name = "flexeff", version)]
pub struct Args {
    /// The job (an id; an array task by its own id).
    #[arg(value_name = "JOBID")]
    pub job: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A job's efficiency, every figure with what it is a share of.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Efficiency {
    pub job: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub host: Option<String>,
    pub cores: u32,
    pub elapsed_s: u64,
    pub time_limit_s: u64,
    /// CPU time in seconds, when measured.
    pub cpu_s: Option<f64>,
    /// CPU time over cores × elapsed, percent.
    pub cpu_efficiency_pct: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    /// Host memory held, bytes (0: none reserved).
    pub mem_bytes: u64,
    pub mem_efficiency_pct: Option<f64>,
    /// Leaves held (a share of a whole GPU counts its fraction) and their profiles.
    pub leaves: f64,
    pub profiles: Vec<String>,
    /// GPU memory of the units held (each counted by its share), bytes.
    pub gpu_mem_held_bytes: u64,
    pub gpu: Option<GpuUsage>,
    /// What to ask for next time.
    pub advice: Vec<Advice>,
}

/// One request the job could make smaller, and the figure that says so.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Advice {
    /// The option as flexsub takes it: `--leaves 1`, `--mem 2G`, `-t 00:20:00`.
    pub option: String,
    pub because: String,
}

/// The efficiency of the job `r` (its figures so far while it runs).
pub fn report(r: &AcctRecord, now: u64) -> Efficiency {
    let elapsed = usage::elapsed(r, now);
    let cores = r.cores.len() as u32;
    let cpu_s = r.cpu_usec.map(|u| u as f64 / 1e6);
    let core_s = cores as f64 * elapsed as f64;
    let pct = |a: f64, b: f64| (b > 0.0).then(|| a / b * 100.0);
    let mut profiles: Vec<String> = r.leaves.iter().map(|l| l.profile.clone()).collect();
    profiles.sort();
    profiles.dedup();
    let mut e = Efficiency {
        job: r.array.map_or_else(|| r.id.to_string(), |a| a.to_string()),
        name: r.name.clone(),
        user: r.user.clone(),
        account: r.account.clone(),
        state: r.state,
        exit_code: r.exit_code,
        host: r.host.clone(),
        cores,
        elapsed_s: elapsed,
        time_limit_s: r.request.time_limit_s,
        cpu_s,
        cpu_efficiency_pct: cpu_s.and_then(|c| pct(c, core_s)),
        max_rss_bytes: r.max_rss,
        mem_bytes: r.mem_bytes,
        mem_efficiency_pct: r.max_rss.and_then(|m| pct(m as f64, r.mem_bytes as f64)),
        leaves: usage::leaves(r),
        profiles,
        gpu_mem_held_bytes: usage::memory_bytes(r) as u64,
        gpu: r.gpu_usage.clone(),
        advice: Vec::new(),
    };
    e.advice = advice(r, &e);
    e
}

/// Right-size notes: fewer leaves, a smaller fraction, less memory, a shorter time limit.
fn advice(r: &AcctRecord, e: &Efficiency) -> Vec<Advice> {
    let mut v = Vec::new();
    if let Some(a) = r.gpu_usage.as_ref().and_then(|g| gpu_advice(r, g)) {
        v.push(a);
    }
    if let (Some(rss), true) = (r.max_rss, r.mem_bytes > 0) {
        // Half of what it held or less: ask for the peak and a quarter more, in 256 MiB steps.
        if rss.saturating_mul(2) <= r.mem_bytes {
            let step = 256u64 << 20;
            let want = (rss + rss / 4).div_ceil(step).max(1) * step;
            if want < r.mem_bytes {
                v.push(Advice {
                    option: format!("--mem {}", mem_option(want)),
                    because: format!(
                        "peak resident memory {} of {} held",
                        bytes(rss),
                        bytes(r.mem_bytes)
                    ),
                });
            }
        }
    }
    let finished = r.end_time.is_some() && r.state.is_finished();
    if finished && r.state != JobState::Timeout && e.time_limit_s > 0 {
        // Ran less than half its limit: half as long again as it ran, in whole minutes.
        if e.elapsed_s.saturating_mul(2) <= e.time_limit_s {
            let want = (e.elapsed_s * 3 / 2).div_ceil(60).max(1) * 60;
            if want < e.time_limit_s {
                v.push(Advice {
                    option: format!("-t {}", format_elapsed(want)),
                    because: format!(
                        "ran {} of its {} limit",
                        format_elapsed(e.elapsed_s),
                        format_elapsed(e.time_limit_s)
                    ),
                });
            }
        }
    }
    v
}

/// Fewer leaves (MIG, or several whole GPUs), or a smaller share of one whole GPU. Needs both
/// utilisation and memory: a job whose device reports no utilisation gets no GPU note.
fn gpu_advice(r: &AcctRecord, g: &GpuUsage) -> Option<Advice> {
    let (util, mem) = (g.util_max_pct?, g.mem_max_bytes?);
    let label = if g.simulated() { " (simulated)" } else { "" };
    if let [unit] = r.leaves.as_slice() {
        if unit.profile == "gpu" {
            // One whole GPU, or a share of one (whose figures are its own processes', as
            // parts of the whole GPU): the share that holds both peaks, in tenths.
            let total = unit.memory_bytes?;
            let held = f64::from(unit.share) / 1000.0;
            let need = (util / 100.0).max(mem as f64 / total as f64);
            let tenths = (need * 10.0).ceil().max(1.0) / 10.0;
            let of = if unit.share < 1000 {
                format!("it held {} of the GPU; ", number(held))
            } else {
                String::new()
            };
            return (tenths < held).then(|| Advice {
                option: format!("--gpu-fraction {tenths:.1}"),
                because: format!(
                    "{of}peak GPU utilisation {}% and peak GPU memory {} of the GPU's {}{label}",
                    number(util),
                    bytes(mem),
                    bytes(total)
                ),
            });
        }
    }
    if r.leaves.is_empty() || r.leaves.iter().any(|l| l.share < 1000) {
        return None;
    }
    let sizes: Vec<u64> = r.leaves.iter().filter_map(|l| l.memory_bytes).collect();
    if sizes.len() != r.leaves.len() {
        return None;
    }
    let need = gres_plugin::telemetry::summary::leaves_needed(g, &sizes)?;
    if need >= r.leaves.len() {
        return None;
    }
    let worth = if util <= 100.0 { "leaf's" } else { "leaves'" };
    Some(Advice {
        option: format!("--leaves {need}"),
        because: format!(
            "it held {} leaves; compute peaked at {} {worth} worth ({}% of one leaf) and GPU \
             memory at {}, which {} of its leaves hold{label}",
            r.leaves.len(),
            number(util / 100.0),
            number(util),
            bytes(mem),
            need
        ),
    })
}

/// flexsub's `--mem` spelling of a size: whole GiB as `NG`, else MiB as `NM`.
fn mem_option(b: u64) -> String {
    if b.is_multiple_of(1 << 30) {
        format!("{}G", b >> 30)
    } else {
        format!("{}M", b.div_ceil(1 << 20))
    }
}

/// Bytes for people: `3.00 GiB`, `512.00 MiB`.
fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    }
}

/// A figure without trailing zeros: `100`, `97.5`.
fn number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The report as text, one `Label: value` line each, as seff prints.
pub fn render(e: &Efficiency) -> String {
    let mut o = String::new();
    let na = "not measured";
    let _ = writeln!(o, "Job ID: {}", e.job);
    let _ = writeln!(o, "Job Name: {}", e.name);
    let _ = writeln!(o, "User/Account: {}/{}", e.user, e.account);
    let code = e
        .exit_code
        .map_or(String::new(), |c| format!(" (exit code {c})"));
    let _ = writeln!(o, "State: {}{code}", e.state);
    let _ = writeln!(o, "Host: {}", e.host.as_deref().unwrap_or("-"));
    let _ = writeln!(o, "Cores: {}", e.cores);
    let cpu = e
        .cpu_s
        .map_or(na.to_string(), |c| format_elapsed(c.round() as u64));
    let _ = writeln!(o, "CPU Utilized: {cpu}");
    let core_walltime = format_elapsed(e.cores as u64 * e.elapsed_s);
    let _ = match e.cpu_efficiency_pct {
        Some(p) => writeln!(
            o,
            "CPU Efficiency: {p:.2}% of {core_walltime} core-walltime"
        ),
        None => writeln!(o, "CPU Efficiency: {na}"),
    };
    let _ = writeln!(o, "Job Wall-clock time: {}", format_elapsed(e.elapsed_s));
    let used = if e.time_limit_s > 0 {
        let pct = e.elapsed_s as f64 / e.time_limit_s as f64 * 100.0;
        format!(" ({pct:.2}% used)")
    } else {
        String::new()
    };
    let _ = writeln!(o, "Time Limit: {}{used}", format_elapsed(e.time_limit_s));
    let _ = writeln!(
        o,
        "Memory Utilized: {}",
        e.max_rss_bytes.map_or(na.to_string(), bytes)
    );
    let _ = match e.mem_efficiency_pct {
        Some(p) => writeln!(o, "Memory Efficiency: {p:.2}% of {}", bytes(e.mem_bytes)),
        None if e.mem_bytes == 0 => writeln!(o, "Memory Efficiency: no memory reserved"),
        None => writeln!(o, "Memory Efficiency: {na} (of {})", bytes(e.mem_bytes)),
    };
    render_gpu(&mut o, e);
    if e.advice.is_empty() {
        let _ = writeln!(o, "Right size: as asked");
    } else {
        let _ = writeln!(o, "Right size: next time ask for");
        for a in &e.advice {
            let _ = writeln!(o, "  {}: {}", a.option, a.because);
        }
    }
    o
}

fn render_gpu(o: &mut String, e: &Efficiency) {
    if e.profiles.is_empty() {
        let _ = writeln!(o, "GPU: none held");
        return;
    }
    let _ = writeln!(
        o,
        "GPU Leaves: {} ({}), {} of GPU memory",
        number(e.leaves),
        e.profiles.join(","),
        bytes(e.gpu_mem_held_bytes)
    );
    let Some(g) = &e.gpu else {
        let _ = writeln!(
            o,
            "GPU Telemetry: none (flexd sampled no GPU use of this job)"
        );
        return;
    };
    let _ = writeln!(
        o,
        "GPU Telemetry: {}, {} samples every {} s",
        g.source,
        g.samples,
        number(g.period_s)
    );
    let sim = if g.simulated() { " (simulated)" } else { "" };
    let _ = match (g.util_ave_pct, g.util_max_pct) {
        (Some(ave), Some(max)) => writeln!(
            o,
            "GPU Utilization: mean {}%, peak {}% of one leaf ({:.2}% / {:.2}% of the {} held){sim}",
            number(ave),
            number(max),
            ave / e.leaves,
            max / e.leaves,
            number(e.leaves)
        ),
        _ => writeln!(o, "GPU Utilization: not reported by the device"),
    };
    let _ = match (g.mem_ave_bytes, g.mem_max_bytes) {
        (Some(ave), Some(max)) => writeln!(
            o,
            "GPU Memory Utilized: peak {}, mean {} ({:.2}% of {} held){sim}",
            bytes(max),
            bytes(ave),
            max as f64 / e.gpu_mem_held_bytes.max(1) as f64 * 100.0,
            bytes(e.gpu_mem_held_bytes)
        ),
        _ => writeln!(o, "GPU Memory Utilized: not reported by the device"),
    };
    let _ = match g.energy_j {
        Some(j) => writeln!(
            o,
            "GPU Energy: {} J ({:.2} Wh), its part of its GPUs' power{sim}",
            number(j),
            j / 3600.0
        ),
        None => writeln!(o, "GPU Energy: not reported by the device"),
    };
}

/// Run flexeff; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let jobs = parse_jobs(std::slice::from_ref(&a.job))?;
    let now = secs(&local_now());
    let q = AcctQuery {
        start: 0,
        end: now,
        jobs: jobs.clone(),
        ..AcctQuery::default()
    };
    let reply = fetch(q, "flexeff")?;
    let Some(r) = reply.jobs.iter().find(|r| jobs.contains(&r.id)) else {
        return Err(Error::Input(format!("job {} is not known to flexd", a.job)));
    };
    let e = report(r, now);
    let text = if a.json {
        serde_json::to_string_pretty(&e).expect("the report serializes") + "\n"
    } else {
        render(&e)
    };
    out.write_all(text.as_bytes()).map_err(Error::output)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flex_proto::AcctLeaf;
    use gres_plugin::{JobId, Request};

    const GIB: u64 = 1 << 30;

    /// Job 12: four 1g.10gb leaves (9.75 GiB each), 4 cores, 8 GiB of host memory, one hour
    /// asked; it ran 10 minutes, used 6 minutes of CPU and 1.5 GiB of RAM.
    fn four_leaves(gpu: Option<GpuUsage>) -> AcctRecord {
        AcctRecord {
            id: JobId(12),
            name: "train".into(),
            user: "ann".into(),
            uid: 1000,
            gid: 1000,
            account: "physics".into(),
            state: JobState::Completed,
            submit_time: 1000,
            eligible_time: 1000,
            start_time: Some(1000),
            end_time: Some(1600),
            exit_code: Some(0),
            signal: None,
            reason: None,
            request: Request::leaves(4, 3600),
            host: Some("gpu1".into()),
            leaves: (0..4)
                .map(|i| AcctLeaf {
                    uuid: format!("MIG-{i}"),
                    profile: "1g.10gb".into(),
                    gpu: 0,
                    share: 1000,
                    sm_slices: 1,
                    memory_bytes: Some(39 * GIB / 4),
                })
                .collect(),
            cores: vec![0, 1, 2, 3],
            mem_bytes: 8 * GIB,
            array: None,
            restarts: 0,
            max_rss: Some(3 * GIB / 2),
            cpu_usec: Some(360_000_000),
            gpu_usage: gpu,
            comment: None,
        }
    }

    fn one_leafs_worth(source: &str) -> GpuUsage {
        GpuUsage {
            source: source.into(),
            samples: 20,
            period_s: 30.0,
            mem_max_bytes: Some(3 * GIB),
            mem_ave_bytes: Some(5 * GIB / 2),
            util_max_pct: Some(100.0),
            util_ave_pct: Some(92.5),
            energy_j: Some(84_000.0),
        }
    }

    #[test]
    fn a_four_leaf_job_that_used_one_leafs_worth_is_told_to_ask_for_one() {
        let r = four_leaves(Some(one_leafs_worth("simulated (four.csv)")));
        let text = render(&report(&r, 2000));
        assert_eq!(
            text,
            "Job ID: 12\n\
             Job Name: train\n\
             User/Account: ann/physics\n\
             State: COMPLETED (exit code 0)\n\
             Host: gpu1\n\
             Cores: 4\n\
             CPU Utilized: 00:06:00\n\
             CPU Efficiency: 15.00% of 00:40:00 core-walltime\n\
             Job Wall-clock time: 00:10:00\n\
             Time Limit: 01:00:00 (16.67% used)\n\
             Memory Utilized: 1.50 GiB\n\
             Memory Efficiency: 18.75% of 8.00 GiB\n\
             GPU Leaves: 4 (1g.10gb), 39.00 GiB of GPU memory\n\
             GPU Telemetry: simulated (four.csv), 20 samples every 30 s\n\
             GPU Utilization: mean 92.5%, peak 100% of one leaf (23.12% / 25.00% of the 4 held) (simulated)\n\
             GPU Memory Utilized: peak 3.00 GiB, mean 2.50 GiB (7.69% of 39.00 GiB held) (simulated)\n\
             GPU Energy: 84000 J (23.33 Wh), its part of its GPUs' power (simulated)\n\
             Right size: next time ask for\n  \
             --leaves 1: it held 4 leaves; compute peaked at 1 leaf's worth (100% of one leaf) and GPU memory at 3.00 GiB, which 1 of its leaves hold (simulated)\n  \
             --mem 2G: peak resident memory 1.50 GiB of 8.00 GiB held\n  \
             -t 00:15:00: ran 00:10:00 of its 01:00:00 limit\n"
        );
    }

    #[test]
    fn memory_or_compute_beyond_a_leaf_keeps_more_leaves() {
        let mut g = one_leafs_worth("nvml");
        g.util_max_pct = Some(180.0);
        let e = report(&four_leaves(Some(g.clone())), 2000);
        assert_eq!(e.advice[0].option, "--leaves 2");
        assert!(
            e.advice[0].because.ends_with("which 2 of its leaves hold"),
            "{:?}",
            e.advice
        );
        g.util_max_pct = Some(100.0);
        g.mem_max_bytes = Some(30 * GIB);
        let e = report(&four_leaves(Some(g)), 2000);
        // 30 GiB needs all four 9.75 GiB leaves: no fewer to ask for.
        assert!(
            e.advice.iter().all(|a| !a.option.starts_with("--leaves")),
            "{:?}",
            e.advice
        );
    }

    #[test]
    fn a_device_without_a_utilisation_counter_is_not_reported_and_gets_no_gpu_advice() {
        let mut g = one_leafs_worth("nvml");
        g.util_max_pct = None;
        g.util_ave_pct = None;
        let e = report(&four_leaves(Some(g)), 2000);
        let text = render(&e);
        assert!(
            text.contains("\nGPU Utilization: not reported by the device\n"),
            "{text}"
        );
        assert!(
            text.contains("\nGPU Telemetry: nvml, 20 samples every 30 s\n"),
            "{text}"
        );
        assert!(e.advice.iter().all(|a| !a.option.starts_with("--leaves")));
        let none = render(&report(&four_leaves(None), 2000));
        assert!(
            none.contains("\nGPU Telemetry: none (flexd sampled no GPU use of this job)\n"),
            "{none}"
        );
    }

    #[test]
    fn a_whole_gpu_used_lightly_is_told_a_fraction() {
        let mut r = four_leaves(Some(GpuUsage {
            util_max_pct: Some(23.0),
            mem_max_bytes: Some(12 * GIB),
            ..one_leafs_worth("nvml")
        }));
        r.leaves.truncate(1);
        r.leaves[0].profile = "gpu".into();
        r.leaves[0].memory_bytes = Some(80 * GIB);
        let e = report(&r, 2000);
        assert_eq!(e.advice[0].option, "--gpu-fraction 0.3");
        assert_eq!(
            e.advice[0].because,
            "peak GPU utilisation 23% and peak GPU memory 12.00 GiB of the GPU's 80.00 GiB"
        );
    }

    #[test]
    fn a_share_of_a_gpu_used_lightly_is_told_a_smaller_fraction() {
        let share = |util: f64, mem: u64| {
            let mut r = four_leaves(Some(GpuUsage {
                util_max_pct: Some(util),
                mem_max_bytes: Some(mem),
                ..one_leafs_worth("nvml")
            }));
            r.leaves.truncate(1);
            r.leaves[0].profile = "gpu".into();
            r.leaves[0].share = 500;
            r.leaves[0].memory_bytes = Some(80 * GIB);
            report(&r, 2000).advice
        };
        let a = share(12.0, 3 * GIB);
        assert_eq!(a[0].option, "--gpu-fraction 0.2");
        assert_eq!(
            a[0].because,
            "it held 0.5 of the GPU; peak GPU utilisation 12% and peak GPU memory 3.00 GiB of \
             the GPU's 80.00 GiB"
        );
        // Compute or memory that needs the half it held: no smaller share to ask for.
        assert!(share(45.0, 3 * GIB)
            .iter()
            .all(|a| !a.option.starts_with("--gpu-fraction")));
        assert!(share(10.0, 36 * GIB)
            .iter()
            .all(|a| !a.option.starts_with("--gpu-fraction")));
    }
}

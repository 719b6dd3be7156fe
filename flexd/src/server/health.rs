//! Supervisor health: a running job whose supervisor is gone ends from its status file, or as
//! NODE_FAIL with what is left of it killed. "Gone" must be proven: a look that fails (out of
//! descriptors, an I/O error) leaves the job as it is until the next look.

use super::{unix_now, Shared};
use crate::exec::files::{self, Liveness};
use crate::state::{node_fail, Outcome};
use gres_plugin::JobId;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// End the running jobs whose supervisor is gone: from their status file when it wrote one,
/// NODE_FAIL (and kill what is left of the job) otherwise.
pub(crate) fn check_supervisors(shared: &Shared) {
    let sups = shared.with_core(|c| c.state.supervisors());
    for (job, pid) in sups {
        match supervisor_gone(shared, job, pid) {
            Ok(Some(outcome)) => {
                tracing::info!(
                    "job {job}: its supervisor is gone; ending it as {}",
                    outcome.state
                );
                shared.with_core(|c| c.state.finish(job, outcome));
            }
            Ok(None) => {}
            Err(e) => warn_limited(&format!(
                "job {job}: cannot check its supervisor ({e}); looking again later"
            )),
        }
    }
}

/// How the job ended when its supervisor `pid` is proven gone; None while it (or a
/// successor) runs; Err when it cannot be told.
fn supervisor_gone(shared: &Shared, job: JobId, pid: u32) -> Result<Option<Outcome>, String> {
    match files::is_supervisor(pid, job, &shared.run_dir) {
        Liveness::Alive => return Ok(None),
        Liveness::Unknown(e) => return Err(e),
        Liveness::Gone => {}
    }
    if let Some(s) = files::read_status(&shared.run_dir, job)? {
        return Ok(Some(Outcome::from(&s)));
    }
    if let Some(p) = files::find_supervisor(&shared.run_dir, job, None)? {
        shared.with_core(|c| c.state.set_supervisor(job, p));
        return Ok(None);
    }
    // It may have written its status between the two looks.
    if let Some(s) = files::read_status(&shared.run_dir, job)? {
        return Ok(Some(Outcome::from(&s)));
    }
    kill_leftovers(&shared.run_dir, job);
    Ok(Some(node_fail(
        unix_now(),
        format!("its supervisor (pid {pid}) died without recording an end"),
    )))
}

/// Kill what is left of a job whose supervisor vanished, when it is proven to be the job's
/// (see [`files::orphaned`]).
pub(crate) fn kill_leftovers(run_dir: &std::path::Path, job: JobId) {
    let run = match files::read_run(run_dir, job) {
        Ok(Some(run)) => run,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("job {job}: not killing what is left of it: {e}");
            return;
        }
    };
    if let Err(why) = files::orphaned(&run) {
        tracing::warn!("job {job}: not killing what is left of it: {why}");
        return;
    }
    match files::kill_orphaned_group(&run) {
        Ok(0) => {}
        Ok(n) => tracing::warn!("job {job}: killed {n} processes left without a supervisor"),
        Err(e) => tracing::warn!("job {job}: not killing its process group: {e}"),
    }
    // What left the group is still in the job's cgroup.
    let cgroup = run.cgroup.as_deref();
    let existing = |p| crate::exec::cgroup::JobCgroup::existing(p, &run.cgroups_v1);
    if let Some(cg) = cgroup.and_then(existing) {
        let n = cg.pids().len();
        if n > 0 {
            tracing::warn!("job {job}: killing {n} processes left in its cgroup");
        }
        if !cg.kill_and_remove(Duration::from_secs(2)) {
            tracing::warn!("job {job}: cannot remove its cgroup {}", cg.path.display());
        }
    }
}

/// A warning at most once a second, with the count of those held back since the last one:
/// under resource exhaustion the same trouble repeats hundreds of times a second.
pub(crate) fn warn_limited(msg: &str) {
    static LAST: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    match &mut *last {
        Some((at, held)) if now.duration_since(*at) < Duration::from_secs(1) => *held += 1,
        slot => {
            let held = slot.map_or(0, |(_, h)| h);
            if held > 0 {
                tracing::warn!("{msg} ({held} similar warnings held back)");
            } else {
                tracing::warn!("{msg}");
            }
            *slot = Some((now, 0));
        }
    }
}

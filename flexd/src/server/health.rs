//! Supervisor health: a running job whose supervisor is gone ends from its status file, or as
//! NODE_FAIL with what is left of it killed.

use super::{unix_now, Shared};
use crate::exec::files;
use crate::state::{node_fail, Outcome};
use gres_plugin::JobId;
use std::time::Duration;

/// End the running jobs whose supervisor is gone: from their status file when it wrote one,
/// NODE_FAIL (and kill what is left of the job) otherwise.
pub(crate) fn check_supervisors(shared: &Shared) {
    let sups = shared.with_core(|c| c.state.supervisors());
    for (job, pid) in sups {
        if files::is_supervisor(pid, job, &shared.run_dir) {
            continue;
        }
        let outcome = match files::read_status(&shared.run_dir, job) {
            Ok(Some(s)) => Outcome::from(&s),
            other => {
                if let Some(p) = files::find_supervisor(&shared.run_dir, job, None) {
                    shared.with_core(|c| c.state.set_supervisor(job, p));
                    continue;
                }
                match files::read_status(&shared.run_dir, job) {
                    Ok(Some(s)) => Outcome::from(&s),
                    _ => {
                        if let Err(e) = other {
                            tracing::error!("job {job}: {e}");
                        }
                        kill_leftovers(&shared.run_dir, job);
                        node_fail(
                            unix_now(),
                            format!("its supervisor (pid {pid}) died without recording an end"),
                        )
                    }
                }
            }
        };
        tracing::info!(
            "job {job}: its supervisor is gone; ending it as {}",
            outcome.state
        );
        shared.with_core(|c| c.state.finish(job, outcome));
    }
}

/// Kill what is left of a job whose supervisor vanished.
pub(crate) fn kill_leftovers(run_dir: &std::path::Path, job: JobId) {
    if let Ok(Some(run)) = files::read_run(run_dir, job) {
        if let Some(pgid) = run.job_pgid {
            let n = files::kill_orphaned_group(pgid, run.uid);
            if n > 0 {
                tracing::warn!("job {job}: killed {n} processes left without a supervisor");
            }
        }
        // What left the group is still in the job's cgroup.
        let cgroup = run.cgroup.as_deref();
        if let Some(cg) = cgroup.and_then(crate::exec::cgroup::JobCgroup::existing) {
            let n = cg.pids().len();
            if n > 0 {
                tracing::warn!("job {job}: killing {n} processes left in its cgroup");
            }
            if !cg.kill_and_remove(Duration::from_secs(2)) {
                tracing::warn!("job {job}: cannot remove its cgroup {}", cg.path.display());
            }
        }
    }
}

//! Finished jobs' scripts and environments are deleted once the job has been finished for
//! `keep_finished` (as Slurm forgets a job's script after MinJobAge): the job's row stays for
//! accounting, without them. A text many jobs share (`scripts`, `envs`) goes with the last job
//! that holds it. Without this the per-user quota for queued scripts would not bound the state
//! directory: every job submitted and cancelled would leave its script behind for good.

use super::{Bodies, StoreError};
use gres_plugin::JobId;
use rusqlite::{params, Transaction};
use std::collections::BTreeSet;

/// Delete the scripts and environments of the finished jobs `jobs` (those flexd has just
/// forgotten); returns how many jobs had any.
pub(super) fn jobs(
    tx: &Transaction,
    bodies: &mut Bodies,
    jobs: &[JobId],
) -> Result<usize, StoreError> {
    let mut texts = Texts::default();
    let mut n = 0;
    for job in jobs {
        n += texts.take(tx, *job)?;
    }
    texts.delete_unheld(tx, bodies)?;
    Ok(n)
}

/// Delete the scripts and environments of the jobs that finished before `before` (at start:
/// the jobs a flexd that was down forgot while it was); returns how many jobs had any.
pub(super) fn finished_before(
    tx: &Transaction,
    bodies: &mut Bodies,
    before: u64,
) -> Result<usize, StoreError> {
    let expired: Vec<JobId> = tx
        .prepare_cached(
            "SELECT id FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING') AND end_time < ?1
                AND (script_id IS NOT NULL OR env_id IS NOT NULL OR script != '' OR env != '')",
        )?
        .query_map([before as i64], |r| r.get::<_, i64>(0))?
        .map(|id| id.map(|id| JobId(id as u64)))
        .collect::<Result<_, _>>()?;
    jobs(tx, bodies, &expired)
}

/// The shared texts the purged jobs held.
#[derive(Default)]
struct Texts {
    scripts: BTreeSet<i64>,
    envs: BTreeSet<i64>,
}

impl Texts {
    /// Take the texts off one finished job (a pending or running one keeps them); 1 when it
    /// had any.
    fn take(&mut self, tx: &Transaction, job: JobId) -> Result<usize, StoreError> {
        let held: Option<(Option<i64>, Option<i64>)> = tx
            .prepare_cached(
                "SELECT script_id, env_id FROM jobs WHERE id = ?1
                    AND state NOT IN ('PENDING', 'RUNNING')",
            )?
            .query_row([job.0 as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        let Some((script, env)) = held else {
            return Ok(0);
        };
        self.scripts.extend(script);
        self.envs.extend(env);
        let changed = tx
            .prepare_cached(
                "UPDATE jobs SET script = '', env = '', script_id = NULL, env_id = NULL
                 WHERE id = ?1
                    AND (script_id IS NOT NULL OR env_id IS NOT NULL OR script != '' OR env != '')",
            )?
            .execute([job.0 as i64])?;
        Ok(changed)
    }

    /// Delete the texts no job holds any more.
    fn delete_unheld(&self, tx: &Transaction, bodies: &mut Bodies) -> Result<(), StoreError> {
        if self.scripts.is_empty() && self.envs.is_empty() {
            return Ok(());
        }
        for (ids, sql) in [
            (
                &self.scripts,
                "DELETE FROM scripts WHERE id = ?1
                    AND NOT EXISTS (SELECT 1 FROM jobs WHERE script_id = ?1)",
            ),
            (
                &self.envs,
                "DELETE FROM envs WHERE id = ?1
                    AND NOT EXISTS (SELECT 1 FROM jobs WHERE env_id = ?1)",
            ),
        ] {
            let mut st = tx.prepare_cached(sql)?;
            for id in ids {
                st.execute(params![id])?;
            }
        }
        // A later submission must not be given the id of a row deleted here.
        bodies.forget();
        Ok(())
    }
}

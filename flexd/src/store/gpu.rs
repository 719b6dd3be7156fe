//! GPU telemetry as stored: each running job's running totals (`gpu_totals`, a JSON
//! `gres_plugin::telemetry::summary::GpuTotals`) after every sample, so that a restarted flexd
//! goes on from them, and its summary (`gpu_usage`) once it has ended, which clears its totals.

use super::StoreError;
use flex_proto::GpuUsage;
use gres_plugin::telemetry::summary::GpuTotals;
use gres_plugin::JobId;
use rusqlite::{params, Connection, Transaction};

/// Write the running totals of jobs after a sample.
pub(crate) fn save_totals(
    tx: &Transaction,
    totals: &[(JobId, GpuTotals)],
) -> Result<(), StoreError> {
    let mut st = tx.prepare_cached("UPDATE jobs SET gpu_totals = ?2 WHERE id = ?1")?;
    for (job, t) in totals {
        let text = serde_json::to_string(t).expect("GpuTotals serializes");
        st.execute(params![job.0 as i64, text])?;
    }
    Ok(())
}

/// Write a job's summary; its running totals are done with.
pub(crate) fn save_usage(tx: &Transaction, job: JobId, usage: &GpuUsage) -> Result<(), StoreError> {
    let text = serde_json::to_string(usage).expect("GpuUsage serializes");
    tx.prepare_cached("UPDATE jobs SET gpu_usage = ?2, gpu_totals = NULL WHERE id = ?1")?
        .execute(params![job.0 as i64, text])?;
    Ok(())
}

/// Every job's stored running totals: those running when flexd stopped, and those that ended
/// before their summary was written. Totals that do not read are left out with a warning
/// (the job's summary then covers the samples after the restart).
pub(crate) fn load_totals(conn: &Connection) -> Result<Vec<(JobId, GpuTotals)>, StoreError> {
    let mut st = conn.prepare("SELECT id, gpu_totals FROM jobs WHERE gpu_totals IS NOT NULL")?;
    let mut rows = st.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let (id, text): (i64, String) = (r.get(0)?, r.get(1)?);
        let job = JobId(id as u64);
        match serde_json::from_str(&text) {
            Ok(t) => out.push((job, t)),
            Err(e) => tracing::warn!("job {job}: stored GPU telemetry totals do not read: {e}"),
        }
    }
    Ok(out)
}

//! Accounting reads: the jobs of a period with what they asked for and what they held
//! (`job_leaves`), for flexacct and flexreport, a page at a time. Read-only; any connection
//! will do.

use super::{json, StoreError};
use flex_proto::{AcctLeaf, AcctQuery, AcctRecord, JobState};
use gres_plugin::JobId;
use rusqlite::{params, Connection};

/// Most records in one reply (a few MiB of JSON, well under the commands' frame limit); the
/// client asks for the next page with `after`.
pub const PAGE: usize = 2000;

const COLUMNS: &str = "id, name, user, uid, gid, account, state, submit_time, eligible_time,
    start_time, end_time, exit_code, signal, reason, request, host, allocation, array_job,
    array_task, restarts, max_rss, cpu_usec, gpu_usage, json_extract(options, '$.comment')";

/// One page of the jobs whose [eligible, end (or `now`)] overlaps [`q.start`, `q.end`], that
/// come after `q.after` and match the query's lists, by id: at most `limit` of them, and
/// whether more ids remain past the page. `only_uid` limits them to one user's (whatever
/// `q.users` says).
pub fn query(
    conn: &Connection,
    q: &AcctQuery,
    only_uid: Option<u32>,
    now: u64,
    limit: usize,
) -> Result<(Vec<AcctRecord>, bool), StoreError> {
    // The ids first, through the index on end_time: jobs that ended in or after the period,
    // and jobs that have not ended (they last until now). Then each row by its id.
    let mut ids = conn.prepare_cached(
        "SELECT id FROM jobs
         WHERE end_time >= ?1 AND eligible_time <= ?2 AND id > ?5
            AND (?4 IS NULL OR uid = ?4)
         UNION ALL
         SELECT id FROM jobs
         WHERE end_time IS NULL AND ?3 >= ?1 AND eligible_time <= ?2 AND id > ?5
            AND (?4 IS NULL OR uid = ?4)
         ORDER BY id",
    )?;
    let mut ids = ids.query(params![
        q.start as i64,
        q.end as i64,
        now as i64,
        only_uid,
        q.after.map_or(0, |j| j.0 as i64)
    ])?;
    let mut row = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?;
    let mut out = Vec::new();
    let mut more = false;
    while let Some(r) = ids.next()? {
        if out.len() == limit {
            more = true;
            break;
        }
        let id: i64 = r.get(0)?;
        let mut rows = row.query([id])?;
        if let Some(r) = rows.next()? {
            let rec = record(r)?;
            if matches(q, &rec) {
                out.push(rec);
            }
        }
    }
    add_leaves(conn, &mut out)?;
    Ok((out, more))
}

/// Fill in what each job held, in one pass over `job_leaves` for the page's id range.
fn add_leaves(conn: &Connection, recs: &mut [AcctRecord]) -> Result<(), StoreError> {
    let (Some(first), Some(last)) = (recs.first(), recs.last()) else {
        return Ok(());
    };
    let mut st = conn.prepare_cached(
        "SELECT job, uuid, profile, gpu, share, sm_slices, memory_bytes FROM job_leaves
         WHERE job >= ?1 AND job <= ?2 ORDER BY job, rank",
    )?;
    let mut rows = st.query([first.id.0 as i64, last.id.0 as i64])?;
    let mut i = 0;
    while let Some(r) = rows.next()? {
        let job = r.get::<_, i64>(0)? as u64;
        while i < recs.len() && recs[i].id.0 < job {
            i += 1;
        }
        if i == recs.len() {
            break;
        }
        if recs[i].id.0 == job {
            recs[i].leaves.push(AcctLeaf {
                uuid: r.get(1)?,
                profile: r.get(2)?,
                gpu: r.get(3)?,
                share: r.get(4)?,
                sm_slices: r.get(5)?,
                memory_bytes: r.get::<_, Option<i64>>(6)?.map(|m| m as u64),
            });
        }
    }
    Ok(())
}

fn matches(q: &AcctQuery, r: &AcctRecord) -> bool {
    (q.users.is_empty()
        || q.users
            .iter()
            .any(|u| *u == r.user || *u == r.uid.to_string()))
        && (q.accounts.is_empty() || q.accounts.contains(&r.account))
        && (q.states.is_empty() || q.states.contains(&r.state))
        && (q.jobs.is_empty()
            || q.jobs.contains(&r.id)
            || r.array.is_some_and(|a| q.jobs.contains(&a.job)))
}

/// The part of a stored allocation (`StoredAlloc`) accounting reads.
#[derive(serde::Deserialize)]
struct Cores {
    cores: Vec<u32>,
    /// The core's allocation, with its host memory (none in allocations made before host
    /// memory was a resource).
    #[serde(default)]
    placement: Option<Placement>,
}

#[derive(serde::Deserialize)]
struct Placement {
    #[serde(default)]
    mem_bytes: u64,
}

fn record(r: &rusqlite::Row) -> Result<AcctRecord, StoreError> {
    let id = r.get::<_, i64>(0)? as u64;
    let state: String = r.get(6)?;
    let time = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|t| t.max(0) as u64))
    };
    let request: String = r.get(14)?;
    let alloc: Option<String> = r.get(16)?;
    let alloc: Option<Cores> = alloc.map(|a| json(id, "allocation", &a)).transpose()?;
    Ok(AcctRecord {
        id: JobId(id),
        name: r.get(1)?,
        user: r.get(2)?,
        uid: r.get(3)?,
        gid: r.get(4)?,
        account: r.get(5)?,
        state: JobState::parse(&state).ok_or_else(|| StoreError::Json {
            job: id,
            column: "state",
            message: format!("unknown state {state:?}"),
        })?,
        submit_time: time(7)?.unwrap_or(0),
        eligible_time: time(8)?.unwrap_or(0),
        start_time: time(9)?,
        end_time: time(10)?,
        exit_code: r.get(11)?,
        signal: r.get(12)?,
        reason: r.get(13)?,
        request: json(id, "request", &request)?,
        host: r.get(15)?,
        leaves: Vec::new(),
        mem_bytes: alloc
            .as_ref()
            .and_then(|a| a.placement.as_ref())
            .map_or(0, |p| p.mem_bytes),
        cores: alloc.map(|a| a.cores).unwrap_or_default(),
        array: match (r.get::<_, Option<i64>>(17)?, r.get::<_, Option<u32>>(18)?) {
            (Some(job), Some(index)) => Some(flex_proto::ArrayTask {
                job: JobId(job as u64),
                index,
            }),
            _ => None,
        },
        restarts: r.get(19)?,
        max_rss: r.get::<_, Option<i64>>(20)?.map(|b| b.max(0) as u64),
        cpu_usec: r.get::<_, Option<i64>>(21)?.map(|u| u.max(0) as u64),
        gpu_usage: match r.get::<_, Option<String>>(22)? {
            Some(text) => Some(json(id, "gpu_usage", &text)?),
            None => None,
        },
        comment: r.get(23)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{open, schema};
    use gres_plugin::Request as ResourceRequest;

    /// A version-2 database (before `job_leaves`) with a finished MIG job and a finished
    /// whole-GPU share migrates, and accounting sees what they held.
    #[test]
    fn a_version_2_database_migrates_with_its_allocations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flex.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            schema::migrate_to(&mut conn, 2).unwrap();
            let unit = |leaf: u32, profile: &str, share: u32| {
                serde_json::json!({"leaf": leaf, "uuid": format!("MIG-{leaf}"),
                    "profile": profile, "gpu": 1, "share": share})
            };
            let allocs = [
                serde_json::json!({"host": "old", "units": [unit(0, "1g.5gb", 1000),
                    unit(6, "1g.10gb+me", 1000), unit(3, "3g.20gb", 1000)], "cores": [2, 3, 4],
                    "placement": {"host": 0, "units": [], "cores": []}}),
                serde_json::json!({"host": "old", "units": [unit(9, "gpu", 250)],
                    "cores": [7], "placement": {"host": 0, "units": [], "cores": []}}),
            ];
            for (i, a) in allocs.iter().enumerate() {
                conn.execute(
                    "INSERT INTO jobs (name, uid, gid, user, account, script, args, env,
                        workdir, submit_dir, request, cores_per_leaf, time_limit, state,
                        submit_time, eligible_time, start_time, end_time, exit_code, host,
                        allocation)
                     VALUES ('old', 7, 7, 'bo', 'g', 'true', '[]', '[]', '/', '/', ?1, 1, 60,
                        'COMPLETED', 10, 10, 20, 80, 0, 'old', ?2)",
                    rusqlite::params![
                        serde_json::to_string(&ResourceRequest::leaves(3, 60)).unwrap(),
                        a.to_string()
                    ],
                )
                .unwrap();
                assert_eq!(conn.last_insert_rowid(), i as i64 + 1);
            }
        }
        let conn = open(&path).unwrap();
        let q = AcctQuery {
            start: 0,
            end: 100,
            ..AcctQuery::default()
        };
        let (jobs, more) = query(&conn, &q, None, 1000, 10).unwrap();
        assert!(!more);
        assert_eq!(jobs.len(), 2);
        let leaves: Vec<(&str, u32, Option<u64>)> = jobs[0]
            .leaves
            .iter()
            .map(|l| (l.uuid.as_str(), l.sm_slices, l.memory_bytes))
            .collect();
        assert_eq!(
            leaves,
            [
                ("MIG-0", 1, Some(5_000_000_000)),
                ("MIG-6", 1, Some(10_000_000_000)),
                ("MIG-3", 3, Some(20_000_000_000)),
            ]
        );
        assert_eq!(jobs[0].cores, [2, 3, 4]);
        let whole = &jobs[1].leaves[0];
        assert_eq!(
            (whole.sm_slices, whole.share, whole.memory_bytes),
            (7, 250, None)
        );
        assert_eq!(jobs[1].host.as_deref(), Some("old"));
    }

    #[test]
    fn pages_follow_each_other_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let conn = {
            let mut conn = open(&dir.path().join("flex.db")).unwrap();
            let tx = conn.transaction().unwrap();
            for i in 0..5u64 {
                let mut j = crate::store::NewJob::for_test(
                    &format!("j{i}"),
                    7 + (i % 2) as u32,
                    &format!("u{}", i % 2),
                    "a",
                    100 + i,
                );
                j.gid = 7;
                crate::store::insert_job(&tx, &j, &mut Default::default()).unwrap();
            }
            tx.commit().unwrap();
            conn
        };
        let mut q = AcctQuery {
            start: 0,
            end: 1000,
            ..AcctQuery::default()
        };
        let page = |q: &AcctQuery, only| {
            let (jobs, more) = query(&conn, q, only, 500, 2).unwrap();
            (jobs.iter().map(|j| j.id.0).collect::<Vec<_>>(), more)
        };
        assert_eq!(page(&q, None), (vec![1, 2], true));
        q.after = Some(JobId(2));
        assert_eq!(page(&q, None), (vec![3, 4], true));
        q.after = Some(JobId(4));
        assert_eq!(page(&q, None), (vec![5], false));
        // One user's jobs: 1, 3, 5.
        q.after = None;
        assert_eq!(page(&q, Some(7)), (vec![1, 3], true));
        q.after = Some(JobId(3));
        assert_eq!(page(&q, Some(7)), (vec![5], false));
    }
}

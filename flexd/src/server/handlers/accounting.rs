//! Accounting (flexacct, flexreport): job records from the database, seen through
//! the caller's rights. Users other than root see only their own jobs, like Slurm's
//! `PrivateData=jobs`; naming another user is refused rather than silently ignored.
//!
//! [`accounting`] is the plain handler over an open connection; [`answer`] runs it off the
//! async threads on a read-only connection of its own. Also the default account of a
//! submission: the submitter's primary group name.

use super::Peer;
use crate::server::Shared;
use crate::state::State;
use crate::store::{self, acct};
use flex_proto::{AcctHost, AcctQuery, AcctReply, ErrorKind, Response};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// The database accounting reads, and the default account of each user seen so far.
#[derive(Debug)]
pub(crate) struct Accounting {
    db: PathBuf,
    accounts: Mutex<HashMap<u32, String>>,
}

impl Accounting {
    pub(crate) fn new(db: PathBuf) -> Accounting {
        Accounting {
            db,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    /// The database it reads.
    pub(crate) fn db(&self) -> &std::path::Path {
        &self.db
    }

    /// Answer an Accounting request (`hosts` from the state, taken by the caller).
    pub(crate) async fn answer(
        &self,
        peer: &Peer,
        q: AcctQuery,
        hosts: Vec<AcctHost>,
        now: u64,
    ) -> Response {
        let db = self.db.clone();
        let peer = peer.clone();
        let r = tokio::task::spawn_blocking(move || match store::open_reader(&db) {
            Ok(conn) => accounting(&conn, &peer, q, hosts, now),
            Err(e) => Response::error(ErrorKind::Internal, e.to_string()),
        })
        .await;
        r.unwrap_or_else(|e| Response::error(ErrorKind::Internal, format!("accounting: {e}")))
    }

    /// The account of a job submitted without one: the name of the user's primary group (from
    /// the password database; the connecting process's group when the user has no entry),
    /// or the group id when that group has no name. Looked up once per user.
    pub(crate) fn default_account(&self, peer: &Peer) -> String {
        use nix::unistd::{Gid, Group, Uid, User};
        let mut accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        accounts
            .entry(peer.uid)
            .or_insert_with(|| {
                let gid = User::from_uid(Uid::from_raw(peer.uid))
                    .ok()
                    .flatten()
                    .map_or(peer.gid, |u| u.gid.as_raw());
                Group::from_gid(Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map_or_else(|| gid.to_string(), |g| g.name)
            })
            .clone()
    }
}

/// Answer an Accounting request with the hosts' capacities from the state, once every change
/// flexd has made so far is committed: a job `flexq` shows ended is ended in `flexacct` too.
pub(crate) async fn answer(shared: &Shared, peer: &Peer, q: AcctQuery, now: u64) -> Response {
    shared.barrier().await;
    let hosts = shared.with_core(|c| hosts(&c.state));
    shared.acct.answer(peer, q, hosts, now).await
}

/// Every host's capacity, for utilization.
pub(crate) fn hosts(st: &State) -> Vec<AcctHost> {
    st.cluster
        .hosts()
        .map(|(_, h)| AcctHost {
            host: h.hostname.clone(),
            gpus: h.gpus.len() as u32,
            leaves: h.leaves.len() as u32,
            cores: h.cores.len() as u32,
        })
        .collect()
}

/// The records `q` selects that `peer` may see.
pub(crate) fn accounting(
    conn: &Connection,
    peer: &Peer,
    q: AcctQuery,
    hosts: Vec<AcctHost>,
    now: u64,
) -> Response {
    // Times are stored as SQLite integers (i64): a later bound would wrap and select nothing.
    if let Some(t) = [q.start, q.end].into_iter().find(|&t| t > i64::MAX as u64) {
        return Response::error(
            ErrorKind::InvalidRequest,
            format!(
                "the period bound {t} is past the largest time flexd stores ({})",
                i64::MAX
            ),
        );
    }
    if q.start > q.end {
        return Response::error(
            ErrorKind::InvalidRequest,
            format!("the period ends ({}) before it starts ({})", q.end, q.start),
        );
    }
    let only = if peer.is_root() {
        None
    } else {
        let own = peer.uid.to_string();
        if let Some(other) = q.users.iter().find(|u| **u != peer.user && **u != own) {
            return Response::error(
                ErrorKind::PermissionDenied,
                format!(
                    "permission denied: {} may see only their own jobs, not those of {other}",
                    peer.user
                ),
            );
        }
        Some(peer.uid)
    };
    match acct::query(conn, &q, only, now, acct::PAGE) {
        Ok((jobs, more)) => Response::Accounting(AcctReply {
            now,
            hosts,
            jobs,
            more,
        }),
        Err(e) => Response::error(ErrorKind::Internal, e.in_db(conn).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewJob, StoredAlloc, StoredUnit};
    use flex_proto::JobState;
    use gres_plugin::JobId;

    fn peer(uid: u32, user: &str) -> Peer {
        Peer {
            uid,
            gid: uid,
            pid: None,
            user: user.into(),
        }
    }

    fn job(conn: &mut Connection, user: (u32, &str), account: &str, t: u64) -> JobId {
        let tx = conn.transaction().unwrap();
        let j = NewJob::for_test("j", user.0, user.1, account, t);
        let id = store::insert_job(&tx, &j, &mut Default::default()).unwrap();
        tx.commit().unwrap();
        id
    }

    fn run(conn: &mut Connection, id: JobId, start: u64, end: u64) {
        let tx = conn.transaction().unwrap();
        let placement = flex_sched::Allocation {
            host: gres_plugin::HostId(0),
            units: vec![],
            cores: vec![],
            mem_bytes: 0,
        };
        let alloc = StoredAlloc {
            host: "h".into(),
            units: vec![StoredUnit {
                leaf: 0,
                uuid: "MIG-a".into(),
                profile: "3g.20gb".into(),
                gpu: 1,
                share: 1000,
                sm_slices: 3,
                memory_bytes: 20 << 30,
            }],
            cores: vec![4, 5],
            placement,
        };
        store::start_job(&tx, id, start, &alloc).unwrap();
        tx.execute(
            "UPDATE jobs SET state = 'COMPLETED', end_time = ?2, exit_code = 0 WHERE id = ?1",
            rusqlite::params![id.0 as i64, end as i64],
        )
        .unwrap();
        tx.commit().unwrap();
    }

    fn ask(conn: &Connection, p: &Peer, q: AcctQuery) -> Response {
        accounting(conn, p, q, vec![], 1000)
    }

    fn ids(r: Response) -> Vec<u64> {
        match r {
            Response::Accounting(a) => a.jobs.iter().map(|j| j.id.0).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn windows_rights_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = store::open(&dir.path().join("flex.db")).unwrap();
        let a = job(&mut conn, (1000, "ana"), "phys", 100);
        run(&mut conn, a, 110, 200);
        let b = job(&mut conn, (1001, "bo"), "chem", 300);
        run(&mut conn, b, 300, 400);
        let pending = job(&mut conn, (1000, "ana"), "phys", 500);
        let all = |s, e| AcctQuery {
            start: s,
            end: e,
            ..AcctQuery::default()
        };
        let root = peer(0, "root");
        assert_eq!(ids(ask(&conn, &root, all(0, 2000))), [a.0, b.0, pending.0]);
        // Overlap, not containment: [150, 350] touches a's and b's runs.
        assert_eq!(ids(ask(&conn, &root, all(150, 350))), [a.0, b.0]);
        assert_eq!(ids(ask(&conn, &root, all(201, 299))), Vec::<u64>::new());
        // A pending job lasts until now (1000).
        assert_eq!(ids(ask(&conn, &root, all(900, 2000))), [pending.0]);
        assert_eq!(ids(ask(&conn, &root, all(1001, 2000))), Vec::<u64>::new());
        let ana = peer(1000, "ana");
        assert_eq!(ids(ask(&conn, &ana, all(0, 2000))), [a.0, pending.0]);
        let mut q = all(0, 2000);
        q.users = vec!["bo".into()];
        match ask(&conn, &ana, q.clone()) {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::PermissionDenied);
                assert!(e.message.contains("bo"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ids(ask(&conn, &root, q)), [b.0]);
        let mut q = all(0, 2000);
        q.users = vec!["1000".into()];
        q.states = vec![JobState::Pending];
        assert_eq!(ids(ask(&conn, &ana, q)), [pending.0]);
        let mut q = all(0, 2000);
        q.accounts = vec!["chem".into()];
        assert_eq!(ids(ask(&conn, &root, q)), [b.0]);
        match ask(&conn, &root, all(10, 5)) {
            Response::Error(e) => assert_eq!(e.kind, ErrorKind::InvalidRequest),
            other => panic!("{other:?}"),
        }
        match ask(&conn, &root, all(0, 2000)) {
            Response::Accounting(r) => {
                let j = &r.jobs[0];
                assert_eq!((j.start_time, j.end_time), (Some(110), Some(200)));
                assert_eq!(j.leaves.len(), 1);
                assert_eq!(j.leaves[0].sm_slices, 3);
                assert_eq!(j.leaves[0].memory_bytes, Some(20 << 30));
                assert_eq!(j.cores, [4, 5]);
                assert_eq!(j.host.as_deref(), Some("h"));
                assert!(r.jobs[2].leaves.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_account_is_the_primary_group() {
        let a = Accounting::new("/nonexistent".into());
        let root = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(0))
            .unwrap()
            .unwrap()
            .name;
        assert_eq!(a.default_account(&peer(0, "root")), root);
        // No password entry and no such group: the process's group id.
        assert_eq!(
            a.default_account(&peer(3_999_999_999, "ghost")),
            "3999999999"
        );
    }
}

//! Fair-share usage as stored: one row per user and per account, its decayed slice-seconds as of
//! a time. The writer replaces a row in the transaction of the job end that charged it, so the
//! usage on disk always matches the job ends on disk; flexd loads every row when it starts.

use super::StoreError;
use flex_sched::fairshare::Decayed;
use rusqlite::{params, Connection, Transaction};

/// Whom a usage row charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Holder {
    User,
    Account,
}

impl Holder {
    fn name(self) -> &'static str {
        match self {
            Holder::User => "user",
            Holder::Account => "account",
        }
    }
}

/// One user's or account's usage, as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UsageRow {
    pub holder: Holder,
    pub name: String,
    pub usage: Decayed,
}

/// Write (replace) usage rows inside the caller's transaction.
pub(crate) fn save(tx: &Transaction, rows: &[UsageRow]) -> Result<(), StoreError> {
    let mut st = tx.prepare_cached(
        "INSERT OR REPLACE INTO usage (kind, name, slice_seconds, at) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for r in rows {
        st.execute(params![
            r.holder.name(),
            r.name,
            r.usage.value,
            r.usage.at as i64
        ])?;
    }
    Ok(())
}

/// Every usage row (a row of an unknown kind is skipped: a newer flexd may add kinds).
pub(crate) fn load(conn: &Connection) -> Result<Vec<UsageRow>, StoreError> {
    let mut st = conn.prepare("SELECT kind, name, slice_seconds, at FROM usage")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, f64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, name, value, at) = row?;
        let holder = match kind.as_str() {
            "user" => Holder::User,
            "account" => Holder::Account,
            _ => continue,
        };
        out.push(UsageRow {
            holder,
            name,
            usage: Decayed {
                value,
                at: at.max(0) as u64,
            },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_rows_round_trip_and_replace() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::store::open(&dir.path().join("flex.db")).unwrap();
        let row = |holder, name: &str, value, at| UsageRow {
            holder,
            name: name.into(),
            usage: Decayed { value, at },
        };
        let tx = conn.transaction().unwrap();
        save(&tx, &[row(Holder::User, "alice", 10.0, 5)]).unwrap();
        save(
            &tx,
            &[
                row(Holder::User, "alice", 30.0, 9),
                row(Holder::Account, "alice", 7.5, 9),
            ],
        )
        .unwrap();
        tx.commit().unwrap();
        let mut got = load(&conn).unwrap();
        got.sort_by(|a, b| (a.holder, &a.name).cmp(&(b.holder, &b.name)));
        assert_eq!(
            got,
            [
                row(Holder::User, "alice", 30.0, 9),
                row(Holder::Account, "alice", 7.5, 9)
            ]
        );
    }
}

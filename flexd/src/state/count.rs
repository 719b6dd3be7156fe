//! What the state keeps per user as jobs come and go, so that nothing walks the queue for it:
//! pending and running jobs per user, in all and per QOS, plus submissions on their way to the
//! database (what `max_queued_per_user` and a QOS's `max_submit_jobs_per_user` are checked
//! against at each submission), and the user, account and QOS names, shared by their jobs.

use crate::store::JobRow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Names many jobs carry (users, accounts, QOS), kept once: a queue of 100,000 jobs of a few
/// users then holds a few strings, not 300,000.
#[derive(Default)]
pub(crate) struct Names(HashSet<Arc<str>>);

impl Names {
    /// The shared copy of `name`.
    pub(crate) fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.0.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        self.0.insert(n.clone());
        n
    }

    /// Make `row` carry the shared copies of its names.
    pub(crate) fn share(&mut self, row: &mut JobRow) {
        row.user = self.get(&row.user);
        row.account = self.get(&row.account);
        if let Some(q) = &row.qos {
            row.qos = Some(self.get(q));
        }
    }
}

/// The QOS key of a job row: its QOS name, or "" for a job stored before jobs had one (it
/// counts in the default QOS).
pub(crate) fn qos_key(qos: Option<&str>) -> &str {
    qos.unwrap_or("")
}

#[derive(Default)]
pub(crate) struct Queued {
    by_uid: HashMap<u32, u32>,
    by_qos: HashMap<(u32, Box<str>), u32>,
}

impl Queued {
    /// `n` more jobs of `uid` in QOS `qos`.
    pub(crate) fn add(&mut self, uid: u32, qos: &str, n: u32) {
        *self.by_uid.entry(uid).or_insert(0) += n;
        match self.by_qos.get_mut(&(uid, qos.into())) {
            Some(c) => *c += n,
            None => {
                self.by_qos.insert((uid, qos.into()), n);
            }
        }
    }

    /// `n` fewer (never below 0); users and QOS that reach 0 are forgotten.
    pub(crate) fn remove(&mut self, uid: u32, qos: &str, n: u32) {
        let key = (uid, Box::<str>::from(qos));
        let Some(c) = self.by_qos.get_mut(&key) else {
            return;
        };
        let n = n.min(*c);
        *c -= n;
        if *c == 0 {
            self.by_qos.remove(&key);
        }
        if let Some(c) = self.by_uid.get_mut(&uid) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.by_uid.remove(&uid);
            }
        }
    }

    pub(crate) fn by_user(&self, uid: u32) -> u32 {
        self.by_uid.get(&uid).copied().unwrap_or(0)
    }

    /// The user's jobs in QOS `qos`; with `default` (it is the default QOS), jobs stored
    /// without a QOS count too.
    pub(crate) fn in_qos(&self, uid: u32, qos: &str, default: bool) -> u32 {
        let get = |q: &str| self.by_qos.get(&(uid, q.into())).copied().unwrap_or(0);
        get(qos)
            + if default && !qos.is_empty() {
                get("")
            } else {
                0
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_users_and_qos() {
        let mut q = Queued::default();
        q.add(1000, "normal", 3);
        q.add(1000, "long", 2);
        q.add(1000, "", 1);
        q.add(1001, "normal", 5);
        assert_eq!(q.by_user(1000), 6);
        assert_eq!(q.in_qos(1000, "normal", true), 4);
        assert_eq!(q.in_qos(1000, "normal", false), 3);
        assert_eq!(q.in_qos(1000, "long", false), 2);
        q.remove(1000, "normal", 3);
        q.remove(1000, "normal", 1);
        assert_eq!(q.in_qos(1000, "normal", false), 0);
        assert_eq!(q.by_user(1000), 3);
        assert_eq!(q.by_user(1001), 5);
        assert_eq!(q.by_user(7), 0);
    }
}

//! What the state keeps per user as jobs come and go, so that nothing walks the queue for it:
//! pending and running jobs per user, in all and per QOS, plus submissions on their way to the
//! database (what `max_queued_per_user` and a QOS's `max_submit_jobs_per_user` are checked
//! against at each submission), the bytes of scripts and environments those jobs hold (what
//! `max_queued_bytes_per_user` is checked against), and the user, account and QOS names, shared
//! by their jobs.

use crate::store::JobRow;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

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

/// A script or an environment as the byte quota knows it: its length and a hash of it under a
/// key drawn when flexd starts (no user can make two texts look the same to it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Text {
    key: u64,
    len: u32,
}

impl Text {
    pub(crate) fn of(body: &str) -> Text {
        static KEY: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
        Text {
            key: KEY.get_or_init(Default::default).hash_one(body),
            len: u32::try_from(body.len()).unwrap_or(u32::MAX),
        }
    }
}

/// Where a job's script and environment are in [`Held`] (`NONE`: not counted).
pub(crate) type Slots = [u32; 2];
pub(crate) const NONE: Slots = [u32::MAX; 2];

/// The texts (scripts, environments) of the jobs flexd holds in memory, each distinct text of a
/// user once, and the bytes of those held by the user's pending and running jobs: the database
/// stores each text once (`store::Bodies`), so a user's queued jobs cost the disk the sum of
/// their distinct texts, and 10,000 jobs of one script cost it one script. A job keeps its slots
/// while it is in memory, so a requeue counts its texts again.
#[derive(Default)]
pub(crate) struct Held {
    entries: Vec<Entry>,
    free: Vec<u32>,
    index: HashMap<(u32, Text), u32>,
    /// Per user: bytes of distinct texts their pending and running jobs hold.
    bytes: HashMap<u32, u64>,
    /// Per user: bytes of distinct texts any of their jobs in memory holds, finished ones too.
    stored: HashMap<u32, u64>,
}

struct Entry {
    uid: u32,
    text: Text,
    /// Jobs in memory that hold it.
    jobs: u32,
    /// Of those, the pending and running ones.
    queued: u32,
}

impl Held {
    /// Bytes of distinct texts the user's pending and running jobs hold.
    pub(crate) fn bytes(&self, uid: u32) -> u64 {
        self.bytes.get(&uid).copied().unwrap_or(0)
    }

    /// Bytes of distinct texts only the user's finished jobs hold (kept for `keep_finished`).
    pub(crate) fn finished_only(&self, uid: u32) -> u64 {
        let stored = self.stored.get(&uid).copied().unwrap_or(0);
        stored.saturating_sub(self.bytes(uid))
    }

    /// Bytes `texts` add to the user's when a job of theirs holding them is queued.
    pub(crate) fn adds(&self, uid: u32, texts: [Text; 2]) -> u64 {
        let new = |t: &Text| {
            let queued = self.index.get(&(uid, *t));
            queued.is_none_or(|&i| self.entries[i as usize].queued == 0)
        };
        let mut n = 0;
        for (k, t) in texts.iter().enumerate() {
            if new(t) && !texts[..k].contains(t) {
                n += u64::from(t.len);
            }
        }
        n
    }

    /// `n` jobs of `uid` holding `texts` come into memory; `queued` when they are pending or
    /// running.
    pub(crate) fn hold(&mut self, uid: u32, texts: [Text; 2], n: u32, queued: bool) -> Slots {
        let mut slots = NONE;
        for (slot, text) in slots.iter_mut().zip(texts) {
            if text.len == 0 {
                continue;
            }
            let i = match self.index.get(&(uid, text)) {
                Some(&i) => i,
                None => {
                    let e = Entry {
                        uid,
                        text,
                        jobs: 0,
                        queued: 0,
                    };
                    let i = match self.free.pop() {
                        Some(i) => {
                            self.entries[i as usize] = e;
                            i
                        }
                        None => {
                            self.entries.push(e);
                            (self.entries.len() - 1) as u32
                        }
                    };
                    self.index.insert((uid, text), i);
                    *self.stored.entry(uid).or_insert(0) += u64::from(text.len);
                    i
                }
            };
            self.entries[i as usize].jobs += n;
            *slot = i;
        }
        if queued {
            self.queue(slots, n);
        }
        slots
    }

    /// `n` jobs holding `slots` join the queue (submitted, requeued).
    pub(crate) fn queue(&mut self, slots: Slots, n: u32) {
        for i in slots.into_iter().filter(|&i| i != u32::MAX) {
            let e = &mut self.entries[i as usize];
            if e.queued == 0 {
                *self.bytes.entry(e.uid).or_insert(0) += u64::from(e.text.len);
            }
            e.queued += n;
        }
    }

    /// `n` jobs holding `slots` leave the queue (they ended).
    pub(crate) fn unqueue(&mut self, slots: Slots, n: u32) {
        for i in slots.into_iter().filter(|&i| i != u32::MAX) {
            let e = &mut self.entries[i as usize];
            let n = n.min(e.queued);
            if n == 0 {
                continue;
            }
            e.queued -= n;
            if e.queued == 0 {
                if let Some(b) = self.bytes.get_mut(&e.uid) {
                    *b = b.saturating_sub(u64::from(e.text.len));
                    if *b == 0 {
                        self.bytes.remove(&e.uid);
                    }
                }
            }
        }
    }

    /// `n` jobs holding `slots`, out of the queue, leave memory (forgotten after they ended, or
    /// never stored).
    pub(crate) fn release(&mut self, slots: Slots, n: u32) {
        for i in slots.into_iter().filter(|&i| i != u32::MAX) {
            let e = &mut self.entries[i as usize];
            if e.jobs == 0 {
                continue;
            }
            e.jobs = e.jobs.saturating_sub(n);
            if e.jobs == 0 {
                self.index.remove(&(e.uid, e.text));
                self.free.push(i);
                if let Some(b) = self.stored.get_mut(&e.uid) {
                    *b = b.saturating_sub(u64::from(e.text.len));
                    if *b == 0 {
                        self.stored.remove(&e.uid);
                    }
                }
            }
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

    #[test]
    fn a_users_distinct_texts_count_once_while_a_job_holding_them_is_queued() {
        let mut h = Held::default();
        let (script, env, other) = (Text::of("#!/bin/sh\ntrue\n"), Text::of("[]"), Text::of("x"));
        assert_ne!(script, Text::of("#!/bin/sh\nfalse\n"));
        assert_eq!(h.adds(1000, [script, env]), 17);
        // An array of 100 tasks holds its script once.
        let a = h.hold(1000, [script, env], 100, true);
        assert_eq!(h.bytes(1000), 17);
        assert_eq!(h.adds(1000, [script, env]), 0);
        // Another user pays for the same text; a text given twice counts once.
        assert_eq!(h.adds(1001, [script, script]), 15);
        let b = h.hold(1000, [other, env], 1, true);
        assert_eq!(h.bytes(1000), 18);
        // 99 tasks end: the script is still held by one.
        h.unqueue(a, 99);
        assert_eq!(h.bytes(1000), 18);
        h.unqueue(a, 1);
        assert_eq!(h.bytes(1000), 3);
        // Requeued while in memory: counted again.
        h.queue(a, 1);
        assert_eq!(h.bytes(1000), 18);
        assert_eq!(h.finished_only(1000), 0);
        h.unqueue(a, 1);
        // Only finished jobs hold the script now; the environment is still queued with b.
        assert_eq!(h.finished_only(1000), 15);
        h.unqueue(b, 1);
        assert_eq!(h.bytes(1000), 0);
        assert_eq!(h.finished_only(1000), 18);
        h.release(a, 100);
        assert_eq!(h.finished_only(1000), 3);
        h.release(b, 1);
        assert_eq!(h.finished_only(1000), 0);
        assert!(h.index.is_empty());
        // Slots are reused.
        let c = h.hold(1000, [other, env], 1, true);
        assert!(c.iter().all(|&i| i < 3));
        assert_eq!(h.bytes(1000), 3);
        // Empty texts are not counted.
        assert_eq!(h.hold(1000, [Text::default(); 2], 1, true), NONE);
    }
}

//! The set of task ids a [`super::eligible::Group`] keeps (pending, queued, reserve…): most
//! submissions are one job, so a set of one id is held inline and only a set of several
//! allocates a B-tree. 100,000 queued plain jobs then cost no set allocation at all.

use gres_plugin::JobId;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(crate) enum TaskSet {
    #[default]
    Empty,
    One(JobId),
    Many(BTreeSet<JobId>),
}

impl TaskSet {
    /// Add `id`; false when it was there.
    pub(crate) fn insert(&mut self, id: JobId) -> bool {
        match self {
            TaskSet::Empty => {
                *self = TaskSet::One(id);
                true
            }
            TaskSet::One(x) if *x == id => false,
            TaskSet::One(x) => {
                *self = TaskSet::Many(BTreeSet::from([*x, id]));
                true
            }
            TaskSet::Many(s) => s.insert(id),
        }
    }

    /// Take `id` out; false when it was not there.
    pub(crate) fn remove(&mut self, id: &JobId) -> bool {
        let removed = match self {
            TaskSet::One(x) if x == id => {
                *self = TaskSet::Empty;
                return true;
            }
            TaskSet::Many(s) => s.remove(id),
            _ => false,
        };
        self.shrink();
        removed
    }

    pub(crate) fn contains(&self, id: &JobId) -> bool {
        match self {
            TaskSet::Empty => false,
            TaskSet::One(x) => x == id,
            TaskSet::Many(s) => s.contains(id),
        }
    }

    /// The lowest id.
    pub(crate) fn first(&self) -> Option<JobId> {
        match self {
            TaskSet::Empty => None,
            TaskSet::One(x) => Some(*x),
            TaskSet::Many(s) => s.first().copied(),
        }
    }

    /// Take the lowest id out.
    pub(crate) fn pop_first(&mut self) -> Option<JobId> {
        let first = match self {
            TaskSet::Empty => None,
            TaskSet::One(x) => {
                let x = *x;
                *self = TaskSet::Empty;
                return Some(x);
            }
            TaskSet::Many(s) => s.pop_first(),
        };
        self.shrink();
        first
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            TaskSet::Empty => 0,
            TaskSet::One(_) => 1,
            TaskSet::Many(s) => s.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids, lowest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &JobId> + '_ {
        let (one, many) = match self {
            TaskSet::Empty => (None, None),
            TaskSet::One(x) => (Some(x), None),
            TaskSet::Many(s) => (None, Some(s.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// An emptied B-tree is dropped (its node freed).
    fn shrink(&mut self) {
        if matches!(self, TaskSet::Many(s) if s.is_empty()) {
            *self = TaskSet::Empty;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every operation answers as a BTreeSet would.
        #[test]
        fn behaves_as_a_btreeset(ops in prop::collection::vec((0u8..4, 0u64..6), 0..64)) {
            let (mut t, mut b) = (TaskSet::default(), BTreeSet::new());
            for (op, id) in ops {
                let id = JobId(id);
                match op {
                    0 => prop_assert_eq!(t.insert(id), b.insert(id)),
                    1 => prop_assert_eq!(t.remove(&id), b.remove(&id)),
                    2 => prop_assert_eq!(t.pop_first(), b.pop_first()),
                    _ => prop_assert_eq!(t.contains(&id), b.contains(&id)),
                }
                prop_assert_eq!(t.len(), b.len());
                prop_assert_eq!(t.is_empty(), b.is_empty());
                prop_assert_eq!(t.first(), b.first().copied());
                prop_assert!(t.iter().eq(b.iter()));
            }
        }
    }
}

//! One file per request: each answers with plain synchronous functions over the settings and
//! the state (no socket, no database, no clock: `now` comes in), unit-tested without a socket.
//! The requests that wait for the database ([`submit`], [`accounting`]) or read a job's files
//! ([`job_ended`]) add an async step around theirs. Only [`super::dispatch`] calls them.

pub(crate) mod accounting;
pub(crate) mod cancel;
pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod job_ended;
pub(crate) mod leaf_map;
pub(crate) mod priority;
pub(crate) mod queue;
pub(crate) mod submit;
pub(crate) mod test_only;

use flex_proto::{ErrorKind, Response};

/// Who is asking, from SO_PEERCRED.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
    /// The uid's name (the number when it has none).
    pub user: String,
}

impl Peer {
    pub(crate) fn is_root(&self) -> bool {
        self.uid == 0
    }
}

fn err(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::error(kind, message)
}

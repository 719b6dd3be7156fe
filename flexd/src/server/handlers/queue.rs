//! Queue (`flexq --json`) and QueueRows (flexq's table): the jobs a filter selects, in pages
//! of [`PAGE`] jobs by id; the connection sends a listing's pages one behind the other
//! ([`next_page`]), each made under the state's lock on its own.

use crate::server::Shared;
use crate::state::{group_id, shown_state, Job, State};
use crate::store;
use flex_proto::{
    ArrayRows, ErrorKind, JobState, JobView, QueueFilter, QueueRows, Request, Response,
};
use std::collections::BTreeSet;

/// One page of full job views.
pub(crate) fn queue(st: &State, f: &QueueFilter) -> Response {
    let mut sel = selected(st, f).peekable();
    let jobs: Vec<JobView> = sel
        .by_ref()
        .take(PAGE)
        .map(|j| {
            let mut v = st.view(j);
            if f.arrays == Some(ArrayRows::Collapse) && j.row.state == JobState::Pending {
                v.pending_tasks = st.pending_tasks(j);
            }
            v
        })
        .collect();
    let next = sel.peek().and(jobs.last()).map(|j| j.id);
    Response::Queue(flex_proto::QueuePage { jobs, next })
}

/// A page of [`queue`] with each job's submission details from the database (squeue's
/// `%g %Z %o %f`, asked by [`QueueFilter::details`]), read once every change so far is
/// committed, off the async threads: they are not kept in memory, where a long queue would pay
/// for them on every job.
pub(crate) async fn with_details(shared: &Shared, mut page: Response) -> Response {
    let Response::Queue(p) = &mut page else {
        return page;
    };
    shared.barrier().await;
    let db = shared.acct.db().to_path_buf();
    let ids: Vec<_> = p.jobs.iter().map(|j| j.id).collect();
    let read = tokio::task::spawn_blocking(move || {
        let conn = store::open_reader(&db)?;
        ids.into_iter()
            .map(|id| store::job_details(&conn, id))
            .collect::<Result<Vec<_>, _>>()
    })
    .await;
    match read {
        Ok(Ok(details)) => {
            for (j, d) in p.jobs.iter_mut().zip(details) {
                j.details = d.map(Box::new);
            }
            page
        }
        Ok(Err(e)) => Response::error(ErrorKind::Internal, format!("job details: {e}")),
        Err(e) => Response::error(ErrorKind::Internal, format!("job details: {e}")),
    }
}

/// One page of flexq's compact rows.
pub(crate) fn queue_rows(st: &State, f: &QueueFilter, now: u64) -> Response {
    let mut sel = selected(st, f).peekable();
    let mut last = None;
    let page = sel.by_ref().take(PAGE).inspect(|j| last = Some(j.row.id));
    let rows = QueueRows::new(st.queue_rows(page, now, f.arrays));
    let next = sel.peek().and(last);
    Response::QueueRows(flex_proto::RowsPage { rows, next })
}

/// Jobs in one page of a listing: small enough that making one holds the state for a few ms.
pub(crate) const PAGE: usize = 4096;

/// The jobs the filter selects, by id. Finished jobs appear with `include_finished`, or when
/// the filter names them or their state.
fn selected<'a>(st: &'a State, f: &'a QueueFilter) -> impl Iterator<Item = &'a Job> + 'a {
    // A user given as a number also selects that uid: parsed once, not once per job.
    let users: Vec<(&str, Option<u32>)> = f.users.iter().map(|u| (&**u, u.parse().ok())).collect();
    candidates(st, f).filter(move |j| {
        let r = &j.row;
        let array = r.q.array.map(|a| a.job);
        (users.is_empty()
            || users
                .iter()
                .any(|&(name, uid)| name == &*r.user || uid == Some(r.uid)))
            && (f.states.is_empty() || f.states.contains(&shown_state(r)))
            && (f.jobs.is_empty()
                || f.jobs.contains(&r.id)
                || array.is_some_and(|a| f.jobs.contains(&a)))
            && (!r.state.is_finished()
                || f.include_finished
                || f.jobs.contains(&r.id)
                || array.is_some_and(|a| f.jobs.contains(&a))
                || f.states.contains(&r.state))
            && !(f.arrays == Some(ArrayRows::Collapse) && collapsed_away(st, j))
    })
}

/// The jobs a listing looks at, by id: those it names (and their arrays' tasks), looked up,
/// or else every job.
fn candidates<'a>(st: &'a State, f: &'a QueueFilter) -> Box<dyn Iterator<Item = &'a Job> + 'a> {
    if f.jobs.is_empty() {
        return Box::new(Ahead::new(st.jobs_after(f.after)));
    }
    let mut ids = BTreeSet::new();
    for &id in &f.jobs {
        if st.job(id).is_some() {
            ids.insert(id);
        }
        if let Some(tasks) = st.array_tasks(id) {
            ids.extend(tasks.map(|j| j.row.id));
        }
    }
    let after = f.after;
    let ids = ids
        .into_iter()
        .filter(move |&id| after.is_none_or(|a| id > a));
    Box::new(ids.filter_map(|id| st.job(id)))
}

/// Jobs in order, each asked of memory a little before it is reached: a listing reads every
/// job's box and then its name, each a cache miss, and waiting on those one after the other
/// was a third of the time a page took. A job's box is fetched [`Ahead::FAR`] jobs ahead, its
/// name (the box then read from the cache) [`Ahead::NEAR`] jobs ahead.
struct Ahead<I> {
    now: I,
    near: I,
    far: I,
}

impl<'a, I: Iterator<Item = &'a Job> + Clone> Ahead<I> {
    const FAR: usize = 16;
    const NEAR: usize = 8;

    fn new(jobs: I) -> Ahead<I> {
        let mut near = jobs.clone();
        let mut far = jobs.clone();
        for j in far.by_ref().take(Self::FAR) {
            prefetch(j, std::mem::size_of::<Job>());
        }
        for j in near.by_ref().take(Self::NEAR) {
            prefetch(j.row.name.as_ptr(), j.row.name.len());
        }
        Ahead {
            now: jobs,
            near,
            far,
        }
    }
}

impl<'a, I: Iterator<Item = &'a Job>> Iterator for Ahead<I> {
    type Item = &'a Job;

    fn next(&mut self) -> Option<&'a Job> {
        if let Some(j) = self.far.next() {
            prefetch(j, std::mem::size_of::<Job>());
        }
        if let Some(j) = self.near.next() {
            prefetch(j.row.name.as_ptr(), j.row.name.len());
        }
        self.now.next()
    }
}

/// Ask for the cache lines of `len` bytes from `p` (a hint: nothing is read, nothing faults).
#[inline(always)]
fn prefetch<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..len).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86_64; a prefetch reads nothing and cannot fault, whatever
        // the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>().wrapping_add(off)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// A pending array task shown in its array's one row, which sits at the array's first
/// pending task.
fn collapsed_away(st: &State, j: &Job) -> bool {
    j.row.state == JobState::Pending
        && j.row.q.array.is_some()
        && st
            .group(group_id(j))
            .and_then(|g| g.first_pending())
            .is_some_and(|first| first != j.row.id)
}

/// The request for the page after `page`, when `page` is one of a listing that goes on.
pub(crate) fn next_page(filter: Option<QueueFilter>, page: &Response) -> Option<Request> {
    let (rows, after) = match page {
        Response::Queue(flex_proto::QueuePage { next, .. }) => (false, (*next)?),
        Response::QueueRows(flex_proto::RowsPage { next, .. }) => (true, (*next)?),
        _ => return None,
    };
    let f = QueueFilter {
        after: Some(after),
        ..filter?
    };
    Some(if rows {
        Request::QueueRows(f)
    } else {
        Request::Queue(f)
    })
}

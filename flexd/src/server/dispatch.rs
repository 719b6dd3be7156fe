//! The dispatcher: the only code between a connection and the handlers. It routes each request
//! to its handler, one file per request under [`super::handlers`], and answers nothing itself.

use super::handlers::{
    accounting, cancel, config, control, job_ended, leaf_map, priority, queue, submit, test_only,
    Peer,
};
use super::{unix_now, Shared};
use flex_proto::{Request, Response};

/// Route one request to its handler.
pub(crate) async fn dispatch(shared: &Shared, peer: &Peer, req: Request) -> Response {
    let now = unix_now();
    match req {
        Request::Submit(spec) => submit::submit(shared, peer, spec, now).await,
        Request::TestOnly(mut spec) => {
            submit::default_account(shared, peer, &mut spec);
            shared.with_core(|c| test_only::test_only(&c.settings, &mut c.state, peer, spec, now))
        }
        Request::Queue(f) => {
            let page = shared.with_core(|c| queue::queue(&c.state, &f));
            if f.details {
                queue::with_details(shared, page).await
            } else {
                page
            }
        }
        Request::QueueRows(f) => shared.with_core(|c| queue::queue_rows(&c.state, &f, now)),
        Request::Cancel(req) => shared.with_core(|c| cancel::cancel(&mut c.state, peer, &req, now)),
        Request::Control(req) => {
            let show = req.action == flex_proto::ControlAction::Show;
            let r =
                shared.with_core(|c| control::control(&c.settings, &mut c.state, peer, &req, now));
            // `show job` prints the job's command, directory and output paths, as scontrol does.
            if show {
                queue::with_details(shared, r).await
            } else {
                r
            }
        }
        Request::LeafMap => shared.with_core(|c| leaf_map::leaf_map(&c.state)),
        Request::Ping => Response::Pong,
        Request::JobEnded(flex_proto::JobEndedRequest { job, status }) => {
            job_ended::reported(shared, peer, job, status).await
        }
        Request::Accounting(q) => accounting::answer(shared, peer, q, now).await,
        Request::Priority(q) => {
            shared.with_core(|c| priority::priority(&c.settings, &c.state, &q, now))
        }
        Request::Shares(q) => {
            shared.with_core(|c| priority::shares(&c.settings, &c.state, &q, now))
        }
        Request::Config => {
            let enforced = shared.enforcement.get().map_or(&[][..], Vec::as_slice);
            shared.with_core(|c| config::config(&c.settings, &c.state, enforced))
        }
    }
}

//! The scheduling loop: it wakes the pure core ([`flex_sched::schedule`], through
//! `State::plan` and `Plan::decide`) when something changed and once a second, runs it off the
//! lock and off the runtime's workers, and applies its decisions. Once a second it also looks
//! after supervisors ([`super::health`]), forgets old finished jobs and sends the time-limit
//! mails that are due ([`crate::mail`]).

use super::health::check_supervisors;
use super::{unix_now, Shared};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Run a scheduling pass whenever something changed (many changes → one pass) and once a
/// second; once a second also look after supervisors and forget old finished jobs.
pub(crate) async fn schedule_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ticked = tokio::select! {
            _ = shared.sched.notified() => false,
            _ = tick.tick() => true,
            _ = stop.changed() => return,
        };
        if ticked {
            check_supervisors(&shared);
            shared.with_core(|c| {
                let keep = c.settings.keep_finished.as_secs();
                c.state.prune_finished(unix_now().saturating_sub(keep));
                if let Some(sendmail) = &c.settings.sendmail {
                    for m in crate::mail::time_limit_mails(&mut c.state, unix_now()) {
                        crate::mail::send(sendmail, m);
                    }
                }
            });
            give_back_memory();
        }
        if shared.writer.stalled() {
            // No job starts while its start could not be written (it would show RUNNING and
            // not run); the writer tries the waiting changes again every second.
            continue;
        }
        let t0 = Instant::now();
        // The core runs on a copy, off the lock and off the runtime's workers, so clients are
        // served while it thinks; its decisions are checked again when they are applied.
        let plan = shared.with_core(|c| {
            c.state.take_dirty();
            c.state
                .plan(&c.settings, unix_now())
                .map(|p| (p, c.settings.policy))
        });
        // Only real passes go into the histogram (none runs while nothing is pending).
        let ran = plan.is_some();
        let started = match plan {
            None => 0,
            Some((plan, policy)) => {
                let now = plan.now;
                let Ok(d) = tokio::task::spawn_blocking(move || plan.decide(&policy)).await else {
                    tracing::error!("the scheduling pass panicked");
                    continue;
                };
                shared.with_core(|c| c.state.apply(&c.settings, d, now))
            }
        };
        let took = t0.elapsed();
        if ran {
            shared.metrics.sched_pass(took);
        }
        if started > 0 || took > Duration::from_millis(5) {
            tracing::debug!("scheduling pass started {started} jobs in {took:?}");
        }
        // Leave the clients twice the time a pass took, and at least 5 ms: under a stream of
        // submissions (each one a change) passes take at most a third of a core, and at most
        // 200 a second when the queue is short. A job submitted to an empty queue starts with
        // its commit when it fits, without waiting for a pass.
        tokio::time::sleep((2 * took).max(Duration::from_millis(5))).await;
    }
}

/// Return freed heap pages to the system, once a second: glibc keeps what bursts of
/// submissions, listings and scheduling passes over a long queue freed in its arenas
/// otherwise, and flexd's resident size would stay at its peak.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let t0 = Instant::now();
        // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
        unsafe {
            libc::malloc_trim(0);
        }
        tracing::trace!("memory given back in {:?}", t0.elapsed());
    }
}

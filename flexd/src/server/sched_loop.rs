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
                let since = unix_now().saturating_sub(keep);
                c.state.prune_finished(since, &c.settings.limits);
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
        let (plan, mut cpu) = on_cpu(|| {
            shared.with_core(|c| {
                c.state.take_dirty();
                c.state
                    .plan(&c.settings, unix_now())
                    .map(|p| (p, c.settings.policy))
            })
        });
        // Only real passes go into the histogram (none runs while nothing is pending).
        let ran = plan.is_some();
        let started = match plan {
            None => 0,
            Some((plan, policy)) => {
                let now = plan.now;
                let decide = move || on_cpu(|| plan.decide(&policy));
                let Ok((d, thought)) = tokio::task::spawn_blocking(decide).await else {
                    tracing::error!("the scheduling pass panicked");
                    continue;
                };
                let (started, applied) =
                    on_cpu(|| shared.with_core(|c| c.state.apply(&c.settings, d, now)));
                cpu += thought + applied;
                started
            }
        };
        let took = t0.elapsed();
        if ran {
            shared.metrics.sched_pass(took);
        }
        if started > 0 || took > Duration::from_millis(5) {
            tracing::debug!("scheduling pass started {started} jobs in {took:?} ({cpu:?} of CPU)");
        }
        // Leave the clients twice the time a pass took, and at least 5 ms: under a stream of
        // submissions (each one a change) passes take at most a third of a core, and at most
        // 200 a second when the queue is short. A job submitted to an empty queue starts with
        // its commit when it fits, without waiting for a pass. The pass's time is the CPU its
        // threads used, at most a tick: the wall time would count a stall of the whole process
        // (SIGSTOP, memory pressure, a slow disk) as work, and stretch every pause after it.
        let pause = (2 * cpu).clamp(Duration::from_millis(5), Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Run `f` and measure the CPU time the calling thread used for it (nothing is measured where
/// the thread's CPU clock cannot be read).
fn on_cpu<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let t0 = thread_cpu();
    let r = f();
    let used = thread_cpu().zip(t0).map(|(t1, t0)| t1.saturating_sub(t0));
    (r, used.unwrap_or_default())
}

/// The calling thread's CPU time so far.
fn thread_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
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

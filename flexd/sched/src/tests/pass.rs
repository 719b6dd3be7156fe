//! The policies, on the Flex-MIG testbed with a 10-leaf job running until t = 500 (4 leaves
//! free until then).

use super::env::{job, reason, started, TestEnv};
use crate::*;
use gres_plugin::JobId;

fn busy_until_500() -> TestEnv {
    TestEnv::testbed().running(job(100).leaves(10), 500)
}

#[test]
fn fifo_head_blocks_everything_behind_it() {
    let env = busy_until_500().queued([job(1).leaves(8), job(2)]);
    let d = env.schedule(&Policy::fifo());
    assert!(d.starts.is_empty());
    assert_eq!(
        d.reservation,
        Some(Reservation {
            job: JobId(1),
            start: 500
        })
    );
    assert_eq!(d.pending[0].estimated_start, Some(500));
    assert_eq!(*reason(&d, 2), Reason::Priority);
}

#[test]
fn easy_backfills_short_jobs_and_holds_long_ones() {
    // head needs 14; job 2 ends before 500 → backfills; job 3 runs past 500 → would delay
    let env = busy_until_500().queued([
        job(1).leaves(14),
        job(2).leaves(2).limit(400),
        job(3).leaves(2),
    ]);
    let d = env.schedule(&Policy::backfill(14));
    assert_eq!(started(&d), [2]);
    assert_eq!(*reason(&d, 3), Reason::Reservation);
    // with a window of 1, job 4 is not even examined
    let env = busy_until_500().queued([job(1).leaves(14), job(3).leaves(2), job(4)]);
    let d = env.schedule(&Policy::backfill(1));
    assert_eq!(*reason(&d, 4), Reason::Priority);
}

#[test]
fn easy_starts_a_long_job_that_leaves_the_head_room() {
    // head needs 12 at 500: 14 free then, so a 2-leaf job running long does not delay it
    let env = busy_until_500().queued([job(1).leaves(12), job(2).leaves(2)]);
    assert_eq!(started(&env.schedule(&Policy::backfill(0))), [2]);
}

#[test]
fn priority_orders_the_queue() {
    let env = TestEnv::testbed().queued([job(1).leaves(14), job(2).leaves(14).priority(10)]);
    assert_eq!(started(&env.schedule(&Policy::fifo())), [2]);
}

#[test]
fn a_pass_at_a_later_time_sees_the_same_limits() {
    // `now` is an argument: at t = 499 the head still waits for t = 500, never for the clock
    let mut env = busy_until_500().queued([job(1).leaves(14)]);
    env.now = 499;
    let d = env.schedule(&Policy::fifo());
    assert!(d.starts.is_empty());
    assert_eq!(d.pending[0].estimated_start, Some(500));
}

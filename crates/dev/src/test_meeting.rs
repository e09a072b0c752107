//! A test's check that two calls run at once: the first to arrive waits (10 s at most) for a
//! second; whether one came is recorded. Calls made one after the other never meet (the
//! first times out alone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Meeting {
    arrived: Mutex<u32>,
    cv: Condvar,
    met: AtomicBool,
}

impl Meeting {
    /// Called inside the operation being checked.
    pub(crate) fn arrive(&self) {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        if *n == 1 {
            let (_n, t) = self
                .cv
                .wait_timeout_while(n, Duration::from_secs(10), |n| *n < 2)
                .unwrap();
            if !t.timed_out() {
                self.met.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Whether a second call came while the first waited.
    pub(crate) fn met(&self) -> bool {
        self.met.load(Ordering::SeqCst)
    }
}

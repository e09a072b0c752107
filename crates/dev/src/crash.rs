//! Crash simulation for tests (pub test support): members that keep every write in memory
//! until the member is flushed, and a machine-wide switch that "crashes" after a chosen
//! number of member operations (writes and flushes). After the crash every write not yet flushed is pending; the test
//! picks which of them reach the underlying members (none, any subset, or a sector-granular
//! prefix of one: a torn write), then opens the pool again from the underlying members.
//!
//! ```text
//! let sim = CrashSim::new();
//! pool.wrap_members(|i, m| sim.wrap(i, m));    // every member write now goes through sim
//! sim.crash_after_ops(k);                      // the (k+1)-th member write or flush and all
//!                                              // later ones do not happen
//! pool.write(..)?;                             // returns as if nothing happened
//! drop(pool);
//! sim.finish(|w| Apply::Whole);                // choose the fate of every pending write
//! ```
//!
//! Flushes after the crash make nothing durable. Reads see the member's pending writes (what
//! a page cache would show). Underlying members are not flushed: durability is what this
//! module simulates.

use std::io;
use std::sync::{Arc, Mutex};

use crate::Member;

/// A member write that was not flushed before the crash.
#[derive(Clone, Debug)]
pub struct PendingWrite {
    /// Issue order among all pending writes.
    pub order: usize,
    pub member: usize,
    pub offset: u64,
    pub len: usize,
}

/// What happens to a pending write at the crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Lost.
    Skip,
    /// Reached the member whole.
    Whole,
    /// Only its first this-many 512-byte sectors reached the member.
    TornSectors(usize),
}

struct Write {
    member: usize,
    offset: u64,
    data: Vec<u8>,
}

#[derive(Default)]
struct SimState {
    ops: u64,
    crash_after: Option<u64>,
    crashed: bool,
    pending: Vec<Write>,
    inner: Vec<Option<Arc<dyn Member>>>,
}

impl SimState {
    /// Counts an operation; true when the crash happens now (the operation is lost).
    fn tick(&mut self) -> bool {
        self.ops += 1;
        if self.crash_after.is_some_and(|n| self.ops > n) {
            self.crashed = true;
        }
        self.crashed
    }
}

/// One simulated machine: the members it wraps crash together.
#[derive(Default)]
pub struct CrashSim {
    st: Mutex<SimState>,
}

impl CrashSim {
    pub fn new() -> Arc<CrashSim> {
        Arc::new(CrashSim::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wraps member `index`.
    pub fn wrap(self: &Arc<Self>, index: usize, inner: Arc<dyn Member>) -> Arc<dyn Member> {
        let mut st = self.lock();
        if st.inner.len() <= index {
            st.inner.resize(index + 1, None);
        }
        st.inner[index] = Some(inner.clone());
        Arc::new(CrashMember {
            index,
            inner,
            sim: self.clone(),
        })
    }

    /// Crash when the member operation (write or flush) after the next `n` is issued (`n` =
    /// 0: before any): it and every later one do not happen.
    pub fn crash_after_ops(&self, n: u64) {
        let mut st = self.lock();
        st.crash_after = Some(st.ops + n);
    }

    /// Crash now.
    pub fn crash(&self) {
        self.lock().crashed = true;
    }

    /// Whether the crash has happened.
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Member writes and flushes issued so far (lost ones included).
    pub fn ops_issued(&self) -> u64 {
        self.lock().ops
    }

    /// The writes issued and not flushed (in issue order).
    pub fn pending(&self) -> Vec<PendingWrite> {
        self.lock()
            .pending
            .iter()
            .enumerate()
            .map(|(order, w)| PendingWrite {
                order,
                member: w.member,
                offset: w.offset,
                len: w.data.len(),
            })
            .collect()
    }

    /// Ends the simulation: applies the pending writes `fate` chooses to the underlying
    /// members, in issue order, and lets go of them (drop the pool first, so that the member
    /// files are closed and unlocked afterwards).
    pub fn finish(&self, mut fate: impl FnMut(&PendingWrite) -> Apply) -> io::Result<()> {
        let mut st = self.lock();
        st.crashed = true;
        let pending = std::mem::take(&mut st.pending);
        let inner = std::mem::take(&mut st.inner);
        drop(st);
        for (order, w) in pending.into_iter().enumerate() {
            let pw = PendingWrite {
                order,
                member: w.member,
                offset: w.offset,
                len: w.data.len(),
            };
            let n = match fate(&pw) {
                Apply::Skip => 0,
                Apply::Whole => w.data.len(),
                Apply::TornSectors(s) => (s * 512).min(w.data.len()),
            };
            if n > 0 {
                if let Some(Some(m)) = inner.get(w.member) {
                    m.write_at(&w.data[..n], w.offset)?;
                }
            }
        }
        Ok(())
    }
}

/// A member whose writes become durable only when it is flushed (see [`CrashSim`]).
pub struct CrashMember {
    index: usize,
    inner: Arc<dyn Member>,
    sim: Arc<CrashSim>,
}

impl Member for CrashMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // The lock is taken before the underlying read: a flush on another thread moves
        // pending writes into the underlying member under it, and a read between the two
        // steps would miss them (stale old blocks in a read-modify-write, hence parity that
        // disagrees with its data: a flaky `wh_served_writes_crash_at_random_points`).
        let st = self.sim.lock();
        self.inner.read_at(buf, offset)?;
        let end = offset + buf.len() as u64;
        for w in st.pending.iter().filter(|w| w.member == self.index) {
            let wend = w.offset + w.data.len() as u64;
            if w.offset < end && offset < wend {
                let from = w.offset.max(offset);
                let to = wend.min(end);
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&w.data[(from - w.offset) as usize..(to - w.offset) as usize]);
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset + buf.len() as u64 > self.inner.size_bytes() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("crash member {}: write past the end", self.index),
            ));
        }
        let mut st = self.sim.lock();
        if st.crashed {
            return Ok(());
        }
        if st.tick() {
            return Ok(());
        }
        st.pending.push(Write {
            member: self.index,
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let mut st = self.sim.lock();
        if st.crashed || st.tick() {
            return Ok(());
        }
        let (mine, rest): (Vec<Write>, Vec<Write>) = std::mem::take(&mut st.pending)
            .into_iter()
            .partition(|w| w.member == self.index);
        st.pending = rest;
        for w in mine {
            self.inner.write_at(&w.data, w.offset)?;
        }
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
    fn describe(&self) -> String {
        format!("crash-simulated {}", self.inner.describe())
    }

    fn completes_in_memory(&self) -> bool {
        true
    }
}

//! Seeded fault injection over real pools (issue 8), in the tradition of FoundationDB's and
//! TigerBeetle's simulators: one 64-bit seed draws everything about a run (the layout, the
//! workload, which faults are injected where and when, where the process crashes and how the
//! unsynced writes come out of the crash), so a failing run is replayed exactly by its seed.
//!
//! A run creates a pool on files in a scratch directory (tmpfs when there is one) whose members
//! are wrapped ([`crate::pool::MemberWrap`]) by a [`FaultMember`]: fail-stop, read errors on
//! byte ranges (latent sector errors), lost writes (acknowledged, never applied), misdirected
//! writes (applied at the wrong offset), slow I/O, silent bit flips at rest, and a record of
//! every write not yet made durable, so that a crash can decide what of it survives. It drives a
//! workload of reads, writes, flushes, member failures, replacements and rebuilds against the
//! pool, crashes it (dropping the `Pool` between operations, or in the middle of one when a
//! countdown of member writes runs out), reopens it, and checks every byte read against a
//! reference model of the volume ([`Model`]).
//!
//! **Tolerance.** A *fault atlas* ([`Atlas`]) keeps each run's faults within what the pool
//! survives, given the pool's protection features ([`Protection`]): every fault that costs
//! redundancy is charged to the member it hits, and at most `tolerance` members may be charged
//! at once (a replaced member is charged until its rebuild ends). The budget is per member,
//! not per stripe: a latent sector error is charged like a failure, since a sector that a
//! rewrite does not remap gets its whole member failed by the engine (as MD does). Silent
//! faults are within tolerance only with
//! block checksums; a crash with unflushed writes uses up every stripe's redundancy unless the
//! pool has a write journal (the RAID write hole: parity may disagree with the data it covers,
//! so a later reconstruction returns wrong bytes). *Beyond-tolerance* runs exceed the budget on
//! purpose and assert that the loss is reported as an error, never returned as good data;
//! where today's engine cannot detect it (silent faults without checksums, crash plus failure
//! without a journal) the undetected loss is counted as a *known gap*, which becomes a failure
//! as soon as [`ENGINE_PROTECTION`] says the protection exists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use layout::{Params, SchemeKind, SplitMix64};
use serde::Serialize;

use crate::pool::{CreateOpts, MemberWrap, Pool, PoolError, RebuildOpts};
use crate::Member;

/// Sector size: the unit a crash keeps or loses atomically (and the model's unit).
pub const SECTOR: u64 = 512;
/// Page size: a crash picks one fate per page of a pending write (FoundationDB's rule).
pub const PAGE: u64 = 4096;

/// The protection features of a pool, which decide what the atlas lets a run inject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Protection {
    /// Write journal (superblock v3 feature bit 0): a crash leaves no stripe whose parity
    /// disagrees with its data, so crash plus member failure is within tolerance.
    pub journal: bool,
    /// Per-block checksums (superblock v3 feature bit 1): silent corruption (bit flips, lost
    /// and misdirected writes) is detected and repaired from redundancy.
    pub checksums: bool,
}

/// The protection the engine gives the pools this harness creates (with both features, as
/// [`create_opts`] does). With `journal` and `checksums` false, silent faults and crash +
/// failure would run only as beyond-tolerance runs whose undetected losses are expected
/// (known gaps); with both on, those runs are within tolerance and any loss fails them.
pub const ENGINE_PROTECTION: Protection = Protection {
    journal: true,
    checksums: true,
};

/// Seeded randomness (SplitMix64 from `layout`, so a seed means the same run everywhere).
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }
    pub fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.u64() % n
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Trips a crash: after `countdown` more member writes (over all members of the pool) the
/// process is "dead": no later write or flush reaches any member (reads still work, so the
/// operation in progress ends normally; its effects are discarded).
#[derive(Debug)]
pub struct CrashSwitch {
    countdown: AtomicI64,
    dead: AtomicBool,
    /// The pool descriptor file, and its contents when the crash tripped: whatever the dead
    /// process saves to it afterwards never happened (restored before reopening).
    desc: Mutex<(Option<PathBuf>, Option<Vec<u8>>)>,
}

impl Default for CrashSwitch {
    fn default() -> CrashSwitch {
        CrashSwitch {
            countdown: AtomicI64::new(-1),
            dead: AtomicBool::new(false),
            desc: Mutex::new((None, None)),
        }
    }
}

impl CrashSwitch {
    /// Crash before the `n`-th next member write (n >= 1). Never while armed (see
    /// [`CrashSwitch::is_armed`]): re-arming a crash under way would hide it from `disarm`.
    pub fn arm(&self, n: u64) {
        assert!(n >= 1, "a crash is armed for a write to come");
        let before = self.countdown.swap(n as i64, Ordering::SeqCst);
        assert!(before < 0, "armed again while armed (countdown {before})");
    }
    /// Nothing armed any more. If a write already took the last count, its crash is under
    /// way: wait until it has taken effect, so that a caller which disarms and then asks
    /// `is_dead` never sees a live process that dies a moment later (the final check of the
    /// served harness once ran on a pool killed under it that way, seed 0x6b08736e).
    pub fn disarm(&self) {
        if self.countdown.swap(-1, Ordering::SeqCst) == 0 {
            while !self.is_dead() {
                std::thread::yield_now();
            }
        }
    }
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }
    /// Armed, or its crash under way or done, until `disarm` or `reset`. (Counting a crash
    /// under way as disarmed let the served harness arm another one over it, which `disarm`
    /// then did not wait for: the process died under the final check, seed 0x6b08736e.)
    pub fn is_armed(&self) -> bool {
        self.countdown.load(Ordering::SeqCst) >= 0
    }
    /// Called before every member write: true if the write must be discarded.
    fn on_write(&self) -> bool {
        if self.is_dead() {
            return true;
        }
        // Counts down only while above zero, so that exactly one write takes it from 1 to 0
        // and 0 means "dying or dead" until the next `arm` or `disarm`.
        let took_last = self
            .countdown
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                (c > 0).then_some(c - 1)
            })
            == Ok(1);
        if took_last {
            self.die();
            return true;
        }
        false
    }
    /// The process dies now (the served harness's crash at a moment, not at a write).
    pub fn trip_now(&self) {
        self.disarm();
        if !self.is_dead() {
            self.die();
        }
    }
    fn die(&self) {
        // The descriptor is saved first: a write racing with us sees `dead` only after it.
        let mut d = self.desc.lock().unwrap();
        d.1 = d.0.as_ref().and_then(|p| std::fs::read(p).ok());
        self.dead.store(true, Ordering::SeqCst);
    }
    /// Alive again, nothing armed (after the crash was applied and before reopening).
    pub fn reset(&self) {
        self.disarm();
        self.dead.store(false, Ordering::SeqCst);
    }
    /// Watches the pool descriptor at `path` (see `desc`).
    pub fn watch_descriptor(&self, path: &Path) {
        *self.desc.lock().unwrap() = (Some(path.to_path_buf()), None);
    }
    /// Puts back the descriptor as it was when the crash tripped (if it did).
    pub fn restore_descriptor(&self) -> io::Result<()> {
        let mut d = self.desc.lock().unwrap();
        if let (Some(p), Some(b)) = (d.0.clone(), d.1.take()) {
            std::fs::write(p, b)?;
        }
        Ok(())
    }
}

/// The faults of one member file, kept across reopening (a dead disk stays dead, a latent
/// error stays until the member is replaced), and its writes since the last flush.
#[derive(Debug)]
pub struct MemberFaults {
    pub path: PathBuf,
    fail_stop: AtomicBool,
    st: Mutex<FaultState>,
    crash: Arc<CrashSwitch>,
}

#[derive(Debug, Default)]
struct FaultState {
    /// Member byte ranges whose reads fail, and whether a write over them remaps the sectors
    /// it covers (clears their error, as a disk with spare sectors does) or not (a sector that
    /// cannot be remapped: the engine must then fail the member, as MD does).
    lse: Vec<(u64, u64, bool)>,
    /// The next this many writes are acknowledged and dropped.
    lost_writes: u32,
    /// The next `count` writes land `shift` bytes away (kept inside `[lo, hi)`).
    misdirect: Option<(u32, i64)>,
    data_range: (u64, u64),
    /// Extra latency per I/O.
    slow: Duration,
    /// Contents at the last flush of every sector written since (the durable image).
    pre: HashMap<u64, Vec<u8>>,
    /// Writes since the last flush, in order: (offset, bytes).
    pending: Vec<(u64, Vec<u8>)>,
}

/// What a crash did to the unsynced writes of one member.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CrashOutcome {
    pub pending_writes: u64,
    pub pages_kept: u64,
    pub pages_dropped: u64,
    pub sectors_torn: u64,
    pub all_durable: bool,
}

impl MemberFaults {
    pub fn new(path: PathBuf, crash: Arc<CrashSwitch>, data_range: (u64, u64)) -> MemberFaults {
        MemberFaults {
            path,
            fail_stop: AtomicBool::new(false),
            st: Mutex::new(FaultState {
                data_range,
                ..FaultState::default()
            }),
            crash,
        }
    }
    pub fn fail_stop(&self) {
        self.fail_stop.store(true, Ordering::SeqCst);
    }
    pub fn is_fail_stopped(&self) -> bool {
        self.fail_stop.load(Ordering::SeqCst)
    }
    /// Reads of `[start, end)` fail from now on; with `remap`, a write over some of its
    /// sectors clears their error.
    pub fn add_lse(&self, start: u64, end: u64, remap: bool) {
        self.st.lock().unwrap().lse.push((start, end, remap));
    }
    /// Whether any read error range is left on this member.
    pub fn has_lse(&self) -> bool {
        !self.st.lock().unwrap().lse.is_empty()
    }
    /// The member's data area `[lo, hi)` (misdirected writes stay inside it).
    pub fn set_data_range(&self, r: (u64, u64)) {
        self.st.lock().unwrap().data_range = r;
    }
    pub fn data_range(&self) -> (u64, u64) {
        self.st.lock().unwrap().data_range
    }
    pub fn lose_writes(&self, n: u32) {
        self.st.lock().unwrap().lost_writes += n;
    }
    pub fn misdirect(&self, n: u32, shift: i64) {
        self.st.lock().unwrap().misdirect = Some((n, shift));
    }
    pub fn set_slow(&self, d: Duration) {
        self.st.lock().unwrap().slow = d;
    }
    pub fn has_pending(&self) -> bool {
        !self.st.lock().unwrap().pending.is_empty()
    }

    /// Flips bit `bit` of byte `offset` of the member file at rest (behind the engine's back).
    pub fn flip_bit(&self, offset: u64, bit: u8) -> io::Result<()> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)?;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, offset)?;
        b[0] ^= 1 << (bit % 8);
        f.write_all_at(&b, offset)?;
        // The flip is at rest: a crash that reverts the sector's pending writes keeps it.
        let mut st = self.st.lock().unwrap();
        if let Some(s) = st.pre.get_mut(&(offset / SECTOR)) {
            s[(offset % SECTOR) as usize] ^= 1 << (bit % 8);
        }
        Ok(())
    }

    /// A process kill (not a power loss): every write the member took is in the page cache,
    /// so all of it survives; only the record of what was unflushed is dropped.
    pub fn apply_kill(&self) -> CrashOutcome {
        let mut st = self.st.lock().unwrap();
        let out = CrashOutcome {
            pending_writes: st.pending.len() as u64,
            all_durable: true,
            ..CrashOutcome::default()
        };
        st.pending.clear();
        st.pre.clear();
        out
    }

    /// Applies a crash to the member file: decides, for every write not yet flushed, what
    /// reached the medium, following FoundationDB's `AsyncFileNonDurable` (its kill path in
    /// `fdbrpc/AsyncFileNonDurable.actor.h`):
    ///
    /// - with probability 1/10 every outstanding write turns out durable;
    /// - otherwise each write is cut at 4 KiB page boundaries (the first and last page may be
    ///   partial) and each page draws one fate uniformly: written correctly, dropped, or
    ///   corrupted;
    /// - a corrupted page is decided per 512-byte sector: correct with probability 1/4;
    ///   otherwise with probability 2/3 a bad write (the right part, the left part or all of
    ///   the sector is bad; the bad part holds random bytes with probability 1/2, always when
    ///   the whole sector is bad, and otherwise keeps its old bytes); otherwise dropped;
    /// - overlapping writes land in the order they were issued (a later write waits for the
    ///   earlier ones), so a sector ends up with its durable contents overwritten by the pieces
    ///   that survived, in order.
    ///
    /// With `garbage` false the disk is assumed to write sectors atomically: a bad sector is
    /// dropped whole instead of holding random or mixed bytes (the crash is then still
    /// sector-granular, but every sector holds a version that was written).
    pub fn apply_crash(&self, rng: &mut Rng, garbage: bool) -> io::Result<CrashOutcome> {
        let mut st = self.st.lock().unwrap();
        let pending = std::mem::take(&mut st.pending);
        let pre = std::mem::take(&mut st.pre);
        drop(st);
        let mut out = CrashOutcome {
            pending_writes: pending.len() as u64,
            ..CrashOutcome::default()
        };
        if pending.is_empty() {
            return Ok(out);
        }
        if rng.chance(0.1) {
            out.all_durable = true;
            return Ok(out);
        }
        let mut img = pre;
        let put = |img: &mut HashMap<u64, Vec<u8>>, at: u64, bytes: &[u8]| {
            let mut pos = at;
            let end = at + bytes.len() as u64;
            while pos < end {
                let s = pos / SECTOR;
                let in_s = (pos % SECTOR) as usize;
                let n = ((SECTOR - pos % SECTOR).min(end - pos)) as usize;
                let sec = img
                    .get_mut(&s)
                    .expect("every written sector has a durable image");
                let from = (pos - at) as usize;
                sec[in_s..in_s + n].copy_from_slice(&bytes[from..from + n]);
                pos += n as u64;
            }
        };
        for (off, data) in &pending {
            let end = off + data.len() as u64;
            let mut page_at = *off;
            while page_at < end {
                let page_end = ((page_at / PAGE + 1) * PAGE).min(end);
                let slice = |a: u64, b: u64| &data[(a - off) as usize..(b - off) as usize];
                match rng.below(3) {
                    0 => {
                        out.pages_kept += 1;
                        put(&mut img, page_at, slice(page_at, page_end));
                    }
                    1 => out.pages_dropped += 1,
                    _ => {
                        let mut s_at = page_at;
                        while s_at < page_end {
                            let s_end = ((s_at / SECTOR + 1) * SECTOR).min(page_end);
                            if rng.chance(0.25) {
                                put(&mut img, s_at, slice(s_at, s_end));
                            } else if rng.chance(2.0 / 3.0) {
                                out.sectors_torn += 1;
                                if garbage {
                                    let len = s_end - s_at;
                                    let side = rng.below(3);
                                    let cut = s_at + rng.below(len);
                                    let (bad_a, bad_b) = match side {
                                        0 => (cut, s_end),
                                        1 => (s_at, cut),
                                        _ => (s_at, s_end),
                                    };
                                    let junk = side == 2 || rng.chance(0.5);
                                    // The good part is the new data.
                                    if s_at < bad_a {
                                        put(&mut img, s_at, slice(s_at, bad_a));
                                    }
                                    if bad_b < s_end {
                                        put(&mut img, bad_b, slice(bad_b, s_end));
                                    }
                                    if junk && bad_a < bad_b {
                                        let j = rng.bytes((bad_b - bad_a) as usize);
                                        put(&mut img, bad_a, &j);
                                    }
                                }
                            }
                            s_at = s_end;
                        }
                    }
                }
                page_at = page_end;
            }
        }
        let f = std::fs::OpenOptions::new().write(true).open(&self.path)?;
        let mut sectors: Vec<(&u64, &Vec<u8>)> = img.iter().collect();
        sectors.sort_by_key(|(s, _)| **s);
        for (s, bytes) in sectors {
            f.write_all_at(bytes, s * SECTOR)?;
        }
        f.sync_data()?;
        Ok(out)
    }
}

/// A member with injected faults and a record of its unsynced writes (see [`MemberFaults`]).
pub struct FaultMember {
    inner: Arc<dyn Member>,
    f: Arc<MemberFaults>,
    merges_writes: bool,
}

impl FaultMember {
    pub fn new(inner: Arc<dyn Member>, f: Arc<MemberFaults>) -> FaultMember {
        let merges_writes = inner.merges_writes();
        FaultMember {
            inner,
            f,
            merges_writes,
        }
    }
    /// Makes the executor send this member's consecutive writes as one `write_vectored_at`
    /// (as it does to O_DIRECT, emulated and NBD members) or not, whatever the file under it
    /// is. The harness's members are memory files, which alone would never take that path.
    /// The vectored write stays the trait's default, one `write_at` per buffer in order, so
    /// every buffer meets the faults and the crash countdown as a write of its own (a crash
    /// in the middle lands a prefix; the crash model then treats every unflushed write as
    /// maybe lost or torn, as a device may do with any part of one request).
    pub fn merging_writes(mut self, on: bool) -> FaultMember {
        self.merges_writes = on;
        self
    }
    fn check_fail_stop(&self) -> io::Result<()> {
        if self.f.is_fail_stopped() {
            return Err(io::Error::other(format!(
                "injected fail-stop: {} is gone",
                self.f.path.display()
            )));
        }
        Ok(())
    }
}

impl Member for FaultMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_fail_stop()?;
        let (slow, lse) = {
            let st = self.f.st.lock().unwrap();
            let end = offset + buf.len() as u64;
            let hit = st
                .lse
                .iter()
                .copied()
                .find(|&(s, e, _)| s < end && offset < e)
                .map(|(s, e, _)| (s, e));
            (st.slow, hit)
        };
        if !slow.is_zero() {
            std::thread::sleep(slow);
        }
        if let Some((s, e)) = lse {
            return Err(io::Error::other(format!(
                "injected latent sector error on {} bytes {s}..{e}",
                self.f.path.display()
            )));
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_fail_stop()?;
        if self.f.crash.on_write() {
            return Ok(());
        }
        let mut st = self.f.st.lock().unwrap();
        if !st.slow.is_zero() {
            std::thread::sleep(st.slow);
        }
        if st.lost_writes > 0 {
            st.lost_writes -= 1;
            return Ok(());
        }
        // A sector that cannot be remapped fails the write that would land on it, as a drive
        // with no spare sectors left reports (a write that "succeeded" onto a sector that
        // still cannot be read would be an acknowledged write lost with no fault since).
        let end = offset + buf.len() as u64;
        if let Some(&(s, e, _)) = st
            .lse
            .iter()
            .find(|&&(s, e, remap)| !remap && s < end && offset < e)
        {
            return Err(io::Error::other(format!(
                "injected write error: {} bytes {s}..{e} cannot be remapped",
                self.f.path.display()
            )));
        }
        let mut at = offset;
        if let Some((n, shift)) = st.misdirect {
            st.misdirect = (n > 1).then_some((n - 1, shift));
            let (lo, hi) = st.data_range;
            let len = buf.len() as u64;
            if offset >= lo && hi >= lo + len {
                let moved = (offset as i64 + shift).clamp(lo as i64, (hi - len) as i64) as u64;
                at = moved;
            }
        }
        // The durable image of every sector this write touches, read before the write.
        let end = at + buf.len() as u64;
        for s in at / SECTOR..end.div_ceil(SECTOR) {
            if let std::collections::hash_map::Entry::Vacant(v) = st.pre.entry(s) {
                let mut b = vec![0u8; SECTOR as usize];
                self.inner.read_at(&mut b, s * SECTOR)?;
                v.insert(b);
            }
        }
        st.pending.push((at, buf.to_vec()));
        self.inner.write_at(buf, at)?;
        // A write remaps the sectors it covers in remappable error ranges.
        if st
            .lse
            .iter()
            .any(|&(s, e, remap)| remap && s < end && at < e)
        {
            let mut kept = Vec::new();
            for (s, e, remap) in std::mem::take(&mut st.lse) {
                if !remap || e <= at || end <= s {
                    kept.push((s, e, remap));
                    continue;
                }
                if s < at {
                    kept.push((s, at, remap));
                }
                if end < e {
                    kept.push((end, e, remap));
                }
            }
            st.lse = kept;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.check_fail_stop()?;
        if self.f.crash.is_dead() {
            // Nothing reaches the medium once the process is dead.
            return Ok(());
        }
        self.inner.flush()?;
        let mut st = self.f.st.lock().unwrap();
        st.pre.clear();
        st.pending.clear();
        Ok(())
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn completes_in_memory(&self) -> bool {
        // Keeps member I/O on the calling thread, in plan order: a crash countdown then trips
        // at the same write in every replay of a seed.
        self.inner.completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        self.merges_writes
    }
    fn emulated_speed(&self) -> Option<crate::Speed> {
        self.inner.emulated_speed()
    }
}

/// What a sector of the volume may hold when its contents are not known exactly.
#[derive(Clone, Debug)]
enum Amb {
    /// One of these versions (written since the last flush before a crash, or durable).
    OneOf(Vec<Vec<u8>>),
    /// Anything (a crash may have torn it with random bytes).
    Any,
}

/// A version of a sector: (write number, harness step, whether the write failed, its first
/// bytes).
type Version = (u64, u64, bool, [u8; 8]);

/// The reference model of the volume: per 512-byte sector, what a read may return.
///
/// `base` holds the newest contents of every sector whose contents are known. A write keeps
/// the versions it replaces (since the last flush) in `pend`; a flush forgets them (what was
/// flushed must read back intact). A crash makes every sector with unflushed writes ambiguous:
/// it may hold its durable contents or any version written since (or anything, when the crash
/// model lets torn sectors hold random bytes); the first read pins the version.
#[derive(Debug)]
pub struct Model {
    base: Vec<u8>,
    pend: HashMap<u64, (Vec<Vec<u8>>, bool)>,
    amb: HashMap<u64, Amb>,
    /// Sectors of failed writes since the last flush: `base` (the new bytes) or any version
    /// in `pend`.
    unk: std::collections::HashSet<u64>,
    /// Every version each sector was given, oldest first, as (write number, the harness's
    /// step, whether the write failed, its first bytes): a wrong read names the version it
    /// returned, if any, which tells stale data from garbage.
    history: HashMap<u64, Vec<Version>>,
    writes: u64,
    /// The harness's step, recorded with each write.
    pub step: u64,
}

impl Model {
    pub fn new(capacity: u64) -> Model {
        Model {
            base: vec![0; capacity as usize],
            pend: HashMap::new(),
            amb: HashMap::new(),
            unk: Default::default(),
            history: HashMap::new(),
            writes: 0,
            step: 0,
        }
    }
    fn sector(&self, s: u64) -> &[u8] {
        &self.base[(s * SECTOR) as usize..((s + 1) * SECTOR) as usize]
    }
    /// Records a write (sector aligned).
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        self.record(offset, data, false);
    }
    fn record(&mut self, offset: u64, data: &[u8], failed: bool) {
        assert!(offset.is_multiple_of(SECTOR) && (data.len() as u64).is_multiple_of(SECTOR));
        self.writes += 1;
        for (k, chunk) in data.chunks(SECTOR as usize).enumerate() {
            let s = offset / SECTOR + k as u64;
            self.history.entry(s).or_default().push((
                self.writes,
                self.step,
                failed,
                chunk[..8].try_into().unwrap(),
            ));
            self.unk.remove(&s);
            let old = self.sector(s).to_vec();
            let e = self.pend.entry(s).or_default();
            match self.amb.remove(&s) {
                Some(Amb::OneOf(v)) => e.0.extend(v),
                Some(Amb::Any) => e.1 = true,
                None => e.0.push(old),
            }
            self.base[(s * SECTOR) as usize..((s + 1) * SECTOR) as usize].copy_from_slice(chunk);
        }
    }
    /// A write whose outcome is unknown (it failed part way): every sector may hold the old
    /// or the new bytes (a crash may tear it like any unflushed write), and stays so across
    /// flushes until read or rewritten.
    pub fn write_unknown(&mut self, offset: u64, data: &[u8]) {
        self.record(offset, data, true);
        for k in 0..data.len() as u64 / SECTOR {
            self.unk.insert(offset / SECTOR + k);
        }
    }
    /// The volume was flushed: everything written is durable.
    pub fn flush(&mut self) {
        for s in std::mem::take(&mut self.unk) {
            let (mut v, any) = self.pend.remove(&s).unwrap_or_default();
            v.push(self.sector(s).to_vec());
            self.amb
                .insert(s, if any { Amb::Any } else { Amb::OneOf(v) });
        }
        self.pend.clear();
    }
    /// Unflushed writes since the last flush.
    pub fn dirty(&self) -> bool {
        !self.pend.is_empty()
    }
    /// Writes whose outcome is unknown (they failed, or were in flight at a crash) and that
    /// were not read or rewritten since.
    pub fn has_unknown(&self) -> bool {
        !self.unk.is_empty()
    }
    /// The pool crashed: every sector with unflushed writes becomes ambiguous.
    pub fn crash(&mut self, garbage: bool) {
        self.unk.clear();
        for (s, (mut v, any)) in self.pend.drain() {
            let cur = self.base[(s * SECTOR) as usize..((s + 1) * SECTOR) as usize].to_vec();
            v.push(cur);
            let a = if garbage || any {
                Amb::Any
            } else {
                Amb::OneOf(v)
            };
            self.amb.insert(s, a);
        }
    }
    /// Checks bytes read at `offset`; returns the first sector that disagrees. Ambiguous
    /// sectors are pinned to what was read.
    pub fn check(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        for (k, got) in data.chunks(SECTOR as usize).enumerate() {
            let s = offset / SECTOR + k as u64;
            let ok = match self.amb.get(&s) {
                None if self.unk.contains(&s) => {
                    got == self.sector(s)
                        || self
                            .pend
                            .get(&s)
                            .is_some_and(|(v, any)| *any || v.iter().any(|x| x.as_slice() == got))
                }
                None => got == self.sector(s),
                Some(Amb::Any) => true,
                Some(Amb::OneOf(v)) => v.iter().any(|x| x.as_slice() == got),
            };
            if !ok {
                let first = got
                    .iter()
                    .zip(self.sector(s))
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                let history = self.history.get(&s).map(Vec::as_slice).unwrap_or(&[]);
                let version = match history
                    .iter()
                    .rposition(|v| got.len() >= 8 && v.3 == got[..8])
                {
                    Some(i) => {
                        let (n, step, failed, _) = history[i];
                        format!(
                            " (it is version {} of {} of this sector: write {n} at step {step}{})",
                            i + 1,
                            history.len(),
                            if failed { ", which failed" } else { "" }
                        )
                    }
                    None if got.iter().all(|&b| b == 0) => " (zeros)".to_string(),
                    None => " (no version written to this sector)".to_string(),
                };
                return Err(format!(
                    "volume sector {s} (bytes {}..{}) read wrong: first difference at byte {} of \
                     it (read {:02x?}, expected {:02x?}){}{version}",
                    s * SECTOR,
                    (s + 1) * SECTOR,
                    first,
                    &got[first..(first + 4).min(got.len())],
                    &self.sector(s)[first..(first + 4).min(got.len())],
                    if self.amb.contains_key(&s) {
                        " (none of the versions it may hold after the crash)"
                    } else {
                        ""
                    }
                ));
            }
            if self.amb.remove(&s).is_some() || self.unk.remove(&s) {
                self.base[(s * SECTOR) as usize..((s + 1) * SECTOR) as usize].copy_from_slice(got);
            }
        }
        Ok(())
    }
}

/// The fault atlas: which members have used redundancy, and how much is left.
#[derive(Clone, Debug)]
pub struct Atlas {
    pub protection: Protection,
    /// Member failures the layout survives (`Scheme::tolerance`).
    pub tolerance: usize,
    /// Members charged: failed, replaced and not rebuilt yet, with latent errors, or (with
    /// checksums) with silent damage.
    pub charged: BTreeSet<usize>,
    /// For each charged member, the file its latest charge is on: the charge ends only
    /// when the member is another file (replaced since) and rebuilt. A replacement made
    /// before the fault does not count (served fault harness, seed 0x6b0848fe: a member
    /// replaced and rebuilt, then given a misdirected write, was let off because it had
    /// been replaced once; the final `verify` then met the damage the harness had not
    /// expected).
    pub charged_file: BTreeMap<usize, PathBuf>,
    /// A crash left unflushed writes behind with no journal: stripes they touched may hold
    /// parity that disagrees with the data, so no redundancy may be used any more.
    pub write_hole: bool,
}

impl Atlas {
    /// Charges member `m`, whose current file is `path`.
    pub fn charge(&mut self, m: usize, path: &Path) {
        self.charged.insert(m);
        self.charged_file.insert(m, path.to_path_buf());
    }
    /// With every cycle rebuilt and no member failed: the charges of members that are a
    /// new file since their latest charge, with no latent errors and not fail-stopped,
    /// end (`faults` holds each member's current file).
    pub fn settle(&mut self, faults: &[Arc<MemberFaults>]) {
        let ended: Vec<usize> = self
            .charged
            .iter()
            .copied()
            .filter(|&m| {
                let f = &faults[m];
                self.charged_file.get(&m) != Some(&f.path) && !f.has_lse() && !f.is_fail_stopped()
            })
            .collect();
        for m in ended {
            self.charged.remove(&m);
            self.charged_file.remove(&m);
        }
    }
    /// Redundancy left: member faults the pool still survives.
    pub fn left(&self) -> usize {
        if self.write_hole {
            0
        } else {
            self.tolerance.saturating_sub(self.charged.len())
        }
    }
    /// Whether a fault that costs member `m`'s redundancy stays within tolerance.
    pub fn allows_member_fault(&self, m: usize) -> bool {
        (self.charged.contains(&m) && !self.write_hole) || self.left() > 0
    }
    /// Whether a crash now stays within tolerance: always with a journal; without one only
    /// when nothing is charged (a crash while degraded with unflushed writes can leave a
    /// stripe whose missing unit no longer follows from the others).
    pub fn allows_crash(&self, dirty: bool) -> bool {
        self.protection.journal || !dirty || self.charged.is_empty()
    }
}

/// The kind of run a seed draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RunKind {
    /// Faults of every kind the atlas allows, kept within tolerance.
    Mixed,
    /// Member faults (fail-stop, latent errors, failures) on one member more than the layout
    /// tolerates: the loss must be reported.
    OverFail,
    /// Silent faults (bit flips, lost and misdirected writes) on up to `tolerance` members:
    /// within tolerance with checksums, beyond without.
    Silent,
    /// A crash with unflushed writes, then member failures up to the tolerance: within
    /// tolerance with a journal, beyond without (the write hole).
    CrashFail,
}

impl RunKind {
    /// Whether a run of this kind is within tolerance for a pool with `p`.
    pub fn within(self, p: Protection) -> bool {
        match self {
            RunKind::Mixed => true,
            RunKind::OverFail => false,
            RunKind::Silent => p.checksums,
            RunKind::CrashFail => p.journal,
        }
    }
    /// Beyond tolerance and not detectable by an engine without the protection: an
    /// undetected loss is the known gap, not a failure.
    pub fn known_gap(self, p: Protection) -> bool {
        match self {
            RunKind::Silent => !p.checksums,
            RunKind::CrashFail => !p.journal,
            _ => false,
        }
    }
}

/// Faults injected, by kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FaultCounts {
    pub fail_stop: u64,
    pub admin_fail: u64,
    pub latent_sector_errors: u64,
    pub bit_flips: u64,
    pub lost_writes: u64,
    pub misdirected_writes: u64,
    pub slow_members: u64,
    pub crashes_between_ops: u64,
    pub crashes_mid_op: u64,
    /// Faults the atlas refused (they would have exceeded the tolerance).
    pub refused_by_atlas: u64,
}

impl FaultCounts {
    pub fn add(&mut self, o: &FaultCounts) {
        self.fail_stop += o.fail_stop;
        self.admin_fail += o.admin_fail;
        self.latent_sector_errors += o.latent_sector_errors;
        self.bit_flips += o.bit_flips;
        self.lost_writes += o.lost_writes;
        self.misdirected_writes += o.misdirected_writes;
        self.slow_members += o.slow_members;
        self.crashes_between_ops += o.crashes_between_ops;
        self.crashes_mid_op += o.crashes_mid_op;
        self.refused_by_atlas += o.refused_by_atlas;
    }
    pub fn crashes(&self) -> u64 {
        self.crashes_between_ops + self.crashes_mid_op
    }
}

/// The outcome of one seed.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub seed: u64,
    pub layout: String,
    pub kind: RunKind,
    pub within_tolerance: bool,
    pub faults: FaultCounts,
    pub reopens: u64,
    pub rebuilds: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_verified: u64,
    pub pages_dropped: u64,
    pub sectors_torn: u64,
    /// Losses in a within-tolerance run: wrong data, or an error (must be empty).
    pub losses: Vec<String>,
    /// Beyond tolerance: reads (or operations) that reported the loss as an error.
    pub detected: u64,
    /// Beyond tolerance: reads that returned wrong data as good.
    pub undetected: Vec<String>,
    /// The undetected losses are the known gap of `kind` (see [`RunKind::known_gap`]).
    pub known_gap: bool,
    /// The members took the executor's merged-write path (see
    /// [`FaultMember::merging_writes`]; chosen from the seed, half of the seeds).
    pub merged_writes: bool,
    /// Served runs: redirected writes that a start after a crash or restart found in the
    /// IDO surrogate's log after the newest record and mapped again.
    pub ido_log_writes_replayed: u64,
}

/// Whether a seed's members take the merged-write path: a bit of its own hash, so that the
/// choice draws nothing from the run's generator (kept seeds replay as before).
pub fn seed_merges_writes(seed: u64) -> bool {
    Rng::new(seed ^ 0x6d65_7267_6564_0000).below(2) == 1
}

impl RunReport {
    /// The run failed: a loss within tolerance, or an undetected loss that is not a known gap.
    pub fn failed(&self) -> bool {
        !self.losses.is_empty() || (!self.undetected.is_empty() && !self.known_gap)
    }
    pub fn first_problem(&self) -> Option<&str> {
        self.losses
            .first()
            .or(if self.known_gap {
                None
            } else {
                self.undetected.first()
            })
            .map(|s| s.as_str())
    }
}

/// How to run a seed.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// Scratch directory (a subdirectory per seed is created and removed).
    pub dir: PathBuf,
    /// Workload steps per run.
    pub steps: usize,
    pub protection: Protection,
    /// Create the pools with these features instead of `protection` (a test that claims
    /// protection the pools lack, to show that the harness then reports losses).
    pub pool_protection: Option<Protection>,
    /// Print every step to stderr.
    pub verbose: bool,
}

impl RunOpts {
    /// Scratch space in `/dev/shm` when there is one (member I/O at memory speed), else the
    /// temporary directory.
    pub fn default_dir() -> PathBuf {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    }
}

impl Default for RunOpts {
    fn default() -> RunOpts {
        RunOpts {
            dir: RunOpts::default_dir(),
            steps: 120,
            protection: ENGINE_PROTECTION,
            pool_protection: None,
            verbose: false,
        }
    }
}

/// The layouts runs draw from: (name, scheme, parameters, chunk bytes).
pub fn layouts() -> Vec<(&'static str, SchemeKind, Params, u64)> {
    let d = |n: usize| Params {
        disks: Some(n),
        ..Params::default()
    };
    vec![
        ("raid1-3", SchemeKind::Raid1, d(3), 4096),
        ("raid10-4", SchemeKind::Raid10, d(4), 4096),
        ("raid4-5", SchemeKind::Raid4, d(5), 4096),
        ("raid5-4", SchemeKind::Raid5, d(4), 4096),
        ("raid5-5", SchemeKind::Raid5, d(5), 16384),
        ("raid6-5", SchemeKind::Raid6, d(5), 4096),
        ("raid6-6", SchemeKind::Raid6, d(6), 8192),
        (
            "raid50-6",
            SchemeKind::Raid50,
            Params {
                width: Some(3),
                ..d(6)
            },
            4096,
        ),
        (
            "raidplus-5-3",
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
            4096,
        ),
        (
            "hash-6-3",
            SchemeKind::Hash,
            Params {
                width: Some(3),
                seed: 5,
                stripes: Some(12),
                ..d(6)
            },
            4096,
        ),
    ]
}

/// Create options for a run's pool, with the protection features the run assumes (a small
/// journal, so that small members keep room for data).
pub fn create_opts(
    kind: SchemeKind,
    params: Params,
    members: Vec<PathBuf>,
    member_bytes: u64,
    chunk: u64,
    protection: Protection,
) -> CreateOpts {
    // The journal and checksum regions sit between the metadata and the data area (which
    // then starts at the next MiB): give them that MiB so the data area keeps its size.
    let extra = if protection.journal || protection.checksums {
        1 << 20
    } else {
        0
    };
    CreateOpts {
        size_bytes: Some(member_bytes + extra),
        force: true,
        checksums: protection.checksums,
        write_hole: if protection.journal {
            crate::pool::WriteHole::Journal
        } else {
            crate::pool::WriteHole::None
        },
        journal_bytes: protection.journal.then_some(256 << 10),
        ..CreateOpts::new(kind, params, members, chunk)
    }
}

/// One member fault, as [`FaultDraw::draw`] picks it.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Every I/O of the member takes this much longer (costs no redundancy).
    Slow(Duration),
    /// Bit `bit` of member byte `at` flips at rest.
    BitFlip { at: u64, bit: u8 },
    /// The member's next this-many writes are acknowledged and dropped.
    LoseWrites(u32),
    /// The member's next write lands this many bytes away.
    Misdirect(i64),
    /// The member stops answering (every I/O fails).
    FailStop,
    /// Reads of member bytes `at..at + len` fail; with `remap` a rewrite clears them.
    Lse { at: u64, len: u64, remap: bool },
    /// The operator fails the member (the harness calls the pool's `fail`).
    AdminFail,
}

impl Fault {
    /// Injects the fault into `f` and counts it; returns a log line, or `None` for
    /// [`Fault::AdminFail`], which the caller carries out through the pool (and counts).
    pub fn apply(self, f: &MemberFaults, counts: &mut FaultCounts) -> Option<String> {
        Some(match self {
            Fault::Slow(d) => {
                f.set_slow(d);
                counts.slow_members += 1;
                format!("slow ({} us per I/O)", d.as_micros())
            }
            Fault::BitFlip { at, bit } => {
                if f.flip_bit(at, bit).is_err() {
                    return Some(format!("bit flip at {at} failed (file too short)"));
                }
                counts.bit_flips += 1;
                format!("bit {bit} of byte {at} flipped")
            }
            Fault::LoseWrites(n) => {
                f.lose_writes(n);
                counts.lost_writes += n as u64;
                format!("loses its next {n} writes")
            }
            Fault::Misdirect(shift) => {
                f.misdirect(1, shift);
                counts.misdirected_writes += 1;
                format!("next write lands {shift} bytes off")
            }
            Fault::FailStop => {
                f.fail_stop();
                counts.fail_stop += 1;
                "fail-stop".to_string()
            }
            Fault::Lse { at, len, remap } => {
                f.add_lse(at, at + len, remap);
                counts.latent_sector_errors += 1;
                format!(
                    "latent errors {at}..{} ({})",
                    at + len,
                    if remap {
                        "a rewrite remaps them"
                    } else {
                        "persistent: rewriting does not help"
                    }
                )
            }
            Fault::AdminFail => return None,
        })
    }
}

/// What a harness needs to pick a member fault the run's kind and its fault atlas allow
/// (shared by the plain harness and the served one, `crate::faultsim_served`).
pub struct FaultDraw<'a> {
    pub rng: &'a mut Rng,
    pub kind: RunKind,
    pub protection: Protection,
    pub atlas: &'a mut Atlas,
    /// Members hit by a beyond-tolerance fault so far.
    pub beyond_hit: &'a mut BTreeSet<usize>,
    pub counts: &'a mut FaultCounts,
    /// In a mixed run: a crash now would keep the redundancy (or none is armed), so a fault
    /// that costs redundancy may be injected.
    pub crash_ok: bool,
    /// A crash-then-fail run has crashed with unflushed writes.
    pub crashed_dirty: bool,
    /// The member's data area and checksum region `[lo, hi)` (faults land there).
    pub data_range: (u64, u64),
    pub checksum_range: (u64, u64),
    pub chunk_bytes: u64,
}

impl FaultDraw<'_> {
    /// Picks a fault for member `m`, charging it to the atlas; `None` when the atlas refuses
    /// (counted).
    pub fn draw(&mut self, m: usize) -> Option<Fault> {
        let (lo, hi) = self.data_range;
        // Slow members cost no redundancy: any run.
        if self.rng.chance(0.15) {
            let us = 20 + self.rng.below(200);
            return Some(Fault::Slow(Duration::from_micros(us)));
        }
        let silent = match self.kind {
            RunKind::Silent => true,
            RunKind::Mixed => self.protection.checksums && self.rng.chance(0.3),
            _ => false,
        };
        // Which member may take it.
        let allowed = match self.kind {
            RunKind::Mixed => self.atlas.allows_member_fault(m) && self.crash_ok,
            RunKind::OverFail => {
                self.beyond_hit.contains(&m) || self.beyond_hit.len() <= self.atlas.tolerance
            }
            RunKind::Silent => {
                self.beyond_hit.contains(&m) || self.beyond_hit.len() < self.atlas.tolerance.max(1)
            }
            RunKind::CrashFail => {
                self.crashed_dirty
                    && (self.beyond_hit.contains(&m)
                        || self.beyond_hit.len() < self.atlas.tolerance)
            }
        };
        if !allowed {
            self.counts.refused_by_atlas += 1;
            return None;
        }
        self.beyond_hit.insert(m);
        if self.kind == RunKind::Mixed {
            self.atlas.charged.insert(m);
        }
        if silent {
            return Some(match self.rng.below(3) {
                0 => {
                    // Mostly the data area; sometimes a copy of checksum entries.
                    let (clo, chi) = self.checksum_range;
                    let at = if chi > clo && self.rng.chance(0.25) {
                        clo + self.rng.below(chi - clo)
                    } else {
                        lo + self.rng.below(hi - lo)
                    };
                    let bit = self.rng.below(8) as u8;
                    Fault::BitFlip { at, bit }
                }
                1 => Fault::LoseWrites(1 + self.rng.below(3) as u32),
                _ => {
                    let chunk = self.chunk_bytes as i64;
                    let k = 1 + self.rng.below(4) as i64;
                    Fault::Misdirect(if self.rng.chance(0.5) {
                        k * chunk
                    } else {
                        -k * chunk
                    })
                }
            });
        }
        Some(match self.rng.below(3) {
            0 => Fault::FailStop,
            1 => {
                let len = SECTOR * (1 + self.rng.below(64));
                let at = lo + self.rng.below((hi - lo - len) / SECTOR) * SECTOR;
                Fault::Lse {
                    at,
                    len,
                    remap: self.rng.chance(0.5),
                }
            }
            _ => Fault::AdminFail,
        })
    }
}

/// The command that replays a seed.
pub fn reproduce_command(seed: u64) -> String {
    format!("cargo run --release -p dev --example faultsim -- --seed {seed:#x} --verbose")
}

struct Run {
    rng: Rng,
    opts: RunOpts,
    kind: RunKind,
    garbage: bool,
    dir: PathBuf,
    desc: PathBuf,
    crash: Arc<CrashSwitch>,
    faults: Arc<Mutex<Vec<Arc<MemberFaults>>>>,
    data_range: (u64, u64),
    /// The checksum region on every member (`(0, 0)` without checksums): bit flips land
    /// there too (a damaged checksum-entry copy).
    checksum_range: (u64, u64),
    pool: Option<Pool>,
    model: Model,
    atlas: Atlas,
    report: RunReport,
    replacements: u64,
    /// Members hit by a beyond-tolerance fault so far.
    beyond_hit: BTreeSet<usize>,
    /// The crash of a CrashFail run happened (with unflushed writes).
    crashed_dirty: bool,
}

/// Runs one seed to the end and reports what happened. Never panics on an engine error (an
/// engine panic propagates: the caller catches it and reports the seed).
pub fn run_seed(seed: u64, opts: &RunOpts) -> RunReport {
    let mut rng = Rng::new(seed);
    let all = layouts();
    let (name, scheme, params, chunk) = all[rng.below(all.len() as u64) as usize].clone();
    let kind = match rng.below(100) {
        0..=54 => RunKind::Mixed,
        55..=69 => RunKind::OverFail,
        70..=84 => RunKind::Silent,
        _ => RunKind::CrashFail,
    };
    let garbage = rng.chance(0.5);
    let dir = opts.dir.join(format!(
        "raidforge-faultsim-{}-{seed:016x}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let disks = params.disks.unwrap_or(0);
    let member_bytes = (1 << 20) + (rng.below(3) + 1) * (256 << 10);
    let paths: Vec<PathBuf> = (0..disks).map(|i| dir.join(format!("m{i}.img"))).collect();
    let desc = dir.join("pool.json");
    let crash = Arc::new(CrashSwitch::default());
    let data_lo = raidcore::superblock::DEFAULT_DATA_OFFSET_BYTES;
    let data_range = (data_lo, member_bytes);
    let faults: Arc<Mutex<Vec<Arc<MemberFaults>>>> = Arc::new(Mutex::new(
        paths
            .iter()
            .map(|p| Arc::new(MemberFaults::new(p.clone(), crash.clone(), data_range)))
            .collect(),
    ));
    let merged_writes = seed_merges_writes(seed);
    let wrap = make_wrap(&faults, merged_writes);
    let within = kind.within(opts.protection);
    let mut report = RunReport {
        seed,
        layout: name.to_string(),
        kind,
        within_tolerance: within,
        faults: FaultCounts::default(),
        reopens: 0,
        rebuilds: 0,
        reads: 0,
        writes: 0,
        bytes_verified: 0,
        pages_dropped: 0,
        sectors_torn: 0,
        losses: Vec::new(),
        detected: 0,
        undetected: Vec::new(),
        known_gap: kind.known_gap(opts.protection),
        merged_writes,
        ido_log_writes_replayed: 0,
    };
    let pool = match Pool::create_wrapped(
        &desc,
        create_opts(
            scheme,
            params,
            paths,
            member_bytes,
            chunk,
            opts.pool_protection.unwrap_or(opts.protection),
        ),
        Some(wrap),
    ) {
        Ok(p) => p,
        Err(e) => {
            report.losses.push(format!("create {name}: {e}"));
            let _ = std::fs::remove_dir_all(&dir);
            return report;
        }
    };
    crash.watch_descriptor(&desc);
    let tolerance = pool.geometry().scheme().tolerance();
    let cap = pool.capacity_bytes();
    // Faults go into the data area, which the journal and checksum regions push further in;
    // bit flips also into the checksum region (charged to the member like any other fault).
    // The journal region is not faulted yet.
    let data_range = (
        pool.data_offset_bytes(),
        pool.data_offset_bytes() + pool.geometry().member_bytes_used(),
    );
    for f in faults.lock().unwrap().iter() {
        f.set_data_range(data_range);
    }
    let checksum_range = {
        let (off, len) = (pool.checksum_region().offset, pool.checksum_region().bytes);
        (off, off + len)
    };
    let mut run = Run {
        rng,
        opts: opts.clone(),
        kind,
        garbage,
        dir: dir.clone(),
        desc,
        crash,
        faults,
        data_range,
        checksum_range,
        pool: Some(pool),
        model: Model::new(cap),
        atlas: Atlas {
            protection: opts.protection,
            tolerance,
            charged: BTreeSet::new(),
            charged_file: BTreeMap::new(),
            write_hole: false,
        },
        report,
        replacements: 0,
        beyond_hit: BTreeSet::new(),
        crashed_dirty: false,
    };
    run.log(format_args!(
        "seed {seed:#x}: {name}, {kind:?} ({}), tolerance {tolerance}, {cap} bytes, torn sectors \
         {}",
        if within {
            "within tolerance"
        } else {
            "beyond tolerance"
        },
        if garbage {
            "may hold random bytes"
        } else {
            "are atomic"
        }
    ));
    run.go();
    let report = run.report.clone();
    drop(run);
    let _ = std::fs::remove_dir_all(&dir);
    report
}

fn make_wrap(faults: &Arc<Mutex<Vec<Arc<MemberFaults>>>>, merge: bool) -> MemberWrap {
    let faults = faults.clone();
    Arc::new(move |i: usize, m: Arc<dyn Member>| -> Arc<dyn Member> {
        let f = faults.lock().unwrap()[i].clone();
        Arc::new(FaultMember::new(m, f).merging_writes(merge))
    })
}

impl Run {
    fn log(&self, a: std::fmt::Arguments<'_>) {
        if self.opts.verbose {
            eprintln!("faultsim: {a}");
        }
    }
    fn pool(&mut self) -> &mut Pool {
        self.pool.as_mut().expect("pool open")
    }
    fn within(&self) -> bool {
        self.report.within_tolerance
    }
    fn member_faults(&self, m: usize) -> Arc<MemberFaults> {
        self.faults.lock().unwrap()[m].clone()
    }
    fn present(&mut self) -> Vec<usize> {
        let failed = self.pool().state().failed().to_vec();
        (0..self.faults.lock().unwrap().len())
            .filter(|m| !failed.contains(&(*m as u32)))
            .collect()
    }

    /// An operation failed with an error.
    fn op_error(&mut self, what: String) {
        self.log(format_args!("error: {what}"));
        if self.crash.is_dead() {
            // The process died during this operation: nobody sees its outcome (its member
            // writes were discarded, so what it read back afterwards proves nothing).
            self.log(format_args!("(after the crash point: not observed)"));
            return;
        }
        if self.within() {
            self.report.losses.push(what);
        } else {
            self.report.detected += 1;
        }
    }

    fn go(&mut self) {
        for step in 0..self.opts.steps {
            if !self.report.losses.is_empty() {
                break;
            }
            self.step(step);
            if self.pool.is_none() {
                // A reopen was refused (a torn superblock, beyond tolerance): the run ends.
                return;
            }
            if self.crash.is_dead() {
                self.report.faults.crashes_mid_op += 1;
                self.crash_and_reopen("mid-operation");
                if self.pool.is_none() {
                    return;
                }
            }
        }
        self.crash.disarm();
        if self.crash.is_dead() {
            self.crash_and_reopen("mid-operation");
        }
        if self.pool.is_some() && self.report.losses.is_empty() {
            self.final_check();
        }
    }

    fn step(&mut self, step: usize) {
        let r = self.rng.below(100);
        // Beyond-tolerance runs mostly leave the damage in place (no replacement) and a
        // crash-then-fail run crashes early.
        if self.kind == RunKind::CrashFail && !self.crashed_dirty && r >= 90 && self.model.dirty() {
            return self.crash_op();
        }
        if matches!(self.kind, RunKind::OverFail | RunKind::CrashFail)
            && (90..=95).contains(&r)
            && self.rng.chance(0.8)
        {
            return self.fault(step);
        }
        match r {
            0..=34 => self.write(),
            35..=69 => self.read(),
            70..=77 => self.flush(),
            78..=89 => self.fault(step),
            90..=95 => self.recover(),
            _ => self.crash_op(),
        }
    }

    fn random_range(&mut self, max_sectors: u64) -> (u64, u64) {
        let cap_s = self.model.base.len() as u64 / SECTOR;
        let len = 1 + self.rng.below(max_sectors.min(cap_s));
        let off = self.rng.below(cap_s - len + 1);
        (off * SECTOR, len * SECTOR)
    }

    fn write(&mut self) {
        let max = if self.rng.chance(0.1) { 512 } else { 64 };
        let (off, len) = self.random_range(max);
        let data = self.rng.bytes(len as usize);
        self.report.writes += 1;
        self.log(format_args!("write {off}+{len}"));
        match self.pool().write(off, &data) {
            Ok(()) => self.model.write(off, &data),
            Err(e) => {
                self.model.write_unknown(off, &data);
                self.op_error(format!("write {off}+{len}: {e}"));
            }
        }
    }

    fn read(&mut self) {
        let max = if self.rng.chance(0.1) { 1024 } else { 128 };
        let (off, len) = self.random_range(max);
        self.read_check(off, len);
    }

    fn read_check(&mut self, off: u64, len: u64) {
        self.report.reads += 1;
        match self.pool().read(off, len) {
            Ok(data) => match self.model.check(off, &data) {
                Ok(()) => self.report.bytes_verified += len,
                Err(_) if self.crash.is_dead() => {
                    // Returned by a process already dead: never seen by anyone.
                    self.log(format_args!(
                        "read {off}+{len} after the crash point: ignored"
                    ));
                }
                Err(why) => {
                    let msg = format!("read {off}+{len}: {why}");
                    self.log(format_args!("WRONG DATA: {msg}"));
                    if self.within() {
                        self.report.losses.push(msg);
                    } else {
                        self.report.undetected.push(msg);
                        // Pin what was read so one loss is reported once.
                        self.model.write(off, &data);
                        self.model.flush();
                    }
                }
            },
            Err(e) => self.op_error(format!("read {off}+{len}: {e}")),
        }
    }

    fn flush(&mut self) {
        self.log(format_args!("flush"));
        match self.pool().sync() {
            Ok(()) => {
                if !self.crash.is_dead() {
                    self.model.flush();
                }
            }
            Err(e) => self.op_error(format!("flush: {e}")),
        }
    }

    /// Injects one fault, as the run's kind and the atlas allow.
    fn fault(&mut self, step: usize) {
        let present = self.present();
        if present.is_empty() {
            return;
        }
        let m = present[self.rng.below(present.len() as u64) as usize];
        let f = self.member_faults(m);
        let chunk = self.pool().geometry().chunk_bytes();
        let crash_ok = self.crash_keeps_redundancy() || !self.crash.is_armed();
        let mut draw = FaultDraw {
            rng: &mut self.rng,
            kind: self.kind,
            protection: self.opts.protection,
            atlas: &mut self.atlas,
            beyond_hit: &mut self.beyond_hit,
            counts: &mut self.report.faults,
            crash_ok,
            crashed_dirty: self.crashed_dirty,
            data_range: self.data_range,
            checksum_range: self.checksum_range,
            chunk_bytes: chunk,
        };
        let Some(fault) = draw.draw(m) else {
            return;
        };
        if self.atlas.charged.contains(&m) {
            // The fault lands on this file: only a later replacement ends the charge.
            self.atlas.charge(m, &f.path);
        }
        match fault.apply(&f, &mut self.report.faults) {
            Some(line) => self.log(format_args!("step {step}: member {m} {line}")),
            None => {
                self.report.faults.admin_fail += 1;
                self.log(format_args!("step {step}: fail member {m}"));
                match self.pool().fail(m) {
                    Ok(()) => self.model_flush_if_alive(),
                    Err(e) => self.op_error(format!("fail {m}: {e}")),
                }
            }
        }
    }

    fn model_flush_if_alive(&mut self) {
        if !self.crash.is_dead() {
            self.model.flush();
        }
    }

    /// Replaces the failed members (new files) and rebuilds, possibly only part way.
    fn recover(&mut self) {
        if self.crash.is_dead() {
            return;
        }
        let failed = self.pool().state().failed().to_vec();
        for &d in &failed {
            let d = d as usize;
            self.replacements += 1;
            let path = self.dir.join(format!("m{d}.r{}.img", self.replacements));
            let nf = Arc::new(MemberFaults::new(
                path.clone(),
                self.crash.clone(),
                self.data_range,
            ));
            let old = std::mem::replace(&mut self.faults.lock().unwrap()[d], nf);
            self.log(format_args!("replace member {d} with {}", path.display()));
            if let Err(e) = self.pool().replace(d, &path) {
                self.faults.lock().unwrap()[d] = old;
                self.op_error(format!("replace {d}: {e}"));
                return;
            }
        }
        if self.pool().state().all_clean() {
            self.settle_atlas();
            return;
        }
        let cycles = self.pool().geometry().cycles();
        let max_cycles = if self.rng.chance(0.3) {
            Some(1 + self.rng.below(cycles))
        } else {
            None
        };
        self.report.rebuilds += 1;
        let parallel_cycles = 1 + self.rng.below(8) as usize;
        let opts = RebuildOpts {
            parallel_cycles,
            max_cycles,
            windows_in_flight: 1 + self.rng.below(4) as usize,
            window_bytes: draw_window(parallel_cycles),
            ..RebuildOpts::default()
        };
        match self.pool().rebuild(&opts, |_| {}) {
            Ok(p) => {
                self.log(format_args!(
                    "rebuild: {}/{} cycles",
                    p.cycles_done, p.cycles_total
                ));
                self.model_flush_if_alive();
            }
            // A member failed during the rebuild (a latent error, a dead disk the rebuild
            // read): the engine stops and asks for the replacement; the next recovery does.
            Err(e) if !self.pool().state().failed().is_empty() => {
                self.log(format_args!("rebuild stopped: {e}"));
            }
            Err(e) => self.op_error(format!("rebuild: {e}")),
        }
        self.settle_atlas();
    }

    /// Members that are present and rebuilt no longer use redundancy (unless they still carry
    /// latent errors or silent damage, which stays charged until they are replaced).
    fn settle_atlas(&mut self) {
        let Some(pool) = self.pool.as_ref() else {
            return;
        };
        if pool.state().all_clean() && pool.state().failed().is_empty() {
            let faults = self.faults.lock().unwrap().clone();
            self.atlas.settle(&faults);
        }
    }

    fn crash_op(&mut self) {
        let dirty = self.model.dirty();
        // (allowed, may crash mid-operation)
        let (allowed, mid_op) = match self.kind {
            // Without a journal a crash is within tolerance only while nothing is charged;
            // member faults are refused while a crash is armed (see `fault`).
            RunKind::Mixed => (
                self.crash_keeps_redundancy() || self.atlas.charged.is_empty(),
                true,
            ),
            RunKind::CrashFail => (!self.crashed_dirty, true),
            // Other beyond-tolerance runs keep crashes harmless: nothing unflushed.
            _ => (!dirty, false),
        };
        if !allowed || self.crash.is_armed() {
            self.report.faults.refused_by_atlas += 1;
            return;
        }
        if mid_op && self.rng.chance(0.5) {
            let n = 1 + self.rng.below(48);
            self.log(format_args!(
                "crash armed: before the {n}th next member write"
            ));
            self.crash.arm(n);
        } else {
            self.report.faults.crashes_between_ops += 1;
            self.crash_and_reopen("between operations");
        }
    }

    /// Drops the pool without closing it, applies the crash to every member file, reopens.
    fn crash_and_reopen(&mut self, when: &str) {
        let dirty = self.model.dirty();
        self.log(format_args!(
            "crash {when} ({})",
            if dirty {
                "unflushed writes"
            } else {
                "nothing unflushed"
            }
        ));
        drop(self.pool.take());
        let all: Vec<Arc<MemberFaults>> = self.faults.lock().unwrap().clone();
        for f in &all {
            match f.apply_crash(&mut self.rng, self.garbage) {
                Ok(o) => {
                    self.report.pages_dropped += o.pages_dropped;
                    self.report.sectors_torn += o.sectors_torn;
                }
                Err(e) => {
                    self.op_error(format!("applying the crash to {}: {e}", f.path.display()));
                }
            }
        }
        if let Err(e) = self.crash.restore_descriptor() {
            self.op_error(format!("restoring the descriptor as of the crash: {e}"));
        }
        self.model.crash(self.garbage);
        if dirty && !self.opts.protection.journal {
            match self.kind {
                RunKind::Mixed => self.atlas.write_hole = true,
                RunKind::CrashFail => self.crashed_dirty = true,
                _ => {}
            }
        }
        self.crash.reset();
        self.report.reopens += 1;
        match Pool::open_wrapped(
            &self.desc,
            make_wrap(&self.faults, self.report.merged_writes),
        ) {
            Ok(p) => {
                // A member the reopen left out (stale: it missed updates) costs redundancy
                // like a failure until it is replaced and rebuilt.
                if self.kind == RunKind::Mixed {
                    let faults = self.faults.lock().unwrap().clone();
                    for &d in p.state().failed() {
                        self.atlas.charge(d as usize, &faults[d as usize].path);
                    }
                }
                self.pool = Some(p);
                if dirty && self.garbage && self.opts.protection.checksums {
                    self.scrub_after_crash();
                }
            }
            Err(e) => {
                let msg = format!("reopen after a crash {when}: {e}");
                self.log(format_args!("{msg}"));
                if self.within() {
                    self.report.losses.push(msg);
                } else {
                    self.report.detected += 1;
                }
            }
        }
    }

    /// Whether a crash with unflushed writes leaves the pool's redundancy intact. Without a
    /// journal it does not (the write hole). With one, the data and parity are made
    /// consistent by replay, but block checksums live in place in the checksum region, 128
    /// blocks per 512-byte sector: when torn sectors may hold random bytes, a crash during a
    /// checksum-page write garbles the checksums of blocks it never wrote. Those blocks are
    /// then vouched for only by a complete stripe that agrees with its parity (the engine then
    /// rewrites the checksums): that needs every unit, so such a crash is within tolerance
    /// only while nothing is charged, and the run scrubs right after reopening (as an
    /// operator scrubs after an unclean shutdown) before any member may fail. A crash while
    /// degraded is beyond what in-place checksums cover; the engine must still report those
    /// blocks lost, never return them unverified.
    fn crash_keeps_redundancy(&self) -> bool {
        self.opts.protection.journal && !(self.garbage && self.opts.protection.checksums)
    }

    /// After reopening from a crash that may have torn checksum-region sectors: scrub, which
    /// rewrites checksums that only their stripes' parity can vouch for.
    fn scrub_after_crash(&mut self) {
        self.log(format_args!("scrub after the crash"));
        match self
            .pool()
            .scrub(&crate::scrub::ScrubOpts::default(), |_| {})
        {
            Ok(r) if r.unrecoverable.is_empty() => {
                self.log(format_args!(
                    "scrub: {} ranges repaired, {} parity mismatches",
                    r.repaired.len(),
                    r.parity_mismatches.len()
                ));
            }
            Ok(r) => self.op_error(format!(
                "scrub after the crash: unrecoverable {}",
                crate::scrub::describe_ranges(&r.unrecoverable)
            )),
            Err(e) => self.op_error(format!("scrub after the crash: {e}")),
        }
    }

    /// Reads the whole volume back; with no silent damage, no write hole and every member
    /// healthy, verifies parity too.
    fn final_check(&mut self) {
        let cap = self.model.base.len() as u64;
        let step = 64 << 10;
        let mut off = 0;
        while off < cap && self.report.losses.is_empty() {
            let len = step.min(cap - off);
            self.read_check(off, len);
            off += len;
        }
        if !self.within() || self.atlas.write_hole || !self.report.losses.is_empty() {
            return;
        }
        let healthy = self.pool().state().failed().is_empty()
            && self.pool().state().all_clean()
            && self.atlas.charged.is_empty();
        if healthy && self.kind == RunKind::Mixed {
            match self.pool().verify() {
                Ok(v) if v.inconsistent.is_empty() => {}
                Ok(v) => self.report.losses.push(format!(
                    "verify found {} inconsistent stripes (first: cycle {}, stripe {})",
                    v.inconsistent.len(),
                    v.inconsistent[0].0,
                    v.inconsistent[0].1
                )),
                Err(e) => self.report.losses.push(format!("verify: {e}")),
            }
        }
        if let Some(p) = self.pool.take() {
            if let Err(e) = p.close() {
                if !matches!(e, PoolError::Io(_)) || self.within() {
                    self.report.losses.push(format!("close: {e}"));
                }
            }
        }
    }
}

/// Totals over many seeds (what the campaign prints).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub seeds_run: u64,
    pub runs_within_tolerance: u64,
    pub runs_beyond_tolerance: u64,
    pub faults: FaultCounts,
    pub crashes: u64,
    pub reopens: u64,
    pub rebuilds: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_verified: u64,
    pub pages_dropped_by_crashes: u64,
    pub sectors_torn_by_crashes: u64,
    /// Seeds whose members took the executor's merged-write path.
    pub seeds_with_merged_writes: u64,
    /// Redirected writes mapped again from the IDO surrogate's log at a start (served runs).
    pub ido_log_writes_replayed: u64,
    /// Served seeds in which a start mapped such writes.
    pub seeds_with_ido_log_replays: u64,
    /// Must be 0.
    pub losses_within_tolerance: u64,
    pub beyond_tolerance_detected: u64,
    /// Undetected losses that are the known gap (no checksums / no journal yet).
    pub beyond_tolerance_undetected_known_gap: u64,
    /// Must be 0.
    pub beyond_tolerance_undetected_unexpected: u64,
    /// Seeds that failed (or panicked), with the first problem.
    pub failed_seeds: Vec<(String, String)>,
}

impl Summary {
    pub fn add(&mut self, r: &RunReport) {
        self.seeds_run += 1;
        if r.within_tolerance {
            self.runs_within_tolerance += 1;
        } else {
            self.runs_beyond_tolerance += 1;
        }
        self.faults.add(&r.faults);
        self.crashes += r.faults.crashes();
        self.reopens += r.reopens;
        self.rebuilds += r.rebuilds;
        self.reads += r.reads;
        self.writes += r.writes;
        self.bytes_verified += r.bytes_verified;
        self.pages_dropped_by_crashes += r.pages_dropped;
        self.sectors_torn_by_crashes += r.sectors_torn;
        self.seeds_with_merged_writes += u64::from(r.merged_writes);
        self.ido_log_writes_replayed += r.ido_log_writes_replayed;
        self.seeds_with_ido_log_replays += u64::from(r.ido_log_writes_replayed > 0);
        self.losses_within_tolerance += r.losses.len() as u64;
        self.beyond_tolerance_detected += r.detected;
        if r.known_gap {
            self.beyond_tolerance_undetected_known_gap += r.undetected.len() as u64;
        } else {
            self.beyond_tolerance_undetected_unexpected += r.undetected.len() as u64;
        }
        if r.failed() {
            self.failed_seeds.push((
                format!("{:#x}", r.seed),
                r.first_problem().unwrap_or("").to_string(),
            ));
        }
    }
    pub fn add_panic(&mut self, seed: u64, msg: String) {
        self.seeds_run += 1;
        self.failed_seeds
            .push((format!("{seed:#x}"), format!("panicked: {msg}")));
    }
}

/// Runs `seed`, turning an engine panic into a failed report line. Returns the report, or the
/// panic message.
pub fn run_seed_caught(seed: u64, opts: &RunOpts) -> Result<RunReport, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(seed, opts))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

/// Parses the regression seed list: one seed per line (decimal or 0x hex), `#` comments.
pub fn parse_seed_list(text: &str) -> Vec<u64> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| parse_seed(l).unwrap_or_else(|| panic!("bad seed '{l}' in the seed list")))
        .collect()
}

/// A seed in decimal or `0x` hex.
pub fn parse_seed(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A rebuild window for a run drawn with `parallel_cycles` (derived from it, so that the
/// seeds kept before windows existed still replay the same faults): one byte (every group
/// of buffers its own window), 64 KiB, or the default.
pub(crate) fn draw_window(parallel_cycles: usize) -> usize {
    match parallel_cycles % 3 {
        0 => 1,
        1 => 64 << 10,
        _ => crate::pool::DEFAULT_REBUILD_WINDOW,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once `disarm` has returned, whether the process is dead is settled: a write that took
    /// the last count before it cannot finish dying afterwards (the served harness's final
    /// check once ran on a pool killed under it, seed 0x6b08736e). The window is widened by
    /// a watched descriptor, which a dying process reads before it is marked dead.
    #[test]
    fn a_crash_under_way_when_disarmed_has_taken_effect_when_disarm_returns() {
        let desc =
            std::env::temp_dir().join(format!("rf-crash-switch-{}.json", std::process::id()));
        std::fs::write(&desc, vec![7u8; 64 << 10]).unwrap();
        let sw = Arc::new(CrashSwitch::default());
        sw.watch_descriptor(&desc);
        let (mut died_before, mut died_after) = (0, 0);
        for i in 0..3000 {
            sw.reset();
            sw.arm(1);
            let start = Arc::new(std::sync::Barrier::new(2));
            let writer = {
                let (sw, start) = (Arc::clone(&sw), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    sw.on_write()
                })
            };
            // Both start together; the disarm comes after a delay swept over the length
            // of a crash, so that many disarms land inside one.
            start.wait();
            for _ in 0..(i * 7) % 4000 {
                std::hint::spin_loop();
            }
            sw.disarm();
            let dead_at_disarm = sw.is_dead();
            let discarded = writer.join().unwrap();
            assert_eq!(
                sw.is_dead(),
                dead_at_disarm,
                "the process died after disarm returned"
            );
            assert_eq!(discarded, sw.is_dead(), "a write was discarded by no crash");
            if dead_at_disarm {
                died_before += 1;
            } else {
                died_after += 1;
            }
        }
        std::fs::remove_file(&desc).unwrap();
        eprintln!("crashed before disarm: {died_before}, disarmed first: {died_after}");
    }

    #[test]
    fn one_write_takes_the_last_count() {
        let sw = Arc::new(CrashSwitch::default());
        assert!(!sw.is_armed());
        sw.arm(5);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let sw = Arc::clone(&sw);
                std::thread::spawn(move || (0..10).filter(|_| sw.on_write()).count())
            })
            .collect();
        let discarded: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        // The fifth write crashes; every write after it is discarded too.
        assert_eq!(discarded, 40 - 4);
        assert!(sw.is_dead());
        // A crash that fired stays armed: nothing can be armed over it before the harness
        // has applied it.
        assert!(sw.is_armed());
        sw.disarm();
        assert!(!sw.is_armed());
        assert!(sw.is_dead(), "disarm brings nobody back to life");
        sw.reset();
        assert!(!sw.is_dead() && !sw.is_armed());
    }
}

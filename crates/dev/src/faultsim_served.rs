//! Seeded fault injection over *served* pools (issue 21): the path users live on.
//!
//! [`crate::faultsim`] drives a plain [`Pool`] one operation at a time. This harness serves the
//! pool the way `raidforge serve` does ([`SharedPool`] behind a real NBD server on a Unix
//! socket, [`PoolBackend`]) and drives it with several NBD clients at once (the project's own
//! client, [`nbd::client::Client`], one connection each), while a controller thread injects
//! what an operator and the hardware do to a running server: member faults (the same
//! [`FaultDraw`] as the plain harness: fail-stop, latent sector errors, silent corruption,
//! slow members, an operator's `fail`), replacements with background rebuilds and copy-backs
//! (rate-limited, so that they overlap with client I/O, with the seed's rebuild policies,
//! IDO's included when the seed gives the pool a surrogate), lazy parity flushing (the served
//! pool's idle flusher), clean restarts, and crashes at random moments:
//!
//! - a crash is the death of the server process at an instant (a countdown of member writes
//!   over all members, or "now", while the clients are busy): no member write or flush after
//!   it takes effect, and the descriptor is as it was;
//! - half the crashes are a **process kill** (SIGKILL: the page cache survives, so every write
//!   the members took is there; an acknowledged write must read back exactly, flushed or not),
//!   the other half a **power loss** (the torn-write rules of [`MemberFaults::apply_crash`]:
//!   unflushed member writes are kept, dropped or torn per page and sector).
//!
//! Then the server is started again on the same member files and the clients go on.
//!
//! **The reference model.** Every client owns a disjoint set of *runs* (runs of `run_bytes`,
//! dealt round-robin), so that its writes and reads have an order, and keeps its own
//! [`Model`] of its runs; neighbouring runs of different clients share stripes, so requests
//! of different clients meet in the stripe locks, read-modify-writes and parity. A client's
//! flush makes its own earlier writes durable in its model (other clients' writes may be
//! durable too; their models stay conservative). An operation that completes after the crash
//! point is not observed (its write is of unknown outcome, its read proves nothing).
//!
//! **Tolerance** is the plain harness's ([`Atlas`], [`RunKind`]). Beyond it, losses must be
//! reported as errors, never returned as good data; and two promises hold whatever the
//! faults: a write acknowledged while no fault is injected afterwards stays readable (an
//! engine that acknowledges a write it could not make redundant or durable breaks it), and a
//! flush fails once the members that are gone lose data (the layout's own verdict).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::csum::BLOCK_BYTES;
use layout::SchemeKind;
use nbd::client::{Address, Client};
use raidcore::{ArrayState, ParityPolicy};

use crate::faultsim::{
    create_opts, layouts, seed_merges_writes, Atlas, CrashSwitch, FaultCounts, FaultDraw,
    FaultMember, MemberFaults, Model, Protection, Rng, RunKind, RunReport, SECTOR,
};
use crate::ido::RebuildPolicy;
use crate::pool::{CreateOpts, MemberWrap, Pool, RebuildOpts};
use crate::serve_support::{Concurrency, HealOpts, HealthEvent, PoolBackend, SharedPool};
use crate::Member;

/// How to run a served seed.
#[derive(Clone, Debug)]
pub struct ServedOpts {
    /// Scratch directory (a subdirectory per seed is created and removed).
    pub dir: PathBuf,
    /// Controller steps per run (each a fault, an operator action, a crash or a pause while
    /// the clients work).
    pub steps: usize,
    /// Concurrent NBD clients.
    pub clients: usize,
    /// The pools' protection (write journal, block checksums); `None` draws it per seed.
    pub protection: Option<Protection>,
    /// Create the pools with these features instead of `protection` (a test that claims
    /// protection the pools lack, to show that the harness then reports losses).
    pub pool_protection: Option<Protection>,
    /// Print every controller step to stderr.
    pub verbose: bool,
    /// Serve the pools with automatic failure handling (hot spares, rebuilds started by the
    /// served pool itself); `None` draws it per seed.
    pub auto_heal: Option<bool>,
}

impl Default for ServedOpts {
    fn default() -> ServedOpts {
        ServedOpts {
            dir: crate::faultsim::RunOpts::default_dir(),
            steps: 60,
            clients: 3,
            protection: None,
            pool_protection: None,
            verbose: false,
            auto_heal: None,
        }
    }
}

/// The command that replays a served seed.
pub fn reproduce_command(seed: u64) -> String {
    format!("cargo run --release -p dev --example faultsim -- --served --seed {seed:#x} --verbose")
}

/// How the server dies at a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Death {
    /// SIGKILL: the page cache survives.
    Kill,
    /// The machine loses power: unflushed member writes are kept, dropped or torn.
    PowerLoss,
}

/// What the controller and the clients share.
struct Shared {
    crash: Arc<CrashSwitch>,
    /// Bumped at every injected fault and crash (see the module documentation's promises).
    epoch: AtomicU64,
    /// The controller's step, for reports.
    step: AtomicU64,
    /// The served pool now (what the clients ask which members the engine has failed), and
    /// which server process this is (counted from 1).
    serving: Mutex<Option<(u64, Arc<SharedPool>)>>,
    within: bool,
    kind: RunKind,
    verbose: bool,
    /// Runs of this many bytes are dealt to the clients round-robin.
    run_bytes: u64,
    clients: usize,
    /// Bytes the clients use (whole runs).
    used_bytes: u64,
    /// Members gone for good (fail-stopped or failed by the operator, not replaced since), and
    /// whether the layout loses data without them.
    gone: Mutex<BTreeSet<usize>>,
    gone_lose_data: AtomicBool,
    /// The server side of the newest failed requests (an NBD error reply carries an errno
    /// only): what a client's error is reported with.
    server_errors: Mutex<std::collections::VecDeque<String>>,
}

impl Shared {
    /// The engine's membership events so far ([`ArrayState::generation`]: every fail and
    /// replace, the engine's own included). A member may fail later from a fault injected
    /// earlier, when the engine first touches it (a latent error met by the rebuild, say), and
    /// be replaced; a set of failed members would then read the same before and after a
    /// fail-and-replace that took a copy away, so the promise is checked against this count
    /// (and the server process it belongs to).
    /// What the engine knows of the faults: its membership events, and the bad blocks it has
    /// met. A latent sector error injected before a write is no fault to the engine until a
    /// read meets it (a rebuild, a request): if that records the range lost afterwards, a
    /// read of a sector acknowledged in between failing is a loss detected, not a write that
    /// should have failed (seed 0x6b07a50e: RAID4 of 5, latent errors on member 0 from step
    /// 0, member 4 failed at step 6, a write acknowledged at step 24 and the rebuild's
    /// discovery of the errors after it).
    fn engine_events(&self) -> u64 {
        let sp = self.serving.lock().unwrap().clone();
        // A server started again replays the events from its superblocks and counts anew.
        sp.and_then(|(inc, sp)| {
            sp.with_pool(|p| {
                let r = &p.file.desc.repairs;
                let met = r.read_errors + r.checksum_mismatches + p.file.desc.lost.len() as u64;
                Ok(inc << 48 ^ p.state().generation() << 24 ^ met)
            })
            .ok()
        })
        .unwrap_or(u64::MAX)
    }
    fn debug_at(&self, off: u64, got: &[u8]) -> String {
        let sp = self.serving.lock().unwrap().clone();
        sp.and_then(|(_, sp)| {
            // The status outside the pool mutex: an IDO pool's section takes the IDO lock,
            // which a request holds while it takes the pool mutex (lock order).
            let status = sp.status().ok();
            let route = sp.ido().debug_route(off, got.len().max(1) as u64, sp.with_pool(|p| Ok(p.geometry().chunk_bytes())).unwrap_or(1));
            sp.with_pool(|p| {
                let st = p.state();
                let geo = p.geometry();
                let c = geo.locate_chunk(off / geo.chunk_bytes()).0;
                let g = st.cycle_generation(c);
                let avail: Vec<bool> = (0..geo.disks())
                    .map(|d| st.member_available(d as u32, g))
                    .collect();
                // Where each sector of `got` (what the read returned) lives now, and
                // whether the member holds the same bytes there.
                let raw_at = |o: u64| {
                    let (cc, idx) = geo.locate_chunk(o / geo.chunk_bytes());
                    let (loc, _) =
                        raidcore::repair::place_loc(geo, st, cc, geo.data_place(idx));
                    let moff =
                        p.data_offset_bytes() + geo.member_offset(cc, loc, o % geo.chunk_bytes());
                    let mut raw = vec![0u8; 512];
                    let r = p.members.handles[loc.disk as usize]
                        .as_ref()
                        .map(|m| m.read_at(&mut raw, moff).map(|_| raw));
                    (loc.disk, moff, r)
                };
                let mut raw_note = String::from("every sector read equals its member's bytes");
                if let Some(k) = got.chunks(512).position(|x| x.iter().all(|&b| b == 0)) {
                    let (d, moff, _) = raw_at(off + k as u64 * 512);
                    raw_note += &format!(" (first zero sector {} on member {d} byte {moff})", off + k as u64 * 512);
                }
                for (k, sector) in got.chunks(512).enumerate() {
                    let o = off + k as u64 * 512;
                    let (d, moff, r) = raw_at(o);
                    let same = matches!(&r, Some(Ok(b)) if b.as_slice() == sector);
                    if !same {
                        raw_note = format!(
                            "sector at {o} (member {d} byte {moff}) read {:?}, member holds {:?}",
                            &sector[..4],
                            r.map(|x| x.map(|b| b[..4].to_vec()))
                        );
                        break;
                    }
                }
                Ok(format!(
                    "cycle {c} gen {g} target {} failed {:?} avail {avail:?} events {} lost {:?} {raw_note} ido {:?} route {route}",
                    st.target_generation(),
                    st.failed(),
                    st.generation(),
                    status.as_ref().map(|s| s.lost.iter().map(|l| (l.logical_offset, l.length)).collect::<Vec<_>>()),
                    status.as_ref().and_then(|s| s.ido.as_ref()).map(|i| format!("{i:?}").chars().take(300).collect::<String>())
                ))
            })
            .ok()
        })
        .unwrap_or_default()
    }
    /// Where volume sector `s` lives in every layout generation of its cycle, and the first
    /// bytes each member holds there: which generation's placement got the latest write.
    fn debug_sector(&self, s: u64) -> String {
        let sp = self.serving.lock().unwrap().clone();
        sp.and_then(|(_, sp)| {
            sp.with_pool(|p| {
                let st = p.state();
                let geo = p.geometry();
                let o = s * SECTOR;
                let (c, idx) = geo.locate_chunk(o / geo.chunk_bytes());
                let mut out = format!("sector {s} cycle {c} now in gen {}:", st.cycle_generation(c));
                for (g, gen) in st.generations().iter().enumerate() {
                    let loc = raidcore::repair::place_loc_in(geo, st, c, geo.data_place(idx), g as u32);
                    let moff = p.data_offset_bytes() + geo.member_offset(c, loc, o % geo.chunk_bytes());
                    let mut raw = [0u8; 4];
                    let held = p.members.handles[loc.disk as usize]
                        .as_ref()
                        .map(|m| m.read_at(&mut raw, moff).map(|_| raw));
                    out += &format!(
                        " [gen {g} failed {:?} blocked {} cycles {}: member {} byte {moff} holds {held:?}]",
                        gen.failed,
                        gen.blocked.is_some(),
                        st.cycles_in_generation(g as u32),
                        loc.disk
                    );
                }
                Ok(out)
            })
            .ok()
        })
        .unwrap_or_default()
    }
    fn log(&self, a: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!("faultsim-served: {a}");
        }
    }
    fn server_error(&self, what: String) {
        let mut q = self.server_errors.lock().unwrap();
        if q.len() >= 4 {
            q.pop_front();
        }
        q.push_back(what);
    }
    /// The server's side of recent failed requests, for an error report.
    fn server_said(&self) -> String {
        let q = self.server_errors.lock().unwrap();
        if q.is_empty() {
            String::new()
        } else {
            format!(
                " [server: {}]",
                q.iter().cloned().collect::<Vec<_>>().join("; ")
            )
        }
    }
}

/// The volume sector a model's "read wrong" message names (`Model::check`).
fn wrong_sector(why: &str) -> Option<u64> {
    why.split("volume sector ")
        .nth(1)?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

/// Every place of the stripe holding volume sector `s`: member, role, checksum state, and
/// the pool's lost ranges (for a wrong read's report).
fn debug_row(sp: &SharedPool, s: u64) -> String {
    sp.with_pool(|p| {
        let st = p.state();
        let geo = p.geometry();
        let o = s * SECTOR;
        let (c, idx) = geo.locate_chunk(o / geo.chunk_bytes());
        let (si, _) = geo.place_units(geo.data_place(idx))[0];
        let in_chunk = (o % geo.chunk_bytes()) / BLOCK_BYTES * BLOCK_BYTES;
        let mut out = format!("row of sector {s}: cycle {c} stripe {si}:");
        for &pl in geo.stripe_places(si) {
            let (loc, valid) = raidcore::repair::place_loc(geo, st, c, pl);
            let moff = geo.member_offset(c, loc, in_chunk);
            let cs = p.integrity.checksums.as_ref().map(|cs| {
                let mut raw = vec![0u8; BLOCK_BYTES as usize];
                let read = p.members.handles[loc.disk as usize]
                    .as_ref()
                    .is_some_and(|m| m.read_at(&mut raw, p.data_offset_bytes() + moff).is_ok());
                format!(
                    "{}{}",
                    if cs.stored(loc.disk as usize, moff) == crate::csum::POISON {
                        "POISON"
                    } else {
                        "sum"
                    },
                    if read && cs.matches(loc.disk as usize, moff, &raw) {
                        " ok"
                    } else {
                        " MISMATCH"
                    }
                )
            });
            out += &format!(
                " [place {pl} {:?} member {} byte {moff} valid {valid} {cs:?}]",
                geo.role(pl),
                loc.disk
            );
        }
        let lost: Vec<(u64, u64)> = p
            .status()
            .lost
            .iter()
            .map(|l| (l.logical_offset, l.length))
            .collect();
        Ok(format!("{out} lost {lost:?}"))
    })
    .unwrap_or_default()
}

/// The served pool's NBD backend, keeping the engine's error messages for the report.
struct Backend {
    inner: PoolBackend,
    sh: Arc<Shared>,
}

impl Backend {
    fn note<T>(&self, what: &str, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            self.sh.server_error(format!("{what}: {e}"));
        }
        r
    }
}

impl nbd::Backend for Backend {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let r = self.inner.read(offset, buf);
        self.note(&format!("read {offset}+{}", buf.len()), r)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let r = self.inner.write(offset, data);
        self.note(&format!("write {offset}+{}", data.len()), r)
    }
    fn flush(&self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note("flush", r)
    }
}

/// One NBD client's side of the run: its runs, its model and what it saw.
struct ClientState {
    id: usize,
    rng: Rng,
    model: Model,
    /// Sector -> its last acknowledged write's fault epoch, the engine's membership events
    /// then ([`Shared::engine_events`]), and the controller's step then: while neither the
    /// epoch nor the events have moved, no fault can have taken the write away.
    acked: HashMap<u64, (u64, u64, u64)>,
    reads: u64,
    writes: u64,
    bytes_verified: u64,
    detected: u64,
    losses: Vec<String>,
    undetected: Vec<String>,
}

impl ClientState {
    /// The runs this client owns, as byte offsets.
    fn runs(&self, sh: &Shared) -> Vec<u64> {
        (0..sh.used_bytes / sh.run_bytes)
            .filter(|r| (*r as usize) % sh.clients == self.id)
            .map(|r| r * sh.run_bytes)
            .collect()
    }

    /// A sector-aligned range inside one of its runs.
    fn pick_range(&mut self, sh: &Shared, runs: &[u64]) -> (u64, u64) {
        let run = runs[self.rng.below(runs.len() as u64) as usize];
        let sectors = sh.run_bytes / SECTOR;
        let len = 1 + self.rng.below(sectors);
        let first = self.rng.below(sectors - len + 1);
        (run + first * SECTOR, len * SECTOR)
    }

    fn op_error(&mut self, sh: &Shared, what: String) {
        let what = format!("{what}{}", sh.server_said());
        sh.log(format_args!("client {}: error: {what}", self.id));
        if sh.within {
            self.losses.push(what);
        } else {
            self.detected += 1;
        }
    }

    fn forget_acks(&mut self, off: u64, len: u64) {
        for s in off / SECTOR..(off + len) / SECTOR {
            self.acked.remove(&s);
        }
    }

    fn write(&mut self, sh: &Shared, c: &mut Client, runs: &[u64]) {
        let (off, len) = self.pick_range(sh, runs);
        let data = self.rng.bytes(len as usize);
        let fua = self.rng.chance(0.05);
        let e0 = sh.epoch.load(Ordering::SeqCst);
        let events0 = sh.engine_events();
        self.model.step = sh.step.load(Ordering::SeqCst);
        let r = c.write_at(&data, off, fua);
        let dead = sh.crash.is_dead();
        self.writes += 1;
        match r {
            Ok(()) if !dead => {
                self.model.write(off, &data);
                // The membership the write was acknowledged under is known only when it did
                // not change while the write ran: a member failed by another request just
                // after the server replied would otherwise be counted as before the reply.
                // (A write that ran while a member failed is the engine's to refuse when its
                // data is no longer held: tests/served_faults.rs pins that.)
                let events = sh.engine_events();
                let same = sh.epoch.load(Ordering::SeqCst) == e0 && events == events0;
                let step = sh.step.load(Ordering::SeqCst);
                for s in off / SECTOR..(off + len) / SECTOR {
                    if same {
                        self.acked.insert(s, (e0, events, step));
                    } else {
                        self.acked.remove(&s);
                    }
                }
            }
            Ok(()) => {
                self.model.write_unknown(off, &data);
                self.forget_acks(off, len);
            }
            Err(e) => {
                self.model.write_unknown(off, &data);
                self.forget_acks(off, len);
                if !dead {
                    self.op_error(sh, format!("write {off}+{len}: {e}"));
                }
            }
        }
    }

    fn read(&mut self, sh: &Shared, c: &mut Client, runs: &[u64]) {
        let (off, len) = if self.rng.chance(0.2) {
            // A whole run.
            (
                runs[self.rng.below(runs.len() as u64) as usize],
                sh.run_bytes,
            )
        } else {
            self.pick_range(sh, runs)
        };
        self.read_check(sh, c, off, len);
    }

    /// Reads `off..off + len` and checks it against the model.
    fn read_check(&mut self, sh: &Shared, c: &mut Client, off: u64, len: u64) {
        let epoch = sh.epoch.load(Ordering::SeqCst);
        let mut buf = vec![0u8; len as usize];
        let r = c.read_at(&mut buf, off);
        if sh.crash.is_dead() {
            // Answered by a process already dead: nobody saw it.
            return;
        }
        self.reads += 1;
        match r {
            Ok(()) => match self.model.check(off, &buf) {
                Ok(()) => self.bytes_verified += len,
                Err(why) => {
                    let msg = format!("client {} read {off}+{len}: {why}", self.id);
                    sh.log(format_args!("WRONG DATA: {msg}"));
                    if sh.verbose {
                        sh.log(format_args!("DEBUG {}", sh.debug_at(off, &buf)));
                        if let Some(s) = wrong_sector(&why) {
                            sh.log(format_args!("DEBUG {}", sh.debug_sector(s)));
                        }
                    }
                    if sh.within {
                        self.losses.push(msg);
                    } else {
                        self.undetected.push(msg);
                        // Pin what was read so that one loss is reported once.
                        self.model.write(off, &buf);
                        self.model.flush();
                        self.forget_acks(off, len);
                    }
                }
            },
            Err(e) => {
                self.op_error(sh, format!("client {} read {off}+{len}: {e}", self.id));
                if !sh.within && sh.kind != RunKind::Silent {
                    self.probe_acked(sh, c, off, len, epoch);
                }
            }
        }
    }

    /// After a read error beyond tolerance: a sector whose write was acknowledged with no
    /// fault injected since must still read.
    fn probe_acked(&mut self, sh: &Shared, c: &mut Client, off: u64, len: u64, epoch: u64) {
        let mut probed = 0;
        for s in off / SECTOR..(off + len) / SECTOR {
            let Some(&(e, events, at_step)) = self.acked.get(&s) else {
                continue;
            };
            if e != epoch || probed >= 64 || events != sh.engine_events() {
                continue;
            }
            probed += 1;
            let mut b = vec![0u8; SECTOR as usize];
            let r = c.read_at(&mut b, s * SECTOR);
            if sh.crash.is_dead()
                || sh.epoch.load(Ordering::SeqCst) != epoch
                || events != sh.engine_events()
            {
                return;
            }
            if let Err(e) = r {
                self.losses.push(format!(
                    "client {}: sector {s} (bytes {}..{}) was written and acknowledged at step \
                     {at_step} with no fault injected since, and at step {} fails to read: {e} \
                     (the write should have failed){}",
                    self.id,
                    s * SECTOR,
                    (s + 1) * SECTOR,
                    sh.step.load(Ordering::SeqCst),
                    sh.server_said()
                ));
                if sh.verbose {
                    sh.log(format_args!("DEBUG {}", sh.debug_at(s * SECTOR, &[])));
                }
                self.acked.remove(&s);
                return;
            }
        }
    }

    fn flush(&mut self, sh: &Shared, c: &mut Client) {
        let lost_before = {
            let g = sh.gone.lock().unwrap();
            sh.gone_lose_data.load(Ordering::SeqCst).then(|| g.clone())
        };
        let r = c.flush();
        if sh.crash.is_dead() {
            return;
        }
        match r {
            Ok(()) => {
                self.model.flush();
                if let Some(gone) = lost_before {
                    self.losses.push(format!(
                        "client {}: a flush at step {} succeeded although the members gone \
                         ({gone:?}) lose data: writes to them cannot have been made durable",
                        self.id,
                        sh.step.load(Ordering::SeqCst),
                    ));
                }
            }
            Err(e) => self.op_error(sh, format!("client {} flush: {e}", self.id)),
        }
    }
}

fn connect(socket: &Path) -> std::io::Result<Client> {
    Client::connect(&Address::Unix {
        socket: socket.to_string_lossy().into_owned(),
        export: String::new(),
    })
}

/// A client thread: random writes, reads and flushes on its runs until told to stop.
fn client_loop(
    sh: Arc<Shared>,
    mut st: ClientState,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
) -> ClientState {
    let runs = st.runs(&sh);
    if runs.is_empty() {
        return st;
    }
    let mut conn: Option<Client> = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match &mut conn {
            Some(c) if !c.is_broken() => c,
            _ => match connect(&socket) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    if !sh.crash.is_dead() && !stop.load(Ordering::SeqCst) {
                        st.op_error(&sh, format!("client {} connect: {e}", st.id));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
            },
        };
        match st.rng.below(100) {
            0..=49 => st.write(&sh, c, &runs),
            50..=89 => st.read(&sh, c, &runs),
            _ => st.flush(&sh, c),
        }
    }
    st
}

/// One life of the server: the served pool, its NBD server and the clients.
struct Incarnation {
    sp: Arc<SharedPool>,
    server: Arc<nbd::Server>,
    accept: JoinHandle<std::io::Result<()>>,
    socket: PathBuf,
    stop_clients: Arc<AtomicBool>,
    clients: Vec<JoinHandle<ClientState>>,
}

struct ServedRun {
    rng: Rng,
    opts: ServedOpts,
    sh: Arc<Shared>,
    protection: Protection,
    garbage: bool,
    dir: PathBuf,
    desc: PathBuf,
    faults: Arc<Mutex<Vec<Arc<MemberFaults>>>>,
    data_range: (u64, u64),
    checksum_range: (u64, u64),
    chunk_bytes: u64,
    /// The pool's layout with nothing failed (the data-loss oracle for `gone`).
    geo: raidcore::Geometry,
    atlas: Atlas,
    beyond_hit: BTreeSet<usize>,
    crashed_dirty: bool,
    /// The pool defers parity (lazy parity update).
    lazy: bool,
    /// The served pool heals itself (issue 25): the operator only adds hot spares; the
    /// healer replaces failed members with them and starts the rebuilds.
    auto_heal: bool,
    /// Bytes of a member file (a spare is made as large).
    member_bytes: u64,
    report: RunReport,
    replacements: u64,
    incarnations: u64,
    /// Policies the seed's rebuilds choose from (surrogate policies when it has one).
    policies: Vec<Option<RebuildPolicy>>,
    clients: Vec<ClientState>,
    inc: Option<Incarnation>,
}

/// Runs one served seed to the end and reports what happened (an engine panic propagates;
/// [`run_seed_caught`] turns it into a report line).
pub fn run_seed(seed: u64, opts: &ServedOpts) -> RunReport {
    let mut rng = Rng::new(seed ^ 0x5e7e_d5e7_ed00_0000);
    let all = layouts();
    let (name, scheme, params, chunk) = all[rng.below(all.len() as u64) as usize].clone();
    let protection = opts.protection.unwrap_or(Protection {
        journal: rng.chance(0.5),
        checksums: rng.chance(0.5),
    });
    let kind = match rng.below(100) {
        0..=64 => RunKind::Mixed,
        65..=79 => RunKind::OverFail,
        80..=89 if protection.checksums => RunKind::Silent,
        _ => RunKind::CrashFail,
    };
    let lazy = matches!(scheme, SchemeKind::Raid6) && rng.chance(0.4);
    let with_surrogate = rng.chance(0.3);
    // Drawn from the seed apart from `rng`, so that seeds without it replay as before.
    let auto_heal = opts
        .auto_heal
        .unwrap_or_else(|| (seed ^ 0xa07e_4ea1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 63 == 1);
    // Sectors that may hold random bytes after a crash (not atomic), except on a pool with
    // block checksums and no journal: it rewrites whole 4 KiB blocks around a partial write,
    // and a power cut that garbles a rewritten sector the client did not write loses bytes no
    // one was writing. Only a journal (which replays the block) survives that; such pools get
    // atomic sectors here (what disks promise).
    let garbage = rng.chance(0.5) && !(protection.checksums && !protection.journal);
    let run_bytes = [2048u64, 4096, 8192, 16384][rng.below(4) as usize];
    let nclients = opts.clients.max(1);
    let dir = opts.dir.join(format!(
        "raidforge-faultsim-served-{}-{seed:016x}",
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
    let faults: Arc<Mutex<Vec<Arc<MemberFaults>>>> = Arc::new(Mutex::new(
        paths
            .iter()
            .map(|p| {
                Arc::new(MemberFaults::new(
                    p.clone(),
                    crash.clone(),
                    (data_lo, member_bytes),
                ))
            })
            .collect(),
    ));
    let layout_name = format!(
        "{name}{}{}{}",
        if lazy { "-lazy" } else { "" },
        match (protection.journal, protection.checksums) {
            (true, true) => "+journal+checksums",
            (true, false) => "+journal",
            (false, true) => "+checksums",
            (false, false) => "",
        },
        if with_surrogate { "+surrogate" } else { "" }
    );
    let layout_name = if auto_heal {
        format!("{layout_name}+autoheal")
    } else {
        layout_name
    };
    // A crash followed by member failures is within tolerance without a journal too: the
    // write-intent bitmap's resync at reopen makes every stripe consistent before a member
    // may fail (the plain harness's pools all have the journal).
    let within = kind.within(protection) || kind == RunKind::CrashFail;
    let mut report = RunReport {
        seed,
        layout: format!("served {layout_name}"),
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
        known_gap: !within && kind.known_gap(protection),
        merged_writes: seed_merges_writes(seed),
        ido_log_writes_replayed: 0,
    };
    let mut copts = create_opts(
        scheme,
        params,
        paths,
        member_bytes,
        chunk,
        opts.pool_protection.unwrap_or(protection),
    );
    if lazy {
        copts.parity = ParityPolicy::Lazy;
        copts.bpgl_capacity = Some(2 + rng.below(7) as usize);
    }
    let pool = match Pool::create_wrapped(
        &desc,
        copts,
        Some(make_wrap(&faults, &crash, report.merged_writes)),
    ) {
        Ok(p) => p,
        Err(e) => {
            report.losses.push(format!("create {layout_name}: {e}"));
            let _ = std::fs::remove_dir_all(&dir);
            return report;
        }
    };
    crash.watch_descriptor(&desc);
    let mut pool = pool;
    let mut policies = vec![None, Some(RebuildPolicy::Pr), Some(RebuildPolicy::Pro)];
    if with_surrogate {
        match make_surrogate(&dir, &mut pool, &mut rng) {
            Ok(()) => policies.extend([
                Some(RebuildPolicy::Workout),
                Some(RebuildPolicy::Vdf),
                Some(RebuildPolicy::Ido),
            ]),
            Err(e) => {
                report
                    .losses
                    .push(format!("surrogate for {layout_name}: {e}"));
                let _ = std::fs::remove_dir_all(&dir);
                return report;
            }
        }
    }
    // A member file's size (metadata and journal before the data area): a spare's.
    let member_bytes = std::fs::metadata(&faults.lock().unwrap()[0].path)
        .map(|m| m.len())
        .unwrap_or(member_bytes);
    if auto_heal && rng.chance(0.5) {
        // A hot spare from the start: the first failure heals at once.
        let spare = dir.join("spare0.img");
        let made = std::fs::File::create(&spare).and_then(|f| f.set_len(member_bytes));
        if let Err(e) = made
            .map_err(|e| e.to_string())
            .and_then(|_| pool.add_spare(&spare).map_err(|e| e.to_string()))
        {
            report
                .losses
                .push(format!("adding a spare to {layout_name}: {e}"));
            let _ = std::fs::remove_dir_all(&dir);
            return report;
        }
    }
    let tolerance = pool.geometry().scheme().tolerance();
    let cap = pool.capacity_bytes();
    let data_range = (
        pool.data_offset_bytes(),
        pool.data_offset_bytes() + pool.geometry().member_bytes_used(),
    );
    for f in faults.lock().unwrap().iter() {
        f.set_data_range(data_range);
    }
    let checksum_range = {
        let r = pool.checksum_region();
        (r.offset, r.end())
    };
    let chunk_bytes = pool.geometry().chunk_bytes();
    let geo = pool.geometry().clone();
    let used_bytes = cap / run_bytes * run_bytes;
    let sh = Arc::new(Shared {
        crash,
        epoch: AtomicU64::new(0),
        step: AtomicU64::new(0),
        serving: Mutex::new(None),
        within,
        kind,
        verbose: opts.verbose,
        run_bytes,
        clients: nclients,
        used_bytes,
        gone: Mutex::new(BTreeSet::new()),
        gone_lose_data: AtomicBool::new(false),
        server_errors: Mutex::new(Default::default()),
    });
    let clients = (0..nclients)
        .map(|id| ClientState {
            id,
            rng: Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (id as u64 + 1)),
            model: Model::new(cap),
            acked: HashMap::new(),
            reads: 0,
            writes: 0,
            bytes_verified: 0,
            detected: 0,
            losses: Vec::new(),
            undetected: Vec::new(),
        })
        .collect();
    let mut run = ServedRun {
        rng,
        opts: opts.clone(),
        sh,
        protection,
        garbage,
        dir: dir.clone(),
        desc,
        faults,
        data_range,
        checksum_range,
        chunk_bytes,
        geo,
        atlas: Atlas {
            protection,
            tolerance,
            charged: BTreeSet::new(),
            charged_file: BTreeMap::new(),
            write_hole: false,
        },
        beyond_hit: BTreeSet::new(),
        crashed_dirty: false,
        lazy,
        auto_heal,
        member_bytes,
        report,
        replacements: 0,
        incarnations: 0,
        policies,
        clients,
        inc: None,
    };
    run.log(format_args!(
        "seed {seed:#x}: {layout_name}, {kind:?} ({}), tolerance {tolerance}, {cap} bytes, \
         {nclients} clients on runs of {run_bytes} bytes, torn sectors {}",
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
    run.start(pool);
    run.go();
    let report = run.finish_report();
    drop(run);
    let _ = std::fs::remove_dir_all(&dir);
    report
}

/// Gives the pool a surrogate (a RAID1 pool of two plain files: a surrogate is another
/// machine, which the crashes of this one do not reach) and a zone size that makes several
/// zones.
fn make_surrogate(
    dir: &Path,
    pool: &mut Pool,
    rng: &mut Rng,
) -> Result<(), crate::pool::PoolError> {
    let sdesc = dir.join("surrogate.json");
    let sur = Pool::create(
        &sdesc,
        CreateOpts {
            scheme: SchemeKind::Raid1,
            params: layout::Params {
                disks: Some(2),
                ..layout::Params::default()
            },
            members: vec![dir.join("s0.img"), dir.join("s1.img")],
            size_bytes: Some(4 << 20),
            chunk_bytes: 4096,
            emulate: None,
            force: true,
            direct: false,
            parity: Default::default(),
            bpgl_capacity: None,
            checksums: false,
            write_hole: crate::pool::WriteHole::None,
            journal_bytes: None,
            metadata: Default::default(),
        },
    )?;
    sur.close()?;
    let zone = pool.capacity_bytes() / (4 + rng.below(8));
    pool.configure_ido(Some(zone.max(4096)), Some(&sdesc))
}

/// Wraps every member the pool opens in the fault layer of its slot. A member opened at a
/// path other than the slot's (a hot spare that the served pool's healer put in the place of
/// a failed member) gets a fresh fault layer, as the harness's own replacements do.
fn make_wrap(
    faults: &Arc<Mutex<Vec<Arc<MemberFaults>>>>,
    crash: &Arc<CrashSwitch>,
    merge: bool,
) -> MemberWrap {
    let faults = faults.clone();
    let crash = crash.clone();
    let known: Mutex<HashMap<PathBuf, Arc<MemberFaults>>> = Mutex::new(HashMap::new());
    Arc::new(move |i: usize, m: Arc<dyn Member>| -> Arc<dyn Member> {
        let mut all = faults.lock().unwrap();
        let canon = |a: &Path| std::fs::canonicalize(a).unwrap_or_else(|_| a.to_path_buf());
        let opened = canon(Path::new(&m.describe()));
        if opened != canon(&all[i].path) {
            // The fault layer a file had keeps following it (a crash may put the old
            // member back in the descriptor).
            let mut seen = known.lock().unwrap();
            for f in all.iter() {
                seen.entry(canon(&f.path)).or_insert_with(|| f.clone());
            }
            let range = all[i].data_range();
            let f = seen
                .entry(opened.clone())
                .or_insert_with(|| Arc::new(MemberFaults::new(opened, crash.clone(), range)))
                .clone();
            all[i] = f;
        }
        Arc::new(FaultMember::new(m, all[i].clone()).merging_writes(merge))
    })
}

impl ServedRun {
    fn log(&self, a: std::fmt::Arguments<'_>) {
        self.sh.log(a);
    }

    fn sp(&self) -> &Arc<SharedPool> {
        &self.inc.as_ref().expect("served").sp
    }

    /// A loss (within tolerance) or a detected loss (beyond it).
    fn op_error(&mut self, what: String) {
        self.log(format_args!("error: {what}"));
        if self.sh.crash.is_dead() {
            self.log(format_args!("(after the crash point: not observed)"));
            return;
        }
        if self.sh.within {
            self.report.losses.push(what);
        } else {
            self.report.detected += 1;
        }
    }

    /// Serves `pool` and starts the clients.
    fn start(&mut self, pool: Pool) {
        self.incarnations += 1;
        let mode = if self.rng.chance(0.15) {
            Concurrency::Serial
        } else {
            Concurrency::Stripes
        };
        let sp = match SharedPool::new(pool, mode) {
            Ok(sp) => sp,
            Err(e) => {
                self.op_error(format!("serving the pool: {e}"));
                return;
            }
        };
        *self.sh.serving.lock().unwrap() = Some((self.incarnations, Arc::clone(&sp)));
        let ido = sp.ido().status(0);
        if ido.phase == "rebuilding" {
            self.report.ido_log_writes_replayed += ido.log_writes;
        }
        if self.auto_heal {
            let sh = Arc::clone(&self.sh);
            let rebuild = self.draw_rebuild_opts();
            self.log(format_args!("auto-heal on, rebuilds {rebuild:?}"));
            sp.enable_auto_heal(HealOpts {
                rebuild,
                sink: Some(Arc::new(move |e: &HealthEvent| {
                    sh.log(format_args!(
                        "healer: {} {:?}: {}",
                        e.event, e.member, e.detail
                    ))
                })),
                ..HealOpts::default()
            });
        }
        let socket = self.dir.join(format!("s{}.sock", self.incarnations));
        let listener = UnixListener::bind(&socket).expect("bind the harness's NBD socket");
        let info = nbd::ExportInfo::new("pool", sp.capacity_bytes());
        let server = nbd::Server::new(
            vec![nbd::Export {
                info,
                backend: Arc::new(Backend {
                    inner: PoolBackend(Arc::clone(&sp)),
                    sh: Arc::clone(&self.sh),
                }),
            }],
            nbd::ServerOptions {
                poll_interval: Duration::from_millis(10),
                ..nbd::ServerOptions::default()
            },
        );
        let srv = Arc::clone(&server);
        let accept = std::thread::spawn(move || srv.serve_unix(listener));
        let stop_clients = Arc::new(AtomicBool::new(false));
        let clients = std::mem::take(&mut self.clients)
            .into_iter()
            .map(|st| {
                let (sh, socket, stop) = (
                    Arc::clone(&self.sh),
                    socket.clone(),
                    Arc::clone(&stop_clients),
                );
                std::thread::spawn(move || client_loop(sh, st, socket, stop))
            })
            .collect();
        self.log(format_args!(
            "server {} up ({mode:?}), {} clients",
            self.incarnations, self.opts.clients
        ));
        self.inc = Some(Incarnation {
            sp,
            server,
            accept,
            socket,
            stop_clients,
            clients,
        });
    }

    /// Stops the clients and the NBD server; the served pool stays.
    fn stop_io(&mut self) -> Option<Arc<SharedPool>> {
        let inc = self.inc.take()?;
        if let Some(h) = inc.sp.heal_status() {
            // The healer's rebuilds count as the run's (it started them instead of us).
            self.report.rebuilds += h.rebuilds_started;
        }
        *self.sh.serving.lock().unwrap() = None;
        inc.stop_clients.store(true, Ordering::SeqCst);
        for h in inc.clients {
            match h.join() {
                Ok(st) => self.clients.push(st),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        self.clients.sort_by_key(|c| c.id);
        inc.server.stop();
        let _ = inc.accept.join();
        let _ = std::fs::remove_file(&inc.socket);
        Some(inc.sp)
    }

    fn go(&mut self) {
        for step in 0..self.opts.steps {
            if self.inc.is_none() || !self.problems_free() {
                break;
            }
            self.sh.step.store(step as u64, Ordering::SeqCst);
            self.step(step);
            self.settle_rebuild();
            if self.sh.crash.is_dead() {
                self.report.faults.crashes_mid_op += 1;
                self.crash_and_restart();
            }
        }
        self.sh.crash.disarm();
        if self.sh.crash.is_dead() {
            self.report.faults.crashes_mid_op += 1;
            self.crash_and_restart();
        }
        if self.inc.is_some() && self.problems_free() {
            self.final_check();
        }
        if let Some(sp) = self.stop_io() {
            sp.abandon();
        }
    }

    fn problems_free(&self) -> bool {
        self.report.losses.is_empty() && self.clients_losses() == 0
    }

    /// Losses the clients found so far (they report when they stop).
    fn clients_losses(&self) -> usize {
        self.clients.iter().map(|c| c.losses.len()).sum()
    }

    fn step(&mut self, step: usize) {
        match self.rng.below(100) {
            0..=29 => pause_ms(1 + self.rng.below(8)),
            30..=51 => self.fault(step),
            52..=66 => self.recover(),
            67..=76 => self.crash_op(),
            77..=80 => self.clean_restart(),
            _ => pause_ms(10 + self.rng.below(30)),
        }
    }

    fn failed_members(&self) -> Vec<u32> {
        self.sp()
            .with_pool(|p| Ok(p.state().failed().to_vec()))
            .unwrap_or_default()
    }

    fn bump_epoch(&self) {
        self.sh.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Members gone for good changed: recompute whether the layout loses data without them.
    ///
    /// Lost only when both say so: the layout as created (every cycle where the array put it
    /// first, the gone members failed), and where the data lives now (the served pool's
    /// membership state, the gone members the pool has not noticed yet failed on top): a
    /// rebuild into the layout's spare room lets it carry a second member gone later, which
    /// the first view alone would call a loss. The second view alone would count failures
    /// the pool made itself (not the harness's claim), and it is the engine's own word; a
    /// state that claimed a rebuild the members do not hold would be caught by the reads,
    /// which check every byte against the clients' models. With no pool up (between a crash
    /// and the restart), the first view alone.
    fn update_gone(&self, f: impl FnOnce(&mut BTreeSet<usize>)) {
        let mut g = self.sh.gone.lock().unwrap();
        f(&mut g);
        let lost_in = |mut st: ArrayState| {
            for &d in g.iter() {
                if !st.failed().contains(&(d as u32)) {
                    st.fail(&self.geo, d as u32)
                        .expect("a member of the array that has not failed can fail");
                }
            }
            st.data_lost(&self.geo)
        };
        let now = self
            .inc
            .as_ref()
            .and_then(|inc| inc.sp.with_pool(|p| Ok(p.state().clone())).ok());
        let lost = lost_in(ArrayState::new(&self.geo)) && now.is_none_or(lost_in);
        self.sh.gone_lose_data.store(lost, Ordering::SeqCst);
    }

    /// Injects one fault while the clients run, as the run's kind and the atlas allow.
    fn fault(&mut self, step: usize) {
        let failed = self.failed_members();
        let n = self.faults.lock().unwrap().len();
        let present: Vec<usize> = (0..n).filter(|m| !failed.contains(&(*m as u32))).collect();
        if present.is_empty() {
            return;
        }
        let m = present[self.rng.below(present.len() as u64) as usize];
        let f = self.faults.lock().unwrap()[m].clone();
        if matches!(self.sh.kind, RunKind::Mixed | RunKind::CrashFail)
            && !self.lazy_allows_another(m)
        {
            self.report.faults.refused_by_atlas += 1;
            return;
        }
        let crash_ok = self.crash_keeps_redundancy() || !self.sh.crash.is_armed();
        let mut draw = FaultDraw {
            rng: &mut self.rng,
            kind: self.sh.kind,
            protection: self.protection,
            atlas: &mut self.atlas,
            beyond_hit: &mut self.beyond_hit,
            counts: &mut self.report.faults,
            crash_ok,
            crashed_dirty: self.crashed_dirty,
            data_range: self.data_range,
            checksum_range: self.checksum_range,
            chunk_bytes: self.chunk_bytes,
        };
        let Some(fault) = draw.draw(m) else {
            return;
        };
        if self.atlas.charged.contains(&m) {
            // The fault lands on this file: only a later replacement ends the charge.
            self.atlas.charge(m, &f.path);
        }
        // Before the fault lands: a write acknowledged from now on is judged against it.
        self.bump_epoch();
        match fault.apply(&f, &mut self.report.faults) {
            Some(line) => {
                self.log(format_args!("step {step}: member {m} {line}"));
                if matches!(fault, crate::faultsim::Fault::FailStop) {
                    self.update_gone(|g| {
                        g.insert(m);
                    });
                }
            }
            None => {
                self.report.faults.admin_fail += 1;
                self.log(format_args!("step {step}: fail member {m}"));
                let already = |sp: &Arc<SharedPool>| {
                    sp.with_pool(|p| Ok(p.state().failed().contains(&(m as u32))))
                        .unwrap_or(false)
                };
                if already(self.sp()) {
                    // The engine failed it already (an earlier fault it met since): the
                    // operator's command has nothing to do.
                    self.log(format_args!(
                        "(member {m} was failed by the engine already)"
                    ));
                } else if let Err(e) = self.sp().fail(m) {
                    if e.to_string().contains("has already failed") {
                        self.log(format_args!(
                            "(member {m} failed by the engine meanwhile: {e})"
                        ));
                    } else {
                        self.op_error(format!("fail {m}: {e}"));
                    }
                }
                // Gone once the command has returned, not before: the member was whole until
                // the engine failed it, so a flush that ran meanwhile made its writes durable
                // (seed 0x6b07f011: a client's flush between the two was reported as "a flush
                // succeeded although the members gone lose data").
                self.update_gone(|g| {
                    g.insert(m);
                });
            }
        }
    }

    /// Lazy parity gives up one parity of the stripes it lists until they are flushed (the
    /// seed's reliability model counts that window): a failure is survived, and the list is
    /// flushed as soon as the engine knows of it. A second member may take a fault only once
    /// the engine knows every other member charged so far failed and has flushed the list.
    /// A member charged for latent errors and still in the array counts as another: its
    /// fail-stop takes its parity chunks too, so a member that failed just before must have
    /// been flushed for (seed 0x6b07a180: latent errors on member 5, member 0 fail-stopped,
    /// member 5 fail-stopped before the engine had flushed for member 0).
    fn lazy_allows_another(&self, m: usize) -> bool {
        // The members faulted so far: charged to the atlas (mixed runs) or hit (a
        // crash-then-fail run keeps its count there).
        let hit = if self.sh.kind == RunKind::CrashFail {
            &self.beyond_hit
        } else {
            &self.atlas.charged
        };
        let charged: Vec<usize> = hit.iter().copied().filter(|&c| c != m).collect();
        if !self.lazy || charged.is_empty() {
            return true;
        }
        self.sp()
            .with_pool(|p| {
                let failed = p.state().failed();
                Ok(p.state().bpgl().is_empty()
                    && charged.iter().all(|&c| failed.contains(&(c as u32))))
            })
            .unwrap_or(false)
    }

    /// Replaces the failed members (new files) and starts a background rebuild, rate-limited
    /// at times so that it overlaps with the clients, crashes and faults.
    fn recover(&mut self) {
        if self.sh.crash.is_dead() {
            return;
        }
        if self.auto_heal {
            return self.add_spare();
        }
        if self.sp().rebuild_info().running {
            return;
        }
        if !self.replace_failed() {
            return;
        }
        let clean = self
            .sp()
            .with_pool(|p| Ok(p.state().all_clean()))
            .unwrap_or(true);
        if clean {
            self.settle_atlas();
            return;
        }
        let opts = self.draw_rebuild_opts();
        let policy = self.policies[self.rng.below(self.policies.len() as u64) as usize];
        self.report.rebuilds += 1;
        self.log(format_args!(
            "rebuild in the background: {opts:?}, policy {:?}",
            policy.map(|p| p.name())
        ));
        if let Err(e) = self.sp().start_rebuild_with(opts, policy, None) {
            // Refused (a member must be replaced first, too many failures, a policy rebuild
            // under way with another policy): an operator reads the message and goes on.
            self.log(format_args!("rebuild refused: {e}"));
        }
    }

    /// A rebuild's batch and speed limits, rate-limited at times so that it overlaps with the
    /// clients, crashes and faults.
    fn draw_rebuild_opts(&mut self) -> RebuildOpts {
        let parallel_cycles = 1 + self.rng.below(8) as usize;
        RebuildOpts {
            parallel_cycles,
            window_bytes: crate::faultsim::draw_window(parallel_cycles),
            speed_max_bytes_per_sec: if self.rng.chance(0.5) {
                Some((256 << 10) * (1 + self.rng.below(16)))
            } else {
                None
            },
            speed_min_bytes_per_sec: if self.rng.chance(0.3) {
                Some(128 << 10)
            } else {
                None
            },
            ..RebuildOpts::default()
        }
    }

    /// The operator of a self-healing pool adds a hot spare when fewer spares than failed
    /// members are listed (now and then one more); the healer does the rest.
    fn add_spare(&mut self) {
        let failed = self.failed_members().len();
        let spares = self
            .sp()
            .with_pool(|p| Ok(p.spares().len()))
            .unwrap_or(usize::MAX);
        if spares == usize::MAX || (spares >= failed && !self.rng.chance(0.1)) {
            return;
        }
        self.replacements += 1;
        let path = self.dir.join(format!("spare{}.img", self.replacements));
        if let Err(e) = std::fs::File::create(&path).and_then(|f| f.set_len(self.member_bytes)) {
            self.op_error(format!("making the spare {}: {e}", path.display()));
            return;
        }
        self.log(format_args!("add spare {}", path.display()));
        if let Err(e) = self.sp().add_spare(&path) {
            self.log(format_args!("add spare: {e}"));
        }
    }

    /// Members gone that the served pool lists as present, and whose device works, are no
    /// longer gone: the healer put spares in their place (their slot's fault layer is the
    /// spare's now), or the pool came back with a member the operator had failed when no
    /// member was left to record the failure (its device is whole and holds every write
    /// acknowledged before; seed 0x6b07a11c: RAID1 of 3, all failed, then a power loss, and
    /// the restart serves member 0 again, whose flushes are durable).
    fn settle_gone(&mut self) {
        // (No server up, after a crash: the next one settles it.)
        if self.inc.is_none() {
            return;
        }
        let failed = self.failed_members();
        let back: Vec<usize> = {
            let faults = self.faults.lock().unwrap();
            self.sh
                .gone
                .lock()
                .unwrap()
                .iter()
                .copied()
                .filter(|&d| !faults[d].is_fail_stopped() && !failed.contains(&(d as u32)))
                .collect()
        };
        if !back.is_empty() {
            self.update_gone(|g| {
                for d in back {
                    g.remove(&d);
                }
            });
        }
    }

    /// Puts new member files in the place of the failed members; false when a replacement
    /// was refused.
    fn replace_failed(&mut self) -> bool {
        for d in self.failed_members() {
            let d = d as usize;
            self.replacements += 1;
            let path = self.dir.join(format!("m{d}.r{}.img", self.replacements));
            let nf = Arc::new(MemberFaults::new(
                path.clone(),
                self.sh.crash.clone(),
                self.data_range,
            ));
            let old = std::mem::replace(&mut self.faults.lock().unwrap()[d], nf);
            self.log(format_args!("replace member {d} with {}", path.display()));
            if let Err(e) = self.sp().replace(d, &path) {
                self.faults.lock().unwrap()[d] = old;
                self.log(format_args!("replace {d}: {e}"));
                return false;
            }
            self.update_gone(|g| {
                g.remove(&d);
            });
        }
        true
    }

    /// A finished background rebuild frees the atlas's charges.
    fn settle_rebuild(&mut self) {
        self.settle_gone();
        let Some(inc) = &self.inc else { return };
        let info = inc.sp.rebuild_info();
        if let Some(e) = &info.error {
            self.log(format_args!("background rebuild ended: {e}"));
        }
        if !info.running {
            self.settle_atlas();
        }
    }

    /// Members that are present and rebuilt no longer use redundancy (unless they still carry
    /// latent errors, which stay charged until they are replaced).
    fn settle_atlas(&mut self) {
        let Some(inc) = &self.inc else { return };
        let Ok((clean, failed)) = inc
            .sp
            .with_pool(|p| Ok((p.state().all_clean(), p.state().failed().is_empty())))
        else {
            return;
        };
        if !(clean && failed) {
            return;
        }
        let faults = self.faults.lock().unwrap().clone();
        self.atlas.settle(&faults);
    }

    fn crash_keeps_redundancy(&self) -> bool {
        self.protection.journal && !(self.garbage && self.protection.checksums)
    }

    fn crash_op(&mut self) {
        let allowed = match self.sh.kind {
            RunKind::Mixed => self.crash_keeps_redundancy() || self.atlas.charged.is_empty(),
            RunKind::CrashFail => !self.crashed_dirty,
            // The other beyond-tolerance runs keep crashes harmless.
            _ => self.protection.journal,
        };
        if !allowed || self.sh.crash.is_armed() {
            self.report.faults.refused_by_atlas += 1;
            return;
        }
        if self.rng.chance(0.6) {
            let n = 1 + self.rng.below(300);
            self.log(format_args!(
                "crash armed: before the {n}th next member write"
            ));
            self.sh.crash.arm(n);
        } else {
            self.log(format_args!("crash now"));
            self.sh.crash.trip_now();
        }
    }

    /// The server died: stop what is left of it, apply the crash to the member files, start
    /// it again on them.
    fn crash_and_restart(&mut self) {
        let Some(sp) = self.stop_io() else { return };
        sp.abandon();
        drop(sp);
        let death = if self.rng.chance(0.5) {
            Death::Kill
        } else {
            Death::PowerLoss
        };
        let dirty = self
            .clients
            .iter()
            .any(|c| c.model.dirty() || c.model.has_unknown());
        let torn = match death {
            Death::PowerLoss => dirty,
            // Page cache survives: only requests in flight may have left a stripe half
            // written.
            Death::Kill => self.clients.iter().any(|c| c.model.has_unknown()),
        };
        self.log(format_args!(
            "crash: {death:?} ({})",
            if dirty {
                "unflushed or unfinished writes"
            } else {
                "nothing unflushed"
            }
        ));
        let all: Vec<Arc<MemberFaults>> = self.faults.lock().unwrap().clone();
        for f in &all {
            match death {
                Death::Kill => {
                    f.apply_kill();
                }
                Death::PowerLoss => match f.apply_crash(&mut self.rng, self.garbage) {
                    Ok(o) => {
                        self.report.pages_dropped += o.pages_dropped;
                        self.report.sectors_torn += o.sectors_torn;
                    }
                    Err(e) => {
                        self.op_error(format!("applying the crash to {}: {e}", f.path.display()))
                    }
                },
            }
        }
        if let Err(e) = self.sh.crash.restore_descriptor() {
            self.op_error(format!("restoring the descriptor as of the crash: {e}"));
        }
        for c in &mut self.clients {
            match death {
                // Everything the members took survives: an acknowledged write reads back as
                // it was acknowledged (only writes in flight may or may not have happened).
                Death::Kill => c.model.flush(),
                Death::PowerLoss => c.model.crash(self.garbage),
            }
            c.acked.clear();
        }
        // Without a journal the stripes a crash may have left half written are in regions the
        // write-intent bitmap marked, resynchronised when the pool is opened again: the
        // redundancy is whole again (no write hole to charge). A crash-then-fail run may now
        // fail members.
        if torn && self.sh.kind == RunKind::CrashFail {
            self.crashed_dirty = true;
        }
        self.bump_epoch();
        self.sh.crash.reset();
        self.reopen("after a crash");
    }

    /// Opens the pool again from its member files and serves it.
    fn reopen(&mut self, when: &str) {
        self.report.reopens += 1;
        match Pool::open_wrapped(
            &self.desc,
            make_wrap(&self.faults, &self.sh.crash, self.report.merged_writes),
        ) {
            Ok(p) => {
                self.start(p);
                self.settle_gone();
            }
            Err(e) => {
                let msg = format!("reopen {when}: {e}");
                self.log(format_args!("{msg}"));
                if self.sh.within {
                    self.report.losses.push(msg);
                } else {
                    self.report.detected += 1;
                }
            }
        }
    }

    /// Stops serving cleanly (what SIGTERM does) and starts again.
    fn clean_restart(&mut self) {
        if self.sh.crash.is_armed() || self.sh.crash.is_dead() {
            return;
        }
        let Some(sp) = self.stop_io() else { return };
        self.log(format_args!("clean restart"));
        let r = sp.close();
        if self.sh.crash.is_dead() {
            // The crash tripped while closing: that is where the process died.
            drop(sp);
            self.report.faults.crashes_mid_op += 1;
            self.inc = None;
            return self.after_crash_while_closing();
        }
        match r {
            // A clean close flushed every member.
            Ok(_) => self.clients.iter_mut().for_each(|c| c.model.flush()),
            Err(e) => self.op_error(format!("close: {e}")),
        }
        drop(sp);
        self.reopen("after a clean shutdown");
    }

    fn after_crash_while_closing(&mut self) {
        // `crash_and_restart` expects a served pool; there is none left to stop.
        let all: Vec<Arc<MemberFaults>> = self.faults.lock().unwrap().clone();
        for f in &all {
            if let Err(e) = f.apply_crash(&mut self.rng, self.garbage) {
                self.op_error(format!("applying the crash to {}: {e}", f.path.display()));
            }
        }
        let _ = self.sh.crash.restore_descriptor();
        for c in &mut self.clients {
            c.model.crash(self.garbage);
            c.acked.clear();
        }
        self.bump_epoch();
        self.sh.crash.reset();
        self.reopen("after a crash while closing");
    }

    /// Ends the run: any rebuild finished at full speed, every client's runs read back and
    /// checked, parity verified where it must hold, a clean shutdown, and the whole volume
    /// checked once more after starting again.
    fn final_check(&mut self) {
        let sp = Arc::clone(self.sp());
        // The healer hands over to the final replacements.
        sp.stop_auto_heal();
        self.settle_gone();
        sp.stop_rebuild();
        // Replace and rebuild until nothing is left to do (a member may fail during it).
        for _ in 0..4 {
            if !self.replace_failed() {
                break;
            }
            let needs = sp
                .with_pool(|p| {
                    Ok(!p.state().all_clean() || p.ido().phase() != crate::ido::Phase::Normal)
                })
                .unwrap_or(false);
            if !needs {
                break;
            }
            if let Err(e) = sp.start_rebuild_with(RebuildOpts::default(), None, None) {
                self.log(format_args!("final rebuild refused: {e}"));
                break;
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            while sp.rebuild_info().running && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(e) = sp.rebuild_info().error {
                if self.failed_members().is_empty() {
                    self.op_error(format!("final rebuild: {e}"));
                    break;
                }
                self.log(format_args!("final rebuild stopped: {e}"));
            }
        }
        self.settle_atlas();
        let Some(sp) = self.stop_io() else { return };
        self.check_all(&sp);
        if !self.problems_free() {
            sp.abandon();
            return;
        }
        let healthy = self.failed_members_of(&sp).is_empty()
            && sp.with_pool(|p| Ok(p.state().all_clean())).unwrap_or(false)
            && self.atlas.charged.is_empty();
        if self.sh.within && !self.atlas.write_hole && healthy && self.sh.kind == RunKind::Mixed {
            match sp.verify() {
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
        match sp.close() {
            Ok(_) => {}
            Err(e) if self.sh.within => self.report.losses.push(format!("close: {e}")),
            Err(_) => self.report.detected += 1,
        }
        drop(sp);
        // Started again after the clean shutdown, every byte must still be there.
        self.report.reopens += 1;
        match Pool::open_wrapped(
            &self.desc,
            make_wrap(&self.faults, &self.sh.crash, self.report.merged_writes),
        ) {
            Ok(p) => match SharedPool::new(p, Concurrency::Stripes) {
                Ok(sp) => {
                    self.check_all(&sp);
                    if let Err(e) = sp.close() {
                        if self.sh.within {
                            self.report
                                .losses
                                .push(format!("close after the final check: {e}"));
                        }
                    }
                }
                Err(e) => self.op_error(format!("serving after the final shutdown: {e}")),
            },
            Err(e) => self.op_error(format!("reopen after the final shutdown: {e}")),
        }
    }

    fn failed_members_of(&self, sp: &SharedPool) -> Vec<u32> {
        sp.with_pool(|p| Ok(p.state().failed().to_vec()))
            .unwrap_or_default()
    }

    /// Reads every client's runs through the served pool (not over NBD: no clients are
    /// running) and checks them.
    fn check_all(&mut self, sp: &SharedPool) {
        let sh = Arc::clone(&self.sh);
        for c in &mut self.clients {
            for run in c.runs(&sh) {
                let mut buf = vec![0u8; sh.run_bytes as usize];
                c.reads += 1;
                match sp.read(run, &mut buf) {
                    Ok(()) => match c.model.check(run, &buf) {
                        Ok(()) => c.bytes_verified += sh.run_bytes,
                        Err(why) => {
                            let msg = format!("final check, client {} run {run}: {why}", c.id);
                            if let Some(s) = wrong_sector(&why).filter(|_| sh.verbose) {
                                eprintln!("faultsim-served: DEBUG {}", debug_row(sp, s));
                            }
                            if sh.within {
                                c.losses.push(msg);
                                return;
                            }
                            c.undetected.push(msg);
                            c.model.write(run, &buf);
                            c.model.flush();
                        }
                    },
                    Err(e) => {
                        let msg = format!("final check, client {} run {run}: {e}", c.id);
                        if sh.within {
                            c.losses.push(msg);
                            return;
                        }
                        c.detected += 1;
                    }
                }
            }
        }
    }

    /// The run's report with the clients' findings folded in.
    fn finish_report(&mut self) -> RunReport {
        let mut r = self.report.clone();
        for c in &self.clients {
            r.reads += c.reads;
            r.writes += c.writes;
            r.bytes_verified += c.bytes_verified;
            r.detected += c.detected;
            r.losses.extend(c.losses.iter().cloned());
            r.undetected.extend(c.undetected.iter().cloned());
        }
        r
    }
}

/// Lets the clients work for a while.
fn pause_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Runs a served seed, turning an engine panic into the panic message.
pub fn run_seed_caught(seed: u64, opts: &ServedOpts) -> Result<RunReport, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(seed, opts))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

//! The write-intent bitmap of a pool without a write journal (`raidcore::intent`), and the
//! resync after an unclean shutdown it bounds (issue 21, defect 4).
//!
//! Without a journal, a crash in the middle of a write can leave a stripe whose parity
//! disagrees with its data (the RAID write hole): harmless until a member fails, when the
//! missing unit is reconstructed wrong. MD marks the regions being written in a bitmap on the
//! members before writing, resynchronises the marked regions when it assembles an array that
//! was not shut down cleanly, and refuses to start one that is also degraded unless forced
//! (`start_dirty_degraded`): the stripes being written when it stopped cannot be repaired
//! without the missing member. This is the same, with one addition: with block checksums, the
//! blocks of a marked region are vouched for from their data (a crash between a block's write
//! and its checksum's would otherwise make a good block unreadable), as dm-integrity's bitmap
//! mode recalculates its tags.
//!
//! The mark is made before a client write's first member write and stays while the write
//! runs; a region's mark is cleared after a flush once its writes are over and it has been
//! idle for [`INTENT_CLEAR_AFTER`]; a clean shutdown clears every mark.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use raidcore::intent::{region_cycles_for, IntentRecord};

use super::*;
use crate::dual_slot::DualSlot;

/// The bitmap's two slots on every member.
pub(crate) const INTENT_SLOTS: DualSlot =
    DualSlot::new("write-intent bitmap", raidcore::region::INTENT);

/// How long a region stays marked after its last write (a region written again soon costs no
/// second bitmap write).
pub(crate) const INTENT_CLEAR_AFTER: Duration = Duration::from_secs(2);

/// Members that failed writing the bitmap, for the caller to fail.
pub(crate) type DeadMembers = Vec<(usize, std::io::Error)>;

/// A pool's write-intent bitmap: what the members hold and the writes running.
pub(crate) struct WriteIntent {
    uuid: [u8; 16],
    region_cycles: u64,
    regions: u64,
    cycle_bytes: u64,
    st: Mutex<IntentState>,
}

#[derive(Default)]
struct IntentState {
    /// Regions marked in the newest record on the members.
    on_disk: BTreeSet<u64>,
    /// Sequence of the newest record written.
    seq: u64,
    /// Writes running, per region.
    in_flight: HashMap<u64, u32>,
    /// When each marked region's last write ended.
    last_done: HashMap<u64, Instant>,
}

/// The regions one write holds marked while it runs; released when dropped.
pub(crate) struct IntentGuard {
    intent: Arc<WriteIntent>,
    regions: std::ops::RangeInclusive<u64>,
}

impl Drop for IntentGuard {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut st = self.intent.lock();
        for r in self.regions.clone() {
            let n = st
                .in_flight
                .get_mut(&r)
                .expect("a guarded region is in flight");
            *n -= 1;
            if *n == 0 {
                st.in_flight.remove(&r);
            }
            st.last_done.insert(r, now);
        }
    }
}

/// What the members' bitmap says, read at assembly.
pub(crate) struct IntentFound {
    /// Regions to resynchronise.
    pub dirty: BTreeSet<u64>,
    /// The newest record's sequence (the next write goes on from it).
    pub seq: u64,
}

impl WriteIntent {
    /// The bitmap of a pool of geometry `geo`, nothing marked.
    pub(crate) fn new(uuid: [u8; 16], geo: &Geometry) -> WriteIntent {
        let cycle_bytes = geo.data_per_cycle() * geo.chunk_bytes();
        let region_cycles = region_cycles_for(geo.cycles(), cycle_bytes);
        WriteIntent {
            uuid,
            region_cycles,
            regions: geo.cycles().div_ceil(region_cycles),
            cycle_bytes,
            st: Mutex::new(IntentState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IntentState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every region (a pool that was in use when it stopped and has no bitmap to say where).
    pub(crate) fn all_regions(&self) -> BTreeSet<u64> {
        (0..self.regions).collect()
    }

    /// The cycles of region `r`.
    pub(crate) fn cycles_of(&self, r: u64, cycles: u64) -> std::ops::Range<u64> {
        r * self.region_cycles..((r + 1) * self.region_cycles).min(cycles)
    }

    /// Reads the newest valid record of this pool on `members`. A record of another region
    /// size (a pool grown since, say) marks everything it marked, widened to whole regions of
    /// this size.
    pub(crate) fn read(&self, members: &[Option<Arc<dyn Member>>]) -> Option<IntentFound> {
        let newest = INTENT_SLOTS
            .read_all(members, IntentRecord::encoded_len)
            .iter()
            .filter_map(|b| IntentRecord::decode(b).ok())
            .filter(|r| r.uuid == self.uuid)
            .max_by_key(|r| r.sequence)?;
        let dirty = if newest.region_cycles == self.region_cycles {
            newest
                .dirty
                .iter()
                .copied()
                .filter(|&r| r < self.regions)
                .collect()
        } else {
            newest
                .dirty
                .iter()
                .flat_map(|&r| {
                    let (a, b) = (r * newest.region_cycles, (r + 1) * newest.region_cycles - 1);
                    (a / self.region_cycles)..=(b / self.region_cycles)
                })
                .filter(|&r| r < self.regions)
                .collect()
        };
        Some(IntentFound {
            dirty,
            seq: newest.sequence,
        })
    }

    /// Continues from a record read at assembly (its marks stay until the resync clears them).
    pub(crate) fn adopt(&self, found: &IntentFound) {
        let mut st = self.lock();
        st.seq = found.seq;
        st.on_disk = found.dirty.clone();
    }

    /// The regions of logical bytes `offset..offset + len` (`len` > 0).
    fn regions_of(&self, offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        let per_region = self.region_cycles * self.cycle_bytes;
        offset / per_region..=(offset + len.max(1) - 1) / per_region
    }

    /// Writes the record saying `marked` to every present member (flushed). Members that fail
    /// are returned; an error when none took it.
    fn write_record(
        &self,
        st: &mut IntentState,
        marked: BTreeSet<u64>,
        members: &[Option<Arc<dyn Member>>],
        counters: &[Counters],
    ) -> Result<DeadMembers> {
        let rec = IntentRecord {
            uuid: self.uuid,
            sequence: st.seq + 1,
            region_cycles: self.region_cycles,
            regions: self.regions,
            dirty: marked.clone(),
        };
        let dead = INTENT_SLOTS
            .write(
                members,
                counters,
                members.len(),
                rec.sequence,
                &rec.encode(),
                true,
            )
            .map_err(|e| PoolError::Io(e.to_string()))?;
        st.seq = rec.sequence;
        st.on_disk = marked;
        Ok(dead)
    }

    /// Marks the regions of a write of `len` bytes at `offset` before its first member write:
    /// the record on the members is updated (and flushed) first when one of them is not
    /// marked there yet. The guard holds them marked until the write is over.
    /// `members` is asked for the members only when the record must be written (the usual
    /// case, a region already marked, takes nothing but this bitmap's lock). Lock order: a
    /// superblock update takes this lock under the pool mutex, so `members` (which may take
    /// the pool mutex) is never called with this lock held.
    pub(crate) fn begin(
        self: &Arc<Self>,
        offset: u64,
        len: u64,
        members: impl FnOnce() -> Result<Vec<Option<Arc<dyn Member>>>>,
        counters: &[Counters],
    ) -> Result<(IntentGuard, DeadMembers)> {
        let regions = self.regions_of(offset, len);
        let unmarked = |st: &IntentState| regions.clone().any(|r| !st.on_disk.contains(&r));
        let mut dead = Vec::new();
        let mut st = self.lock();
        if unmarked(&st) {
            drop(st);
            let members = members()?;
            st = self.lock();
            // Another writer may have marked them meanwhile.
            if unmarked(&st) {
                let mut marked = st.on_disk.clone();
                marked.extend(regions.clone());
                // Serialised by the lock: writers of regions already marked go on meanwhile.
                dead = self.write_record(&mut st, marked, &members, counters)?;
            }
        }
        for r in regions.clone() {
            *st.in_flight.entry(r).or_default() += 1;
        }
        drop(st);
        Ok((
            IntentGuard {
                intent: Arc::clone(self),
                regions,
            },
            dead,
        ))
    }

    /// A flush of every member that started at `started` is done: regions with no write
    /// running, whose last write ended before it (and at least `idle` ago), are consistent
    /// and durable; their marks are cleared on the members. A client's flush waits
    /// [`INTENT_CLEAR_AFTER`] (a region written again soon costs no second bitmap write); a
    /// superblock update, which flushes every member anyway, clears at once. `members` is
    /// called without this bitmap's lock held (see [`WriteIntent::begin`]).
    pub(crate) fn flushed(
        &self,
        started: Instant,
        idle: Duration,
        members: impl FnOnce() -> Result<Vec<Option<Arc<dyn Member>>>>,
        counters: &[Counters],
    ) -> Result<DeadMembers> {
        let clearable = |st: &IntentState| -> Vec<u64> {
            let now = Instant::now();
            st.on_disk
                .iter()
                .copied()
                .filter(|r| {
                    !st.in_flight.contains_key(r)
                        && st
                            .last_done
                            .get(r)
                            .is_none_or(|&t| t < started && now.duration_since(t) >= idle)
                })
                .collect()
        };
        if clearable(&self.lock()).is_empty() {
            return Ok(Vec::new());
        }
        let members = members()?;
        let mut st = self.lock();
        let clear = clearable(&st);
        if clear.is_empty() {
            return Ok(Vec::new());
        }
        let mut marked = st.on_disk.clone();
        for r in &clear {
            marked.remove(r);
            st.last_done.remove(r);
        }
        self.write_record(&mut st, marked, &members, counters)
    }

    /// A clean shutdown (every member flushed, no write running): every mark is cleared.
    pub(crate) fn clear_all(
        &self,
        members: &[Option<Arc<dyn Member>>],
        counters: &[Counters],
    ) -> Result<DeadMembers> {
        let mut st = self.lock();
        assert!(
            st.in_flight.is_empty(),
            "a clean shutdown with writes running"
        );
        if st.on_disk.is_empty() {
            return Ok(Vec::new());
        }
        st.last_done.clear();
        self.write_record(&mut st, BTreeSet::new(), members, counters)
    }

    /// Regions marked on the members now.
    pub(crate) fn marked(&self) -> BTreeSet<u64> {
        self.lock().on_disk.clone()
    }
}

/// What the resync at assembly did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResyncReport {
    /// Cycles resynchronised (those of the regions the bitmap marked).
    pub cycles: u64,
    /// Stripes whose parity (or copies) disagreed with the data and were rewritten.
    pub stripes_rewritten: u64,
    /// Stripes with a unit on a missing member, left as they were (only with `--force`).
    pub stripes_degraded: u64,
    /// Blocks whose checksum was vouched for from their data.
    pub blocks_revouched: u64,
}

impl Pool {
    /// The pool's write-intent bitmap marks before a write (see [`WriteIntent::begin`]);
    /// `None` for a pool with a journal (which needs none). Members that failed taking the
    /// bitmap are failed.
    pub(crate) fn intent_begin(&mut self, offset: u64, len: u64) -> Result<Option<IntentGuard>> {
        let Some(w) = self.wh.intent.clone() else {
            return Ok(None);
        };
        let members = self.members.handles.clone();
        let (g, dead) = w.begin(offset, len, || Ok(members), &self.members.counters)?;
        self.fail_record_writers(dead)?;
        Ok(Some(g))
    }

    /// Members that failed writing a record are failed like members failing a data write.
    pub(crate) fn fail_record_writers(&mut self, dead: DeadMembers) -> Result<()> {
        if dead.is_empty() {
            return Ok(());
        }
        self.fail_dead_members(&dead)?;
        let tag = self.tag();
        self.persist(tag)
    }

    /// After assembly of a pool without a journal: the regions the bitmap marked (every region
    /// of a pool that was in use and has no bitmap) are resynchronised before anything reads
    /// the parity. Refused, writing nothing, when the pool is also missing members that
    /// stripes of those regions need, unless `force`.
    pub(crate) fn resync_marked(&mut self, dirty: &BTreeSet<u64>, force: bool) -> Result<()> {
        let Some(w) = self.wh.intent.clone() else {
            return Ok(());
        };
        if dirty.is_empty() {
            return Ok(());
        }
        let cycles: Vec<u64> = dirty
            .iter()
            .flat_map(|&r| w.cycles_of(r, self.geo.cycles()))
            .collect();
        let degraded: u64 = cycles
            .iter()
            .map(|&c| raidcore::verify::unavailable_stripes(&self.state, c) as u64)
            .sum();
        if degraded > 0 && !force {
            let missing: Vec<String> = self
                .state
                .failed()
                .iter()
                .map(|d| format!("m{d}"))
                .collect();
            return Err(PoolError::Usage(format!(
                "the pool was not shut down cleanly, and {degraded} stripes it was writing \
                 then lack a member ({}): their parity may disagree with their data, so what \
                 the missing member held there cannot be trusted. Nothing was changed. Start \
                 it anyway with --force on `raidforge serve`, `rebuild` or `assemble` (as \
                 mdadm's --force, MD's start_dirty_degraded): the other stripes are \
                 resynchronised, those are left as they are",
                if missing.is_empty() {
                    "a member replaced and not yet rebuilt".to_string()
                } else {
                    format!("missing: {}", missing.join(", "))
                }
            )));
        }
        let mut report = ResyncReport::default();
        for &c in &cycles {
            self.resync_cycle(c, &mut report)?;
        }
        let dead = self.flush_each();
        self.fail_record_writers(dead)?;
        let dead = w.clear_all(&self.members.handles, &self.members.counters)?;
        self.fail_record_writers(dead)?;
        self.integrity.resync = Some(report);
        Ok(())
    }

    /// Resynchronises cycle `c` (see [`raidcore::resync_cycle`]); a member failing on the way
    /// is failed and the cycle done again without it.
    fn resync_cycle(&mut self, c: u64, report: &mut ResyncReport) -> Result<()> {
        for _ in 0..=self.members.handles.len() {
            let plan = plan_verify_cycle(&self.geo, &self.state, c);
            // Raw reads: a block a crash tore does not match its checksum, and is taken as
            // it is (its checksum vouched for below).
            let view = Members {
                members: &self.members.handles,
                counters: &self.members.counters,
                data_offset_bytes: self.map.data_offset_bytes,
                checksums: None,
                marked_lost_as_stored: false,
            };
            let bufs = match crate::exec::run_reads(&plan, &view) {
                Ok(b) => b,
                Err(e) => {
                    self.fail_members(&e.failed_members())?;
                    continue;
                }
            };
            if let Some(cs) = self.integrity.checksums.clone() {
                for (io, buf) in plan.reads.iter().zip(bufs.iter().skip(1)) {
                    report.blocks_revouched += cs.revouch(io.member as usize, io.offset_bytes, buf);
                }
            }
            let rs = resync_cycle(&self.geo, &self.state, &plan, &bufs);
            report.cycles += 1;
            report.stripes_rewritten += rs.rewritten.len() as u64;
            report.stripes_degraded += rs.degraded as u64;
            let mut dead: DeadMembers = Vec::new();
            for (d, off, bytes) in &rs.writes {
                let Some(m) = self.members.handles[*d as usize].clone() else {
                    continue;
                };
                if let Err(e) = m.write_at(bytes, self.map.data_offset_bytes + off) {
                    dead.push((*d as usize, e));
                    continue;
                }
                self.members.counters[*d as usize]
                    .write_bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                if let Some(cs) = &self.integrity.checksums {
                    cs.record(*d as usize, *off, bytes);
                }
            }
            if let Some(cs) = self.integrity.checksums.clone() {
                let b = crate::csum::BLOCK_BYTES;
                for io in &plan.reads {
                    let d = io.member as usize;
                    if let Err(e) = cs.write_pages(
                        d,
                        &self.members.handles,
                        io.offset_bytes / b,
                        (io.offset_bytes + io.data.len as u64) / b,
                    ) {
                        dead.push((e.member, e.source));
                    }
                }
            }
            if dead.is_empty() {
                return Ok(());
            }
            self.fail_dead_members(&dead)?;
            let tag = self.tag();
            self.persist(tag)?;
        }
        Err(PoolError::Io(format!(
            "resync of cycle {c}: members keep failing; gave up"
        )))
    }
}

//! Blocks that read wrong, and `raidforge scrub`.
//!
//! A member range *reads wrong* when part of it returns a read error (a latent sector error)
//! or, on a pool with checksums ([`crate::csum`]), a block does not match its checksum. The
//! executor reports such ranges ([`crate::exec::BadRange`]) instead of failing the member, and
//! stops the batch before any op or write uses the bytes. The pool then repairs them:
//!
//! 1. each bad 4 KiB block is located in its cycle (`raidcore::locate_member_byte`); blocks of
//!    one cycle at the same in-chunk range are repaired together;
//! 2. `raidcore::plan_repair` plans recomputing them from the rest of the cycle, treating
//!    them as unreadable: the planner's own reconstruction (the degraded-read path) picks the
//!    survivors and the codec ops;
//! 3. the repair's reads are verified too: a survivor that reads wrong joins the unreadable
//!    set and the repair is planned again, until it succeeds or the planner says the
//!    redundancy is spent;
//! 4. with checksums, a recomputed data block must match its stored checksum before it is
//!    written (the end-to-end check: a stale checksum left by a crash, or damage beyond the
//!    redundancy, is reported, never "repaired" into invented data); recomputed parity is
//!    trusted, since it derives from verified data;
//! 5. the recomputed blocks are written back in place (with their checksums).
//!
//! What cannot be repaired is *lost*: named by logical range, recorded in the pool descriptor
//! (and, during a rebuild, marked on the members by a poisoned checksum), and every read of it
//! fails with [`crate::pool::PoolError::Lost`] until the range is rewritten.
//!
//! `scrub` reads every unit of every cycle, repairs the blocks that read wrong as above, then
//! checks each stripe's parity or copies (`raidcore::check_verify`). A stripe whose units all
//! verified but disagree (a crash between the writes of a stripe, without the write journal):
//! with checksums the data is known good, so the parity is recomputed from it (mirrors: the
//! first copy is copied to the others). Without checksums nothing tells which unit is wrong:
//! scrub reports the stripe, like MD's `check` (which only counts `mismatch_cnt`), and with
//! `--rewrite-parity` recomputes parity from data, like MD's `repair` (MD's RAID6 `repair`
//! also just recomputes P and Q).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use layout::Role;
use raidcore::{
    check_verify, locate_member_byte, logical_offset, lost_with, place_loc, plan_repair,
    plan_verify_cycle, PlaceId, SpeedLimits, Throttle,
};
use serde::{Deserialize, Serialize};

use crate::csum::{BLOCK_BYTES, POISON};
use crate::exec::BadRange;
use crate::pool::{Pool, PoolError, WriteHole};

type Result<T> = std::result::Result<T, PoolError>;

/// A member range that was rewritten with repaired content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRange {
    pub member: usize,
    /// Byte offset in the member (file or device) itself, data offset included.
    pub offset: u64,
    pub length: u64,
    /// Why: "checksum" (mismatch), "read-error", "parity" (a stripe's parity or copies
    /// disagreed with its verified data and were recomputed).
    pub kind: String,
}

/// A logical range whose data is lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostRange {
    pub logical_offset: u64,
    pub length: u64,
    /// What happened.
    pub reason: String,
}

/// Bad blocks found and repaired, over the pool's life (in the descriptor and `status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairCounts {
    /// Blocks that did not match their checksum.
    pub checksum_mismatches: u64,
    /// Blocks that returned a read error (member kept).
    pub read_errors: u64,
    /// Blocks rewritten with repaired content.
    pub repaired_blocks: u64,
    /// Stripes whose parity (or copies) scrub recomputed.
    pub parity_rewrites: u64,
    /// Members failed because a block still read wrong after its repair was written.
    #[serde(default)]
    pub members_failed_by_repair: u64,
    /// Blocks whose data agreed with its whole stripe while their stored checksum did not
    /// (a torn checksum-region sector): the checksum was rewritten, not the data.
    #[serde(default)]
    pub checksum_entries_rewritten: u64,
}

/// A cycle's blocks lost together (one in-chunk range).
#[derive(Clone, Debug)]
pub(crate) struct LostGroup {
    pub cycle: u64,
    /// Every place lost (the unreadable ones and those that depended on them).
    pub places: Vec<PlaceId>,
    /// The unreadable places (on working members).
    pub unreadable: Vec<PlaceId>,
    pub ra: u64,
    pub rb: u64,
    pub ranges: Vec<LostRange>,
}

/// What a repair did.
#[derive(Debug, Default)]
pub(crate) struct RepairOutcome {
    pub repaired: Vec<MemberRange>,
    pub lost: Vec<LostGroup>,
}

/// How to scrub.
#[derive(Clone, Debug, Default)]
pub struct ScrubOpts {
    /// Upper bound on bytes read per second (None = unlimited).
    pub speed_max_bytes_per_sec: Option<u64>,
    /// Rate while clients do I/O (a served pool; ignored by an exclusive scrub).
    pub speed_min_bytes_per_sec: Option<u64>,
    /// Without checksums: recompute the parity of stripes that disagree from their data (MD's
    /// `repair`). With checksums scrub does this anyway, the data being verified.
    pub rewrite_parity: bool,
}

/// Progress of a scrub.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ScrubProgress {
    pub cycles_done: u64,
    pub cycles_total: u64,
    pub checked_bytes: u64,
    pub elapsed_s: f64,
}

/// A stripe whose parity or copies disagreed with its (readable) data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParityMismatch {
    pub cycle: u64,
    pub stripe: usize,
    /// First logical byte of the stripe's data.
    pub logical_offset: Option<u64>,
    /// Recomputed (true) or only reported (false).
    pub repaired: bool,
}

/// What `scrub` found and did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScrubReport {
    /// Whether blocks were verified against checksums (else parity only).
    pub checksums: bool,
    pub cycles_checked: u64,
    /// Member bytes read and checked.
    pub checked_bytes: u64,
    /// Member ranges rewritten with repaired content.
    pub repaired: Vec<MemberRange>,
    /// Logical ranges that could not be repaired.
    pub unrecoverable: Vec<LostRange>,
    /// Stripes whose parity or copies disagreed with verified (or, without checksums,
    /// readable) data.
    pub parity_mismatches: Vec<ParityMismatch>,
    /// Stripes not fully checkable (a member missing).
    pub stripes_degraded: u64,
    pub elapsed_s: f64,
}

impl ScrubReport {
    /// Nothing left wrong: nothing unrecoverable, every mismatch repaired.
    pub fn clean(&self) -> bool {
        self.unrecoverable.is_empty() && self.parity_mismatches.iter().all(|m| m.repaired)
    }
}

/// "a..b, c..d" for an error message.
pub fn describe_ranges(r: &[LostRange]) -> String {
    let v: Vec<String> = r
        .iter()
        .map(|l| {
            format!(
                "{}..{} ({})",
                l.logical_offset,
                l.logical_offset + l.length,
                l.reason
            )
        })
        .collect();
    v.join(", ")
}

/// Splits bad ranges into pieces that do not cross a 4 KiB block.
fn pieces(bad: &[BadRange]) -> Vec<(u32, u64, u64, bool)> {
    let mut out = Vec::new();
    for b in bad {
        let mut o = b.offset_bytes;
        let end = b.offset_bytes + b.len;
        while o < end {
            let n = (BLOCK_BYTES - o % BLOCK_BYTES).min(end - o);
            out.push((b.member, o, n, b.checksum));
            o += n;
        }
    }
    out
}

fn is_data(role: Role) -> bool {
    matches!(role, Role::Data | Role::Mirror)
}

impl Pool {
    /// Handles a failed batch: fails the members that failed (flushing deferred parity, so a
    /// second failure is survived), and repairs the blocks that read wrong. Lost data is an
    /// error naming it. The caller plans again.
    pub(crate) fn absorb(&mut self, e: crate::exec::BatchErrors) -> Result<()> {
        let failed = e.failed_members();
        if !failed.is_empty() {
            self.fail_members(&failed)?;
            self.flush_bpgl(0)?;
        }
        self.repair_bad(&e.bad)
    }

    /// Repairs blocks that read wrong (the caller holds their stripes, or the pool alone).
    /// Lost data is an error naming it.
    pub(crate) fn repair_bad(&mut self, bad: &[crate::exec::BadRange]) -> Result<()> {
        if bad.is_empty() {
            return Ok(());
        }
        let out = self.repair_ranges(bad)?;
        if !out.lost.is_empty() {
            let ranges: Vec<LostRange> = out.lost.iter().flat_map(|g| g.ranges.clone()).collect();
            self.note_lost(&ranges);
            // Recorded now: the command that hit it ends with this error.
            let _ = self.save_descriptor();
            return Err(PoolError::Lost { ranges });
        }
        Ok(())
    }

    /// Fails with [`PoolError::Lost`] when `[offset, offset + len)` overlaps a lost range.
    pub(crate) fn check_lost(&self, offset: u64, len: u64) -> Result<()> {
        let hit: Vec<LostRange> = self
            .file
            .desc
            .lost
            .iter()
            .filter(|l| l.logical_offset < offset + len && offset < l.logical_offset + l.length)
            .cloned()
            .collect();
        if hit.is_empty() {
            Ok(())
        } else {
            Err(PoolError::Lost { ranges: hit })
        }
    }

    /// Before a write of `[offset, offset + len)`: every lost range it overlaps must be
    /// covered whole, since a write cannot make part of a lost range readable again (the
    /// rest stays unknown, and reads are refused per range): a partial rewrite fails with
    /// [`PoolError::Lost`] naming the range, rather than being acknowledged and then
    /// unreadable. Returns whether the write rewrites some lost range (to clear it after).
    ///
    /// The same holds for blocks marked lost on the members (a poisoned checksum entry), which
    /// outlive the descriptor's list (a pool assembled from its members alone): the 4 KiB
    /// blocks the write covers only in part must not be marked, since their old bytes would
    /// be merged into the write (the executor takes marked blocks as stored in a write).
    pub(crate) fn check_lost_for_write(&self, offset: u64, len: u64) -> Result<bool> {
        self.check_marked_partial(offset, len)?;
        let mut rewrites = false;
        for l in &self.file.desc.lost {
            let end = l.logical_offset + l.length;
            if !(l.logical_offset < offset + len && offset < end) {
                continue;
            }
            if offset <= l.logical_offset && end <= offset + len {
                rewrites = true;
            } else {
                return Err(PoolError::Lost {
                    ranges: vec![l.clone()],
                });
            }
        }
        Ok(rewrites)
    }

    /// Fails with [`PoolError::Lost`] when a 4 KiB logical block that `[offset, offset + len)`
    /// covers only in part is marked lost on a member holding it (data or a copy).
    fn check_marked_partial(&self, offset: u64, len: u64) -> Result<()> {
        let Some(cs) = self.integrity.checksums.as_deref() else {
            return Ok(());
        };
        let end = offset + len;
        let mut partial: Vec<u64> = Vec::new();
        if !offset.is_multiple_of(BLOCK_BYTES) || len < BLOCK_BYTES {
            partial.push(offset - offset % BLOCK_BYTES);
        }
        if !end.is_multiple_of(BLOCK_BYTES) {
            partial.push(end - end % BLOCK_BYTES);
        }
        partial.dedup();
        for block in partial {
            for (disk, off) in self.member_blocks_of(block) {
                if cs.stored(disk, off) == POISON {
                    return Err(PoolError::Lost {
                        ranges: vec![LostRange {
                            logical_offset: block,
                            length: BLOCK_BYTES,
                            reason: "marked lost on the members (a rebuild could not recompute \
                                     it); a write must cover its 4 KiB whole"
                                .into(),
                        }],
                    });
                }
            }
        }
        Ok(())
    }

    /// The stripes holding a 4 KiB logical block of `[offset, offset + len)` that is marked
    /// lost on a member (data place or copy); empty on a pool without checksums. Asked of
    /// every write (under the served pool's mutex): the places are found once per chunk, and
    /// each block costs one look-up of its entry per copy.
    pub(crate) fn stripes_rewriting_marked(
        &self,
        offset: u64,
        len: u64,
    ) -> Vec<raidcore::StripeId> {
        let Some(cs) = self.integrity.checksums.as_deref() else {
            return Vec::new();
        };
        let cb = self.geo.chunk_bytes();
        let end = offset + len;
        let mut out = Vec::new();
        let mut chunk_start = offset - offset % cb;
        while chunk_start < end {
            let lo = chunk_start.max(offset - offset % BLOCK_BYTES);
            let hi = (chunk_start + cb).min(end);
            // Member byte of the chunk's start on every member holding it validly.
            let copies = self.member_blocks_of(chunk_start);
            let marked = (lo..hi).step_by(BLOCK_BYTES as usize).any(|block| {
                copies
                    .iter()
                    .any(|&(disk, at)| cs.stored(disk, at + (block - chunk_start)) == POISON)
            });
            if marked {
                let (c, index) = self.geo.locate_chunk(chunk_start / cb);
                for &(s, _) in self.geo.place_units(self.geo.data_place(index)) {
                    let id = raidcore::StripeId {
                        cycle: c,
                        stripe: s,
                    };
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
            }
            chunk_start += cb;
        }
        out
    }

    /// Whether every block that read wrong in `bad` is marked lost (a poisoned checksum
    /// entry): a read that met nothing else may run again through them
    /// ([`Pool::read_through_marked`]).
    pub(crate) fn only_marked(&self, bad: &[BadRange]) -> bool {
        let Some(cs) = &self.integrity.checksums else {
            return false;
        };
        !bad.is_empty()
            && bad.iter().all(|b| {
                let first = b.offset_bytes / BLOCK_BYTES;
                let end = (b.offset_bytes + b.len.max(1)).div_ceil(BLOCK_BYTES);
                b.checksum
                    && (first..end).all(|k| cs.stored(b.member as usize, k * BLOCK_BYTES) == POISON)
            })
    }

    /// A read of `[offset, offset + len)` whose plans met only blocks marked lost (a degraded
    /// read reconstructing a unit of a row that holds them): runs it again taking the marked
    /// blocks as stored, since their stored bytes are what the row's parity was computed with
    /// ([`Pool::repair_in_rebuild`] and reconstruct-writes keep it so), then checks every
    /// 4 KiB block of the request, reconstructed ones included, against its own checksum
    /// where its data place is. Returns the bytes when every block matches; `None` otherwise
    /// (a marked block read directly, a row whose parity disagrees): the caller then repairs
    /// and reports as before. Without this, such a read recorded the reconstructed unit lost
    /// with the marked ones although the redundancy still held it.
    pub(crate) fn read_through_marked(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        let cs = self.integrity.checksums.as_ref()?;
        let a = offset / BLOCK_BYTES * BLOCK_BYTES;
        let b = ((offset + len).div_ceil(BLOCK_BYTES) * BLOCK_BYTES).min(self.capacity_bytes());
        if b <= a || !(b - a).is_multiple_of(BLOCK_BYTES) {
            return None;
        }
        let plans = raidcore::plan_read(&self.geo, &self.state, a, b - a).ok()?;
        let mut out = vec![0u8; (b - a) as usize];
        {
            let mut users = crate::exec::read_buffers(&plans, &mut out);
            let view = crate::exec::Members {
                marked_lost_as_stored: true,
                ..self.members_view()
            };
            crate::exec::run_plans(&plans, &mut users, &view).ok()?;
        }
        let cb = self.geo.chunk_bytes();
        for (k, block) in out.chunks(BLOCK_BYTES as usize).enumerate() {
            let l = a + k as u64 * BLOCK_BYTES;
            let (c, index) = self.geo.locate_chunk(l / cb);
            let (loc, _) = place_loc(&self.geo, &self.state, c, self.geo.data_place(index));
            let at = self.geo.member_offset(c, loc, l % cb);
            if !cs.matches(loc.disk as usize, at, block) {
                return None;
            }
        }
        out.drain(..(offset - a) as usize);
        out.truncate(len as usize);
        Some(out)
    }

    /// Where the 4 KiB logical block at `block` lives on the members that hold it validly:
    /// (member, data-area byte) of its data place and of every copy of it.
    fn member_blocks_of(&self, block: u64) -> Vec<(usize, u64)> {
        let cb = self.geo.chunk_bytes();
        let (c, index) = self.geo.locate_chunk(block / cb);
        if c >= self.geo.cycles() {
            return Vec::new();
        }
        let data = self.geo.data_place(index);
        let in_chunk = block % cb;
        let mut out = Vec::new();
        for &(s, _) in self.geo.place_units(data) {
            for &p in self.geo.stripe_places(s) {
                if p != data && self.geo.role(p) != Role::Mirror {
                    continue;
                }
                let (loc, valid) = place_loc(&self.geo, &self.state, c, p);
                if !valid || self.members.handles[loc.disk as usize].is_none() {
                    continue;
                }
                let at = (loc.disk as usize, self.geo.member_offset(c, loc, in_chunk));
                if !out.contains(&at) {
                    out.push(at);
                }
            }
        }
        out
    }

    /// A write covered `[offset, offset + len)`: lost ranges inside it hold data again.
    pub(crate) fn clear_lost(&mut self, offset: u64, len: u64) {
        if !self.file.desc.lost.is_empty() {
            self.file.desc.lost.retain(|l| {
                !(offset <= l.logical_offset && l.logical_offset + l.length <= offset + len)
            });
        }
    }

    pub(crate) fn note_lost(&mut self, ranges: &[LostRange]) {
        for r in ranges {
            if !self
                .file
                .desc
                .lost
                .iter()
                .any(|l| l.logical_offset == r.logical_offset && l.length == r.length)
            {
                self.file.desc.lost.push(r.clone());
            }
        }
    }

    /// Repairs the blocks of `bad` (see the module docs).
    pub(crate) fn repair_ranges(&mut self, bad: &[BadRange]) -> Result<RepairOutcome> {
        let mut groups: BTreeMap<(u64, u64, u64), (Vec<PlaceId>, bool)> = BTreeMap::new();
        for (member, off, len, checksum) in pieces(bad) {
            let blocks = len.div_ceil(BLOCK_BYTES).max(1);
            if checksum {
                self.file.desc.repairs.checksum_mismatches += blocks;
            } else {
                self.file.desc.repairs.read_errors += blocks;
            }
            let Some((c, p, in_chunk)) =
                locate_member_byte(&self.geo, &self.state, member as layout::Disk, off)
            else {
                // Plans only read places: a bad range outside every place is a bug.
                debug_assert!(false, "bad range {member}:{off} is in no place");
                continue;
            };
            let g = groups.entry((c, in_chunk, in_chunk + len)).or_default();
            if !g.0.contains(&p) {
                g.0.push(p);
            }
            g.1 |= checksum;
        }
        let mut out = RepairOutcome::default();
        for ((c, ra, rb), (places, checksum)) in groups {
            let kind = if checksum { "checksum" } else { "read-error" };
            match self.repair_group(c, places, ra, rb, Check::Data, kind)? {
                Ok(r) => out.repaired.extend(r),
                Err(g) => out.lost.push(g),
            }
        }
        Ok(out)
    }

    /// Recomputes `places` of cycle `c` over `[ra, rb)` and writes them back, unless a
    /// recomputed block fails `check` against its stored checksum. Returns the member ranges
    /// written, or the lost group.
    fn repair_group(
        &mut self,
        c: u64,
        places: Vec<PlaceId>,
        ra: u64,
        rb: u64,
        check: Check,
        kind: &str,
    ) -> Result<std::result::Result<Vec<MemberRange>, LostGroup>> {
        let checked = check != Check::No;
        let mut stale = places;
        for _attempt in 0..32 {
            let plan = match plan_repair(&self.geo, &self.state, c, &stale, ra, rb) {
                Ok(p) => p,
                Err(e) => {
                    let why = format!("the redundancy is spent: {e}");
                    return self.give_up(c, &stale, ra, rb, &why, checked);
                }
            };
            let mut none: [u8; 0] = [];
            let prepared = {
                let users = [&mut none[..]];
                crate::exec::prepare(std::slice::from_ref(&plan), &users, &self.members_view())
            };
            let bufs = match prepared {
                Ok(mut b) => b.pop().expect("one plan"),
                Err(e) => {
                    let failed = e.failed_members();
                    if !failed.is_empty() {
                        self.fail_members(&failed)?;
                        continue;
                    }
                    let mut grew = false;
                    for (member, off, len, checksum) in pieces(&e.bad) {
                        let n = len.div_ceil(BLOCK_BYTES).max(1);
                        if checksum {
                            self.file.desc.repairs.checksum_mismatches += n;
                        } else {
                            self.file.desc.repairs.read_errors += n;
                        }
                        if let Some((cc, p, _)) =
                            locate_member_byte(&self.geo, &self.state, member as layout::Disk, off)
                        {
                            if cc == c && !stale.contains(&p) {
                                stale.push(p);
                                grew = true;
                            }
                        }
                    }
                    if !grew {
                        let why = "the blocks needed to repair it keep reading wrong";
                        return self.give_up(c, &stale, ra, rb, why, checked);
                    }
                    continue;
                }
            };
            if let (true, Some(cs)) = (checked, self.integrity.checksums.clone()) {
                for w in &plan.writes {
                    let Some((_, p, _)) =
                        locate_member_byte(&self.geo, &self.state, w.member, w.offset_bytes)
                    else {
                        continue;
                    };
                    let bytes = &bufs[w.data.buf][w.data.off..w.data.end()];
                    if (check == Check::Every || is_data(self.geo.role(p)))
                        && !cs.matches(w.member as usize, w.offset_bytes, bytes)
                    {
                        let poisoned = (0..w.data.len as u64 / BLOCK_BYTES).any(|k| {
                            cs.stored(w.member as usize, w.offset_bytes + k * BLOCK_BYTES) == POISON
                        });
                        let why = if poisoned {
                            "lost earlier (marked on the member when a rebuild could not \
                             recompute it)"
                        } else {
                            "what the redundancy gives does not match the stored checksum \
                             (damage beyond what the redundancy covers, or a crash between a \
                             block's write and its checksum's)"
                        };
                        return self.give_up(c, &stale, ra, rb, why, checked);
                    }
                }
            }
            // On a pool with a journal a repair is a logged write like any other. It rewrites
            // places in place, and a crash before those writes are durable may leave a sector
            // torn (random bytes where the redundancy's answer was going) that nothing would
            // find again; the record replays it whole when the pool opens. (Written in place
            // only, a torn repair read back wrong with nothing to say so, and so did every
            // reconstruction that used it: served fault harness, seed 0x6b081cc9.)
            let logged = match self.wh.journal.clone() {
                Some(j) => {
                    let entries: Vec<(u32, u64, &[u8])> = plan
                        .writes
                        .iter()
                        .map(|w| {
                            let b: &[u8] = &bufs[w.data.buf][w.data.off..w.data.end()];
                            (w.member, w.offset_bytes, b)
                        })
                        .collect();
                    match j.append_final(&self.members.handles, &entries) {
                        Ok(seqs) => Some((j, seqs)),
                        Err(e) => {
                            let failed = j.take_failed_members();
                            if failed.is_empty() {
                                return Err(PoolError::Io(e.to_string()));
                            }
                            self.fail_members(&failed)?;
                            continue;
                        }
                    }
                }
                None => None,
            };
            let committed = crate::exec::commit(
                std::slice::from_ref(&plan),
                std::slice::from_ref(&bufs),
                &self.members_view(),
            );
            if let Some((j, seqs)) = logged {
                for seq in seqs {
                    j.done(seq);
                }
                // A journal member that failed (the record went to the next one instead).
                let failed = j.take_failed_members();
                if !failed.is_empty() {
                    self.fail_members(&failed)?;
                    continue;
                }
            }
            if let Err(e) = committed {
                self.fail_members(&e.failed_members())?;
                continue;
            }
            // Like MD's read-error correction: read the rewritten blocks back. A block that
            // still reads wrong after its repair was written (a disk that cannot remap the
            // sector) fails its member; the caller then plans again, degraded.
            let still_bad = self.reread_repaired(&plan, &bufs);
            if !still_bad.is_empty() {
                self.fail_persistently_bad(&still_bad, c, ra, rb)?;
            }
            let written: Vec<MemberRange> = plan
                .writes
                .iter()
                .map(|w| MemberRange {
                    member: w.member as usize,
                    offset: self.map.data_offset_bytes + w.offset_bytes,
                    length: w.data.len as u64,
                    kind: kind.to_string(),
                })
                .collect();
            self.file.desc.repairs.repaired_blocks += written
                .iter()
                .map(|r| r.length.div_ceil(BLOCK_BYTES))
                .sum::<u64>();
            return Ok(Ok(written));
        }
        Err(PoolError::Io(format!(
            "repairing cycle {c} bytes {ra}..{rb} of its chunks: members keep failing"
        )))
    }

    /// The redundancy could not recompute `stale`: they are lost.
    fn give_up(
        &mut self,
        c: u64,
        stale: &[PlaceId],
        ra: u64,
        rb: u64,
        why: &str,
        _checked: bool,
    ) -> Result<std::result::Result<Vec<MemberRange>, LostGroup>> {
        Ok(Err(self.lost_group(c, stale, ra, rb, why)))
    }

    /// After a journal replay: the checksum-region pages (`(member, page)`, 504 blocks each)
    /// that replayed records touched were being written when the pool stopped, so a crash may
    /// have torn their sectors (each holds 63 blocks' entries, most of blocks the crash
    /// never wrote). Blocks of those pages that fail their checksums are vouched for by their
    /// cycle ([`Pool::checksums_wrong_only`]); what no complete cycle vouches for is left to
    /// the usual repair (and reported lost if it cannot be repaired). Like MD resyncing only
    /// the regions its bitmap marks dirty after an unclean shutdown. Returns the blocks whose
    /// checksums were rewritten.
    pub(crate) fn vouch_torn_checksum_pages(
        &mut self,
        pages: &BTreeSet<(u32, u64)>,
    ) -> Result<u64> {
        let Some(cs) = self.integrity.checksums.clone() else {
            return Ok(0);
        };
        let per_page = crate::csum::ENTRIES_PER_PAGE;
        let blocks = self.geo.member_bytes_used() / BLOCK_BYTES;
        let mut cycles: BTreeSet<u64> = BTreeSet::new();
        for &(member, page) in pages {
            let Some(m) = self.members.handles[member as usize].clone() else {
                continue;
            };
            let first = page * per_page;
            let end = ((page + 1) * per_page).min(blocks);
            if first >= end {
                continue;
            }
            let mut buf = vec![0u8; ((end - first) * BLOCK_BYTES) as usize];
            if m.read_at(&mut buf, self.map.data_offset_bytes + first * BLOCK_BYTES)
                .is_err()
            {
                continue; // read errors are for the usual repair
            }
            for mm in cs.verify(member as usize, first * BLOCK_BYTES, &buf) {
                if let Some((c, _, _)) =
                    locate_member_byte(&self.geo, &self.state, member, mm.offset_bytes)
                {
                    cycles.insert(c);
                }
            }
        }
        let mut fixed = 0;
        for c in cycles {
            if let Some(r) = self.checksums_wrong_only(c, pages)? {
                fixed += r.len() as u64;
            }
        }
        Ok(fixed)
    }

    /// Blocks of cycle `c` that do not match their checksums, in `suspect` checksum pages (a
    /// crash may have torn them), in a cycle every unit of which is present and reads without
    /// error. Per stripe:
    /// - a stripe that agrees with its parity or copies: its data is what the redundancy says
    ///   it is, so the stored checksums are what is wrong; they are rewritten from the data;
    /// - a stripe that disagrees (a unit damaged at rest besides the torn checksums): per
    ///   4 KiB row, when the row's blocks that do not match are no more than the layout
    ///   tolerates and every other block of the row matches its checksum, those blocks are
    ///   recomputed from the others (which their checksums vouch for) and written with new
    ///   checksums. (Served fault harness, seed 0x6b07f806: a power loss tore both copies of a
    ///   checksum sector of a member whose block a bit flip had damaged; the flip's stripe
    ///   disagreed, so the whole cycle was left unvouched and the good blocks under the torn
    ///   entries were reported lost.)
    ///
    /// A stripe or row holding a block marked lost, or a mismatch outside the suspect pages,
    /// is left to the usual repair. Only for pages a crash may have torn: at rest, damage that
    /// leaves a stripe consistent (the same bits flipped in a data unit and its parity) must
    /// be reported, not blessed. Returns the blocks whose checksums were rewritten, or `None`
    /// when the cycle does not qualify.
    fn checksums_wrong_only(
        &mut self,
        c: u64,
        suspect: &BTreeSet<(u32, u64)>,
    ) -> Result<Option<Vec<MemberRange>>> {
        let Some(cs) = self.integrity.checksums.clone() else {
            return Ok(None);
        };
        // A stripe on the deferred-parity list has a stale background parity by design, so
        // the check below finds it inconsistent (unless the stale parity happens to agree):
        // its blocks then take the per-row path, where `plan_repair` reconstructs from the
        // foreground parity alone (the views leave a listed stripe's background parity out).
        // Leaving listed cycles unvouched left a torn entry's good block with one parity
        // short: a member failure then lost it (served fault harness, seed 0x6b08ba9d: RAID6
        // with lazy parity, a power loss tore every copy of a checksum sector, then a member
        // fail-stop; within the tolerance, yet data lost).
        let plan = plan_verify_cycle(&self.geo, &self.state, c);
        let (bufs, bad) = match crate::exec::run_reads_flagged(&plan, &self.members_view()) {
            Ok(x) => x,
            Err(_) => return Ok(None),
        };
        if bad.is_empty() || bad.iter().any(|b| !b.checksum) {
            return Ok(None);
        }
        let outcome = check_verify(&self.state, &plan, &bufs);
        // A cycle short of a member cannot vouch from its stripes; with the write journal some
        // of its entries still can be (below).
        let degraded = outcome.degraded > 0;
        if degraded && self.wh.mode != WriteHole::Journal {
            return Ok(None);
        }
        let per_page = crate::csum::ENTRIES_PER_PAGE;
        let stripes = &self.state.layout_of(c).stripes;
        // Each mismatching block: (stripe, place, block-aligned byte of its chunk, member,
        // member byte, whether a crash may have torn its entry, whether it is marked lost).
        type Blk = (usize, PlaceId, u64, u32, u64, bool, bool);
        let mut blocks: Vec<Blk> = Vec::new();
        for b in &bad {
            for k in 0..b.len.div_ceil(BLOCK_BYTES) {
                let off = b.offset_bytes + k * BLOCK_BYTES;
                let Some((cc, p, in_chunk)) =
                    locate_member_byte(&self.geo, &self.state, b.member, off)
                else {
                    return Ok(None);
                };
                let loc = place_loc(&self.geo, &self.state, cc, p).0;
                let Some(si) = stripes
                    .iter()
                    .position(|s| s.units.iter().any(|u| u.loc() == loc))
                else {
                    return Ok(None);
                };
                let poison = cs.stored(b.member as usize, off) == POISON;
                let torn = cc == c
                    && !poison
                    && suspect.contains(&(b.member, off / BLOCK_BYTES / per_page));
                blocks.push((si, p, in_chunk, b.member, off, torn, poison));
            }
        }
        // The block the cycle's read holds at member `member`'s byte `off`.
        let data_at = |member: u32, off: u64| -> Option<Vec<u8>> {
            let io = plan.reads.iter().find(|io| {
                io.member == member
                    && io.offset_bytes <= off
                    && off + BLOCK_BYTES <= io.offset_bytes + io.data.len as u64
            })?;
            let at = io.data.off + (off - io.offset_bytes) as usize;
            Some(bufs[io.data.buf][at..at + BLOCK_BYTES as usize].to_vec())
        };
        let data_offset = self.map.data_offset_bytes;
        let entry_range = |member: u32, off: u64| MemberRange {
            member: member as usize,
            offset: data_offset + off,
            length: BLOCK_BYTES,
            kind: "checksum-entry".into(),
        };
        let tolerance = self.geo.scheme().tolerance();
        let mut fixed = Vec::new();
        let mut rewritten: Vec<(u32, u64)> = Vec::new();
        let stripe_ids: BTreeSet<usize> = if degraded {
            // The replay has rewritten every block a write had in flight, with its checksum,
            // so a block that still fails an entry the crash tore in every copy (unsealed at
            // load) was not being written: it holds what it held before the crash, and its
            // entry is rewritten from it. A mismatch against an entry that was sealed is
            // damage, left to the usual repair, as everything is without the journal (a block
            // may then have been torn mid-write). (Served fault harness, seed 0x6b0a9e54:
            // RAID50 with member 3 failed, a power loss tore both copies of member 4's checksum
            // sectors; every cycle was degraded, none vouched for, and dozens of member 4's
            // blocks were reported lost.)
            for &(_, _, _, member, off, torn, _) in &blocks {
                if !torn || !cs.unsealed_at_load(member, off / BLOCK_BYTES) {
                    continue;
                }
                let Some(bytes) = data_at(member, off) else {
                    continue;
                };
                cs.record(member as usize, off, &bytes);
                rewritten.push((member, off));
            }
            BTreeSet::new()
        } else {
            blocks.iter().map(|x| x.0).collect()
        };
        for si in stripe_ids {
            let mine: Vec<Blk> = blocks.iter().filter(|x| x.0 == si).copied().collect();
            if !outcome.inconsistent.contains(&si) {
                if mine.iter().any(|x| !x.5) {
                    continue;
                }
                for &(_, _, _, member, off, _, _) in &mine {
                    let Some(bytes) = data_at(member, off) else {
                        return Ok(None);
                    };
                    cs.record(member as usize, off, &bytes);
                    rewritten.push((member, off));
                }
                continue;
            }
            let rows: BTreeSet<u64> = mine.iter().map(|x| x.2).collect();
            for row in rows {
                let in_row: Vec<Blk> = mine.iter().filter(|x| x.2 == row).copied().collect();
                if in_row.iter().any(|x| x.6) {
                    continue;
                }
                let (torn, known): (Vec<Blk>, Vec<Blk>) = in_row.into_iter().partition(|x| x.5);
                if known.is_empty() && torn.len() <= tolerance {
                    // Only torn entries: the row's other blocks (matching their checksums)
                    // say what these hold.
                    let places: Vec<PlaceId> = torn.iter().map(|x| x.1).collect();
                    if let Ok(written) =
                        self.repair_group(c, places, row, row + BLOCK_BYTES, Check::No, "checksum")?
                    {
                        self.file.desc.repairs.checksum_entries_rewritten += written.len() as u64;
                        fixed.extend(written);
                    }
                    continue;
                }
                // Some blocks are recomputed: every block whose checksum is known and does not
                // match (damaged at rest), and when the row's mismatches are more than the
                // redundancy covers, some torn ones too (a block damaged at rest whose entry
                // sits in a page the replay touched counts as torn: served fault harness, seed
                // 0x6b08cb68, a misdirected write beside a checksum sector a power loss tore
                // in every copy). The other torn entries are taken at their blocks' word for
                // a moment; recomputed blocks that all match their own stored checksums
                // vouch for every block that went into them (an error in one would have
                // carried into them). The first choice that checks out is written; otherwise
                // the entries go back to unknown.
                if known.len() > tolerance {
                    continue;
                }
                for extra in torn_choices(torn.len(), tolerance - known.len()) {
                    if known.is_empty() && extra.is_empty() {
                        continue;
                    }
                    let mut saved = Vec::new();
                    let mut whole = true;
                    for (i, &(_, _, _, member, off, _, _)) in torn.iter().enumerate() {
                        if extra.contains(&i) {
                            continue;
                        }
                        let Some(bytes) = data_at(member, off) else {
                            whole = false;
                            break;
                        };
                        saved.push((member, off, cs.entry(member as usize, off)));
                        cs.record(member as usize, off, &bytes);
                    }
                    let places: Vec<PlaceId> = known
                        .iter()
                        .map(|x| x.1)
                        .chain(extra.iter().map(|&i| torn[i].1))
                        .collect();
                    let outcome = if whole {
                        self.repair_group(
                            c,
                            places,
                            row,
                            row + BLOCK_BYTES,
                            Check::Every,
                            "checksum",
                        )?
                        .ok()
                    } else {
                        None
                    };
                    match outcome {
                        Some(written) => {
                            fixed.extend(written);
                            rewritten.extend(saved.iter().map(|&(m, o, _)| (m, o)));
                            break;
                        }
                        None => {
                            for (member, off, e) in saved {
                                cs.restore_entry(member as usize, off, e);
                            }
                        }
                    }
                }
            }
        }
        for (member, off) in rewritten {
            if self.members.handles[member as usize].is_none() {
                return Ok(None);
            }
            if let Err(e) = cs.write_pages(
                member as usize,
                &self.members.handles,
                off / BLOCK_BYTES,
                off / BLOCK_BYTES + 1,
            ) {
                self.fail_members(&[e.member as u32])?;
                return Ok(None);
            }
            self.file.desc.repairs.checksum_entries_rewritten += 1;
            fixed.push(entry_range(member, off));
        }
        Ok(Some(fixed))
    }

    /// Reads back what a repair plan just wrote; returns the members whose blocks still read
    /// wrong (a read error, a checksum mismatch, or other bytes than were written).
    fn reread_repaired(&self, plan: &raidcore::Plan, bufs: &[Vec<u8>]) -> Vec<u32> {
        let mut bad: Vec<u32> = Vec::new();
        for w in &plan.writes {
            let Some(m) = self.members.handles[w.member as usize].as_ref() else {
                continue;
            };
            let want = &bufs[w.data.buf][w.data.off..w.data.end()];
            let mut got = vec![0u8; want.len()];
            let ok = m
                .read_at(&mut got, self.map.data_offset_bytes + w.offset_bytes)
                .is_ok()
                && got == want
                && self
                    .integrity
                    .checksums
                    .as_ref()
                    .is_none_or(|cs| cs.matches(w.member as usize, w.offset_bytes, &got));
            if !ok && !bad.contains(&w.member) {
                bad.push(w.member);
            }
        }
        bad
    }

    /// Members whose blocks still read wrong after their repair was written: failed (MD kicks
    /// such a member out), unless that would fail more members than the layout survives, in
    /// which case the blocks are left as they are and the command fails naming the member.
    fn fail_persistently_bad(&mut self, members: &[u32], c: u64, ra: u64, rb: u64) -> Result<()> {
        let tolerance = self.geo.scheme().tolerance();
        let failed = self.state.failed().len();
        if failed + members.len() > tolerance {
            return Err(PoolError::Io(format!(
                "member(s) {members:?}: blocks of cycle {c} (bytes {ra}..{rb} of its chunks) \
                 still read wrong after being repaired, and failing them would exceed the \
                 {tolerance} failure(s) the layout survives: replace the failed members first"
            )));
        }
        self.file.desc.repairs.members_failed_by_repair += members.len() as u64;
        self.fail_members(members)
    }

    fn lost_group(&self, c: u64, stale: &[PlaceId], ra: u64, rb: u64, why: &str) -> LostGroup {
        let places = lost_with(&self.geo, &self.state, c, stale);
        let mut ranges: Vec<LostRange> = Vec::new();
        for &p in &places {
            if let Some(lo) = logical_offset(&self.geo, c, p, ra) {
                if !ranges.iter().any(|r| r.logical_offset == lo) {
                    ranges.push(LostRange {
                        logical_offset: lo,
                        length: rb - ra,
                        reason: why.to_string(),
                    });
                }
            }
        }
        ranges.sort_by_key(|r| r.logical_offset);
        LostGroup {
            cycle: c,
            places,
            unreadable: stale.to_vec(),
            ra,
            rb,
            ranges,
        }
    }

    /// During a rebuild: repairs what can be, and for what cannot, records the loss, makes the
    /// blocks that read wrong read again (those the medium still returns keep their bytes
    /// under a checksum that matches them; zeros go over those it cannot return, since a
    /// rewrite lets a disk remap a bad sector and the content is lost either way) so that the
    /// rebuild can go on, and remembers the blocks to mark once the rebuild is over.
    pub(crate) fn repair_in_rebuild(&mut self, bad: &[BadRange]) -> Result<()> {
        let out = self.repair_ranges(bad)?;
        if !out.lost.is_empty() {
            for g in &out.lost {
                self.note_lost(&g.ranges);
            }
            // The loss is recorded durably before anything is written over the unreadable
            // blocks: the zeros below read back as good data (a remapped sector), and the
            // rebuild then reconstructs the lost units from them, both with checksums that
            // match. Were the process to die before the rebuild's end marks them (or the
            // next superblock update saves the descriptor), the lost ranges would come back
            // readable as wrong data (found by the served fault harness, seed 0x6b07695d: a
            // power loss during a rebuild that had met a latent error on another member).
            self.save_descriptor()?;
        }
        for g in out.lost {
            for &p in &g.unreadable {
                let (loc, valid) = place_loc(&self.geo, &self.state, g.cycle, p);
                let Some(m) = self.members.handles[loc.disk as usize].clone() else {
                    continue;
                };
                if !valid {
                    continue;
                }
                let off = self.geo.member_offset(g.cycle, loc, g.ra);
                let at = self.map.data_offset_bytes + off;
                // A block the medium still returns keeps its bytes: only its checksum entry is
                // made to match them. Such a block read wrong by its checksum: damaged at rest,
                // or marked lost by an earlier rebuild, whose bytes are then exactly what the
                // stripe's parity was computed with. Zeros written over it would change the
                // stripe under its parity, and the rebuild would reconstruct the *other* units
                // of the stripe (data the redundancy still held, perhaps rewritten by the user
                // since the loss) wrong, with matching checksums (served fault harness, seed
                // 0x6b0922a7: a user rewrote a lost range; a later rebuild zeroed a marked
                // block of its stripe and rebuilt the rewritten unit from the zeros). Only a
                // block that cannot be read gets zeros, whose write lets the disk remap it.
                let mut bytes = vec![0u8; (g.rb - g.ra) as usize];
                let readable = m.read_at(&mut bytes, at).is_ok();
                if !readable {
                    bytes.fill(0);
                }
                let r = (if readable {
                    Ok(())
                } else {
                    m.write_at(&bytes, at)
                })
                .and_then(|_| {
                    if let Some(cs) = &self.integrity.checksums {
                        cs.record(loc.disk as usize, off, &bytes);
                        cs.write_pages(
                            loc.disk as usize,
                            &self.members.handles,
                            off / BLOCK_BYTES,
                            (off + bytes.len() as u64) / BLOCK_BYTES,
                        )?;
                    }
                    Ok(())
                });
                if r.is_err() {
                    self.fail_members(&[loc.disk])?;
                    continue;
                }
                if readable {
                    continue;
                }
                // The rewrite must have cleared the read error (a remapped sector); if the
                // block still cannot be read, the rebuild cannot go past it: stop and say so
                // (failing the member would lose every other unit it still holds).
                let mut back = vec![0u8; bytes.len()];
                if m.read_at(&mut back, at).is_err() {
                    self.integrity.lost_pending.push(g.clone());
                    self.poison_pending()?;
                    return Err(PoolError::Io(format!(
                        "rebuild stopped: member {} bytes {}..{} cannot be read even after \
                         being rewritten, and no redundancy is left to rebuild past them (data \
                         lost at logical bytes {}); the progress so far is recorded: replace \
                         member {} too",
                        loc.disk,
                        self.map.data_offset_bytes + off,
                        at + bytes.len() as u64,
                        describe_ranges(&g.ranges),
                        loc.disk
                    )));
                }
            }
            self.integrity.lost_pending.push(g);
        }
        Ok(())
    }

    /// Marks the blocks lost during the rebuild on the members (a poisoned checksum), so that
    /// reads of them fail even without the descriptor's list.
    pub(crate) fn poison_pending(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.integrity.lost_pending);
        let Some(cs) = self.integrity.checksums.clone() else {
            return Ok(());
        };
        for g in pending {
            for &p in &g.places {
                if !is_data(self.geo.role(p)) {
                    continue;
                }
                let (loc, valid) = place_loc(&self.geo, &self.state, g.cycle, p);
                if self.members.handles[loc.disk as usize].is_none() || !valid {
                    continue;
                }
                let off = self.geo.member_offset(g.cycle, loc, g.ra);
                let mut k = 0;
                while k < g.rb - g.ra {
                    // A block the user rewrote whole since the loss was found holds their
                    // data again (its range is no longer listed lost): marking it would lose
                    // an acknowledged write.
                    let still_lost = logical_offset(&self.geo, g.cycle, p, g.ra + k)
                        .is_none_or(|lo| self.still_lost_to_mark(lo));
                    if still_lost {
                        cs.poison(loc.disk as usize, &self.members.handles, off + k)
                            .map_err(|e| PoolError::Io(format!("marking lost blocks: {e}")))?;
                    }
                    k += BLOCK_BYTES;
                }
            }
        }
        Ok(())
    }

    /// Whether the 4 KiB logical block at `lo` may be marked lost: still listed, and not
    /// being rewritten by a served write (see `Integrity::rewriting_lost`).
    fn still_lost_to_mark(&self, lo: u64) -> bool {
        self.check_lost(lo, BLOCK_BYTES).is_err()
            && !self
                .integrity
                .rewriting_lost
                .iter()
                .any(|&(o, n)| o < lo + BLOCK_BYTES && lo < o + n)
    }

    /// After the rebuild of a replaced member: its blocks that were marked lost before the
    /// replacement, and whose ranges are still listed lost, are marked again. The rebuild
    /// wrote them back with the bytes their rows give (the stored ones, not the lost data)
    /// under checksums of their own, so without this a descriptor rebuilt from the members
    /// alone would read them as data. The rule of [`Pool::poison_pending`]: a block the user
    /// rewrote whole since (no longer listed) holds their data and stays as it is.
    pub(crate) fn mark_again_after_reset(&mut self) -> Result<()> {
        let Some(cs) = self.integrity.checksums.clone() else {
            return Ok(());
        };
        for i in 0..self.members.handles.len() {
            if self.members.handles[i].is_none() {
                continue;
            }
            for off in cs.marked_before_reset(i) {
                let Some((c, p, in_chunk)) =
                    locate_member_byte(&self.geo, &self.state, i as layout::Disk, off)
                else {
                    continue;
                };
                if !is_data(self.geo.role(p)) || cs.stored(i, off) == POISON {
                    continue;
                }
                let still_lost = logical_offset(&self.geo, c, p, in_chunk)
                    .is_none_or(|lo| self.still_lost_to_mark(lo));
                if still_lost {
                    cs.poison(i, &self.members.handles, off)
                        .map_err(|e| PoolError::Io(format!("marking lost blocks: {e}")))?;
                }
            }
        }
        Ok(())
    }

    /// Reads every unit of every cycle, verifies checksums (when the pool has them) and parity,
    /// repairs what it can and reports everything (see the module docs). `progress` is called
    /// after every cycle.
    pub fn scrub(
        &mut self,
        opts: &ScrubOpts,
        mut progress: impl FnMut(ScrubProgress),
    ) -> Result<ScrubReport> {
        // A listed stripe's background parity is stale by design, not damaged.
        self.flush_bpgl(0)?;
        let start = Instant::now();
        let mut throttle = Throttle::new(SpeedLimits {
            min_bytes_per_sec: opts.speed_min_bytes_per_sec.unwrap_or(0),
            max_bytes_per_sec: opts.speed_max_bytes_per_sec.unwrap_or(0),
        });
        let mut r = ScrubReport {
            checksums: self.integrity.checksums.is_some(),
            ..ScrubReport::default()
        };
        let total = self.geo.cycles();
        for c in 0..total {
            self.scrub_cycle(c, opts, &mut r)?;
            r.cycles_checked += 1;
            progress(ScrubProgress {
                cycles_done: c + 1,
                cycles_total: total,
                checked_bytes: r.checked_bytes,
                elapsed_s: start.elapsed().as_secs_f64(),
            });
            if opts.speed_max_bytes_per_sec.is_some() {
                let now = start.elapsed().as_nanos() as u64;
                let wait = throttle.delay_ns(now, false, r.checked_bytes);
                if wait > 0 {
                    std::thread::sleep(Duration::from_nanos(wait));
                }
            }
        }
        r.elapsed_s = start.elapsed().as_secs_f64();
        let tag = self.tag();
        self.persist(tag)?;
        Ok(r)
    }

    pub(crate) fn scrub_cycle(
        &mut self,
        c: u64,
        opts: &ScrubOpts,
        r: &mut ScrubReport,
    ) -> Result<()> {
        // Blocks of this cycle found lost: not repaired again, their stripes not re-checked.
        let mut lost: BTreeSet<(u32, u64)> = BTreeSet::new();
        // A part of the cycle at a time (`crate::pool::VERIFY_PART_BYTES`), so that a wide
        // layout's cycle is not held whole; the parts are planned again after each repair
        // (a failure may change the layout the cycle is in).
        let mut next_stripe = 0usize;
        while next_stripe < self.state.layout_of(c).stripes.len() {
            next_stripe = self.scrub_part(c, next_stripe, opts, r, &mut lost)?;
        }
        Ok(())
    }

    /// Scrubs the part of cycle `c` that starts at stripe `from` ([`raidcore::verify_parts`]);
    /// returns the stripe after it.
    fn scrub_part(
        &mut self,
        c: u64,
        from: usize,
        opts: &ScrubOpts,
        r: &mut ScrubReport,
        lost: &mut BTreeSet<(u32, u64)>,
    ) -> Result<usize> {
        for _attempt in 0..8 {
            let part =
                raidcore::verify_parts(&self.geo, &self.state, c, crate::pool::VERIFY_PART_BYTES)
                    .into_iter()
                    .find(|p| p.contains(&from));
            let Some(part) = part.map(|p| from..p.end) else {
                return Ok(usize::MAX);
            };
            let plan = raidcore::plan_verify_stripes(&self.geo, &self.state, c, part.clone());
            let (bufs, bad) = match crate::exec::run_reads_flagged(&plan, &self.members_view()) {
                Ok(x) => x,
                Err(e) => {
                    self.fail_members(&e.failed_members())?;
                    continue;
                }
            };
            let fresh: Vec<BadRange> = bad
                .iter()
                .copied()
                .filter(|b| !lost.contains(&(b.member, b.offset_bytes / BLOCK_BYTES)))
                .collect();
            if !fresh.is_empty() {
                let out = self.repair_ranges(&fresh)?;
                r.repaired.extend(out.repaired);
                for g in out.lost {
                    for &p in &g.unreadable {
                        let (loc, _) = place_loc(&self.geo, &self.state, c, p);
                        let off = self.geo.member_offset(c, loc, g.ra);
                        let mut b = off;
                        while b < off + (g.rb - g.ra) {
                            lost.insert((loc.disk, b / BLOCK_BYTES));
                            b += BLOCK_BYTES;
                        }
                    }
                    self.note_lost(&g.ranges);
                    for l in g.ranges {
                        if !r.unrecoverable.contains(&l) {
                            r.unrecoverable.push(l);
                        }
                    }
                }
                // Read the cycle again: the parity check needs the repaired bytes.
                continue;
            }
            r.checked_bytes += plan.reads.iter().map(|io| io.data.len as u64).sum::<u64>();
            let outcome = raidcore::check_verify_stripes(&self.state, &plan, &bufs, part.clone());
            r.stripes_degraded += outcome.degraded as u64;
            for s in outcome.inconsistent {
                if self.stripe_touches(c, s, &lost) {
                    continue; // already reported unrecoverable
                }
                let repair = self.integrity.checksums.is_some() || opts.rewrite_parity;
                let repaired = if repair {
                    self.rewrite_parity(c, s, r)?
                } else {
                    false
                };
                r.parity_mismatches.push(ParityMismatch {
                    cycle: c,
                    stripe: s,
                    logical_offset: self.stripe_logical(c, s),
                    repaired,
                });
            }
            return Ok(part.end);
        }
        Err(PoolError::Io(format!(
            "scrub: cycle {c} keeps reading wrong after repairs (a member failing?)"
        )))
    }

    fn stripe_touches(&self, c: u64, s: usize, lost: &BTreeSet<(u32, u64)>) -> bool {
        let cb = self.geo.chunk_bytes();
        self.geo.stripe_places(s).iter().any(|&p| {
            let (loc, _) = place_loc(&self.geo, &self.state, c, p);
            let off = self.geo.member_offset(c, loc, 0);
            lost.range((loc.disk, off / BLOCK_BYTES)..(loc.disk, (off + cb) / BLOCK_BYTES))
                .next()
                .is_some()
        })
    }

    fn stripe_logical(&self, c: u64, s: usize) -> Option<u64> {
        self.geo
            .stripe_places(s)
            .iter()
            .filter_map(|&p| logical_offset(&self.geo, c, p, 0))
            .min()
    }

    /// Recomputes stripe `s`'s parity from its data (mirrors: the first readable copy to the
    /// others). Returns whether it was rewritten.
    fn rewrite_parity(&mut self, c: u64, s: usize, r: &mut ScrubReport) -> Result<bool> {
        let places = self.geo.stripe_places(s).to_vec();
        let targets: Vec<PlaceId> = if places.iter().any(|&p| self.geo.role(p) == Role::Mirror) {
            let readable: Vec<PlaceId> = places
                .iter()
                .copied()
                .filter(|&p| place_loc(&self.geo, &self.state, c, p).1)
                .collect();
            readable.into_iter().skip(1).collect()
        } else {
            places
                .iter()
                .copied()
                .filter(|&p| matches!(self.geo.role(p), Role::P | Role::Q))
                .collect()
        };
        if targets.is_empty() {
            return Ok(false);
        }
        let cb = self.geo.chunk_bytes();
        match self.repair_group(c, targets, 0, cb, Check::No, "parity")? {
            Ok(written) => {
                self.file.desc.repairs.parity_rewrites += 1;
                r.repaired.extend(written);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }
}

/// What [`Pool::repair_group`] checks recomputed blocks against before writing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Nothing: the sources' checksums vouch for the result.
    No,
    /// Recomputed data blocks must match their stored checksums (a parity's may be stale by
    /// design: lazy parity's background parity).
    Data,
    /// Every recomputed block, parity too, must match its stored checksum: the match is the
    /// evidence that the blocks it was computed from are right.
    Every,
}

/// The subsets of `0..n` with at most `k` elements, smallest first (the empty one first), at
/// most 64 of them: which torn entries of a row to recompute besides its damaged blocks.
fn torn_choices(n: usize, k: usize) -> Vec<Vec<usize>> {
    const MAX: usize = 64;
    let mut out: Vec<Vec<usize>> = vec![Vec::new()];
    let mut layer: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..k.min(n) {
        let mut next = Vec::new();
        for set in &layer {
            let from = set.last().map_or(0, |&l| l + 1);
            for i in from..n {
                let mut s = set.clone();
                s.push(i);
                next.push(s);
            }
        }
        out.extend(next.iter().cloned());
        if out.len() >= MAX {
            out.truncate(MAX);
            break;
        }
        layer = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::torn_choices;
    use super::*;

    /// A block marked lost before its member was reset (replaced), still listed lost, is
    /// marked again after the rebuild; not while a served write that rewrites its range is
    /// under way (`Integrity::rewriting_lost`): that write clears the list after releasing
    /// its stripes, and a mark made in between would fall on its acknowledged data.
    #[test]
    fn marking_again_skips_ranges_a_served_write_is_rewriting() {
        for rewriting in [false, true] {
            let dir = std::env::temp_dir().join(format!(
                "raidforge-remark-{rewriting}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let opts = crate::pool::CreateOpts {
                checksums: true,
                ..crate::pool::test_opts(layout::SchemeKind::Raid5, &dir, 4, 4 << 20)
            };
            let mut pool = Pool::create(&dir.join("p.json"), opts).unwrap();
            let data = vec![0x42u8; 1 << 20];
            pool.write(0, &data).unwrap();
            // The first data block of chunk 5, listed lost and marked on its member.
            let lo = 5 * pool.geo.chunk_bytes();
            let (c, index) = pool.geo.locate_chunk(lo / pool.geo.chunk_bytes());
            let (loc, _) = place_loc(&pool.geo, &pool.state, c, pool.geo.data_place(index));
            let (i, off) = (loc.disk as usize, pool.geo.member_offset(c, loc, 0));
            let cs = pool.integrity.checksums.clone().unwrap();
            pool.note_lost(&[LostRange {
                logical_offset: lo,
                length: BLOCK_BYTES,
                reason: "test".into(),
            }]);
            cs.poison(i, &pool.members.handles, off).unwrap();
            // The member is replaced: its entries start over, the old ones are kept.
            cs.reset_zeroed(i, &pool.members.handles).unwrap();
            assert_ne!(cs.stored(i, off), POISON);
            if rewriting {
                pool.integrity.rewriting_lost.push((lo, BLOCK_BYTES));
            }
            pool.mark_again_after_reset().unwrap();
            let marked = cs.stored(i, off) == POISON;
            assert_eq!(
                marked, !rewriting,
                "a served write rewriting the range: {rewriting}; marked again: {marked}"
            );
            drop(pool);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn torn_choices_are_every_small_subset_smallest_first() {
        assert_eq!(torn_choices(3, 0), vec![Vec::<usize>::new()]);
        assert_eq!(torn_choices(3, 1), vec![vec![], vec![0], vec![1], vec![2]]);
        let two = torn_choices(4, 2);
        assert_eq!(two.len(), 1 + 4 + 6);
        assert!(two.windows(2).all(|w| w[0].len() <= w[1].len()));
        let mut seen = two.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), two.len(), "no subset twice");
        assert!(two.iter().all(|s| s.windows(2).all(|w| w[0] < w[1])));
        assert_eq!(torn_choices(2, 5).len(), 4, "no more than n elements");
        assert_eq!(torn_choices(63, 2).len(), 64, "bounded");
    }
}

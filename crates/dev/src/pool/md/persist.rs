//! MD's superblock updates: the pool's state recorded as MD keeps it.

use super::geometry::valid_rows;
use super::*;

use crate::pool::create::now_unix;
use raidcore::md::{
    FEATURE_RECOVERY_OFFSET, MD_SB_BLOCK_BYTES, RESYNC_CLEAN, ROLE_FAULTY, ROLE_SPARE,
};

impl Pool {
    /// Before a write: the superblocks say dirty first (MD's rule), once until the pool is
    /// closed.
    pub(crate) fn md_before_write(&mut self) -> Result<()> {
        if self.md.as_ref().is_some_and(|m| !m.dirty) {
            self.persist(ArrayStateTag::Active)?;
        }
        Ok(())
    }

    /// The pool is closing: every write is over (flushed by the persist that follows).
    pub(crate) fn md_mark_clean(&mut self) {
        if let Some(m) = self.md.as_mut() {
            m.dirty = false;
        }
    }

    /// `persist` for an MD-format pool: flush, one superblock per present member (and spare)
    /// with the events bumped, roles, clean/dirty and recovery offsets as MD keeps them,
    /// flush, the descriptor.
    pub(in crate::pool) fn persist_md(&mut self, tag: ArrayStateTag) -> Result<()> {
        if tag == ArrayStateTag::Active {
            if let Some(m) = self.md.as_mut() {
                m.dirty = true;
            }
        }
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        let n = self.members.handles.len();
        let recovery: Vec<Option<u64>> = {
            let md = self.md.as_ref().expect("an MD pool");
            (0..n)
                .map(|s| valid_rows(&self.geo, &self.state, s as Disk, md))
                .collect()
        };
        let present: Vec<bool> = self.members.handles.iter().map(Option::is_some).collect();
        let md = self.md.as_mut().expect("an MD pool");
        md.next_update(&present);
        let writes = md.superblocks(&recovery);
        let mut dead: Vec<(usize, std::io::Error)> = Vec::new();
        for (s, raw, sb) in &writes {
            let mut b = sb.encode().map_err(|e| PoolError::Io(e.to_string()))?;
            b.resize(MD_SB_BLOCK_BYTES, 0);
            let r = raw
                .write_at(&b, sb.super_offset * 512)
                .and_then(|_| raw.flush());
            match r {
                Err(e) if *s != usize::MAX => dead.push((*s, e)),
                // A spare that cannot take its superblock is only a spare less.
                _ => {}
            }
        }
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            return self.persist(self.tag_after_failure(tag));
        }
        self.sb.generation = self.md.as_ref().map_or(0, |m| m.array.events);
        self.sb.rebuilt_unrecorded.clear();
        self.sb.moved_unrecorded = false;
        self.save_descriptor()
    }
}

impl MdFormat {
    /// The array-wide fields of the next superblock update: events bumped, the time, clean
    /// or dirty, and the roles (slots whose member is `present` hold their role, the others
    /// are faulty and their superblocks are not written again).
    fn next_update(&mut self, present: &[bool]) {
        self.array.events += 1;
        self.array.utime = now_unix();
        self.array.resync_offset = if self.dirty { 0 } else { RESYNC_CLEAN };
        for (s, &here) in present.iter().enumerate() {
            let Some(slot) = self.slots[s].as_mut() else {
                continue;
            };
            let dn = slot.sb.dev_number as usize;
            if self.array.dev_roles.len() <= dn {
                self.array.dev_roles.resize(dn + 1, ROLE_SPARE);
            }
            if here {
                self.array.dev_roles[dn] = s as u16;
            } else {
                self.array.dev_roles[dn] = ROLE_FAULTY;
                slot.raw = None;
            }
        }
    }

    /// The superblock each member still written (and each spare, slot `usize::MAX`) gets:
    /// the array-wide fields with its own, and its recovery offset (`recovery`: per slot, the
    /// member rows rebuilt when it is recovering). Kept as each member's last written.
    fn superblocks(
        &mut self,
        recovery: &[Option<u64>],
    ) -> Vec<(usize, Arc<dyn Member>, MdSuperblock)> {
        let mut writes = Vec::new();
        for (s, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            let Some(raw) = slot.raw.clone() else {
                continue;
            };
            let mut sb = stamped(&self.array, &slot.sb);
            if let Some(rows) = recovery[s] {
                sb.feature_map |= FEATURE_RECOVERY_OFFSET;
                sb.recovery_offset = rows * self.geo.chunk_sectors;
            }
            slot.sb = sb.clone();
            writes.push((s, raw, sb));
        }
        for sp in self.spares.iter_mut() {
            let sb = stamped(&self.array, &sp.sb);
            sp.sb = sb.clone();
            writes.push((usize::MAX, sp.raw.clone(), sb));
        }
        writes
    }
}

/// The array-wide fields of `array` with a member's own from `own` (its offsets, dev number,
/// device UUID, flags, bad block log), not recovering.
fn stamped(array: &MdSuperblock, own: &MdSuperblock) -> MdSuperblock {
    let mut sb = array.clone();
    sb.data_offset = own.data_offset;
    sb.data_size = own.data_size;
    sb.super_offset = own.super_offset;
    sb.dev_number = own.dev_number;
    sb.cnt_corrected_read = own.cnt_corrected_read;
    sb.device_uuid = own.device_uuid;
    sb.devflags = own.devflags;
    sb.bblog_shift = own.bblog_shift;
    sb.bblog_size = own.bblog_size;
    sb.bblog_offset = own.bblog_offset;
    sb.feature_map &= !FEATURE_RECOVERY_OFFSET;
    sb.recovery_offset = 0;
    sb
}

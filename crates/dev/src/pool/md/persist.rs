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
        let now = now_unix();
        let mut writes: Vec<(usize, Arc<dyn Member>, MdSuperblock)> = Vec::new();
        {
            let n = self.members.handles.len();
            let recovery: Vec<Option<u64>> = {
                let md = self.md.as_ref().expect("an MD pool");
                (0..n)
                    .map(|s| valid_rows(&self.geo, &self.state, s as Disk, md))
                    .collect()
            };
            let md = self.md.as_mut().expect("an MD pool");
            md.array.events += 1;
            md.array.utime = now;
            md.array.resync_offset = if md.dirty { 0 } else { RESYNC_CLEAN };
            // Roles: present slots hold their role, failed ones are faulty.
            for s in 0..n {
                let Some(slot) = md.slots[s].as_mut() else {
                    continue;
                };
                let dn = slot.sb.dev_number as usize;
                if md.array.dev_roles.len() <= dn {
                    md.array.dev_roles.resize(dn + 1, ROLE_SPARE);
                }
                if self.members.handles[s].is_some() {
                    md.array.dev_roles[dn] = s as u16;
                } else {
                    md.array.dev_roles[dn] = ROLE_FAULTY;
                    slot.raw = None;
                }
            }
            let template = md.array.clone();
            let stamp = |own: &MdSuperblock| {
                let mut sb = template.clone();
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
            };
            for (s, slot) in md.slots.iter_mut().enumerate() {
                let Some(slot) = slot else { continue };
                let Some(raw) = slot.raw.clone() else {
                    continue;
                };
                let mut sb = stamp(&slot.sb);
                if let Some(rows) = recovery[s] {
                    sb.feature_map |= FEATURE_RECOVERY_OFFSET;
                    sb.recovery_offset = rows * md.geo.chunk_sectors;
                }
                slot.sb = sb.clone();
                writes.push((s, raw, sb));
            }
            for sp in md.spares.iter_mut() {
                let sb = stamp(&sp.sb);
                sp.sb = sb.clone();
                writes.push((usize::MAX, sp.raw.clone(), sb));
            }
        }
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
        self.save_descriptor()
    }
}

//! A Linux MD member as the pool sees it: its data area at the pool's usual data offset,
//! cycles packed back to back, whatever MD's placement on the member (issue 23).
//!
//! The pool addresses every member as `data_offset_bytes + cycle row * chunk + byte` with its
//! cycles back to back (`raidcore::Geometry`). An MD member differs in three ways, all handled
//! here so that nothing above changes: its data starts at its own superblock's data offset
//! (members of one array may differ), RAID10's far copies lie `1/far` of the member apart
//! (`layout::md::MdGeometry::physical_row` says where each row is), and the array's last
//! cycle is usually cut short by the member's end (RAID5 repeats every `n` rows): rows the
//! array does not use read as zeros and writes to them are dropped (whole-cycle work, a
//! rebuild or a verify, touches them; requests never do, the geometry's capacity being MD's
//! array size).
//!
//! Nothing of raidforge's own metadata may reach an MD member: an access below the data area
//! (where raidforge keeps its superblocks, deferred-parity list and IDO record) or past it is
//! an error, never a write into MD's space. The pool writes MD's superblocks through the
//! member's raw handle (`pool/md/persist.rs`).

use std::io;
use std::sync::Arc;

use layout::md::MdGeometry;

use crate::Member;

/// Where the pool's data area of an MD member lies on the member.
pub(crate) struct MdMember {
    inner: Arc<dyn Member>,
    /// Pool offset of the data area (the pool's `data_offset_bytes`).
    base: u64,
    /// Member byte where MD's data area starts (its superblock's data offset).
    data_start: u64,
    chunk: u64,
    /// Rows of one cycle of the pool's layout.
    cycle_rows: u64,
    /// Rows the pool addresses: whole cycles.
    rows: u64,
    geo: MdGeometry,
    /// Rows map one to one (every layout but RAID10 far).
    identity: bool,
}

impl MdMember {
    pub(crate) fn new(
        inner: Arc<dyn Member>,
        base: u64,
        data_start: u64,
        geo: MdGeometry,
        cycle_rows: u64,
        rows: u64,
    ) -> MdMember {
        let identity =
            !matches!(geo.layout, layout::md::MdLayout::Raid10(r) if r.far > 1 && !r.offset);
        MdMember {
            inner,
            base,
            data_start,
            chunk: geo.chunk_sectors * 512,
            cycle_rows,
            rows,
            geo,
            identity,
        }
    }

    /// The pieces of `[offset, offset + len)` (pool offsets): (start in the buffer, length,
    /// member byte or `None` for a row the array does not use).
    fn pieces(&self, offset: u64, len: usize) -> io::Result<Vec<(usize, usize, Option<u64>)>> {
        let end = self.base + self.rows * self.chunk;
        if offset < self.base || offset + len as u64 > end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes at pool offset {offset} are outside the MD member's data area \
                     ({}..{end}): raidforge's own metadata is never written to an MD member",
                    len, self.base
                ),
            ));
        }
        let used = self.geo.used_rows() * self.chunk;
        let mut v = Vec::new();
        let mut at = 0usize;
        while at < len {
            let virt = offset + at as u64 - self.base;
            if self.identity {
                // One piece up to the end of the rows the array uses, one after.
                let n = if virt < used {
                    ((used - virt) as usize).min(len - at)
                } else {
                    len - at
                };
                let phys = (virt < used).then_some(self.data_start + virt);
                v.push((at, n, phys));
                at += n;
                continue;
            }
            let row = virt / self.chunk;
            let in_chunk = virt % self.chunk;
            let n = ((self.chunk - in_chunk) as usize).min(len - at);
            let phys = self
                .geo
                .physical_row(row, self.cycle_rows)
                .map(|r| self.data_start + r * self.chunk + in_chunk);
            // Merge with the previous piece when the member bytes continue it.
            if let Some(last) = v.last_mut() {
                let (s, l, p): &mut (usize, usize, Option<u64>) = last;
                let continues = match (*p, phys) {
                    (Some(a), Some(b)) => a + *l as u64 == b,
                    (None, None) => true,
                    _ => false,
                };
                if continues && *s + *l == at {
                    *l += n;
                    at += n;
                    continue;
                }
            }
            v.push((at, n, phys));
            at += n;
        }
        Ok(v)
    }

    /// Where `len` bytes at `offset` lie on the inner member when they are one contiguous run
    /// of it (the common case), for a vectored request passed on whole.
    fn one_run(&self, offset: u64, len: usize) -> io::Result<Option<u64>> {
        Ok(match self.pieces(offset, len)?.as_slice() {
            [(0, n, Some(p))] if *n == len => Some(*p),
            _ => None,
        })
    }
}

impl Member for MdMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        for (s, n, phys) in self.pieces(offset, buf.len())? {
            match phys {
                Some(p) => self.inner.read_at(&mut buf[s..s + n], p)?,
                None => buf[s..s + n].fill(0),
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        for (s, n, phys) in self.pieces(offset, buf.len())? {
            if let Some(p) = phys {
                self.inner.write_at(&buf[s..s + n], p)?;
            }
        }
        Ok(())
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if let Some(p) = self.one_run(offset, len)? {
            return self.inner.write_vectored_at(bufs, p);
        }
        let mut at = offset;
        for b in bufs {
            self.write_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }

    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if let Some(p) = self.one_run(offset, len)? {
            return self.inner.read_vectored_at(bufs, p);
        }
        let mut at = offset;
        for b in bufs.iter_mut() {
            self.read_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn size_bytes(&self) -> u64 {
        self.base + self.rows * self.chunk
    }

    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn completes_in_memory(&self) -> bool {
        self.inner.completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        self.inner.merges_writes()
    }
    fn emulated_speed(&self) -> Option<crate::Speed> {
        self.inner.emulated_speed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemMember;
    use layout::md::{MdLayout, Raid10};

    fn member(bytes: u64) -> Arc<dyn Member> {
        Arc::new(MemMember::new(bytes as usize))
    }

    /// Writes through the view land where `physical_row` says, rows past the array's read as
    /// zeros and take no writes, and nothing below the data area or past the rows is reached.
    #[test]
    fn rows_land_where_md_puts_them() {
        let far = MdLayout::Raid10(Raid10 {
            near: 1,
            far: 2,
            offset: false,
            version: 0,
        });
        for layout in [MdLayout::Raid5(layout::md::Parity::LeftSymmetric), far] {
            let geo = MdGeometry {
                layout,
                raid_disks: 4,
                chunk_sectors: 8,
                dev_sectors: 8 * 11,
            };
            let cycle_rows = layout.cycle(4, 0).rows;
            let cycles = match layout {
                MdLayout::Raid10(_) => geo.far_stride_rows().div_ceil(cycle_rows / 2),
                _ => geo.used_rows().div_ceil(cycle_rows),
            };
            let rows = cycles * cycle_rows;
            let raw = member(8192 + 11 * 4096);
            let m = MdMember::new(raw.clone(), 1 << 20, 8192, geo, cycle_rows, rows);
            for r in 0..rows {
                let b = vec![r as u8 + 1; 4096];
                m.write_at(&b, (1 << 20) + r * 4096).unwrap();
            }
            for r in 0..rows {
                let mut got = vec![0u8; 4096];
                m.read_at(&mut got, (1 << 20) + r * 4096).unwrap();
                match geo.physical_row(r, cycle_rows) {
                    Some(p) => {
                        assert_eq!(got, vec![r as u8 + 1; 4096], "{layout:?} row {r}");
                        let mut raw_b = vec![0u8; 4096];
                        raw.read_at(&mut raw_b, 8192 + p * 4096).unwrap();
                        assert_eq!(raw_b, got);
                    }
                    None => assert_eq!(got, vec![0u8; 4096], "{layout:?} row {r}"),
                }
            }
            // A vectored read across rows gives what single reads give.
            let mut a = vec![0u8; 6000];
            let mut b = vec![0u8; 10000];
            m.read_vectored_at(&mut [&mut a, &mut b], (1 << 20) + 100)
                .unwrap();
            let mut whole = vec![0u8; 16000];
            m.read_at(&mut whole, (1 << 20) + 100).unwrap();
            assert_eq!([a, b].concat(), whole);
            // Below the data area, or past the rows: refused.
            assert!(m.write_at(&[1], (1 << 20) - 1).is_err());
            assert!(m.read_at(&mut [0], (1 << 20) + rows * 4096).is_err());
            let mut head = vec![0u8; 8192];
            raw.read_at(&mut head, 0).unwrap();
            assert!(
                head.iter().all(|&x| x == 0),
                "nothing before MD's data area"
            );
        }
    }
}

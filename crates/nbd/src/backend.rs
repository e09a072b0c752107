//! What an export serves: a [`Backend`] of a fixed size, called from several worker threads at
//! once. Ranges passed in are always inside the export (the protocol layer refuses the rest).

use std::io;
use std::sync::RwLock;

use crate::proto::{STATE_HOLE, STATE_ZERO};

/// A run of an export's bytes with one allocation status, as `NBD_CMD_BLOCK_STATUS` reports
/// it in the `base:allocation` context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Bytes in the run.
    pub len: u64,
    /// [`STATE_HOLE`] (not allocated) and [`STATE_ZERO`] (reads as zeros), or 0: allocated,
    /// contents unknown. 0 is always true; a client may skip reading a run marked
    /// [`STATE_ZERO`], so that flag must only be set on bytes that certainly read as zeros.
    pub flags: u32,
}

impl Extent {
    /// `len` bytes of allocated data (status 0).
    pub fn data(len: u64) -> Extent {
        Extent { len, flags: 0 }
    }
    /// `len` bytes that are not allocated and read as zeros.
    pub fn hole(len: u64) -> Extent {
        Extent {
            len,
            flags: STATE_HOLE | STATE_ZERO,
        }
    }
}

/// Storage behind one export. Every method may be called concurrently from several threads;
/// an implementation serialises what it must.
pub trait Backend: Send + Sync {
    /// Size in bytes (fixed while served).
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`. On success every byte of `buf` must have been written: the
    /// transport reuses its read buffers, so `buf` may hold an earlier read's data.
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Work the last request left for after its reply, run on the same thread once the reply
    /// is sent (a cache fill that the reply need not wait for; a small write's reply may
    /// still wait in the connection's batch then). The default has none.
    fn after_reply(&self) {}
    /// Writes `data` at `offset`. Returning means the data are visible to later reads (on any
    /// connection), not necessarily durable.
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable (survives a crash of the process and the machine).
    fn flush(&self) -> io::Result<()>;
    /// The client no longer needs `len` bytes at `offset` (a hint; doing nothing is correct).
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// The allocation status of the `len` bytes (at least 1) at `offset`: runs that follow
    /// each other from `offset`. They may cover less than `len` (the client asks again for the
    /// rest) or more (the reply is cut at `len`). The default says everything is allocated
    /// data, which is always true.
    fn block_status(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        let _ = offset;
        Ok(vec![Extent::data(len)])
    }
    /// Writes `len` zero bytes at `offset`.
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        const STEP: u64 = 1 << 20;
        let zero = vec![0u8; STEP.min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = STEP.min(len - at);
            self.write(offset + at, &zero[..n as usize])?;
            at += n;
        }
        Ok(())
    }
}

/// A backend in memory, for tests. Its block status reports every 4 KiB block (aligned on
/// the export) that holds only zeros as a hole that reads as zeros, and the rest as data.
#[derive(Debug)]
pub struct MemBackend {
    data: RwLock<Vec<u8>>,
    /// Counts flushes (tests check FLUSH and FUA reach the backend).
    flushes: std::sync::atomic::AtomicU64,
}

impl MemBackend {
    /// `size` zero bytes.
    pub fn new(size: usize) -> MemBackend {
        MemBackend {
            data: RwLock::new(vec![0; size]),
            flushes: Default::default(),
        }
    }
    /// A copy of the contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Number of flushes so far.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn range(offset: u64, len: usize, size: usize) -> io::Result<std::ops::Range<usize>> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= size as u64 => Ok(offset as usize..end as usize),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len} bytes at {offset} run past the end ({size} bytes)"),
        )),
    }
}

impl Backend for MemBackend {
    fn size(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        let r = range(offset, buf.len(), d.len())?;
        buf.copy_from_slice(&d[r]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        let len = d.len();
        let r = range(offset, data.len(), len)?;
        d[r].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn block_status(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        const BLOCK: u64 = 4096;
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        let r = range(offset, len as usize, d.len())?;
        let mut out: Vec<Extent> = Vec::new();
        let mut at = r.start as u64;
        while at < r.end as u64 {
            let next = ((at / BLOCK + 1) * BLOCK).min(r.end as u64);
            let zero = d[at as usize..next as usize].iter().all(|&b| b == 0);
            let e = if zero {
                Extent::hole(next - at)
            } else {
                Extent::data(next - at)
            };
            match out.last_mut() {
                Some(last) if last.flags == e.flags => last.len += e.len,
                _ => out.push(e),
            }
            at = next;
        }
        Ok(out)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        let size = d.len();
        let r = range(offset, len as usize, size)?;
        d[r].fill(0);
        Ok(())
    }
}

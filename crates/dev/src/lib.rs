//! # dev: the members of a raidforge array on real storage
//!
//! A *member* is one disk of an array: something that reads and writes bytes at positions. This
//! crate provides the members the engine runs plans on, and nothing else: it holds no RAID logic.
//!
//! - [`FileMember`]: a regular file or a block device, positional I/O (`pread`/`pwrite`), with
//!   `O_DIRECT` on request.
//! - [`MemMember`]: a member in memory, for tests.
//! - [`Emulated`]: wraps a member and makes it as slow as a disk of a given bandwidth and per-I/O
//!   latency (`hdd:150MB/s:8ms`), one I/O at a time like a single actuator, so that the benefit of
//!   spreading rebuild I/O over many members is visible in real time on a small machine.
//! - [`Faulty`]: wraps a member and injects faults: fail-stop, I/O errors on byte ranges, and a
//!   slow-down factor.
//! - [`faultsim`]: the seeded fault-injection harness over pools (its own fault layer,
//!   [`faultsim::FaultMember`], adds lost and misdirected writes, bit flips and crashes with
//!   torn writes), with a reference model of the volume and a fault atlas.
//!
//! Errors are `std::io::Error`s carrying what failed and where; an injected fault uses
//! `ErrorKind::Other` with a message naming the fault.

pub mod crash;
pub mod csum;
mod dual_slot;
pub mod exec;
pub mod faultsim;
pub mod faultsim_served;
pub mod ido;
pub mod journal;
pub mod metrics;
pub mod nbd_member;
pub mod pool;
pub mod scrub;
pub mod serve_support;
pub mod spread;
#[cfg(test)]
mod test_meeting;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// What a member knows of its bytes from some offset on without reading them
/// ([`Member::allocation`]), for telling NBD clients which ranges read as zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// The bytes up to `end` (exclusive) read as zeros: a hole of a sparse file (never
    /// written, or punched).
    Zeros { end: u64 },
    /// The bytes up to `end` may hold data (allocated, or nothing is known of them).
    Data { end: u64 },
}

/// One disk of an array.
pub trait Member: Send + Sync {
    /// Fills `buf` from byte `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes `buf` at byte `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
    /// Size in bytes.
    fn size_bytes(&self) -> u64;
    /// A short description for messages (path, or "memory").
    fn describe(&self) -> String;
    /// True when I/O normally completes at memory speed (a buffered regular file served from
    /// the page cache, memory): the executor then runs small batches on the calling thread,
    /// because starting threads would cost more than the copies.
    fn completes_in_memory(&self) -> bool {
        false
    }
    /// True when consecutive writes of one batch should reach this member as one
    /// `write_vectored_at` (every call is a device request: O_DIRECT files and devices,
    /// emulated and NBD members); see `exec::commit`. The default follows
    /// [`Member::completes_in_memory`]. Wrappers pass it on, so that a member that decides
    /// otherwise (the fault harness's, to exercise the merged path on memory files) is heard.
    fn merges_writes(&self) -> bool {
        !self.completes_in_memory()
    }
    /// The speed this member is emulated at ([`Emulated`]): what a request costs in fixed
    /// time and per byte, for the rebuild's packing of windows (`pool::pack_windows`), which
    /// weighs a request that merges with the one before it against one that does not. `None`
    /// (a real device, a file): unknown, every request counted alike. Wrappers pass it on.
    fn emulated_speed(&self) -> Option<Speed> {
        None
    }
    /// Why the device behind this member is no longer there, if it is not: its file or
    /// device node vanished or names another file now, its NBD server cannot be reached. Asked
    /// when an I/O error fails the member, so that the failure says so (`Pool::DISAPPEARED_WHY`,
    /// the served pool's `DeviceDisappeared` event). Wrappers pass it on.
    fn gone(&self) -> Option<String> {
        None
    }
    /// Fills `bufs`, in order, from consecutive bytes starting at `offset`: what
    /// `read_at` of each in turn does, in one system call where the member can (`preadv`).
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        let mut at = offset;
        for b in bufs.iter_mut() {
            self.read_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// Writes `bufs`, in order, at consecutive bytes starting at `offset`: what `write_at` of
    /// each in turn does, in one request where the member can (`pwritev`; one emulated I/O).
    /// The executor sends runs of consecutive writes this way to members whose every call is
    /// a device request (see `exec::commit_from`). A failure may leave any part written, as
    /// a failing `write_at` of one of them may.
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut at = offset;
        for b in bufs {
            self.write_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// What is known, without reading, of the bytes from `offset` on: a run that certainly
    /// reads as zeros, or one that may hold data. The default knows nothing (data, to the
    /// end), which is always true. A wrapper whose reads return what its inner member's do
    /// ([`Emulated`], metering, `Box`/`Arc`) passes this on; one that changes what reads
    /// return (fault injection, crash simulation, an offset view such as an MD member, a
    /// remote member) keeps the default.
    fn allocation(&self, offset: u64) -> Allocation {
        let _ = offset;
        Allocation::Data { end: u64::MAX }
    }
}

fn out_of_range(what: &str, offset: u64, len: usize, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}: {len} bytes at offset {offset} run past the end ({size} bytes)"),
    )
}

/// Memory, offset and length alignment O_DIRECT needs on common file systems and devices.
const DIRECT_ALIGN: usize = 4096;

/// An aligned byte buffer for O_DIRECT bounces. Written here because std has no aligned byte
/// vector; over-allocating and slicing keeps it safe.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + DIRECT_ALIGN];
        let start = raw.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuf { raw, start, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// A regular file or block device.
#[derive(Debug)]
pub struct FileMember {
    file: File,
    path: PathBuf,
    size_bytes: u64,
    direct: bool,
    /// A regular file (not a block device).
    regular: bool,
}

/// How to open a [`FileMember`].
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOpts {
    /// Open with `O_DIRECT` (bypass the page cache). Buffers and offsets must then be aligned
    /// to the device's logical block size.
    pub direct: bool,
    /// Create the file (sparse) with this size if it does not exist, or grow it to this size.
    pub create_bytes: Option<u64>,
}

impl FileMember {
    /// Opens `path` for reading and writing.
    pub fn open(path: &Path, opts: OpenOpts) -> io::Result<FileMember> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if opts.create_bytes.is_some() {
            o.create(true);
        }
        if opts.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open member {}: {e}", path.display()),
            )
        })?;
        let meta = file.metadata()?;
        let mut size = if meta.file_type().is_file() {
            meta.len()
        } else {
            // Block devices report length 0 in metadata; ask by seeking to the end.
            use std::io::Seek;
            (&file).seek(io::SeekFrom::End(0))?
        };
        if let Some(want) = opts.create_bytes {
            if meta.file_type().is_file() && size < want {
                file.set_len(want)?;
                size = want;
            }
        }
        Ok(FileMember {
            file,
            path: path.to_path_buf(),
            size_bytes: size,
            direct: opts.direct,
            regular: meta.file_type().is_file(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`Member::gone`]: the path no longer names the file or device this member has open
    /// (removed, or replaced by another), or a block device that now has no capacity (a
    /// detached loop device, a disk whose medium is gone).
    fn vanished(&self) -> Option<String> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let open = self.file.metadata().ok()?;
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Some(format!("{} is gone", self.path.display()))
            }
            Err(_) => return None,
            Ok(now) if (now.dev(), now.ino()) != (open.dev(), open.ino()) => {
                return Some(format!(
                    "{} names another file or device now",
                    self.path.display()
                ))
            }
            Ok(_) => {}
        }
        if open.file_type().is_block_device() {
            use std::io::Seek;
            let size = (&self.file).seek(io::SeekFrom::End(0)).ok()?;
            if size == 0 {
                return Some(format!("{} has no capacity now", self.path.display()));
            }
        }
        None
    }

    /// Takes an exclusive advisory lock (`flock`) on the file or device without waiting, so
    /// that two raidforge processes never run one member at once (each would plan against a
    /// state the other is changing). Held until this member is dropped.
    pub fn lock_exclusive(&self) -> io::Result<()> {
        match self.file.try_lock() {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} is in use by another raidforge process (or another pool in this one)",
                    self.path.display()
                ),
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(io::Error::new(
                e.kind(),
                format!("cannot lock {}: {e}", self.path.display()),
            )),
        }
    }

    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// One `preadv` (or, with `write`, `pwritev`) of `iov` at `offset`: bytes moved (a read
    /// gives 0 at the end of the file), retried when interrupted.
    fn vectored_once(&self, iov: &[libc::iovec], offset: u64, write: bool) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // Linux takes at most IOV_MAX (1024) segments per call; the caller loops.
        let cnt = iov.len().min(1024) as libc::c_int;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
        let fd = self.file.as_raw_fd();
        loop {
            // SAFETY: `iov` holds at least `cnt` valid iovecs describing memory the caller
            // borrows for the whole call (writable for a read), and the descriptor is open
            // while `self` lives.
            let r = unsafe {
                if write {
                    libc::pwritev(fd, iov.as_ptr(), cnt, off)
                } else {
                    libc::preadv(fd, iov.as_ptr(), cnt, off)
                }
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// `lseek(SEEK_DATA or SEEK_HOLE)` from `offset`: the offset found, `None` for `ENXIO` (no
    /// data, or no hole, at or after `offset` before the end of the file), `Err` otherwise.
    /// The file position it moves is used by nothing (all I/O is positional).
    fn seek_whence(&self, offset: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
        use std::os::fd::AsRawFd;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
        // SAFETY: lseek on a descriptor that is open while `self` lives; no memory involved.
        let r = unsafe { libc::lseek(self.file.as_raw_fd(), off, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        }
    }

    fn read_error(&self, len: usize, offset: u64, e: io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!(
                "read of {len} bytes at {offset} from {}: {e}",
                self.path.display()
            ),
        )
    }
}

impl Member for FileMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if offset + buf.len() as u64 > self.size_bytes {
            return Err(out_of_range(
                &self.describe(),
                offset,
                buf.len(),
                self.size_bytes,
            ));
        }
        if self.direct && (buf.as_ptr() as usize) % DIRECT_ALIGN != 0 {
            // O_DIRECT needs aligned memory: read through an aligned bounce buffer.
            let mut b = AlignedBuf::new(buf.len());
            self.read_at(b.as_mut(), offset)?;
            buf.copy_from_slice(b.as_mut());
            return Ok(());
        }
        self.file.read_exact_at(buf, offset).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "read of {} bytes at {offset} from {}: {e}",
                    buf.len(),
                    self.path.display()
                ),
            )
        })
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset + buf.len() as u64 > self.size_bytes {
            return Err(out_of_range(
                &self.describe(),
                offset,
                buf.len(),
                self.size_bytes,
            ));
        }
        if self.direct && (buf.as_ptr() as usize) % DIRECT_ALIGN != 0 {
            let mut b = AlignedBuf::new(buf.len());
            b.as_mut().copy_from_slice(buf);
            return self.write_at(b.as_mut(), offset);
        }
        self.file.write_all_at(buf, offset).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "write of {} bytes at {offset} to {}: {e}",
                    buf.len(),
                    self.path.display()
                ),
            )
        })
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    fn gone(&self) -> Option<String> {
        self.vanished()
    }
    fn describe(&self) -> String {
        self.path.display().to_string()
    }
    fn completes_in_memory(&self) -> bool {
        !self.direct && self.regular
    }
    /// A regular file answers from its extents (`SEEK_DATA`/`SEEK_HOLE`): the file system
    /// counts bytes written but not yet flushed (dirty pages, delayed allocation) as data,
    /// and a hole reads as zeros. Only bytes inside the file count as zeros (a read past its
    /// end fails). A block device, or an error, says data.
    fn allocation(&self, offset: u64) -> Allocation {
        let unknown = Allocation::Data { end: u64::MAX };
        if !self.regular {
            return unknown;
        }
        match self.seek_whence(offset, libc::SEEK_DATA) {
            Ok(Some(d)) if d > offset => Allocation::Zeros { end: d },
            Ok(Some(_)) => match self.seek_whence(offset, libc::SEEK_HOLE) {
                Ok(Some(h)) if h > offset => Allocation::Data { end: h },
                _ => unknown,
            },
            // No data from `offset` to the end of the file.
            Ok(None) => match self.file.metadata() {
                Ok(m) if m.len() > offset => Allocation::Zeros { end: m.len() },
                _ => unknown,
            },
            Err(_) => unknown,
        }
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if self.direct || bufs.len() < 2 {
            // O_DIRECT wants every segment aligned: one at a time, bounced if need be.
            let mut at = offset;
            for b in bufs.iter_mut() {
                self.read_at(b, at)?;
                at += b.len() as u64;
            }
            return Ok(());
        }
        if offset + len as u64 > self.size_bytes {
            return Err(out_of_range(&self.describe(), offset, len, self.size_bytes));
        }
        let mut slices: Vec<io::IoSliceMut<'_>> =
            bufs.iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
        let mut rest: &mut [io::IoSliceMut<'_>] = &mut slices;
        io::IoSliceMut::advance_slices(&mut rest, 0);
        let mut at = offset;
        while !rest.is_empty() {
            // SAFETY: `IoSliceMut` is guaranteed ABI-compatible with `iovec` on Unix; same
            // length, and `rest` (which borrows the buffers mutably) outlives `iov`.
            let iov: &[libc::iovec] =
                unsafe { std::slice::from_raw_parts(rest.as_ptr().cast(), rest.len()) };
            let n = self
                .vectored_once(iov, at, false)
                .map_err(|e| self.read_error(len, offset, e))?;
            if n == 0 {
                let e = io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer");
                return Err(self.read_error(len, offset, e));
            }
            io::IoSliceMut::advance_slices(&mut rest, n);
            at += n as u64;
        }
        Ok(())
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        // O_DIRECT wants every segment's memory and length aligned; otherwise one at a time
        // (each bounced by `write_at` as need be).
        let aligned = bufs
            .iter()
            .all(|b| (b.as_ptr() as usize) % DIRECT_ALIGN == 0 && b.len() % DIRECT_ALIGN == 0);
        if bufs.len() < 2 || (self.direct && !aligned) {
            let mut at = offset;
            for b in bufs {
                self.write_at(b, at)?;
                at += b.len() as u64;
            }
            return Ok(());
        }
        if offset + len as u64 > self.size_bytes {
            return Err(out_of_range(&self.describe(), offset, len, self.size_bytes));
        }
        let mut slices: Vec<io::IoSlice<'_>> = bufs.iter().map(|b| io::IoSlice::new(b)).collect();
        let mut rest: &mut [io::IoSlice<'_>] = &mut slices;
        let mut at = offset;
        let error = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!(
                    "write of {len} bytes at {offset} to {}: {e}",
                    self.path.display()
                ),
            )
        };
        while !rest.is_empty() {
            // SAFETY: `IoSlice` is guaranteed ABI-compatible with `iovec` on Unix; same
            // length, and `rest` (which borrows the buffers) outlives `iov`.
            let iov: &[libc::iovec] =
                unsafe { std::slice::from_raw_parts(rest.as_ptr().cast(), rest.len()) };
            let n = self.vectored_once(iov, at, true).map_err(error)?;
            if n == 0 {
                return Err(error(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                )));
            }
            io::IoSlice::advance_slices(&mut rest, n);
            at += n as u64;
        }
        Ok(())
    }
}

/// A member held in memory.
#[derive(Debug)]
pub struct MemMember {
    data: RwLock<Vec<u8>>,
}

impl MemMember {
    pub fn new(size_bytes: usize) -> MemMember {
        MemMember {
            data: RwLock::new(vec![0; size_bytes]),
        }
    }
    /// A copy of the whole contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().unwrap().clone()
    }
}

impl Member for MemMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.read().unwrap();
        let end = offset as usize + buf.len();
        if end > d.len() {
            return Err(out_of_range(
                "memory member",
                offset,
                buf.len(),
                d.len() as u64,
            ));
        }
        buf.copy_from_slice(&d[offset as usize..end]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut d = self.data.write().unwrap();
        let end = offset as usize + buf.len();
        if end > d.len() {
            return Err(out_of_range(
                "memory member",
                offset,
                buf.len(),
                d.len() as u64,
            ));
        }
        d[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn size_bytes(&self) -> u64 {
        self.data.read().unwrap().len() as u64
    }
    fn describe(&self) -> String {
        "memory".into()
    }
    fn completes_in_memory(&self) -> bool {
        true
    }
}

pub use raidcore::emulate::{Actuator, SpecError, Speed};

/// A member slowed down to a given [`Speed`]. The data still goes to the inner member; the
/// caller's thread sleeps until the emulated completion time.
pub struct Emulated<M: Member> {
    inner: M,
    speed: Speed,
    epoch: Instant,
    actuator: Mutex<Actuator>,
    busy_ns: AtomicU64,
}

impl<M: Member> Emulated<M> {
    pub fn new(inner: M, speed: Speed) -> Emulated<M> {
        Emulated {
            inner,
            speed,
            epoch: Instant::now(),
            actuator: Mutex::new(Actuator::default()),
            busy_ns: AtomicU64::new(0),
        }
    }
    pub fn speed(&self) -> Speed {
        self.speed
    }
    /// Total emulated busy time so far.
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed))
    }
    /// Reserves the actuator for an I/O of `len` bytes arriving now; returns when it
    /// completes.
    fn begin(&self, len: usize) -> u64 {
        let service = self.speed.service_ns(len);
        self.busy_ns.fetch_add(service, Ordering::Relaxed);
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.actuator.lock().unwrap().reserve(now, service)
    }
    fn wait_until(&self, done: u64) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        if done > now {
            std::thread::sleep(Duration::from_nanos(done - now));
        }
    }
}

// Each request is one emulated I/O, `latency + len / bandwidth`, reserved before the copy to
// or from the file underneath, so that the copy happens within the emulated service time
// rather than adding to it; a vectored read (`preadv`, what the executor sends for a run of
// consecutive bytes) is one request, as a disk sees it. (Split into one I/O per slice, a
// 2 MiB read of eight 256 KiB slices paid the latency eight times, with the copies on top;
// traced after the change, such a read at 100 MB/s and 0.1 ms takes 21.16 ms against the
// 21.07 ms it should.)
impl<M: Member> Member for Emulated<M> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let done = self.begin(buf.len());
        self.inner.read_at(buf, offset)?;
        self.wait_until(done);
        Ok(())
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        let done = self.begin(bufs.iter().map(|b| b.len()).sum());
        self.inner.read_vectored_at(bufs, offset)?;
        self.wait_until(done);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let done = self.begin(buf.len());
        self.inner.write_at(buf, offset)?;
        self.wait_until(done);
        Ok(())
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let done = self.begin(bufs.iter().map(|b| b.len()).sum());
        self.inner.write_vectored_at(bufs, offset)?;
        self.wait_until(done);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
    fn describe(&self) -> String {
        format!(
            "{} (emulated {:.0} MB/s, {:.2} ms)",
            self.inner.describe(),
            self.speed.bytes_per_sec / 1e6,
            self.speed.latency_ns as f64 / 1e6
        )
    }
    fn allocation(&self, offset: u64) -> Allocation {
        self.inner.allocation(offset)
    }
    fn emulated_speed(&self) -> Option<Speed> {
        Some(self.speed)
    }
}

/// Faults to inject into a member.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every I/O fails (the disk is gone).
    pub fail_stop: AtomicBool,
    /// Byte ranges `[start, end)` whose reads fail (latent sector errors).
    pub read_error_ranges: Mutex<Vec<(u64, u64)>>,
    /// Byte ranges whose writes fail.
    pub write_error_ranges: Mutex<Vec<(u64, u64)>>,
    /// A successful write over a whole read-error range clears it, as a disk remaps a bad
    /// sector when it is rewritten (off: read errors stay until removed).
    pub remap_on_write: AtomicBool,
}

/// A member with injected faults.
pub struct Faulty<M: Member> {
    inner: M,
    pub faults: Faults,
}

fn overlaps(ranges: &Mutex<Vec<(u64, u64)>>, offset: u64, len: usize) -> Option<(u64, u64)> {
    let end = offset + len as u64;
    ranges
        .lock()
        .unwrap()
        .iter()
        .copied()
        .find(|(s, e)| *s < end && offset < *e)
}

impl<M: Member> Faulty<M> {
    pub fn new(inner: M) -> Faulty<M> {
        Faulty {
            inner,
            faults: Faults::default(),
        }
    }
    pub fn inner(&self) -> &M {
        &self.inner
    }
    fn check(
        &self,
        what: &str,
        offset: u64,
        len: usize,
        ranges: &Mutex<Vec<(u64, u64)>>,
    ) -> io::Result<()> {
        if self.faults.fail_stop.load(Ordering::SeqCst) {
            return Err(io::Error::other(format!(
                "injected fail-stop: {} is gone",
                self.inner.describe()
            )));
        }
        if let Some((s, e)) = overlaps(ranges, offset, len) {
            return Err(io::Error::other(format!(
                "injected {what} error on {} bytes {s}..{e}",
                self.inner.describe()
            )));
        }
        Ok(())
    }
}

impl<M: Member> Member for Faulty<M> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check("read", offset, buf.len(), &self.faults.read_error_ranges)?;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check("write", offset, buf.len(), &self.faults.write_error_ranges)?;
        self.inner.write_at(buf, offset)?;
        if self.faults.remap_on_write.load(Ordering::SeqCst) {
            let end = offset + buf.len() as u64;
            self.faults
                .read_error_ranges
                .lock()
                .unwrap()
                .retain(|&(s, e)| !(offset <= s && e <= end));
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        if self.faults.fail_stop.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fail-stop"));
        }
        self.inner.flush()
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
        self.inner.completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        self.inner.merges_writes()
    }
    fn emulated_speed(&self) -> Option<Speed> {
        self.inner.emulated_speed()
    }
}

impl Member for Box<dyn Member> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn size_bytes(&self) -> u64 {
        (**self).size_bytes()
    }
    fn gone(&self) -> Option<String> {
        (**self).gone()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn completes_in_memory(&self) -> bool {
        (**self).completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        (**self).merges_writes()
    }
    fn emulated_speed(&self) -> Option<Speed> {
        (**self).emulated_speed()
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        (**self).read_vectored_at(bufs, offset)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        (**self).write_vectored_at(bufs, offset)
    }
    fn allocation(&self, offset: u64) -> Allocation {
        (**self).allocation(offset)
    }
}

impl Member for std::sync::Arc<dyn Member> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn size_bytes(&self) -> u64 {
        (**self).size_bytes()
    }
    fn gone(&self) -> Option<String> {
        (**self).gone()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn completes_in_memory(&self) -> bool {
        (**self).completes_in_memory()
    }
    fn merges_writes(&self) -> bool {
        (**self).merges_writes()
    }
    fn emulated_speed(&self) -> Option<Speed> {
        (**self).emulated_speed()
    }
    fn read_vectored_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> io::Result<()> {
        (**self).read_vectored_at(bufs, offset)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        (**self).write_vectored_at(bufs, offset)
    }
    fn allocation(&self, offset: u64) -> Allocation {
        (**self).allocation(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    /// A sparse file's holes and data, as `allocation` sees them: holes read as zeros, written
    /// bytes are data before and after a flush, nothing past the end counts as zeros, and
    /// wrappers that change reads know nothing.
    #[test]
    fn file_allocation_follows_holes_and_writes() {
        let path = std::env::temp_dir().join(format!("rf-alloc-{}.img", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let m = FileMember::open(
            &path,
            OpenOpts {
                direct: false,
                create_bytes: Some(4 << 20),
            },
        )
        .unwrap();
        assert_eq!(m.allocation(0), Allocation::Zeros { end: 4 << 20 });
        m.write_at(&[7u8; 5000], 1 << 20).unwrap();
        // Unflushed: the file system counts it as data already.
        let at = |o: u64| m.allocation(o);
        match at(0) {
            Allocation::Zeros { end } => assert!(end <= 1 << 20 && end > 0),
            a => panic!("{a:?}"),
        }
        match at((1 << 20) + 4999) {
            Allocation::Data { end } => assert!(end >= (1 << 20) + 5000),
            a => panic!("{a:?}"),
        }
        m.flush().unwrap();
        match at(1 << 20) {
            Allocation::Data { end } => assert!(end > (1 << 20) + 4999 && end < 4 << 20),
            a => panic!("{a:?}"),
        }
        match at(2 << 20) {
            Allocation::Zeros { end } => assert_eq!(end, 4 << 20),
            a => panic!("{a:?}"),
        }
        // At or past the end: nothing reads there, so nothing is zeros.
        assert_eq!(at(4 << 20), Allocation::Data { end: u64::MAX });
        assert_eq!(at(5 << 20), Allocation::Data { end: u64::MAX });
        // Every zeros answer reads as zeros.
        for o in (0..4u64 << 20).step_by(64 << 10) {
            if let Allocation::Zeros { end } = at(o) {
                let mut b = vec![1u8; (end - o).min(1 << 20) as usize];
                m.read_at(&mut b, o).unwrap();
                assert!(b.iter().all(|&x| x == 0), "offset {o}");
            }
        }
        let shared: Arc<dyn Member> = Arc::new(m);
        assert_eq!(
            Emulated::new(Arc::clone(&shared), Speed::parse("ssd:1GB/s:0ms").unwrap())
                .allocation(0),
            shared.allocation(0)
        );
        assert_eq!(
            Faulty::new(Arc::clone(&shared)).allocation(0),
            Allocation::Data { end: u64::MAX }
        );
        drop(shared);
        let _ = std::fs::remove_file(&path);
    }

    /// A vectored read of a file (`preadv`, looping over short transfers and the 1024-segment
    /// limit) reads the same bytes as one `read_at` per segment.
    #[test]
    fn vectored_file_reads_match_one_read_per_segment() {
        let path = std::env::temp_dir().join(format!("rf-vectored-{}.img", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let m = FileMember::open(
            &path,
            OpenOpts {
                direct: false,
                create_bytes: Some(4 << 20),
            },
        )
        .unwrap();
        // Uneven segments, an empty one among them, more than 1024 in all.
        let lens: Vec<usize> = (0..1500).map(|i| [1, 0, 7, 512, 4096][i % 5]).collect();
        let total: usize = lens.iter().sum();
        let other = pattern(total, 9);
        m.write_at(&other, 12345).unwrap();
        let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
        let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        m.read_vectored_at(&mut slices, 12345).unwrap();
        assert_eq!(bufs.concat(), other);

        // Past the end: refused as a whole, like a single read.
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        let err = m
            .read_vectored_at(&mut [&mut a, &mut b], (4 << 20) - 4096)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        drop(m);
        let _ = std::fs::remove_file(&path);
    }

    /// A file member is gone when its path names nothing or another file, not while the path
    /// still names the file it has open; wrappers pass it on.
    #[test]
    fn a_file_member_is_gone_when_its_path_no_longer_names_its_file() {
        let dir = std::env::temp_dir().join(format!("rf-gone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.img");
        let _ = std::fs::remove_file(&path);
        let opts = OpenOpts {
            direct: false,
            create_bytes: Some(1 << 16),
        };
        let m: std::sync::Arc<dyn Member> =
            std::sync::Arc::new(Faulty::new(FileMember::open(&path, opts).unwrap()));
        assert_eq!(m.gone(), None);
        std::fs::rename(&path, dir.join("moved.img")).unwrap();
        let g = m.gone().expect("gone once renamed away");
        assert!(g.contains("m.img is gone"), "{g}");
        std::fs::write(&path, b"another file").unwrap();
        let g = m.gone().expect("gone while the path names another file");
        assert!(g.contains("names another file"), "{g}");
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(dir.join("moved.img"), &path).unwrap();
        assert_eq!(m.gone(), None, "back in place");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A wrapper without its own vectored read goes through its `read_at` per segment, so
    /// injected faults still apply to the segment they cover.
    #[test]
    fn vectored_reads_through_a_wrapper_keep_its_faults() {
        let m = Faulty::new(MemMember::new(1 << 16));
        let data = pattern(8192, 3);
        m.write_at(&data, 0).unwrap();
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        m.read_vectored_at(&mut [&mut a, &mut b], 0).unwrap();
        assert_eq!([a.clone(), b.clone()].concat(), data);
        // A latent error in the second segment: the first is still read, the call fails.
        m.faults
            .read_error_ranges
            .lock()
            .unwrap()
            .push((4096, 4100));
        let (mut a2, mut b2) = (vec![0u8; 4096], vec![0u8; 4096]);
        assert!(m.read_vectored_at(&mut [&mut a2, &mut b2], 0).is_err());
        assert_eq!(a2, a);
        m.faults.fail_stop.store(true, Ordering::SeqCst);
        assert!(m.read_vectored_at(&mut [&mut a2, &mut b2], 0).is_err());
    }
}

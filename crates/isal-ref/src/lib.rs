//! Intel ISA-L as a reference peer for the `codec` crate, loaded at run time.
//!
//! The library (`libisal.so.2`, or the path in the environment variable
//! `ISAL_LIBRARY`) is opened with `dlopen` on first use, so the workspace
//! builds and links without it; every call returns [`IsalError::Unavailable`]
//! when it cannot be loaded. Only the two RAID
//! functions are wrapped: `xor_gen` (XOR parity) and `pq_gen` (RAID6 P and Q
//! with polynomial 0x11d, the same code as Linux MD).
//!
//! The wrappers check what ISA-L assumes but does not check: equal lengths,
//! at least two sources, 32-byte aligned buffers, and for `pq_gen` a length
//! that is a multiple of 32. [`AlignedBuf`] gives suitably aligned buffers.
//!
//! The crate also holds the parity benchmark ([`mod@bench`]), which compares
//! `codec` against ISA-L; it lives here rather than in `codec` because
//! `codec` may not read clocks or load libraries.

use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::OnceLock;

pub mod bench;

/// The shared object that is loaded, unless `ISAL_LIBRARY` names another.
pub const LIBRARY: &str = "libisal.so.2";

/// The environment variable that overrides [`LIBRARY`] (a path or a name for
/// `dlopen`); setting it to a missing file shows how tests behave without
/// ISA-L.
pub const LIBRARY_ENV: &str = "ISAL_LIBRARY";

/// The most sources a wrapper accepts (matches `codec::pq::MAX_DATA`).
pub const MAX_SOURCES: usize = 255;

/// The alignment ISA-L requires of every buffer (in bytes).
pub const REQUIRED_ALIGN: usize = 32;

/// Why an ISA-L call did not happen or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IsalError {
    /// The library or one of its symbols could not be loaded.
    #[error("cannot load ISA-L: {0}")]
    Unavailable(String),
    /// The arguments break one of ISA-L's preconditions.
    #[error("arguments unsuitable for ISA-L: {0}")]
    BadArguments(&'static str),
    /// ISA-L returned a non-zero status.
    #[error("ISA-L {function} returned {code}")]
    Failed {
        /// The C function.
        function: &'static str,
        /// Its return value.
        code: i32,
    },
}

/// `int xor_gen(int vects, int len, void **array)` and `pq_gen` alike.
type RaidFn = unsafe extern "C" fn(c_int, c_int, *mut *mut c_void) -> c_int;

struct Library {
    xor_gen: RaidFn,
    pq_gen: RaidFn,
    /// The AVX2-machine kernels ([`IsalKernels::Avx2Machine`]), when the library exports them.
    xor_gen_avx: Option<RaidFn>,
    pq_gen_avx2: Option<RaidFn>,
}

/// Which of ISA-L's kernels a call runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IsalKernels {
    /// The library's own choice for this CPU (`xor_gen`, `pq_gen`).
    #[default]
    Dispatched,
    /// The kernels ISA-L's dispatcher picks on a CPU with AVX2 and no AVX-512 (its
    /// `raid/raid_multibinary.asm`: `xor_gen_avx` and `pq_gen_avx2`), called directly: on an
    /// AVX-512 machine they measure what ISA-L does on an AVX2-only one. Needs AVX2.
    Avx2Machine,
}

impl IsalKernels {
    /// The C functions called for XOR and for P+Q.
    pub fn functions(self) -> (&'static str, &'static str) {
        match self {
            IsalKernels::Dispatched => ("xor_gen", "pq_gen"),
            IsalKernels::Avx2Machine => ("xor_gen_avx", "pq_gen_avx2"),
        }
    }

    /// The kernels' name, as `raidforge bench parity --isal-kernels` takes it.
    pub fn name(self) -> &'static str {
        match self {
            IsalKernels::Dispatched => "dispatched",
            IsalKernels::Avx2Machine => "avx2",
        }
    }

    /// The kernels named `name` ([`IsalKernels::name`]).
    pub fn from_name(name: &str) -> Option<IsalKernels> {
        [IsalKernels::Dispatched, IsalKernels::Avx2Machine]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

fn library() -> Result<&'static Library, IsalError> {
    static LIBRARY_CELL: OnceLock<Result<Library, String>> = OnceLock::new();
    LIBRARY_CELL
        .get_or_init(load)
        .as_ref()
        .map_err(|e| IsalError::Unavailable(e.clone()))
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a valid C string owned by libc.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

fn load() -> Result<Library, String> {
    let name = std::env::var(LIBRARY_ENV).unwrap_or_else(|_| LIBRARY.to_string());
    let c_name = CString::new(name).map_err(|_| format!("{LIBRARY_ENV} contains NUL"))?;
    // SAFETY: dlopen/dlsym with valid C strings; the handle is never closed,
    // so the function pointers stay valid for the life of the process. The
    // symbols have the C signature `RaidFn` per isa-l/raid.h.
    unsafe {
        let handle = libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            return Err(dl_error());
        }
        let symbol = |name: &CStr| -> Result<RaidFn, String> {
            let f = libc::dlsym(handle, name.as_ptr());
            if f.is_null() {
                Err(format!("symbol {name:?} missing: {}", dl_error()))
            } else {
                Ok(std::mem::transmute::<*mut c_void, RaidFn>(f))
            }
        };
        Ok(Library {
            xor_gen: symbol(c"xor_gen")?,
            pq_gen: symbol(c"pq_gen")?,
            xor_gen_avx: symbol(c"xor_gen_avx").ok(),
            pq_gen_avx2: symbol(c"pq_gen_avx2").ok(),
        })
    }
}

/// Whether ISA-L could be loaded.
pub fn is_available() -> bool {
    library().is_ok()
}

/// Loads ISA-L now, returning why it cannot be used.
pub fn load_library() -> Result<(), IsalError> {
    library().map(|_| ())
}

/// Checks buffers against ISA-L's preconditions and builds its pointer array
/// (sources first, then the outputs). Returns the number of pointers.
fn pointer_array(
    data: &[&[u8]],
    outputs: &mut [&mut [u8]],
    len_multiple: usize,
    array: &mut [*mut c_void; MAX_SOURCES + 2],
) -> Result<(usize, c_int), IsalError> {
    if data.len() < 2 {
        return Err(IsalError::BadArguments("ISA-L needs at least two sources"));
    }
    if data.len() > MAX_SOURCES {
        return Err(IsalError::BadArguments("more than 255 sources"));
    }
    let len = data[0].len();
    if data.iter().any(|d| d.len() != len) || outputs.iter().any(|o| o.len() != len) {
        return Err(IsalError::BadArguments("buffers differ in length"));
    }
    if !len.is_multiple_of(len_multiple) {
        return Err(IsalError::BadArguments("length is not a multiple of 32"));
    }
    let len = c_int::try_from(len).map_err(|_| IsalError::BadArguments("length over i32::MAX"))?;
    let mut n = 0;
    for d in data {
        array[n] = d.as_ptr().cast_mut().cast();
        n += 1;
    }
    for o in outputs.iter_mut() {
        array[n] = o.as_mut_ptr().cast();
        n += 1;
    }
    if array[..n]
        .iter()
        .any(|&p| !(p as usize).is_multiple_of(REQUIRED_ALIGN))
    {
        return Err(IsalError::BadArguments("a buffer is not 32-byte aligned"));
    }
    Ok((n, len))
}

/// ISA-L `xor_gen`: `parity = XOR of data`. Needs 2..=255 sources of equal
/// length, all buffers 32-byte aligned.
pub fn xor_gen(data: &[&[u8]], parity: &mut [u8]) -> Result<(), IsalError> {
    xor_gen_with(IsalKernels::Dispatched, data, parity)
}

/// ISA-L `pq_gen`: P and Q of `data`. Needs 2..=255 sources of equal length,
/// a length that is a multiple of 32, and 32-byte aligned buffers.
pub fn pq_gen(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) -> Result<(), IsalError> {
    pq_gen_with(IsalKernels::Dispatched, data, p, q)
}

/// The function `kernels` runs for XOR (`pq` false) or P+Q, and its name.
fn kernel(kernels: IsalKernels, pq: bool) -> Result<(RaidFn, &'static str), IsalError> {
    let lib = library()?;
    let (xor_name, pq_name) = kernels.functions();
    let name = if pq { pq_name } else { xor_name };
    let f = match kernels {
        IsalKernels::Dispatched => Some(if pq { lib.pq_gen } else { lib.xor_gen }),
        IsalKernels::Avx2Machine => {
            #[cfg(target_arch = "x86_64")]
            let avx2 = std::arch::is_x86_feature_detected!("avx2");
            #[cfg(not(target_arch = "x86_64"))]
            let avx2 = false;
            if !avx2 {
                return Err(IsalError::Unavailable(format!(
                    "{name} needs a CPU with AVX2"
                )));
            }
            if pq {
                lib.pq_gen_avx2
            } else {
                lib.xor_gen_avx
            }
        }
    };
    f.map(|f| (f, name))
        .ok_or_else(|| IsalError::Unavailable(format!("the library does not export {name}")))
}

/// [`xor_gen`] with the given kernels.
pub fn xor_gen_with(
    kernels: IsalKernels,
    data: &[&[u8]],
    parity: &mut [u8],
) -> Result<(), IsalError> {
    let (f, function) = kernel(kernels, false)?;
    let mut array = [std::ptr::null_mut(); MAX_SOURCES + 2];
    let (n, len) = pointer_array(data, &mut [parity], 1, &mut array)?;
    // SAFETY: `array` holds `n` pointers to buffers of `len` bytes, aligned
    // as ISA-L requires; only the last (the parity) is written, and it is a
    // `&mut` borrow distinct from the sources. `kernel` returns an
    // instruction-set specific function only on a CPU that has it.
    let code = unsafe { f(n as c_int, len, array.as_mut_ptr()) };
    if code == 0 {
        Ok(())
    } else {
        Err(IsalError::Failed { function, code })
    }
}

/// [`pq_gen`] with the given kernels.
pub fn pq_gen_with(
    kernels: IsalKernels,
    data: &[&[u8]],
    p: &mut [u8],
    q: &mut [u8],
) -> Result<(), IsalError> {
    let (f, function) = kernel(kernels, true)?;
    let mut array = [std::ptr::null_mut(); MAX_SOURCES + 2];
    let (n, len) = pointer_array(data, &mut [p, q], 32, &mut array)?;
    // SAFETY: as for `xor_gen_with`; the last two pointers (P, Q) are written.
    let code = unsafe { f(n as c_int, len, array.as_mut_ptr()) };
    if code == 0 {
        Ok(())
    } else {
        Err(IsalError::Failed { function, code })
    }
}

/// Whether `kernels` can run here (the library loaded, exporting them, on a CPU that has
/// their instructions), or why not.
pub fn kernels_available(kernels: IsalKernels) -> Result<(), IsalError> {
    kernel(kernels, false)
        .and(kernel(kernels, true))
        .map(|_| ())
}

/// A zero-initialised heap buffer aligned to [`AlignedBuf::ALIGN`] bytes.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// The alignment of every buffer (a cache line; ISA-L needs 32).
    pub const ALIGN: usize = 64;

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1), Self::ALIGN).expect("buffer too large")
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len }
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut buf = Self::zeroed(bytes.len());
        buf.copy_from_slice(bytes);
        buf
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the allocation holds `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        for len in [0, 1, 31, 4096] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % AlignedBuf::ALIGN, 0);
            assert!(b.iter().all(|&x| x == 0));
        }
        let c = AlignedBuf::from_slice(&[1, 2, 3]).clone();
        assert_eq!(&c[..], &[1, 2, 3]);
    }

    #[test]
    fn preconditions_are_checked_before_calling() {
        if let Err(e) = load_library() {
            // CI must have ISA-L; elsewhere its absence only skips this test.
            assert!(std::env::var_os("CI").is_none(), "CI is set but {e}");
            eprintln!("SKIPPED: {e}");
            return;
        }
        let a = AlignedBuf::zeroed(64);
        let b = AlignedBuf::zeroed(64);
        let mut p = AlignedBuf::zeroed(64);
        let mut q = AlignedBuf::zeroed(64);
        assert_eq!(
            xor_gen(&[&a], &mut p),
            Err(IsalError::BadArguments("ISA-L needs at least two sources"))
        );
        assert_eq!(
            pq_gen(&[&a[..48], &b[..48]], &mut p[..48], &mut q[..48]),
            Err(IsalError::BadArguments("length is not a multiple of 32"))
        );
        assert_eq!(
            xor_gen(&[&a[1..33], &b[1..33]], &mut p[..32]),
            Err(IsalError::BadArguments("a buffer is not 32-byte aligned"))
        );
        assert_eq!(
            xor_gen(&[&a[..32], &b], &mut p),
            Err(IsalError::BadArguments("buffers differ in length"))
        );
        let a = AlignedBuf::from_slice(&[0x0f; 64]);
        let b = AlignedBuf::from_slice(&[0xf1; 64]);
        xor_gen(&[&a, &b], &mut p).unwrap();
        assert!(p.iter().all(|&x| x == 0xfe));
    }
}

//! Parity math for raidforge: XOR parity, RAID6 P+Q over GF(2^8), and a
//! generic peeling decoder for XOR parity groups (RM2). The crate knows
//! nothing about disks, stripes or offsets: every function takes equally long
//! byte buffers and either fills some of them or checks them.
//!
//! # Concepts
//!
//! **XOR parity (RAID4/5).** For data buffers `D_0 .. D_{k-1}` the parity is
//! `P = D_0 ^ D_1 ^ ... ^ D_{k-1}` (byte by byte). The k+1 buffers XOR to zero,
//! so any *one* of them equals the XOR of all the others: that is both how P
//! is made and how a lost buffer is rebuilt ([`xor`]).
//!
//! **GF(2^8).** RAID6 needs a second, independent parity. It treats each byte
//! as an element of the finite field GF(2^8): addition is XOR, multiplication
//! is polynomial multiplication modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11d). The
//! element g = {02} generates the field: g^0 .. g^254 are the 255 distinct
//! non-zero bytes. Multiplying by g is one shift plus a conditional XOR with
//! 0x1d; multiplying by any constant is a lookup in two 16-entry tables (one
//! per nibble, `PSHUFB`) or one GFNI affine instruction with an 8x8 bit matrix
//! (see [`gf`]).
//!
//! **P and Q (RAID6).** `P = sum D_i` (plain XOR) and
//! `Q = sum g^i * D_i` for data index i = 0..k-1, which is exactly what Linux
//! MD (`lib/raid6`) and ISA-L's `pq_gen` write, byte for byte. Because the
//! coefficients 1 and g^i are distinct for i < 255, any two lost buffers among
//! the k+2 can be solved for; this is why k is limited to
//! [`pq::MAX_DATA`] = 255. Q can be computed by Horner's scheme
//! (`Q = (..((D_{k-1}) * g ^ D_{k-2}) * g ..) ^ D_0`, multiply-by-2 only) or as
//! a direct sum of constant products; the kernels use whichever is faster for
//! the instruction set. Losing two data buffers x < y: with `P'`, `Q'` the
//! parities of the survivors (lost ones taken as zero),
//! `Pxy = P ^ P' = D_x ^ D_y` and `Qxy = Q ^ Q' = g^x D_x ^ g^y D_y`, so
//! `D_y = (g^x Pxy ^ Qxy) / (g^x ^ g^y)` and `D_x = Pxy ^ D_y` (MD's
//! `raid6_2data_recov`). All of it happens in one pass over the survivors
//! ([`pq::recover`]).
//!
//! **Delta update (read-modify-write).** Parity is linear, so when data
//! buffer i changes from `old` to `new` the parities change by the difference
//! alone: `P ^= old ^ new` and `Q ^= g^i * (old ^ new)`. Other data buffers
//! need not be read ([`xor::update`], [`pq::update`], [`pq::update_many`]).
//!
//! **Parity groups and peeling (RM2).** A *group* is a set of buffers whose
//! XOR is zero (some data buffers plus the parity that covers them). A buffer
//! may belong to several groups. Given the erased buffers, *peeling* repeats:
//! find a group with exactly one erased member, rebuild that member as the XOR
//! of the others, mark it present. It succeeds when nothing erased is left and
//! is stuck (a typed error) when every group still holding an erased buffer
//! holds two or more ([`groups`]). Making parity is the same operation: erase
//! the parity buffers and peel.
//!
//! # Instruction sets
//!
//! Every operation has an auto-dispatching form (using [`Isa::best`]) and a
//! `_with` form that takes an [`Isa`], so tests and benchmarks can force a
//! path. [`Isa::Scalar`] is the plain byte-at-a-time reference (the
//! specification the SIMD paths are tested against); the x86-64 paths are
//! SSE2, AVX2 (nibble tables with `VPSHUFB`), AVX-512BW, and AVX-512 with GFNI.
//! Buffers need no alignment and may have any length, including 0; outputs of
//! 256 KiB or more that are aligned to the vector width are written with
//! non-temporal stores (they would not stay in cache anyway), unless an
//! output starts just past or just before an input modulo 4 KiB: reading
//! that input then waits for each streamed write, so ordinary stores are
//! used. Where buffers sit is the caller's business; the result never
//! depends on it, only the speed.
//!
//! # Errors
//!
//! Bad calls (buffers of different lengths, too many or too few buffers,
//! erasure lists that are out of range, repeated or too long, an [`Isa`] the
//! CPU lacks) return a [`CodecError`]; no call panics on bad input or reads
//! out of bounds. Internal invariants are `debug_assert!`s.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod gf;
pub mod groups;
mod isa;
mod kernels;
pub mod pq;
pub mod xor;

pub use isa::Isa;
use kernels::Table;

/// Names one buffer of a call in a [`CodecError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Buffer {
    /// The buffer at this position of the slice of buffers passed to the call
    /// (data buffers, then the parities, in the documented order).
    Index(usize),
    /// The separately passed XOR parity (or P) buffer.
    P,
    /// The separately passed Q buffer.
    Q,
    /// The `old` contents of the delta at this position of the delta list.
    Old(usize),
    /// The `new` contents of the delta at this position of the delta list.
    New(usize),
}

/// Why a codec call was refused. Nothing is written when an error is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Fewer buffers than the operation needs (for example no data buffer at
    /// all, or a recovery call without room for the parities).
    #[error("too few buffers: got {actual}, need at least {min}")]
    TooFewBuffers {
        /// How many were given.
        actual: usize,
        /// The least the operation accepts.
        min: usize,
    },
    /// More data buffers than the code supports: P+Q distinguishes at most
    /// 255 data buffers because g^255 = g^0.
    #[error("too many data buffers: {k}, the maximum is {max}")]
    TooManyData {
        /// How many data buffers were given.
        k: usize,
        /// The maximum for this code.
        max: usize,
    },
    /// More buffers than the operation supports (see [`xor::MAX_DATA`] and
    /// [`groups::MAX_BUFFERS`]; fixed limits keep the pointer tables on the
    /// stack).
    #[error("too many buffers: {count}, the maximum is {max}")]
    TooManyBuffers {
        /// How many were given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// A buffer's length differs from the first buffer's length.
    #[error("buffer {buffer:?} is {actual} bytes long, expected {expected}")]
    LengthMismatch {
        /// Which buffer.
        buffer: Buffer,
        /// The length of the first buffer of the call.
        expected: usize,
        /// This buffer's length.
        actual: usize,
    },
    /// An index (an erasure, a data index of a delta, a group member) is not
    /// below the number of buffers it refers to.
    #[error("index {index} is out of range: there are {count}")]
    IndexOutOfRange {
        /// The offending index.
        index: usize,
        /// The number of valid indices.
        count: usize,
    },
    /// The same buffer is listed twice as erased.
    #[error("buffer {index} is listed twice as erased")]
    DuplicateErasure {
        /// The repeated index.
        index: usize,
    },
    /// More erased buffers than the code can rebuild (1 for XOR, 2 for P+Q).
    #[error("{erased} buffers erased, the code tolerates at most {max}")]
    TooManyErasures {
        /// How many were listed.
        erased: usize,
        /// The code's tolerance.
        max: usize,
    },
    /// A parity group has fewer than two members or lists a buffer twice.
    #[error("group {group} is malformed: {reason}")]
    InvalidGroup {
        /// The position of the group in the group list.
        group: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Peeling stopped with erased buffers left: every group that holds one
    /// of them holds at least two (or none holds it).
    #[error("peeling is stuck with {remaining} erased buffers left (buffer {first} among them)")]
    Unrecoverable {
        /// How many erased buffers could not be rebuilt.
        remaining: usize,
        /// The lowest-numbered of them.
        first: usize,
    },
    /// The forced instruction set is not supported by this CPU (or this
    /// target architecture).
    #[error("instruction set {isa:?} is not available on this CPU")]
    IsaUnavailable {
        /// The requested instruction set.
        isa: Isa,
    },
}

/// Checks that `isa` can run here.
fn require(isa: Isa) -> Result<(), CodecError> {
    if isa.is_available() {
        Ok(())
    } else {
        Err(CodecError::IsaUnavailable { isa })
    }
}

/// Checks that the erasure list has no repeats, no index `>= count` and at
/// most `max` entries. Returns the indices sorted (at most 2 are ever kept,
/// so this needs no allocation).
fn check_erasures(erased: &[usize], count: usize, max: usize) -> Result<[usize; 2], CodecError> {
    debug_assert!(max <= 2);
    for (i, &e) in erased.iter().enumerate() {
        if e >= count {
            return Err(CodecError::IndexOutOfRange { index: e, count });
        }
        if erased[..i].contains(&e) {
            return Err(CodecError::DuplicateErasure { index: e });
        }
    }
    if erased.len() > max {
        return Err(CodecError::TooManyErasures {
            erased: erased.len(),
            max,
        });
    }
    let mut sorted = [usize::MAX; 2];
    sorted[..erased.len()].copy_from_slice(erased);
    if sorted[0] > sorted[1] {
        sorted.swap(0, 1);
    }
    Ok(sorted)
}

/// Reads each buffer's address and length exactly once (a second `as_ref`
/// could answer differently), checking that all lengths are equal. Returns
/// the common length (0 for no buffers).
fn gather<D: AsRef<[u8]>, const N: usize>(
    bufs: &[D],
    out: &mut Table<*const u8, N>,
) -> Result<usize, CodecError> {
    debug_assert!(bufs.len() <= N && out.len() == 0);
    let mut len = 0;
    for (i, buf) in bufs.iter().enumerate() {
        let buf = buf.as_ref();
        if i == 0 {
            len = buf.len();
        } else if buf.len() != len {
            return Err(CodecError::LengthMismatch {
                buffer: Buffer::Index(i),
                expected: len,
                actual: buf.len(),
            });
        }
        out.push(buf.as_ptr());
    }
    Ok(len)
}

/// [`gather`] for mutable buffers.
fn gather_mut<B: AsMut<[u8]>, const N: usize>(
    bufs: &mut [B],
    out: &mut Table<*mut u8, N>,
) -> Result<usize, CodecError> {
    debug_assert!(bufs.len() <= N && out.len() == 0);
    let mut len = 0;
    for (i, buf) in bufs.iter_mut().enumerate() {
        let buf = buf.as_mut();
        if i == 0 {
            len = buf.len();
        } else if buf.len() != len {
            return Err(CodecError::LengthMismatch {
                buffer: Buffer::Index(i),
                expected: len,
                actual: buf.len(),
            });
        }
        out.push(buf.as_mut_ptr());
    }
    Ok(len)
}

/// Checks that a separately passed buffer has the call's common length.
fn same_len(buffer: Buffer, expected: usize, actual: usize) -> Result<(), CodecError> {
    if actual == expected {
        Ok(())
    } else {
        Err(CodecError::LengthMismatch {
            buffer,
            expected,
            actual,
        })
    }
}

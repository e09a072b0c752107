//! Which member bytes a logical range's contents come from: for answering "does this range
//! read as zeros?" without reading it (NBD block status, `dev::serve_support`), by asking the
//! members whether those bytes are holes.
//!
//! [`read_sources`] gives, for each chunk's piece of a logical range, member ranges such that
//! **if every one of them reads as zeros on the members present, a read of the piece returns
//! zeros**, whatever plan serves it. Why that holds:
//!
//! - Healthy cycle (every place of the cycle's current layout available, no stale parity): a
//!   read of the piece reads its data place or a copy of it ([`crate::plan_read_balanced`]
//!   picks among the copies), all of which are places of the stripes holding the data place.
//!   The ranges are every place of those stripes, whole chunks: data, copies and parities
//!   (parities are not read, but a write to the stripe writes them, which makes the answer
//!   more careful, never wrong).
//! - Any other cycle (a member failed or replaced and not rebuilt, a deferred parity): a read
//!   may reconstruct the piece, peeling across the cycle's stripes, from any place of the
//!   cycle. Every place of a cycle, in every layout generation, lies in the cycle's member rows
//!   (`Geometry::stride_rows` covers the healthy and every rebuilt layout), so the ranges are
//!   those rows on every member. A member that is missing is never read, so the caller skips
//!   it; every codec op is linear over GF(2^8) (copies, XOR, P+Q encode, update and recover),
//!   so zeros in give zeros out.
//!
//! The answer is as of one state: the caller holds the state (or the read's stripe locks)
//! while it looks at the members, so that no write to those stripes is half done.

use layout::Disk;

use crate::array::{ArrayState, Geometry, PlaceId};
use crate::planner::split;
use crate::recon::View;
use crate::CoreError;

/// Bytes of one member's data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberRange {
    /// The member.
    pub member: Disk,
    /// Byte offset in the member's data area.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A piece of a logical range (inside one chunk) and the member ranges its bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    /// Logical byte offset of the piece.
    pub offset: u64,
    /// Length of the piece in bytes.
    pub len: u64,
    /// If all of these read as zeros (on the members present), the piece reads as zeros.
    pub ranges: Vec<MemberRange>,
}

/// The sources of `len` bytes at logical byte `offset`, one entry per chunk touched, in
/// order (see the module documentation).
pub fn read_sources(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
) -> Result<Vec<Sources>, CoreError> {
    let cb = geo.chunk_bytes();
    let mut out = Vec::new();
    each_piece(
        geo,
        state,
        offset,
        len,
        |c, view, impaired, p, at, piece_len| {
            let ranges = if impaired {
                let rows = geo.stride_rows() * cb;
                (0..geo.disks() as Disk)
                    .map(|member| MemberRange {
                        member,
                        offset_bytes: geo.base_row(c) * cb,
                        len: rows,
                    })
                    .collect()
            } else {
                let mut v: Vec<MemberRange> = Vec::new();
                for &(s, _) in geo.place_units(p) {
                    for &u in geo.stripe_places(s) {
                        let loc = view.loc(u);
                        let r = MemberRange {
                            member: loc.disk,
                            offset_bytes: geo.member_offset(c, loc, 0),
                            len: cb,
                        };
                        if !v.contains(&r) {
                            v.push(r);
                        }
                    }
                }
                v
            };
            out.push(Sources {
                offset: offset + at,
                len: piece_len,
                ranges,
            });
        },
    )?;
    Ok(out)
}

/// Calls `f(cycle, view, impaired, data place, offset in the range, length)` for each
/// chunk's piece of `len` bytes at logical byte `offset`, in order. Whether a cycle is
/// impaired is asked once per cycle (a RAID+ cycle has thousands of places).
fn each_piece(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
    mut f: impl FnMut(u64, &View, bool, PlaceId, u64, u64),
) -> Result<(), CoreError> {
    for part in split(geo, offset, len)? {
        let c = part.cycle;
        let view = View::current(geo, state, c);
        let impaired = view.any_lost();
        for (p, at, piece_len) in part.pieces() {
            f(c, &view, impaired, p, at, piece_len);
        }
    }
    Ok(())
}

/// Where a chunk's piece of a logical range is stored now: a member and a byte offset in its
/// data area, or `None` when the piece's cycle has a lost place (a read would reconstruct it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPiece {
    /// Logical byte offset of the piece.
    pub offset: u64,
    /// Length in bytes (inside one chunk).
    pub len: u64,
    /// The member and the byte offset in its data area of the piece's data place.
    pub at: Option<(Disk, u64)>,
}

/// The data places of `len` bytes at logical byte `offset`, one entry per chunk touched, in
/// order: for an executor that holds the member contents of some cycles already (IDO's
/// migration of a hot zone takes the zone from the rebuild's own reads and writes).
pub fn data_pieces(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
) -> Result<Vec<DataPiece>, CoreError> {
    let cb = geo.chunk_bytes();
    let mut out = Vec::new();
    each_piece(
        geo,
        state,
        offset,
        len,
        |c, view, impaired, p, at, piece_len| {
            let lo = offset + at;
            let at = (!impaired).then(|| {
                let loc = view.loc(p);
                (loc.disk, geo.member_offset(c, loc, lo % cb))
            });
            out.push(DataPiece {
                offset: lo,
                len: piece_len,
                at,
            });
        },
    )?;
    Ok(out)
}

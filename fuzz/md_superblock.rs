//! Fuzz target: `raidcore::md::MdSuperblock::decode` (Linux MD's v1.x superblock).
//!
//! Included by `crates/raidcore/examples/fuzz_md_superblock.rs` (the campaign driver) and
//! `crates/raidcore/tests/fuzz_md_superblock.rs` (bounded cases in CI). The format's promises,
//! from the layout table in `md.rs` and md_p.h (not from the decoder):
//!
//! - any input: no panic; fewer than 256 bytes is `Short { got: len, need: 256 }`; bytes after
//!   the superblock's `256 + 2 * max_dev` are not looked at;
//! - a valid superblock round-trips: `decode(encode(sb)) == sb`;
//! - every byte is a field or padding that must be zero, so whatever decodes re-encodes to the
//!   input's bytes exactly, and its checksum is MD's;
//! - any single bit flipped in a valid superblock is refused (MD's checksum, a folded 64-bit
//!   word sum, changes with every single bit): as damage, or in the magic and version words as
//!   those (a flip in `max_dev` changes the bytes the checksum covers; it is refused unless the
//!   dropped roles happen to sum to the change, a 2^-32 chance, so that word is not asserted);
//! - a refusal of a field names a field of `mdp_superblock_1`.
#![allow(dead_code)]

use crate::fuzzutil::{mutate, CaseResult, Rng, INTERESTING};
use raidcore::md::{
    md_checksum, MdSuperblock, MdSuperblockError, FEATURE_ALL, FEATURE_BAD_BLOCKS,
    FEATURE_BITMAP_OFFSET, FEATURE_JOURNAL, FEATURE_MULTIPLE_PPLS, FEATURE_PPL, MD_MAX_DEV_LIMIT,
    MD_SB_HEAD_BYTES,
};

/// Names a field refusal may give.
const FIELD_NAMES: [&str; 13] = [
    "max_dev",
    "pad0",
    "pad3",
    "feature_map",
    "level",
    "raid_disks",
    "data_size",
    "bblog_size",
    "bblog_offset",
    "ppl",
    "bitmap_offset",
    "super_offset",
    "size",
];

/// A valid superblock drawn from `rng`: every field anywhere in its range, edges often.
pub fn gen_md(rng: &mut Rng) -> MdSuperblock {
    let max_dev = match rng.below(4) {
        0 => 0,
        1 => MD_MAX_DEV_LIMIT as usize,
        2 => 128,
        _ => rng.index(40),
    };
    let dev_roles = (0..max_dev)
        .map(|_| match rng.below(5) {
            0 => 0xffff,
            1 => 0xfffe,
            2 => 0xfffd,
            3 => rng.next_u64() as u16,
            _ => rng.below(64) as u16,
        })
        .collect();
    let mut feature_map = rng.next_u64() as u32 & FEATURE_ALL;
    if feature_map & (FEATURE_PPL | FEATURE_MULTIPLE_PPLS) != 0 {
        feature_map &= !(FEATURE_BITMAP_OFFSET | FEATURE_JOURNAL);
        if feature_map & FEATURE_PPL != 0 {
            feature_map &= !FEATURE_MULTIPLE_PPLS;
        }
    }
    let mut uuid = [0u8; 16];
    uuid.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    let mut dev_uuid = [0u8; 16];
    dev_uuid.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    let mut name = [0u8; 32];
    let n = rng.index(33);
    name[..n].iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    let data_offset = rng.skewed() >> 1;
    let data_size = 10 + (rng.skewed() >> 2);
    let nonzero = |rng: &mut Rng| (rng.next_u64() as u32).max(1);
    let mut bitmap_offset = rng.next_u64() as u32;
    if feature_map & FEATURE_BITMAP_OFFSET != 0 && bitmap_offset == 0 {
        bitmap_offset = 8;
    }
    if feature_map & (FEATURE_PPL | FEATURE_MULTIPLE_PPLS) != 0 {
        bitmap_offset = (bitmap_offset & 0xffff) | (u32::from(nonzero(rng) as u16).max(1) << 16);
    }
    let (bblog_size, bblog_offset) = if feature_map & FEATURE_BAD_BLOCKS != 0 {
        (1 + rng.below(8) as u16, nonzero(rng) as i32)
    } else {
        (rng.next_u64() as u16, rng.next_u64() as i32)
    };
    MdSuperblock {
        feature_map,
        set_uuid: uuid,
        set_name: name,
        ctime: rng.next_u64(),
        level: *rng.pick(&[-4, -1, 0, 1, 4, 5, 6, 10]),
        layout: rng.next_u64() as u32,
        size: rng.skewed(),
        chunk_sectors: rng.next_u64() as u32,
        raid_disks: 1 + rng.below(0xfeff) as u32,
        bitmap_offset,
        new_level: rng.next_u64() as i32,
        reshape_position: rng.skewed(),
        delta_disks: rng.next_u64() as i32,
        new_layout: rng.next_u64() as u32,
        new_chunk: rng.next_u64() as u32,
        new_offset: rng.next_u64() as i32,
        data_offset,
        data_size,
        super_offset: rng.skewed(),
        recovery_offset: rng.skewed(),
        dev_number: if rng.chance(1, 2) {
            rng.below(max_dev as u64 + 2) as u32
        } else {
            rng.next_u64() as u32
        },
        cnt_corrected_read: rng.next_u64() as u32,
        device_uuid: dev_uuid,
        devflags: rng.next_u64() as u8,
        bblog_shift: rng.next_u64() as u8,
        bblog_size,
        bblog_offset,
        utime: rng.next_u64(),
        events: rng.skewed(),
        resync_offset: if rng.chance(1, 2) {
            u64::MAX
        } else {
            rng.skewed()
        },
        dev_roles,
    }
}

/// Stores MD's checksum (so mutations reach the field checks).
pub fn fix_checksum(b: &mut [u8]) {
    if b.len() >= MD_SB_HEAD_BYTES {
        let len = MdSuperblock::needed_len(b).min(b.len());
        let c = md_checksum(&b[..len]);
        b[216..220].copy_from_slice(&c.to_le_bytes());
    }
}

/// The fields: (offset, width).
const FIELDS: [(usize, usize); 34] = [
    (0, 4),
    (4, 4),
    (8, 4),
    (12, 4),
    (16, 16),
    (32, 32),
    (64, 8),
    (72, 4),
    (76, 4),
    (80, 8),
    (88, 4),
    (92, 4),
    (96, 4),
    (100, 4),
    (104, 8),
    (112, 4),
    (116, 4),
    (120, 4),
    (124, 4),
    (128, 8),
    (136, 8),
    (144, 8),
    (152, 8),
    (160, 4),
    (164, 4),
    (168, 16),
    (184, 1),
    (185, 1),
    (186, 2),
    (188, 4),
    (200, 8),
    (208, 8),
    (220, 4),
    (224, 32),
];

fn kind(r: &Result<MdSuperblock, MdSuperblockError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(MdSuperblockError::Short { .. }) => "short".into(),
        Err(MdSuperblockError::NoMagic { .. }) => "no-magic".into(),
        Err(MdSuperblockError::Version(_)) => "version".into(),
        Err(MdSuperblockError::Checksum { .. }) => "checksum".into(),
        Err(MdSuperblockError::Field { field, .. }) => format!("field:{field}"),
        Err(e) => format!("other:{e}"),
    }
}

/// The properties every input must satisfy; `original` is the valid superblock and encoding
/// the input was derived from, and `fixed` whether the mutation recomputed the checksum.
pub fn check(input: &[u8], original: Option<(&MdSuperblock, &[u8])>, fixed: bool) -> CaseResult {
    let r = MdSuperblock::decode(input);
    if input.len() < MD_SB_HEAD_BYTES {
        return match r {
            Err(MdSuperblockError::Short { got, need: 256 }) if got == input.len() => Ok(kind(&r)),
            other => Err(format!("{} bytes decoded as {other:?}", input.len())),
        };
    }
    let need = MdSuperblock::needed_len(input);
    if input.len() > need && MdSuperblock::decode(&input[..need]) != r {
        return Err("bytes after the superblock changed the result".into());
    }
    if let Err(MdSuperblockError::Field { field, reason }) = &r {
        if !FIELD_NAMES.contains(field) {
            return Err(format!("refusal names {field:?}, not a field: {reason}"));
        }
        if reason.is_empty() {
            return Err(format!("refusal of {field} says nothing"));
        }
    }
    if let Some((sb, enc)) = original {
        if input.len() >= enc.len() && input[..enc.len()] == *enc {
            if r.as_ref() != Ok(sb) {
                return Err(format!("the valid encoding decoded as {r:?}"));
            }
        } else if !fixed && input.len() == enc.len() {
            let diff: Vec<usize> = (0..enc.len()).filter(|&i| input[i] != enc[i]).collect();
            let bits: u32 = diff.iter().map(|&i| (input[i] ^ enc[i]).count_ones()).sum();
            // A flip in max_dev changes which bytes the checksum covers: refused too, except
            // by a 2^-32 coincidence of the dropped roles' sum, so not asserted there.
            if bits == 1 && r.is_ok() && !(220..224).contains(&diff[0]) {
                return Err(format!(
                    "a single bit flipped at byte {} was accepted",
                    diff[0]
                ));
            }
        }
    }
    if let Ok(d) = &r {
        let again = d
            .encode()
            .map_err(|e| format!("decoded {d:?} but encoding it fails: {e}"))?;
        if again[..] != input[..again.len()] {
            return Err("a decoded superblock re-encodes to other bytes".into());
        }
        if MdSuperblock::decode(&again).as_ref() != Ok(d) {
            return Err("re-encoded superblock decodes differently".into());
        }
    }
    Ok(kind(&r))
}

/// One campaign case: a valid superblock, mutated one of several ways.
pub fn case(seed: u64, input: &mut Vec<u8>) -> CaseResult {
    let mut rng = Rng::new(seed);
    let sb = gen_md(&mut rng);
    let enc = sb
        .encode()
        .map_err(|e| format!("a valid superblock failed to encode: {e}: {sb:?}"))?;
    if MdSuperblock::decode(&enc).as_ref() != Ok(&sb) {
        return Err(format!("a valid superblock does not round-trip: {sb:?}"));
    }
    input.extend_from_slice(&enc);
    let mode = rng.below(7);
    let mut fixed = false;
    match mode {
        0 => {}
        1 => {
            let bit = rng.index(enc.len() * 8);
            input[bit / 8] ^= 1 << (bit % 8);
        }
        2 => mutate(
            &mut rng,
            input,
            2 * enc.len(),
            &[&0xa92b_4efcu32.to_le_bytes()],
            &[],
        ),
        3 => {
            mutate(
                &mut rng,
                input,
                2 * enc.len(),
                &[&0xa92b_4efcu32.to_le_bytes()],
                &[],
            );
            fix_checksum(input);
            fixed = true;
        }
        4 => {
            let (at, width) = *rng.pick(&FIELDS);
            let v = *rng.pick(&INTERESTING);
            let v = if rng.chance(1, 3) {
                v.wrapping_add(rng.below(3)).wrapping_sub(1)
            } else {
                v
            };
            let b = v.to_le_bytes();
            for i in 0..width {
                input[at + i] = b[i % 8];
            }
            fix_checksum(input);
            fixed = true;
        }
        5 => {
            // A bit flipped with the checksum recomputed: the field checks decide.
            let bit = rng.index(enc.len() * 8);
            input[bit / 8] ^= 1 << (bit % 8);
            fix_checksum(input);
            fixed = true;
        }
        _ => {
            if rng.chance(1, 2) {
                let to = rng.index(enc.len());
                input.truncate(to);
            } else {
                let n = 1 + rng.index(64);
                let junk = rng.bytes(n);
                input.extend_from_slice(&junk);
            }
        }
    }
    let outcome = check(input, Some((&sb, &enc)), fixed)?;
    Ok(format!(
        "{}:{outcome}",
        [
            "valid",
            "bitflip",
            "mutate",
            "mutate+csum",
            "field+csum",
            "bitflip+csum",
            "length"
        ][mode as usize]
    ))
}

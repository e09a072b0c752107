//! Fuzz target: `raidcore::superblock::Superblock::decode`.
//!
//! Included by `crates/raidcore/examples/fuzz_superblock.rs` (the campaign driver) and
//! `crates/raidcore/tests/fuzz_superblock.rs` (bounded cases in CI). The format's promises,
//! from the layout table in `superblock.rs` (not from the decoder):
//!
//! - any input: no panic; fewer than 4096 bytes is `Short(len)`; bytes after the first 4096
//!   are not looked at;
//! - a valid superblock round-trips: `decode(encode(sb)) == sb`;
//! - a change confined to 32 consecutive bits of the first 4096 bytes (any single bit flip
//!   included) is refused (CRC-32C detects every burst of up to 32 bits), as damage
//!   (`Checksum`) or, in the magic and version, as `NoMagic` / `Version`;
//! - whatever decodes is what the bytes say: re-encoding the decoded superblock gives back the
//!   input's bytes at every defined offset (only reserved and unused bytes may differ), and
//!   the re-encoding decodes to the same superblock (encode accepts what decode accepts).
#![allow(dead_code)]

use crate::fuzzutil::{mutate, CaseResult, Rng, INTERESTING};
use raidcore::superblock::{
    crc32c, ArrayStateTag, Event, Superblock, SuperblockError, FEATURE_CHECKSUMS, FEATURE_JOURNAL,
    SUPERBLOCK_BYTES,
};
use raidcore::ParityPolicy;

/// A valid superblock drawn from `rng`: every field anywhere in its documented range, with
/// the edges (counts of 0 and of the maximum, empty and 1024-byte layouts) often.
pub fn gen_superblock(rng: &mut Rng) -> Superblock {
    let member_count = match rng.below(4) {
        0 => 1,
        1 => 4096,
        _ => 1 + rng.below(64) as u32,
    };
    let member_index = rng.below(u64::from(member_count)) as u32;
    let layout_len = match rng.below(4) {
        0 => 0,
        1 => 1024,
        _ => rng.index(120),
    };
    let mut layout = String::new();
    let alphabet = ['a', 'z', '=', ';', '0', '9', ' ', 'é', '€', '😀'];
    while layout.len() < layout_len {
        let c = if rng.chance(1, 2) {
            *rng.pick(&alphabet)
        } else {
            (b'a' + rng.below(26) as u8) as char
        };
        if layout.len() + c.len_utf8() > layout_len {
            if layout_len - layout.len() < 4 {
                layout.push('x');
            }
            continue;
        }
        layout.push(c);
    }
    let n_events = match rng.below(4) {
        0 => 0,
        1 => 64,
        _ => rng.index(8),
    };
    let events = (0..n_events)
        .map(|_| {
            let m = rng.below(u64::from(member_count)) as u32;
            if rng.chance(1, 2) {
                Event::Fail(m)
            } else {
                Event::Replace(m)
            }
        })
        .collect::<Vec<_>>();
    let n_runs = match rng.below(4) {
        0 => 0,
        1 => 128,
        _ => 1 + rng.index(8),
    };
    let mut runs = Vec::with_capacity(n_runs);
    let mut first = 0u64;
    for i in 0..n_runs {
        if i > 0 {
            // Strictly increasing, leaving room for the remaining runs.
            let room = u64::MAX - first - (n_runs - i) as u64;
            first += 1 + rng.skewed().min(room / 2);
        }
        runs.push((first, rng.below(n_events as u64 + 1) as u32));
    }
    let state = *rng.pick(&[
        ArrayStateTag::Clean,
        ArrayStateTag::Active,
        ArrayStateTag::Degraded,
        ArrayStateTag::Rebuilding,
    ]);
    let mut uuid = [0u8; 16];
    uuid.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    let parity = *rng.pick(&[ParityPolicy::Eager, ParityPolicy::Lazy]);
    let bpgl_capacity = match rng.below(3) {
        0 => 0,
        1 => u32::MAX,
        _ => rng.next_u64() as u32,
    };
    let data_offset_bytes = 4096 * (1 + rng.skewed() % (u64::MAX / 4096 - 1));
    // Version 3's regions: none, or a journal and/or checksum region between the superblock
    // and the data offset.
    let pages = data_offset_bytes / 4096 - 1;
    let (mut features, mut journal, mut checksum) = (0u32, (0u64, 0u64), (0u64, 0u64));
    if pages >= 2 && rng.chance(2, 3) {
        let j = if rng.chance(1, 2) {
            1 + rng.below(pages / 2)
        } else {
            0
        };
        let c = 1 + rng.below(pages - j);
        if j > 0 {
            features |= FEATURE_JOURNAL;
            journal = (4096, j * 4096);
        }
        if rng.chance(3, 4) || j == 0 {
            features |= FEATURE_CHECKSUMS;
            checksum = (4096 * (1 + j), c * 4096);
        }
    }
    Superblock {
        features,
        journal_offset_bytes: journal.0,
        journal_len_bytes: journal.1,
        checksum_offset_bytes: checksum.0,
        checksum_len_bytes: checksum.1,
        parity,
        bpgl_capacity,
        uuid,
        member_index,
        member_count,
        generation: rng.skewed(),
        state,
        data_offset_bytes,
        data_bytes: rng.skewed(),
        chunk_bytes: 512 * (1 + rng.skewed() % (u64::MAX / 512 - 1)),
        created_unix_secs: rng.skewed(),
        layout,
        events,
        runs,
    }
}

/// Stores the CRC-32C of bytes 0..4092 at 4092 (so mutations reach the field checks).
pub fn fix_crc(b: &mut [u8]) {
    if b.len() >= SUPERBLOCK_BYTES {
        let crc = crc32c(&b[..4092]);
        b[4092..4096].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The documented fields: (offset, width).
const FIELDS: [(usize, usize); 24] = [
    (0, 8),
    (8, 4),
    (12, 4),
    (16, 16),
    (32, 4),
    (36, 4),
    (40, 8),
    (48, 4),
    (56, 8),
    (64, 8),
    (72, 8),
    (80, 8),
    (88, 2),
    (1120, 2),
    (1442, 2),
    (1122, 5),
    (1444, 12),
    (2980, 1),
    (2984, 4),
    (2988, 4),
    (2992, 8),
    (3000, 8),
    (3008, 8),
    (3016, 8),
];

fn kind(r: &Result<Superblock, SuperblockError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(SuperblockError::NoMagic) => "no-magic".into(),
        Err(SuperblockError::Version(_)) => "version".into(),
        Err(SuperblockError::Checksum { .. }) => "checksum".into(),
        Err(SuperblockError::Short(_)) => "short".into(),
        Err(SuperblockError::Field { field, reason }) => {
            // The reason's first word tells the checks apart ("member 9 out of range",
            // "count 70", "first cycles must ...").
            // Numbers are values, not checks: "4096+0" and "0+512" are the same check (each
            // run of digits becomes one '#').
            let mut first = String::new();
            for c in reason.split(' ').next().unwrap_or("").chars() {
                if !c.is_ascii_digit() {
                    first.push(c);
                } else if !first.ends_with('#') {
                    first.push('#');
                }
            }
            format!("field:{field}:{first}")
        }
        Err(e) => format!("other:{e}"),
    }
}

/// The bytes re-encoding may legitimately change: reserved and unused space, and the CRC
/// (which covers them). An older superblock re-encodes as version 3: its version field and
/// the fields later versions added are not compared.
fn defined_bytes(sb: &Superblock, version: u32) -> Vec<std::ops::Range<usize>> {
    let l = sb.layout.len();
    let e = sb.events.len();
    let r = sb.runs.len();
    let mut v = match version {
        1 => vec![0..8, 12..52],
        2 => vec![0..8, 12..52, 2980..2981, 2984..2988],
        _ => vec![0..52, 2980..2981, 2984..3024],
    };
    v.extend([56..90 + l, 1120..1122 + 5 * e, 1442..1444 + 12 * r]);
    v
}

/// The properties every input must satisfy; `original` is the valid superblock the input was
/// derived from and `crc_fixed` whether the mutation recomputed the checksum.
pub fn check(input: &[u8], original: Option<(&Superblock, &[u8])>, crc_fixed: bool) -> CaseResult {
    let r = Superblock::decode(input);
    if input.len() < SUPERBLOCK_BYTES {
        return match r {
            Err(SuperblockError::Short(n)) if n == input.len() => Ok(kind(&r)),
            other => Err(format!("{} bytes decoded as {other:?}", input.len())),
        };
    }
    let head = &input[..SUPERBLOCK_BYTES];
    if input.len() > SUPERBLOCK_BYTES && Superblock::decode(head) != r {
        return Err("bytes after the first 4096 changed the result".into());
    }
    if let Some((sb, enc)) = original {
        if head == enc {
            if r.as_ref() != Ok(sb) {
                return Err(format!("the valid encoding decoded as {r:?}"));
            }
        } else if !crc_fixed {
            // Where do the bytes differ? Within 32 consecutive bits the CRC must catch it.
            let first = head.iter().zip(enc).position(|(a, b)| a != b).unwrap();
            let last = SUPERBLOCK_BYTES
                - 1
                - head
                    .iter()
                    .rev()
                    .zip(enc.iter().rev())
                    .position(|(a, b)| a != b)
                    .unwrap();
            let bit_first = first * 8 + (head[first] ^ enc[first]).trailing_zeros() as usize;
            let bit_last = last * 8 + 7 - (head[last] ^ enc[last]).leading_zeros() as usize;
            if bit_last - bit_first < 32 {
                match &r {
                    Err(SuperblockError::Checksum { .. }) => {}
                    Err(SuperblockError::NoMagic) if first < 8 => {}
                    Err(SuperblockError::Version(_))
                        if (8..12).contains(&first) || (8..12).contains(&last) => {}
                    other => {
                        return Err(format!(
                            "a {}-bit burst at byte {first} was not caught: {other:?}",
                            bit_last - bit_first + 1
                        ))
                    }
                }
            }
        }
    }
    if let Ok(d) = &r {
        let again = d
            .encode()
            .map_err(|e| format!("decoded {d:?} but encoding it fails: {e}"))?;
        if Superblock::decode(&again).as_ref() != Ok(d) {
            return Err(format!("re-encoded {d:?} decodes differently"));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        for range in defined_bytes(d, version) {
            if head[range.clone()] != again[range.clone()] {
                return Err(format!(
                    "decoded superblock re-encodes differently in bytes {range:?}: {d:?}"
                ));
            }
        }
        if u32::from_le_bytes(head[4092..4096].try_into().unwrap()) != crc32c(&head[..4092]) {
            return Err("accepted with a wrong checksum".into());
        }
    }
    Ok(kind(&r))
}

/// One campaign case: a valid superblock, mutated one of several ways.
pub fn case(seed: u64, input: &mut Vec<u8>) -> CaseResult {
    let mut rng = Rng::new(seed);
    let sb = gen_superblock(&mut rng);
    let enc = sb
        .encode()
        .map_err(|e| format!("a valid superblock failed to encode: {e}: {sb:?}"))?;
    if enc.len() != SUPERBLOCK_BYTES {
        return Err(format!("encoded {} bytes", enc.len()));
    }
    input.extend_from_slice(&enc);
    let mode = rng.below(7);
    let mut crc_fixed = false;
    match mode {
        // The valid encoding itself.
        0 => {}
        // One bit flipped.
        1 => {
            let bit = rng.index(SUPERBLOCK_BYTES * 8);
            input[bit / 8] ^= 1 << (bit % 8);
        }
        // A burst of up to 32 bits.
        2 => {
            let at = rng.index(SUPERBLOCK_BYTES - 3);
            let x = (rng.next_u64() as u32 | 1) >> rng.below(32);
            let mut w = u32::from_le_bytes(input[at..at + 4].try_into().unwrap());
            w ^= x.max(1);
            input[at..at + 4].copy_from_slice(&w.to_le_bytes());
        }
        // Generic mutations, checksum left as it is.
        3 => mutate(&mut rng, input, 2 * SUPERBLOCK_BYTES, &[b"RAIDFRG\0"], &[]),
        // Generic mutations, then a correct checksum: reaches the field checks.
        4 => {
            mutate(&mut rng, input, 2 * SUPERBLOCK_BYTES, &[b"RAIDFRG\0"], &[]);
            fix_crc(input);
            crc_fixed = true;
        }
        // One documented field set to an interesting value, correct checksum.
        5 => {
            let (at, width) = *rng.pick(&FIELDS);
            let v = *rng.pick(&INTERESTING);
            let v = if rng.chance(1, 3) {
                v.wrapping_add(rng.below(3)).wrapping_sub(1)
            } else {
                v
            };
            let b = v.to_le_bytes();
            let n = width.min(8);
            input[at..at + n].copy_from_slice(&b[..n]);
            fix_crc(input);
            crc_fixed = true;
        }
        // Truncated, or extended with junk.
        _ => {
            if rng.chance(1, 2) {
                let to = rng.index(SUPERBLOCK_BYTES);
                input.truncate(to);
            } else {
                let n = 1 + rng.index(64);
                let junk = rng.bytes(n);
                input.extend_from_slice(&junk);
            }
        }
    }
    let outcome = check(input, Some((&sb, &enc)), crc_fixed)?;
    Ok(format!(
        "{}:{outcome}",
        [
            "valid",
            "bitflip",
            "burst",
            "mutate",
            "mutate+crc",
            "field+crc",
            "length"
        ][mode as usize]
    ))
}

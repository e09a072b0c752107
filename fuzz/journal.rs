//! Fuzz target: the write journal's decoders, `raidcore::journal::JournalRecord::decode` (with
//! `encoded_len`) and `Checkpoint::decode`.
//!
//! Included by `crates/raidcore/examples/fuzz_journal.rs` (the campaign driver) and
//! `crates/raidcore/tests/fuzz_journal.rs` (bounded cases in CI). The promises, from the
//! format table in `crates/raidcore/src/journal.rs` (not from the decoder):
//!
//! - any input: no panic; an input of fewer than 52 bytes is `Short`;
//! - a valid record round-trips, padding or trailing bytes after its encoded length ignored,
//!   and `encoded_len` of its first bytes is that length;
//! - a change confined to 32 consecutive bits of a record's encoded bytes is refused (CRC-32C
//!   detects every burst of up to 32 bits); so is a torn record: a prefix of its 512-byte
//!   sectors followed by zeros (what a crash during its write leaves), or any truncation;
//! - whatever decodes is what the bytes say: re-encoding the decoded record gives back the
//!   input's bytes up to the encoded length, and `encoded_len` says that length;
//! - the same for checkpoints (4096 bytes; reserved bytes must be zero).
//!
//! The first byte of a campaign input says which decoder it is for (0: record, 1:
//! checkpoint), so that the corpus replays both.
#![allow(dead_code)]

use crate::fuzzutil::{mutate, CaseResult, Rng, INTERESTING};
use raidcore::journal::{
    padded, Checkpoint, JournalEntry, JournalError, JournalRecord, CHECKPOINT_BYTES,
    RECORD_HEADER_BYTES,
};
use raidcore::superblock::crc32c;

/// A valid record drawn from `rng`: 1 to 8 entries (often 1), lengths from 1 byte to a few
/// KiB, members and offsets anywhere (offsets up to 2^64 - length).
pub fn gen_record(rng: &mut Rng) -> JournalRecord {
    let n = if rng.chance(1, 3) {
        1
    } else {
        1 + rng.index(8)
    };
    let entries = (0..n)
        .map(|_| {
            let len = match rng.below(4) {
                0 => 1,
                1 => 512 * (1 + rng.index(8)),
                _ => 1 + rng.index(3000),
            };
            let offset = match rng.below(3) {
                0 => 0,
                1 => u64::MAX - len as u64,
                _ => rng.skewed(),
            };
            JournalEntry {
                member: match rng.below(3) {
                    0 => 0,
                    1 => u32::MAX,
                    _ => rng.below(64) as u32,
                },
                offset,
                data: rng.bytes(len),
            }
        })
        .collect();
    let mut uuid = [0u8; 16];
    uuid.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    JournalRecord {
        uuid,
        sequence: rng.skewed(),
        entries,
    }
}

fn gen_checkpoint(rng: &mut Rng) -> Checkpoint {
    let mut uuid = [0u8; 16];
    uuid.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    Checkpoint {
        uuid,
        sequence: rng.skewed(),
        watermark: rng.skewed(),
        tail: 4096 * (rng.skewed() % (u64::MAX / 4096)),
    }
}

/// Recomputes a record's CRC where its length field says it is (if that is inside the input).
pub fn fix_record_crc(b: &mut [u8]) {
    if b.len() < 16 {
        return;
    }
    let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    if (RECORD_HEADER_BYTES + 4..=b.len()).contains(&len) {
        let crc = crc32c(&b[..len - 4]);
        b[len - 4..len].copy_from_slice(&crc.to_le_bytes());
    }
}

fn fix_checkpoint_crc(b: &mut [u8]) {
    if b.len() >= 4096 {
        let crc = crc32c(&b[..4092]);
        b[4092..4096].copy_from_slice(&crc.to_le_bytes());
    }
}

fn kind(e: &JournalError) -> String {
    match e {
        JournalError::Short { .. } => "short".into(),
        JournalError::NoMagic => "no-magic".into(),
        JournalError::Version(_) => "version".into(),
        JournalError::Checksum => "checksum".into(),
        JournalError::Field { field, .. } => format!("field:{field}"),
        e => format!("other:{e}"),
    }
}

/// The properties of the record decoder on `input`; `original` is the valid encoding the
/// input came from (if any) and `crc_fixed` whether the mutation recomputed the CRC.
pub fn check_record(input: &[u8], original: Option<&[u8]>, crc_fixed: bool) -> CaseResult {
    let r = JournalRecord::decode(input);
    if input.len() < RECORD_HEADER_BYTES + 4 && !matches!(r, Err(JournalError::Short { .. })) {
        return Err(format!("{} bytes decoded as {r:?}", input.len()));
    }
    if let Some(enc) = original {
        let len = JournalRecord::encoded_len(enc).ok_or("the valid encoding has no length")?;
        if input.len() >= len && input[..len] == enc[..len] {
            let want = JournalRecord::decode(enc).map_err(|e| format!("valid: {e}"))?;
            if r.as_ref() != Ok(&want) {
                return Err(format!(
                    "the valid encoding (plus {} bytes) decoded as {r:?}",
                    input.len() - len
                ));
            }
        } else if !crc_fixed && input.len() >= len {
            let first = input.iter().zip(enc).position(|(a, b)| a != b).unwrap();
            let last = len
                - 1
                - input[..len]
                    .iter()
                    .rev()
                    .zip(enc[..len].iter().rev())
                    .position(|(a, b)| a != b)
                    .unwrap();
            let bit_first = first * 8 + (input[first] ^ enc[first]).trailing_zeros() as usize;
            let bit_last = last * 8 + 7 - (input[last] ^ enc[last]).leading_zeros() as usize;
            // A burst of at most 32 bits that leaves the length field alone must be caught by
            // the CRC (a changed length moves where the CRC is read: then anything but
            // success is fine).
            if bit_last - bit_first < 32 && first >= 16 && r.is_ok() {
                return Err(format!(
                    "a {}-bit burst at byte {first} was accepted",
                    bit_last - bit_first + 1
                ));
            }
            if r.is_ok() && first < 16 && last < 16 && bit_last - bit_first < 32 {
                return Err(format!(
                    "a burst in the header at byte {first} was accepted"
                ));
            }
        } else if !crc_fixed && r.is_ok() {
            return Err(format!(
                "a truncation to {} of {len} bytes was accepted",
                input.len()
            ));
        }
    }
    if let Ok(d) = &r {
        let again = d.encode();
        let len = JournalRecord::encoded_len(&again).ok_or("re-encoding has no length")?;
        if input.len() < len || input[..len] != again[..len] {
            return Err(format!(
                "decoded {} entries but re-encodes differently",
                d.entries.len()
            ));
        }
        if JournalRecord::encoded_len(input) != Some(len) {
            return Err("encoded_len disagrees with the decoder".into());
        }
        if again.len() as u64 != padded(len) {
            return Err("re-encoding is not padded to 4096".into());
        }
    }
    Ok(match &r {
        Ok(_) => "record:ok".into(),
        Err(e) => format!("record:{}", kind(e)),
    })
}

/// The properties of the checkpoint decoder on `input`.
pub fn check_checkpoint(input: &[u8]) -> CaseResult {
    let r = Checkpoint::decode(input);
    if input.len() < CHECKPOINT_BYTES as usize && !matches!(r, Err(JournalError::Short { .. })) {
        return Err(format!("{} bytes decoded as {r:?}", input.len()));
    }
    if let Ok(c) = &r {
        if c.encode()[..] != input[..CHECKPOINT_BYTES as usize] {
            return Err(format!("{c:?} re-encodes differently"));
        }
    }
    Ok(match &r {
        Ok(_) => "checkpoint:ok".into(),
        Err(e) => format!("checkpoint:{}", kind(e)),
    })
}

/// Checks a kept corpus input (first byte: 0 record, 1 checkpoint).
pub fn check_corpus(input: &[u8]) -> CaseResult {
    match input.split_first() {
        Some((1, rest)) => check_checkpoint(rest),
        Some((_, rest)) => check_record(rest, None, false),
        None => Ok("empty".into()),
    }
}

/// One campaign case. `input` gets the tagged input (tag byte, then the bytes decoded).
pub fn case(seed: u64, input: &mut Vec<u8>) -> CaseResult {
    let mut rng = Rng::new(seed);
    if rng.chance(1, 5) {
        let c = gen_checkpoint(&mut rng);
        let mut b = c.encode();
        let mode = rng.below(4);
        match mode {
            0 => {}
            1 => {
                let bit = rng.index(4096 * 8);
                b[bit / 8] ^= 1 << (bit % 8);
            }
            2 => {
                mutate(&mut rng, &mut b, 8192, &[b"RFJHEAD\0"], &[]);
                fix_checkpoint_crc(&mut b);
            }
            _ => {
                let at = 8 * rng.index(7);
                let v = *rng.pick(&INTERESTING);
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                fix_checkpoint_crc(&mut b);
            }
        }
        input.push(1);
        input.extend_from_slice(&b);
        if mode == 1 && Checkpoint::decode(&b).is_ok() {
            return Err("a bit flip in a checkpoint was accepted".into());
        }
        let out = check_checkpoint(&b)?;
        return Ok(format!("cp{mode}:{out}"));
    }
    let rec = gen_record(&mut rng);
    let enc = rec.encode();
    let len = JournalRecord::encoded_len(&enc).ok_or("valid record without a length")?;
    let mut b = enc.clone();
    let mode = rng.below(8);
    let mut crc_fixed = false;
    match mode {
        0 => {
            // Valid, with junk after the encoded length (padding or the next record).
            let n = rng.index(64);
            let junk = rng.bytes(n);
            b.truncate(len);
            b.extend_from_slice(&junk);
        }
        1 => {
            let bit = rng.index(len * 8);
            b[bit / 8] ^= 1 << (bit % 8);
        }
        2 => {
            let at = rng.index(len - 3);
            let x = ((rng.next_u64() as u32) >> rng.below(32)).max(1);
            let mut w = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            w ^= x;
            b[at..at + 4].copy_from_slice(&w.to_le_bytes());
        }
        3 => mutate(&mut rng, &mut b, 16 << 10, &[b"RFJREC\0\0"], &[]),
        4 => {
            mutate(&mut rng, &mut b, 16 << 10, &[b"RFJREC\0\0"], &[]);
            fix_record_crc(&mut b);
            crc_fixed = true;
        }
        5 => {
            // One header or entry-table field set to an interesting value, CRC fixed.
            let fields = RECORD_HEADER_BYTES + 16 * rec.entries.len();
            let at = 4 * rng.index(fields / 4 - 1);
            let v = *rng.pick(&INTERESTING);
            let n = if rng.chance(1, 2) {
                4
            } else {
                8.min(fields - at)
            };
            b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
            fix_record_crc(&mut b);
            crc_fixed = true;
        }
        6 => {
            // Torn: a prefix of its sectors, zeros after.
            let sectors = len.div_ceil(512);
            if sectors > 1 {
                let keep = 512 * (1 + rng.index(sectors - 1));
                b[keep..].fill(0);
            }
        }
        _ => {
            let to = rng.index(len);
            b.truncate(to);
        }
    }
    input.push(0);
    input.extend_from_slice(&b);
    let out = check_record(&b, Some(&enc), crc_fixed)?;
    // A tear that only zeroes bytes that were zero already (the record's padding, or a zero
    // payload tail) leaves the record intact: accepting it is right. Accepting a torn record
    // whose contents differ from what was written is the violation.
    if mode == 6 && len > 512 && JournalRecord::decode(&b).is_ok_and(|r| r != rec) {
        return Err("a torn record was accepted with contents it was not written with".into());
    }
    Ok(format!(
        "{}:{out}",
        [
            "valid",
            "bitflip",
            "burst",
            "mutate",
            "mutate+crc",
            "field+crc",
            "torn",
            "truncate"
        ][mode as usize]
    ))
}

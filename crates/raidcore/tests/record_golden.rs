//! Today's bytes of every on-disk record raidcore encodes, pinned: a change to how a record is
//! framed or laid out (a refactor that meant to change nothing) fails here, naming the record.
//! Each record is small and built from fixed values; the expected bytes are its non-zero
//! stretches (offset, hex), so every other byte, padding included, must be zero. A deliberate format change
//! bumps the record's version and replaces its expectation here in the same commit.

use raidcore::ido::{DMap, Ido, IdoConfig, RebuildPolicy, ZoneTable};
use raidcore::journal::{encode_record, Checkpoint, JournalRecord};
use raidcore::lazy::{BpglRecord, ParityPolicy};
use raidcore::superblock::{ArrayStateTag, Event, Superblock};
use raidcore::StripeId;

/// The non-zero stretches of `b` as (offset, hex), stretches less than 16 zero bytes apart
/// joined.
fn runs(b: &[u8]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, _) in b.iter().enumerate().filter(|(_, &x)| x != 0) {
        match out.last_mut() {
            Some((_, end)) if i < *end + 16 => *end = i + 1,
            _ => out.push((i, i + 1)),
        }
    }
    out.into_iter()
        .map(|(s, e)| (s, b[s..e].iter().map(|x| format!("{x:02x}")).collect()))
        .collect()
}

/// `bytes` is `len` long and its non-zero stretches are `want`.
fn assert_golden(name: &str, bytes: &[u8], len: usize, want: &[(usize, &str)]) {
    assert_eq!(bytes.len(), len, "{name}: encoded length");
    let got = runs(bytes);
    if std::env::var_os("RECORD_GOLDEN_PRINT").is_some() {
        eprintln!("{name}: {got:?}");
    }
    for (g, w) in got.iter().zip(want) {
        assert_eq!(
            (g.0, g.1.as_str()),
            *w,
            "{name}: the bytes at {} changed",
            w.0
        );
    }
    assert_eq!(got.len(), want.len(), "{name}: {got:?}");
}

#[test]
fn bpgl_record_bytes() {
    let r = BpglRecord {
        uuid: [0x11; 16],
        sequence: 7,
        capacity: 1024,
        stripes: vec![
            StripeId {
                cycle: 3,
                stripe: 1,
            },
            StripeId {
                cycle: 9,
                stripe: 0,
            },
        ],
    };
    let b = r.encode();
    assert_golden(
        "BPGL record",
        &b,
        4096,
        &[(
            0,
            concat!(
                "52464250474c0000010000004c00000011111111111111111111111111111111",
                "0700000000000000000400000200000003000000000000000100000009000000",
                "0000000000000000ca1e9b24",
            ),
        )],
    );
    assert_eq!(BpglRecord::decode(&b), Some(r));
}

/// What the simulator charges for a record of the list is what the engine writes, for every
/// length up to the largest (one past a 4 KiB boundary included).
#[test]
fn bpgl_record_size_is_what_encode_writes() {
    use raidcore::lazy::BPGL_MAX_CAPACITY;
    for n in (0..BPGL_MAX_CAPACITY)
        .step_by(97)
        .chain([BPGL_MAX_CAPACITY, 337, 338, 339])
    {
        let r = BpglRecord {
            uuid: [0; 16],
            sequence: 1,
            capacity: BPGL_MAX_CAPACITY as u32,
            stripes: (0..n as u64)
                .map(|cycle| StripeId { cycle, stripe: 0 })
                .collect(),
        };
        assert_eq!(BpglRecord::bytes_for(n), r.encode().len(), "{n} stripes");
    }
}

#[test]
fn journal_record_bytes() {
    let b = encode_record([0x22; 16], 42, &[(1, 8192, b"abcd"), (3, 0, &[0xee; 6])]);
    assert_golden(
        "journal record",
        &b,
        4096,
        &[(
            0,
            concat!(
                "52464a5245430000010000005e00000022222222222222222222222222222222",
                "2a00000000000000020000000000000001000000040000000020000000000000",
                "0300000006000000000000000000000061626364eeeeeeeeeeee52f52050",
            ),
        )],
    );
    let r = JournalRecord::decode(&b).unwrap();
    assert_eq!(r.sequence, 42);
    assert_eq!(r.entries[1].data, vec![0xee; 6]);
}

#[test]
fn journal_checkpoint_bytes() {
    let c = Checkpoint {
        uuid: [0x33; 16],
        sequence: 5,
        watermark: 17,
        tail: 3 * 4096,
    };
    let b = c.encode();
    assert_golden(
        "journal checkpoint",
        &b,
        4096,
        &[
            (
                0,
                concat!(
                    "52464a4845414400010000000000000033333333333333333333333333333333",
                    "050000000000000011000000000000000030",
                ),
            ),
            (4092, "1591acc7"),
        ],
    );
    assert_eq!(Checkpoint::decode(&b), Ok(c));
}

fn zone_table() -> ZoneTable {
    let mut z = ZoneTable::new(100 << 20, 12 << 20, 4096).unwrap();
    z.add_counts(1, 5);
    z.add_counts(8, 2);
    z
}

#[test]
fn zone_table_bytes() {
    let b = zone_table().encode();
    let len = b.len();
    assert_golden(
        "zone table",
        &b,
        len,
        &[
            (
                0,
                concat!(
                    "524649444f5a540001000000630000000000c000000000000000400600000000",
                    "09",
                ),
            ),
            (60, "05"),
            (88, "02000000000000ede7a917"),
        ],
    );
    assert_eq!(ZoneTable::decode(&b).unwrap().encode(), b);
}

fn dmap() -> DMap {
    let mut d = DMap::new();
    d.insert(8192, 4096, 0, true);
    d.insert(1 << 20, 65536, 4096, false);
    d
}

#[test]
fn dmap_bytes() {
    let b = dmap().encode();
    let len = b.len();
    assert_golden(
        "D-Map",
        &b,
        len,
        &[(
            0,
            concat!(
                "524649444f444d00010000004e00000002000000000000000020000000000000",
                "0010000000000000000000000000000001000010000000000000000100000000",
                "000010000000000000004ceb884a",
            ),
        )],
    );
    assert_eq!(DMap::decode(&b).unwrap().encode(), b);
}

#[test]
fn ido_state_bytes() {
    let mut ido = Ido::new(IdoConfig::new(RebuildPolicy::Ido, 64 << 20), zone_table());
    ido.record(13 << 20, 4096, 1);
    ido.start_rebuild(false);
    let b = ido.encode_state();
    let len = b.len();
    assert_golden(
        "IDO state",
        &b,
        len,
        &[
            (
                0,
                concat!(
                    "524649444f53540001000000b700000001040000000000000000000000000000",
                    "0200000001000000000000000800000000000000524649444f5a540001000000",
                    "630000000000c00000000000000040060000000009",
                ),
            ),
            (112, "06"),
            (
                140,
                concat!(
                    "02000000000000885de275524649444f444d00010000001c0000000000000000",
                    "000000db31670a4a8e900c",
                ),
            ),
        ],
    );
    let back = Ido::decode_state(IdoConfig::new(RebuildPolicy::Pr, 0), &zone_table(), &b).unwrap();
    assert_eq!(back.encode_state(), b);
}

#[test]
fn superblock_bytes() {
    let sb = Superblock {
        uuid: [0x44; 16],
        member_index: 2,
        member_count: 5,
        generation: 9,
        state: ArrayStateTag::Rebuilding,
        data_offset_bytes: 4 << 20,
        data_bytes: 64 << 20,
        chunk_bytes: 65536,
        created_unix_secs: 1_700_000_000,
        layout: "scheme=raid6;disks=5".into(),
        events: vec![Event::Fail(1), Event::Replace(1)],
        runs: vec![(0, 2), (10, 1)],
        parity: ParityPolicy::Lazy,
        bpgl_capacity: 1024,
        features: 3,
        journal_offset_bytes: 1 << 20,
        journal_len_bytes: 2 << 20,
        checksum_offset_bytes: 3 << 20,
        checksum_len_bytes: 1 << 16,
    };
    let b = sb.encode().unwrap();
    assert_golden(
        "superblock",
        &b,
        4096,
        &[
            (
                0,
                concat!(
                    "5241494446524700030000000010000044444444444444444444444444444444",
                    "0200000005000000090000000000000003000000000000000000400000000000",
                    "0000000400000000000001000000000000f15365000000001400736368656d65",
                    "3d72616964363b6469736b733d35",
                ),
            ),
            (1120, "020001010000000201"),
            (1442, "02000000000000000000020000000a0000000000000001"),
            (
                2980,
                concat!(
                    "0100000000040000030000000000100000000000000020000000000000003000",
                    "00000000000001",
                ),
            ),
            (4092, "3969df11"),
        ],
    );
    assert_eq!(Superblock::decode(&b), Ok(sb));
}

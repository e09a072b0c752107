//! A create that is refused changes nothing: every refusal comes before the first write to
//! any member (and before the descriptor is written). Each case starts from member files full
//! of a pattern and checks, after the refusal, that they still hold it, byte for byte.

use std::path::{Path, PathBuf};

use dev::pool::{test_opts, CreateOpts, Pool, PoolError, WriteHole};
use layout::SchemeKind;
use raidcore::ParityPolicy;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "raidforge-create-refusals-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const MEMBER_BYTES: usize = 3 << 20;

/// Member `i`'s pattern: not zero anywhere, different per member and per block.
fn pattern(i: usize) -> Vec<u8> {
    (0..MEMBER_BYTES)
        .map(|b| (b / 4096 * 7 + i * 31 + 1) as u8 | 1)
        .collect()
}

/// Fills the members of `opts` with their patterns, runs create, and checks that it was
/// refused with an error naming `says`, that no descriptor appeared and that every member
/// still holds its pattern.
fn refused_without_a_write(dir: &Path, opts: CreateOpts, says: &str) {
    for (i, p) in opts.members.iter().enumerate() {
        std::fs::write(p, pattern(i)).unwrap();
    }
    // The members hold data on purpose (to see that nothing is written): --force, so that
    // what is refused is the option under test, not the data found at the members.
    let opts = CreateOpts {
        force: true,
        ..opts
    };
    let desc = dir.join("pool.json");
    let members = opts.members.clone();
    let e: PoolError = Pool::create(&desc, opts)
        .err()
        .unwrap_or_else(|| panic!("create was not refused (expected: {says})"));
    assert!(e.to_string().contains(says), "refused with: {e}");
    assert!(!desc.exists(), "a refused create wrote the descriptor");
    for (i, p) in members.iter().enumerate() {
        let now = std::fs::read(p).unwrap();
        assert_eq!(now.len(), MEMBER_BYTES, "member {i} changed size ({e})");
        if let Some(at) = now.iter().zip(pattern(i)).position(|(a, b)| *a != b) {
            panic!("member {i} changed at byte {at} though create was refused ({e})");
        }
    }
}

#[test]
fn lazy_parity_on_a_one_parity_layout_is_refused_before_any_write() {
    let tmp = TempDir::new("lazy");
    let opts = CreateOpts {
        parity: ParityPolicy::Lazy,
        ..test_opts(SchemeKind::Raid5, &tmp.0, 4, MEMBER_BYTES as u64)
    };
    refused_without_a_write(&tmp.0, opts, "--parity lazy needs a two-parity layout");
}

#[test]
fn an_oversized_deferred_parity_bound_is_refused_before_any_write() {
    let tmp = TempDir::new("bpgl");
    let opts = CreateOpts {
        parity: ParityPolicy::Lazy,
        bpgl_capacity: Some(1 << 30),
        ..test_opts(SchemeKind::Raid6, &tmp.0, 5, MEMBER_BYTES as u64)
    };
    refused_without_a_write(&tmp.0, opts, "--bpgl-capacity");
}

#[test]
fn checks_that_came_before_the_writes_still_refuse_without_one() {
    let tmp = TempDir::new("early");
    let base = || test_opts(SchemeKind::Raid6, &tmp.0, 5, MEMBER_BYTES as u64);
    let cases: Vec<(CreateOpts, &str)> = vec![
        (
            CreateOpts {
                chunk_bytes: 1000,
                ..base()
            },
            "--chunk 1000",
        ),
        (
            CreateOpts {
                write_hole: WriteHole::Journal,
                journal_bytes: Some(1000),
                ..base()
            },
            "--journal-size 1000",
        ),
        (
            CreateOpts {
                emulate: Some("floppy".into()),
                ..base()
            },
            "--emulate floppy",
        ),
        (
            CreateOpts {
                size_bytes: Some(1 << 20),
                ..base()
            },
            "too small",
        ),
    ];
    for (opts, says) in cases {
        refused_without_a_write(&tmp.0, opts, says);
    }
}

//! Bad calls get typed errors, write nothing and panic nowhere; and the
//! peeling decoder for XOR groups.

use codec::{groups, pq, xor, Buffer, CodecError, Isa};

fn bufs(n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8 + 1; len]).collect()
}

#[test]
fn xor_rejects_bad_calls() {
    let mut parity = [7u8; 4];
    let none: [&[u8]; 0] = [];
    assert_eq!(
        xor::encode(&none, &mut parity),
        Err(CodecError::TooFewBuffers { actual: 0, min: 1 })
    );
    let data = [&[1u8; 4][..], &[2u8; 3][..]];
    assert_eq!(
        xor::encode(&data, &mut parity),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::Index(1),
            expected: 4,
            actual: 3
        })
    );
    assert_eq!(
        xor::encode(&bufs(2, 4), &mut parity[..2]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::P,
            expected: 4,
            actual: 2
        })
    );
    assert_eq!(parity, [7; 4], "nothing written on error");
    let many = vec![&[0u8][..]; xor::MAX_DATA + 1];
    assert_eq!(
        xor::encode(&many, &mut [0u8]),
        Err(CodecError::TooManyData {
            k: xor::MAX_DATA + 1,
            max: xor::MAX_DATA
        })
    );

    let mut b = bufs(3, 4);
    let before = b.clone();
    assert_eq!(
        xor::recover(&mut b, &[0, 1]),
        Err(CodecError::TooManyErasures { erased: 2, max: 1 })
    );
    assert_eq!(
        xor::recover(&mut b, &[3]),
        Err(CodecError::IndexOutOfRange { index: 3, count: 3 })
    );
    assert_eq!(
        xor::recover(&mut b[..1], &[0]),
        Err(CodecError::TooFewBuffers { actual: 1, min: 2 })
    );
    b[2].truncate(3);
    assert_eq!(
        xor::recover(&mut b, &[0]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::Index(2),
            expected: 4,
            actual: 3
        })
    );
    assert_eq!(b[..2], before[..2]);
    let mut p = [0u8; 4];
    assert_eq!(
        xor::update(&mut p, &[0; 4], &[0; 5]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::New(0),
            expected: 4,
            actual: 5
        })
    );
    assert_eq!(
        xor::verify(&bufs(2, 4), &[0u8; 3]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::P,
            expected: 4,
            actual: 3
        })
    );
}

#[test]
fn pq_rejects_bad_calls() {
    let (mut p, mut q) = ([9u8; 4], [9u8; 4]);
    let too_many = vec![&[0u8; 4][..]; pq::MAX_DATA + 1];
    assert_eq!(
        pq::encode(&too_many, &mut p, &mut q),
        Err(CodecError::TooManyData {
            k: 256,
            max: pq::MAX_DATA
        })
    );
    assert_eq!(
        pq::encode(&bufs(3, 4), &mut p, &mut q[..3]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::Q,
            expected: 4,
            actual: 3
        })
    );
    assert_eq!((p, q), ([9; 4], [9; 4]), "nothing written on error");

    let mut b = bufs(6, 4);
    let before = b.clone();
    for (erased, err) in [
        (
            &[0usize, 1, 2][..],
            CodecError::TooManyErasures { erased: 3, max: 2 },
        ),
        (&[4, 4], CodecError::DuplicateErasure { index: 4 }),
        (&[1, 6], CodecError::IndexOutOfRange { index: 6, count: 6 }),
        (
            &[usize::MAX],
            CodecError::IndexOutOfRange {
                index: usize::MAX,
                count: 6,
            },
        ),
    ] {
        assert_eq!(pq::recover(&mut b, erased), Err(err), "{erased:?}");
        assert_eq!(b, before, "nothing written for {erased:?}");
    }
    assert_eq!(
        pq::recover(&mut b[..2], &[0]),
        Err(CodecError::TooFewBuffers { actual: 2, min: 3 })
    );
    let mut too_wide = vec![vec![0u8; 1]; pq::MAX_DATA + 3];
    assert_eq!(
        pq::recover(&mut too_wide, &[0]),
        Err(CodecError::TooManyData {
            k: 256,
            max: pq::MAX_DATA
        })
    );

    let (mut p, mut q) = ([0u8; 4], [0u8; 4]);
    assert_eq!(
        pq::update(&mut p, &mut q, 255, &[0; 4], &[1; 4]),
        Err(CodecError::IndexOutOfRange {
            index: 255,
            count: 255
        })
    );
    let deltas = [
        pq::Delta {
            index: 0,
            old: &[1; 4],
            new: &[2; 4],
        },
        pq::Delta {
            index: 1,
            old: &[1; 3],
            new: &[2; 4],
        },
    ];
    assert_eq!(
        pq::update_many(&mut p, &mut q, &deltas),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::Old(1),
            expected: 4,
            actual: 3
        })
    );
    assert_eq!((p, q), ([0; 4], [0; 4]), "no delta applied when one is bad");
}

#[test]
fn unavailable_isa_is_an_error_not_a_crash() {
    for isa in Isa::ALL {
        let result = xor::encode_with(isa, &bufs(2, 8), &mut [0u8; 8]);
        if isa.is_available() {
            assert_eq!(result, Ok(()));
        } else {
            assert_eq!(result, Err(CodecError::IsaUnavailable { isa }));
        }
    }
}

#[test]
fn errors_display_their_details() {
    let e = CodecError::LengthMismatch {
        buffer: Buffer::Index(3),
        expected: 4096,
        actual: 17,
    };
    let text = e.to_string();
    assert!(
        text.contains("Index(3)") && text.contains("4096") && text.contains("17"),
        "{text}"
    );
    let e = CodecError::Unrecoverable {
        remaining: 2,
        first: 5,
    };
    assert!(e.to_string().contains("2 erased") && e.to_string().contains("buffer 5"));
}

// --------------------------------------------------------------- groups ---

/// An RM2-like layout: a 3x3 grid of data buffers (ids 0..9), a parity per
/// row (9, 10, 11) and per column (12, 13, 14).
fn grid_groups() -> Vec<Vec<usize>> {
    let mut g = Vec::new();
    for r in 0..3 {
        g.push(vec![3 * r, 3 * r + 1, 3 * r + 2, 9 + r]);
    }
    for c in 0..3 {
        g.push(vec![c, 3 + c, 6 + c, 12 + c]);
    }
    g
}

fn grid_buffers(len: usize) -> Vec<Vec<u8>> {
    let mut b: Vec<Vec<u8>> = (0..15)
        .map(|i| (0..len).map(|j| (i * 37 + j * 11 + j / 7) as u8).collect())
        .collect();
    // Encoding is recovery with the parities erased.
    groups::recover(&grid_groups(), &mut b, &[9, 10, 11, 12, 13, 14]).unwrap();
    b
}

#[test]
fn groups_encode_is_xor_of_each_group() {
    let b = grid_buffers(100);
    let xor3 = |x: usize, y: usize, z: usize| -> Vec<u8> {
        (0..100).map(|j| b[x][j] ^ b[y][j] ^ b[z][j]).collect()
    };
    assert_eq!(b[9], xor3(0, 1, 2));
    assert_eq!(b[14], xor3(2, 5, 8));
    assert_eq!(groups::verify(&grid_groups(), &b), Ok(None));
}

#[test]
fn groups_recover_every_pair_and_some_larger_sets() {
    let g = grid_groups();
    for isa in Isa::available() {
        let want = grid_buffers(131);
        let mut sets: Vec<Vec<usize>> = Vec::new();
        for a in 0..15 {
            for b in a + 1..15 {
                sets.push(vec![a, b]);
            }
        }
        // Three in a row plus a fourth elsewhere: peelable via columns.
        sets.push(vec![0, 1, 2, 4]);
        // A whole row and its parity: columns rebuild the data, then the row.
        sets.push(vec![3, 4, 5, 10]);
        for erased in sets {
            let mut b = want.clone();
            for &e in &erased {
                b[e].fill(0xcc);
            }
            groups::check_recoverable(&g, 15, &erased).unwrap();
            groups::recover_with(isa, &g, &mut b, &erased).unwrap();
            assert_eq!(b, want, "{erased:?} on {isa}");
        }
    }
}

#[test]
fn groups_report_a_stuck_peel() {
    let g = grid_groups();
    // A 2x2 square of data: every row and column holding one of them holds two.
    let erased = [0, 1, 3, 4];
    assert_eq!(
        groups::check_recoverable(&g, 15, &erased),
        Err(CodecError::Unrecoverable {
            remaining: 4,
            first: 0
        })
    );
    let mut b = grid_buffers(16);
    let before = b.clone();
    assert_eq!(
        groups::recover(&g, &mut b, &erased),
        Err(CodecError::Unrecoverable {
            remaining: 4,
            first: 0
        })
    );
    assert_eq!(
        b, before,
        "a stuck peel that made no progress wrote nothing"
    );
    // Partly peelable: 8 comes back (via row 2), then the square is stuck.
    let erased = [0, 1, 3, 4, 8];
    assert_eq!(
        groups::check_recoverable(&g, 15, &erased),
        Err(CodecError::Unrecoverable {
            remaining: 4,
            first: 0
        })
    );
    // A buffer that is in no group cannot come back.
    let two: [&[usize]; 1] = [&[0, 1]];
    assert_eq!(
        groups::check_recoverable(&two, 3, &[2]),
        Err(CodecError::Unrecoverable {
            remaining: 1,
            first: 2
        })
    );
}

#[test]
fn groups_reject_bad_calls() {
    let mut b = bufs(4, 8);
    let before = b.clone();
    let tiny: [&[usize]; 2] = [&[0, 1], &[2]];
    assert_eq!(
        groups::recover(&tiny, &mut b, &[0]),
        Err(CodecError::InvalidGroup {
            group: 1,
            reason: "fewer than two members"
        })
    );
    let dup: [&[usize]; 1] = [&[0, 1, 0]];
    assert_eq!(
        groups::recover(&dup, &mut b, &[0]),
        Err(CodecError::InvalidGroup {
            group: 0,
            reason: "a member is listed twice"
        })
    );
    let out: [&[usize]; 1] = [&[0, 4]];
    assert_eq!(
        groups::recover(&out, &mut b, &[0]),
        Err(CodecError::IndexOutOfRange { index: 4, count: 4 })
    );
    let ok: [&[usize]; 1] = [&[0, 1, 2, 3]];
    assert_eq!(
        groups::recover(&ok, &mut b, &[1, 1]),
        Err(CodecError::DuplicateErasure { index: 1 })
    );
    assert_eq!(
        groups::recover(&ok, &mut b, &[9]),
        Err(CodecError::IndexOutOfRange { index: 9, count: 4 })
    );
    assert_eq!(b, before);
    assert_eq!(
        groups::check_recoverable(&ok, groups::MAX_BUFFERS + 1, &[]),
        Err(CodecError::TooManyBuffers {
            count: groups::MAX_BUFFERS + 1,
            max: groups::MAX_BUFFERS
        })
    );
    b[3].push(0);
    assert_eq!(
        groups::recover(&ok, &mut b, &[0]),
        Err(CodecError::LengthMismatch {
            buffer: Buffer::Index(3),
            expected: 8,
            actual: 9
        })
    );
    // Nothing erased: nothing to do, even for an inconsistent set.
    let mut b = bufs(4, 8);
    groups::recover(&ok, &mut b, &[]).unwrap();
    assert_eq!(b, bufs(4, 8));
}

#[test]
fn groups_verify_finds_the_inconsistent_group() {
    let g = grid_groups();
    let mut b = grid_buffers(5000);
    assert_eq!(groups::verify(&g, &b), Ok(None));
    b[13][4500] ^= 1; // column 1's parity, past the first 4 KiB step
    assert_eq!(groups::verify(&g, &b), Ok(Some(4)));
    b[13][4500] ^= 1;
    b[4][0] ^= 0x80; // row 1 and column 1
    assert_eq!(groups::verify(&g, &b), Ok(Some(1)));
}

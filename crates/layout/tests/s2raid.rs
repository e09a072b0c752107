//! S2-RAID5 and S2-RAID10 (seed 000): mapping table, skew property, rebuild parallelism.

use std::collections::{BTreeSet, HashSet};

use layout::{check, recovery_plan, Disk, LayoutError, Params, Role, S2Raid, Scheme, Source};

fn params(disks: usize, spares: usize, group: Option<usize>, partitions: Option<usize>) -> Params {
    Params {
        disks: Some(disks),
        spares,
        group,
        partitions,
        ..Params::default()
    }
}

fn s2(
    mirror: bool,
    disks: usize,
    spares: usize,
    group: Option<usize>,
    partitions: Option<usize>,
) -> S2Raid {
    S2Raid::new(mirror, &params(disks, spares, group, partitions)).unwrap()
}

fn is_prime(x: usize) -> bool {
    x >= 2 && (2..x).all(|d| x % d != 0)
}

/// Every valid (R, G, K) with G prime up to `max_g`, as (mirror, disks, group, partitions).
fn valid_shapes(max_g: usize) -> Vec<(bool, usize, usize, usize)> {
    let mut v = Vec::new();
    for g in (2..=max_g).filter(|&g| is_prime(g)) {
        for n in 2..=g {
            for k in 2..=g {
                if n >= 3 {
                    v.push((false, n * g, g, k));
                }
                v.push((true, n * g, g, k));
            }
        }
    }
    v
}

/// Section 2's worked example (Figure 1): R = 9, G = 3, K = 3. The mapping table M as printed
/// after the recursive definition, columns D0..D8.
#[test]
fn mapping_table_matches_section_2_example() {
    let s = s2(false, 9, 0, Some(3), Some(3));
    let paper_m: Vec<Vec<usize>> = vec![
        vec![0, 1, 2, 0, 1, 2, 0, 1, 2],
        vec![3, 4, 5, 5, 3, 4, 4, 5, 3],
        vec![6, 7, 8, 7, 8, 6, 8, 6, 7],
    ];
    assert_eq!(s.mapping_table(), paper_m);
    assert_eq!((s.groups(), s.group_size(), s.partitions()), (3, 3, 3));
    assert_eq!(s.subarrays().len(), 9);
}

/// Figure 1's narrative: sub-array 0 on D0, D3, D6; sub-array 1 on D1, D4, D7; a failed D4 loses
/// 1.1, 3.1 and 8.1, rebuilt from 1.0/1.2, 3.0/3.2 and 8.0/8.2 on six different disks.
#[test]
fn figure_1_subarrays_and_failure_of_d4() {
    let s = s2(false, 9, 0, Some(3), Some(3));
    let disks_of =
        |id: usize| -> Vec<u32> { s.subarrays()[id].members.iter().map(|m| m.0).collect() };
    assert_eq!(disks_of(0), vec![0, 3, 6]);
    assert_eq!(disks_of(1), vec![1, 4, 7]);
    // Sub-arrays on D4, with D4's logical disk number.
    let mut lost: Vec<(usize, usize)> = Vec::new();
    for sa in s.subarrays() {
        for (l, m) in sa.members.iter().enumerate() {
            if m.0 == 4 {
                lost.push((sa.id, l));
            }
        }
    }
    lost.sort();
    assert_eq!(lost, vec![(1, 1), (3, 1), (8, 1)]);
    let mut readers: Vec<u32> = [1usize, 3, 8]
        .iter()
        .flat_map(|&id| disks_of(id))
        .filter(|&d| d != 4)
        .collect();
    readers.sort();
    let n = readers.len();
    readers.dedup();
    assert_eq!(n, 6);
    assert_eq!(readers.len(), 6, "conflict-free: six distinct source disks");
    assert_eq!(s.partner_disks(4), readers);
}

/// Figure 2: S2-RAID10 over 8 disks, D0..D3 data and D4..D7 mirrors, mirror partitions shifted
/// one position per partition; D2's data is mirrored across all of D4..D7.
#[test]
fn figure_2_raid10_mirrors_spread() {
    let s = s2(true, 8, 0, None, None);
    assert_eq!((s.group_size(), s.groups(), s.partitions()), (4, 2, 4));
    let mut mirrors_of_d2 = BTreeSet::new();
    for st in &s.cycle().stripes {
        assert_eq!(st.units.len(), 2);
        assert!(st.units[0].disk < 4 && st.units[1].disk >= 4);
        assert_eq!(st.units[1].role, Role::Mirror);
        if st.units[0].disk == 2 {
            mirrors_of_d2.insert(st.units[1].disk);
        }
    }
    assert_eq!(mirrors_of_d2, BTreeSet::from([4, 5, 6, 7]));
    // Partition j of the mirror disks is partition j of the data disks shifted right by j.
    let m = s.mapping_table();
    for (j, row) in m.iter().enumerate() {
        for t in 0..4 {
            assert_eq!(row[4 + (t + j) % 4], row[t]);
        }
    }
    let plan = recovery_plan(&s, &[2]).unwrap();
    let readers: HashSet<Disk> = plan
        .repairs
        .iter()
        .flat_map(|r| r.sources.iter())
        .map(|src| match src {
            Source::Disk(l) => l.disk,
            Source::Rebuilt(l) => l.disk,
        })
        .collect();
    assert_eq!(readers, HashSet::from([4, 5, 6, 7]));
}

/// Brute force over the sub-array list: the most disks two distinct sub-arrays share.
fn brute_max_shared(s: &S2Raid) -> usize {
    let sets: Vec<HashSet<u32>> = s
        .subarrays()
        .iter()
        .map(|sa| sa.members.iter().map(|m| m.0).collect())
        .collect();
    let mut max = 0;
    for a in 0..sets.len() {
        for b in a + 1..sets.len() {
            max = max.max(sets[a].intersection(&sets[b]).count());
        }
    }
    max
}

/// The skew property (section 6: "any two subRAIDs share no more than one disk"), exhaustively
/// for every valid shape with G prime up to 11, and the sub-array structure itself.
#[test]
fn any_two_subarrays_share_at_most_one_disk() {
    let shapes = valid_shapes(11);
    assert!(shapes.len() > 200);
    for (mirror, r, g, k) in shapes {
        let s = s2(mirror, r, 0, Some(g), Some(k));
        let n = r / g;
        assert_eq!(s.subarrays().len(), k * g);
        let mut seen = HashSet::new();
        for sa in s.subarrays() {
            assert_eq!(sa.members.len(), n);
            for (l, &(d, j)) in sa.members.iter().enumerate() {
                assert_eq!(d as usize / g, l, "member L lives in group L");
                assert_eq!(j, sa.id / g, "a sub-array uses one partition index");
                assert!(seen.insert((d, j)), "partition used twice");
            }
        }
        assert_eq!(seen.len(), r * k, "every partition belongs to a sub-array");
        let fast = s.max_disks_shared_by_two_subarrays();
        assert_eq!(fast, brute_max_shared(&s), "R={r} G={g} K={k}");
        assert_eq!(fast, 1, "R={r} G={g} K={k} mirror={mirror}");
    }
}

/// Structural checks: stripes on distinct disks, parity balanced (S2-RAID5: one parity chunk
/// per partition per disk), spares empty.
#[test]
fn stripes_on_distinct_disks_and_parity_balanced() {
    for (mirror, r, g, k) in valid_shapes(7) {
        let s = s2(mirror, r + 1, 1, Some(g), Some(k));
        let c = s.cycle();
        assert_eq!(c.disks, r + 1);
        assert_eq!(c.rows, k as u64 * s.rows_per_partition());
        for st in &c.stripes {
            let d: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
            assert_eq!(d.len(), st.units.len());
        }
        let rep = check(&s, &[], 4).unwrap();
        assert!(rep.stripes_on_distinct_disks);
        assert_eq!(rep.data_units_per_disk[r] + rep.parity_units_per_disk[r], 0);
        if !mirror {
            let n = (r / g) as u64;
            for d in 0..r {
                assert_eq!(rep.parity_units_per_disk[d], k as u64);
                assert_eq!(rep.data_units_per_disk[d], k as u64 * (n - 1));
            }
        }
        assert_eq!(s.spare_disks(), vec![r as Disk]);
    }
}

/// After any single failure, every lost partition is rebuilt from its own sub-array; the reads
/// hit K(N-1) distinct disks for S2-RAID5 (K for S2-RAID10), the writes land on min(K, room)
/// disks none of which is read, and the rebuilt layout still has every stripe on distinct disks.
#[test]
fn single_failure_rebuild_is_parallel_and_conflict_free() {
    let configs: &[(bool, usize, usize, usize, usize)] = &[
        // (mirror, active R, spares, G, K)
        (false, 9, 0, 3, 3),
        (false, 9, 1, 3, 3),
        (false, 9, 3, 3, 3),
        (false, 9, 1, 3, 2),
        (false, 15, 1, 5, 5),
        (false, 25, 2, 5, 3),
        (false, 21, 0, 7, 7),
        (true, 8, 0, 4, 4),
        (true, 8, 1, 4, 4),
        (true, 20, 2, 5, 5),
        (true, 9, 0, 3, 3),
        (true, 15, 1, 5, 5),
    ];
    println!("scheme     R+S  G K | reads: disks (per disk) | writes: disks (per disk)");
    for &(mirror, r, spares, g, k) in configs {
        let s = s2(mirror, r + spares, spares, Some(g), Some(k));
        let n = r / g;
        let rpp = s.rows_per_partition();
        // S2-RAID10 near-2: a member's copies pair with one neighbour (N even) or, with the
        // pair wrapping rows, two different neighbours (N odd).
        let expect_readers = match (mirror, n % 2) {
            (false, _) => k * (n - 1),
            (true, 0) => k,
            (true, _) => 2 * k,
        };
        let per_reader = if mirror { 1 } else { rpp };
        let mut summary = None;
        for f in 0..r as Disk {
            let plan = recovery_plan(&s, &[f]).unwrap();
            let rep = check(&s, &[f], 8).unwrap();
            let readers: Vec<usize> = (0..r + spares)
                .filter(|&d| rep.rebuild_reads_per_disk[d] > 0)
                .collect();
            let writers: Vec<usize> = (0..r + spares)
                .filter(|&d| rep.rebuild_writes_per_disk[d] > 0)
                .collect();
            assert_eq!(
                readers.len(),
                expect_readers,
                "R={r} G={g} K={k} failed {f}"
            );
            assert_eq!(
                readers,
                s.partner_disks(f)
                    .iter()
                    .map(|&d| d as usize)
                    .filter(|&d| !mirror || rep.rebuild_reads_per_disk[d] > 0)
                    .collect::<Vec<_>>()
            );
            // Each reader serves one partition of one sub-array: rpp chunks (mirror: 1 copy).
            for &d in &readers {
                assert_eq!(rep.rebuild_reads_per_disk[d], per_reader);
            }
            // Writes go to disks that serve no read, spread over min(K, candidates) disks.
            assert!(writers.iter().all(|w| !readers.contains(w)));
            let partners = s.partner_disks(f);
            let room = spares
                + (0..r as Disk)
                    .filter(|d| *d != f && !partners.contains(d))
                    .count();
            assert_eq!(writers.len(), k.min(room), "R={r} S={spares} failed {f}");
            let per_writer_max = writers
                .iter()
                .map(|&w| rep.rebuild_writes_per_disk[w])
                .max()
                .unwrap();
            assert_eq!(per_writer_max, rpp * k.div_ceil(k.min(room)) as u64);
            for st in &plan.rebuilt.stripes {
                let d: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
                assert_eq!(d.len(), st.units.len(), "rebuilt stripe on distinct disks");
                assert!(st.units.iter().all(|u| u.disk != f));
            }
            assert_eq!(plan.repairs.len() as u64, k as u64 * rpp);
            summary.get_or_insert((readers.len(), per_reader, writers.len(), per_writer_max));
        }
        let (rd, rper, wr, wper) = summary.unwrap();
        println!(
            "{:<10} {:>2}+{} {:>2} {} | {:>2} disks ({} each)      | {} disks (<= {} each)",
            s.name(),
            r,
            spares,
            g,
            k,
            rd,
            rper,
            wr,
            wper
        );
    }
}

#[test]
fn defaults_pick_smallest_group_and_k_equal_g() {
    let s = s2(false, 9, 0, None, None);
    assert_eq!((s.group_size(), s.partitions()), (3, 3));
    let s = s2(false, 12, 3, None, None);
    assert_eq!(
        (s.active_disks(), s.group_size(), s.partitions()),
        (9, 3, 3)
    );
    let s = s2(false, 25, 0, None, Some(2));
    assert_eq!((s.group_size(), s.groups(), s.partitions()), (5, 5, 2));
    let s = s2(true, 20, 0, None, None);
    assert_eq!((s.group_size(), s.groups()), (5, 4));
    assert_eq!(s.name(), "s2raid10");
    let s = s2(true, 9, 0, None, None);
    assert_eq!(
        (s.group_size(), s.groups(), s.rows_per_partition()),
        (3, 3, 2)
    );
    assert_eq!(s2(false, 9, 0, None, None).name(), "s2raid5");
}

fn err(mirror: bool, p: Params) -> (&'static str, String) {
    match S2Raid::new(mirror, &p) {
        Err(LayoutError::InvalidParam { param, reason }) => (param, reason),
        other => panic!("expected InvalidParam, got {other:?}"),
    }
}

#[test]
fn unsupported_parameters_are_rejected_with_the_constraint() {
    // G not prime.
    let (p, why) = err(false, params(12, 0, Some(4), None));
    assert_eq!(p, "group");
    assert!(why.contains("prime"), "{why}");
    // R not a multiple of G.
    let (_, why) = err(false, params(10, 0, Some(3), None));
    assert!(why.contains("N * G"), "{why}");
    // N > G.
    let (_, why) = err(false, params(12, 0, Some(3), None));
    assert!(why.contains("N <= G"), "{why}");
    // K too small / too large.
    let (p, why) = err(false, params(9, 0, Some(3), Some(1)));
    assert_eq!(p, "partitions");
    assert!(why.contains("1 < K"), "{why}");
    let (p, why) = err(false, params(9, 0, Some(3), Some(4)));
    assert_eq!(p, "partitions");
    assert!(why.contains("exceeds G"), "{why}");
    // RAID5 sub-arrays need 3 members.
    let (_, why) = err(false, params(6, 0, Some(3), None));
    assert!(why.contains("at least 3 members"), "{why}");
    // RAID10 needs two members, and G prime beyond two groups.
    let (_, why) = err(true, params(3, 0, Some(3), None));
    assert!(why.contains("at least 2 members"), "{why}");
    let (_, why) = err(true, params(16, 0, Some(4), None));
    assert!(why.contains("prime"), "{why}");
    // No shape at all.
    let (p, why) = err(false, params(7, 0, None, None));
    assert_eq!(p, "group");
    assert!(why.contains("no group size"), "{why}");
    // Missing disks, spares eating everything.
    let (p, _) = err(false, Params::default());
    assert_eq!(p, "disks");
    let (p, _) = err(false, params(3, 3, None, None));
    assert_eq!(p, "spares");
}

#[test]
fn extra_json_lists_subarray_members() {
    let s = s2(false, 9, 0, Some(3), Some(3));
    let j = s.extra_json().unwrap();
    assert!(j.starts_with(
        "\"subarrays\": [{\"id\": 0, \"members\": [{\"disk\": 0, \"partition\": 0}, {\"disk\": 3, \"partition\": 0}, {\"disk\": 6, \"partition\": 0}]}, {\"id\": 1,"
    ), "{j}");
    assert!(
        j.ends_with("{\"disk\": 4, \"partition\": 2}, {\"disk\": 6, \"partition\": 2}]}]"),
        "{j}"
    );
    assert_eq!(j.matches("\"id\"").count(), 9);
    assert_eq!(j.matches('{').count(), j.matches('}').count());
}

#[test]
fn too_many_failures_and_partition_lookup() {
    let s = s2(false, 9, 0, Some(3), Some(3));
    assert!(matches!(
        recovery_plan(&s, &[0, 4]),
        Err(LayoutError::TooManyFailures { .. })
    ));
    assert_eq!(s.partition_of(0), Some(0));
    assert_eq!(s.partition_of(3), Some(1));
    assert_eq!(s.partition_of(9), None);
    assert_eq!(s.subarray_at(4, 2), Some(8));
}

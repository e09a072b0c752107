//! RAID+ (seed 001): the template of Figure 2, the interim layout of Figure 4, the stripe orders
//! of Figure 3, the valid pool sizes of section 4.1, Properties 1-5 and the evaluation
//! configuration (n = 59, k = 7), multi-failure interim layouts, pools of volumes and bad
//! parameters.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use layout::{
    build, check, cov, gf, recovery_plan, Code, Cycle, Disk, Layout, LayoutError, Loc, Order,
    Params, RaidPlus, RaidPlusPool, Role, Scheme, SchemeKind, Source,
};

const ORDERS: [Order; 3] = [Order::Native, Order::Read, Order::Write];

fn letter(i: usize) -> char {
    (b'a' + i as u8) as char
}

fn disks_of(c: &Cycle, i: usize) -> Vec<Disk> {
    c.stripes[i].units.iter().map(|u| u.disk).collect()
}

// ---------------------------------------------------------------------------------------------
// Figure 2: n = 5, k = 3, three squares L_t[x, y] = (t+1)x + y mod 5, cells below row 0 in
// row-major order give stripes a..t. The seed's text carries the figures' captions but not
// their cells, so the tables below were worked out by hand (mod 5) from the paper's
// definitions; they agree with every value the text quotes: a = <1,2,3> at [1,0], b = (2,3,4),
// c = (3,4,0), disk 0 holding the 3rd unit of c, the 2nd of d and the 1st of e first, and
// (Figure 4) c becoming (3,4,1) because L_3[1,2] = 1.
// ---------------------------------------------------------------------------------------------

const FIG2_STRIPES: [(char, [Disk; 3]); 20] = [
    ('a', [1, 2, 3]),
    ('b', [2, 3, 4]),
    ('c', [3, 4, 0]),
    ('d', [4, 0, 1]),
    ('e', [0, 1, 2]),
    ('f', [2, 4, 1]),
    ('g', [3, 0, 2]),
    ('h', [4, 1, 3]),
    ('i', [0, 2, 4]),
    ('j', [1, 3, 0]),
    ('k', [3, 1, 4]),
    ('l', [4, 2, 0]),
    ('m', [0, 3, 1]),
    ('n', [1, 4, 2]),
    ('o', [2, 0, 3]),
    ('p', [4, 3, 2]),
    ('q', [0, 4, 3]),
    ('r', [1, 0, 4]),
    ('s', [2, 1, 0]),
    ('t', [3, 2, 1]),
];

/// Figure 2, right column: the stripes whose units each disk holds, top to bottom.
const FIG2_DISKS: [&str; 5] = [
    "cdegijlmoqrs",
    "adefhjkmnrst",
    "abefgilnopst",
    "abcghjkmopqt",
    "bcdfhiklnpqr",
];

/// Figure 4: disk 0 fails; each 0 in the 12 affected stripes is replaced by L_3[x, y]
/// (the text's example: c = (3,4,0) becomes (3,4,1) since L_3[1,2] = 1).
const FIG4_INTERIM: [(char, [Disk; 3]); 12] = [
    ('c', [3, 4, 1]),
    ('d', [4, 2, 1]),
    ('e', [3, 1, 2]),
    ('g', [3, 4, 2]),
    ('i', [1, 2, 4]),
    ('j', [1, 3, 2]),
    ('l', [4, 2, 3]),
    ('m', [4, 3, 1]),
    ('o', [2, 1, 3]),
    ('q', [2, 4, 3]),
    ('r', [1, 3, 4]),
    ('s', [2, 1, 4]),
];

/// Figure 4's reserved (green) rows: the rebuilt units each survivor receives, in row order.
const FIG4_RESERVED: [(Disk, &str); 4] = [(1, "cio"), (2, "djq"), (3, "elr"), (4, "gms")];

#[test]
fn figure2_template_n5_k3() {
    let s = RaidPlus::new(5, 3, 5, Order::Native).unwrap();
    let c = s.cycle();
    assert_eq!(c.stripes.len(), 20);
    assert_eq!(c.rows, 15, "n*k rows: 12 used + 3 reserved");
    assert_eq!(s.used_rows(), 0..12);
    assert_eq!(s.reserved_rows(), 12..15);
    for (i, (name, disks)) in FIG2_STRIPES.iter().enumerate() {
        assert_eq!(letter(i), *name);
        assert_eq!(disks_of(c, i), disks, "stripe {name}");
        assert_eq!(s.cell(i), (1 + i as u32 / 5, i as u32 % 5), "stripe {name}");
        let st = &c.stripes[i];
        assert_eq!(st.code, Code::Xor);
        let roles: Vec<Role> = st.units.iter().map(|u| u.role).collect();
        assert_eq!(roles, [Role::Data, Role::Data, Role::P]);
    }
    for (d, want) in FIG2_DISKS.iter().enumerate() {
        let mut units: Vec<(u64, usize)> = (0..20)
            .flat_map(|i| {
                c.stripes[i]
                    .units
                    .iter()
                    .filter(|u| u.disk == d as Disk)
                    .map(move |u| (u.offset, i))
            })
            .collect();
        units.sort();
        let offsets: Vec<u64> = units.iter().map(|u| u.0).collect();
        assert_eq!(offsets, (0..12).collect::<Vec<_>>(), "disk {d} rows 0..12");
        let got: String = units.iter().map(|u| letter(u.1)).collect();
        assert_eq!(&got, want, "disk {d}");
    }
    // Disk 0 holds the 3rd unit of c, the 2nd of d, the 1st of e at its first three rows.
    assert_eq!(c.stripes[2].units[2].loc(), Loc { disk: 0, offset: 0 });
    assert_eq!(c.stripes[3].units[1].loc(), Loc { disk: 0, offset: 1 });
    assert_eq!(c.stripes[4].units[0].loc(), Loc { disk: 0, offset: 2 });
    // 40 data chunks per template, in stripe order.
    assert_eq!(c.data_chunks(), 40);
    assert_eq!(c.data[0], c.stripes[0].units[0].loc());
    assert_eq!(c.data[1], c.stripes[0].units[1].loc());
    assert_eq!(c.data[2], c.stripes[1].units[0].loc());
}

#[test]
fn figure4_interim_layout_after_disk0_fails() {
    let s = RaidPlus::new(5, 3, 5, Order::Native).unwrap();
    assert_eq!(s.spare_squares(), 1);
    let plan = recovery_plan(&s, &[0]).unwrap();
    assert_eq!(plan.repairs.len(), 12, "(n-1)k units lost");
    let rebuilt = &plan.rebuilt;
    assert_eq!(rebuilt.rows, 15, "the rebuild fits in the reserved rows");
    let interim: HashMap<char, [Disk; 3]> = FIG4_INTERIM.iter().copied().collect();
    for (i, (name, disks)) in FIG2_STRIPES.iter().enumerate() {
        let want = interim.get(name).unwrap_or(disks);
        assert_eq!(&disks_of(rebuilt, i), want, "stripe {name}");
        // Units not on disk 0 do not move.
        for (u, v) in s.cycle().stripes[i]
            .units
            .iter()
            .zip(&rebuilt.stripes[i].units)
        {
            if u.disk != 0 {
                assert_eq!(u, v);
            }
        }
    }
    for (d, want) in FIG4_RESERVED {
        let mut got: Vec<(u64, char)> = Vec::new();
        for r in &plan.repairs {
            if r.target.disk == d {
                got.push((r.target.offset, letter(r.stripe)));
            }
        }
        got.sort();
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            [12, 13, 14],
            "disk {d}"
        );
        assert_eq!(
            got.iter().map(|g| g.1).collect::<String>(),
            want,
            "disk {d}"
        );
    }
    // The interim scheme is the same layout.
    let im = s.interim(&[0]).unwrap();
    assert_eq!(im.cycle(), rebuilt);
    assert_eq!(im.failed(), &[0]);
    // Property 3 and 5: 6 reads and 3 writes on each survivor.
    let r = check(&s, &[0], 20).unwrap();
    assert_eq!(r.rebuild_reads_per_disk, [0, 6, 6, 6, 6]);
    assert_eq!(r.rebuild_writes_per_disk, [0, 3, 3, 3, 3]);
    assert_eq!(r.rebuild_read_cov, 0.0);
    assert_eq!(r.rebuild_write_cov, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Figure 3 / section 4.3: read-friendly (head = previous tail) and write-friendly
// (head = previous tail + x) orders. Row 1 of n = 5, k = 3.
// ---------------------------------------------------------------------------------------------

#[test]
fn figure3_stripe_orders_n5_k3() {
    let name_of: HashMap<Vec<Disk>, char> =
        FIG2_STRIPES.iter().map(|(n, d)| (d.to_vec(), *n)).collect();
    for (order, row1) in [
        (Order::Native, "abcde"),
        (Order::Read, "acebd"),
        (Order::Write, "adbec"),
    ] {
        let s = RaidPlus::new(5, 3, 5, order).unwrap();
        let c = s.cycle();
        let names: String = (0..20).map(|i| name_of[&disks_of(c, i)]).collect();
        assert_eq!(&names[..5], row1, "{order:?}");
        // A permutation of the native stripes, row by row.
        let mut sorted: Vec<char> = names.chars().collect();
        sorted.sort();
        assert_eq!(sorted.iter().collect::<String>(), "abcdefghijklmnopqrst");
        for row in 0..4 {
            let x = row as u32 + 1;
            for i in row * 5..row * 5 + 5 {
                assert_eq!(s.cell(i).0, x);
            }
        }
    }
}

/// The order rule holds within every row; for n = p^m with m > 1 the walk restarts (at the
/// lowest unused cell) exactly n/p - 1 times per row.
#[test]
fn order_rules_hold_for_prime_and_prime_power_n() {
    for n in [5usize, 7, 8, 9, 11, 16, 25, 27, 32] {
        let (p, _) = gf::prime_power(n).unwrap();
        for k in [2, 3, n / 2, n - 1] {
            for order in [Order::Read, Order::Write] {
                let t = RaidPlus::template_for(n, k, order).unwrap();
                let f = gf::Field::new(n).unwrap();
                let mut restarts = 0;
                for i in 0..t.len() {
                    let (x, y) = t.cell(i);
                    if y == 0 {
                        assert_eq!(i % n, 0, "each row starts at [x, 0]");
                        continue;
                    }
                    let prev = t.disks(i - 1);
                    let want = match order {
                        Order::Read => prev[k - 1],
                        _ => f.add(prev[k - 1], x),
                    };
                    if t.disks(i)[0] != want {
                        restarts += 1;
                    }
                }
                assert_eq!(
                    restarts,
                    (n - 1) * (n / p as usize - 1),
                    "n={n} k={k} {order:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Section 4.1: valid pool sizes.
// ---------------------------------------------------------------------------------------------

/// The paper's 42 valid n between 4 and 128.
const PAPER_VALID_N: [usize; 42] = [
    4, 5, 7, 8, 9, 11, 13, 16, 17, 19, 23, 25, 27, 29, 31, 32, 37, 41, 43, 47, 49, 53, 59, 61, 64,
    67, 71, 73, 79, 81, 83, 89, 97, 101, 103, 107, 109, 113, 121, 125, 127, 128,
];

fn valid_n() -> Vec<usize> {
    (4..=128)
        .filter(|&n| gf::prime_power(n).is_some())
        .collect()
}

#[test]
fn section41_valid_pool_sizes() {
    assert_eq!(valid_n(), PAPER_VALID_N);
    for n in 4..=128 {
        let ok = RaidPlus::new(n, 3, 5, Order::Native).is_ok();
        assert_eq!(ok, PAPER_VALID_N.contains(&n), "n={n}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties 1 and 2 over every valid n in 4..=128 and every k in 2..=n-1.
// ---------------------------------------------------------------------------------------------

/// Checks Properties 1 and 2 on a bare template: distinct disks per stripe, and per disk the
/// same number of units of every square (so of data, P and Q for either level).
fn template_uniform(n: usize, k: usize, order: Order) {
    let t = RaidPlus::template_for(n, k, order).unwrap();
    assert_eq!(t.len(), n * (n - 1));
    let mut per = vec![0u32; n * k];
    let mut stamp = vec![usize::MAX; n];
    for i in 0..t.len() {
        let d = t.disks(i);
        assert_eq!(d.len(), k);
        for (j, &disk) in d.iter().enumerate() {
            assert!(
                stamp[disk as usize] != i,
                "n={n} k={k}: stripe {i} repeats {disk}"
            );
            stamp[disk as usize] = i;
            per[disk as usize * k + j] += 1;
        }
    }
    assert!(
        per.iter().all(|&c| c as usize == n - 1),
        "n={n} k={k}: every disk holds n-1 units of each square"
    );
}

/// Properties 1 and 2 on a full scheme, through `layout::check`.
fn scheme_uniform(n: usize, k: usize, level: u8, order: Order) -> RaidPlus {
    let s = RaidPlus::new(n, k, level, order).unwrap();
    let c = s.cycle();
    assert_eq!(c.rows, (n * k) as u64);
    let parity = if level == 6 { 2 } else { 1 };
    let r = check(&s, &[0], n * (n - 1)).unwrap();
    assert!(r.stripes_on_distinct_disks);
    let data = ((n - 1) * (k - parity)) as u64;
    let par = ((n - 1) * parity) as u64;
    assert!(
        r.data_units_per_disk.iter().all(|&d| d == data),
        "n={n} k={k}"
    );
    assert!(
        r.parity_units_per_disk.iter().all(|&p| p == par),
        "n={n} k={k}"
    );
    s
}

/// Every valid n in 4..=128, every k in 2..=n-1, on the bare template (the stripe-to-disk map
/// that `RaidPlus::new` stacks into its cycle): about 1.4e9 units in all, some 15 s at
/// opt-level 1. Run in CI because the layouts issue asks for exactly this sweep.
#[test]
fn properties_1_2_full_sweep() {
    let t0 = Instant::now();
    for n in valid_n() {
        for k in 2..n {
            template_uniform(n, k, Order::Native);
        }
    }
    eprintln!("full sweep: {:?}", t0.elapsed());
}

/// The fast part of the sweep: every k for n <= 32 (all orders) and for n = 49, 59, 64, 81;
/// every other n for a spread of k including 2, n-2 and n-1.
#[test]
fn properties_1_2_sweep() {
    let t0 = Instant::now();
    for n in valid_n() {
        let ks: Vec<usize> = if n <= 32 || [49, 59, 64, 81].contains(&n) {
            (2..n).collect()
        } else {
            vec![2, 3, 4, 7, 8, n / 2, n - 2, n - 1]
        };
        for k in ks {
            template_uniform(n, k, Order::Native);
            if n <= 32 {
                template_uniform(n, k, Order::Read);
                template_uniform(n, k, Order::Write);
            }
        }
    }
    eprintln!("template sweep: {:?}", t0.elapsed());
}

/// Full schemes (cycle, roles, offsets) for every k at n <= 16 and a spread above.
#[test]
fn properties_1_2_on_schemes() {
    let t0 = Instant::now();
    for n in valid_n() {
        let ks: Vec<usize> = if n <= 16 {
            (2..n).collect()
        } else if n <= 32 {
            vec![2, 3, 7, n - 2, n - 1]
        } else {
            vec![2, 3, 7]
        };
        for &k in &ks {
            scheme_uniform(n, k, 5, Order::Native);
            if k >= 3 && k <= n - 2 && n <= 32 {
                scheme_uniform(n, k, 6, Order::Native);
            }
        }
    }
    eprintln!("scheme sweep: {:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Properties 3-5: one failure rebuilds with exactly uniform reads and writes.
// ---------------------------------------------------------------------------------------------

/// One failure: reads and writes on every survivor exactly equal (CoV 0), k writes each into
/// the reserved rows, and the interim layout keeps distinct disks and uniform data.
fn one_failure_uniform(s: &RaidPlus, f: Disk) {
    let (n, k) = (s.n(), s.width());
    let level = s.level();
    let r = check(s, &[f], n * (n - 1)).unwrap();
    let ctx = format!("n={n} k={k} level {level} {:?} f={f}", s.order());
    assert_eq!(
        r.rebuild_read_cov, 0.0,
        "{ctx}: {:?}",
        r.rebuild_reads_per_disk
    );
    assert_eq!(
        r.rebuild_write_cov, 0.0,
        "{ctx}: {:?}",
        r.rebuild_writes_per_disk
    );
    assert_eq!(r.windowed.read_cov_max, 0.0, "{ctx}");
    assert_eq!(r.disks_read, n - 1, "{ctx}");
    assert_eq!(r.disks_written, n - 1, "{ctx}");
    let reads = (k * (k - if level == 6 { 2 } else { 1 })) as u64;
    for d in 0..n {
        let (rd, wr) = if d == f as usize {
            (0, 0)
        } else {
            (reads, k as u64)
        };
        assert_eq!(r.rebuild_reads_per_disk[d], rd, "{ctx} disk {d}");
        assert_eq!(r.rebuild_writes_per_disk[d], wr, "{ctx} disk {d}");
    }
    // Rebuilt units land exactly in the reserved rows (Property 5).
    let plan = recovery_plan(s, &[f]).unwrap();
    assert_eq!(plan.repairs.len(), (n - 1) * k);
    let reserved = s.reserved_rows();
    let mut used: HashSet<Loc> = HashSet::new();
    for rep in &plan.repairs {
        assert!(
            reserved.contains(&rep.target.offset),
            "{ctx}: {:?}",
            rep.target
        );
        assert!(used.insert(rep.target));
    }
    // Property 4 and uniform data after the rebuild.
    let c = &plan.rebuilt;
    assert_eq!(c.rows, (n * k) as u64);
    let mut data = vec![0u64; n];
    let mut par = vec![0u64; n];
    for st in &c.stripes {
        let ds: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
        assert_eq!(ds.len(), k, "{ctx}");
        assert!(!ds.contains(&f), "{ctx}");
        for u in &st.units {
            if u.role == Role::Data {
                data[u.disk as usize] += 1;
            } else {
                par[u.disk as usize] += 1;
            }
        }
    }
    let live = |d: usize| d != f as usize;
    let dv: HashSet<u64> = (0..n).filter(|&d| live(d)).map(|d| data[d]).collect();
    let pv: HashSet<u64> = (0..n).filter(|&d| live(d)).map(|d| par[d]).collect();
    assert_eq!(dv.len(), 1, "{ctx}: interim data {data:?}");
    assert_eq!(pv.len(), 1, "{ctx}: interim parity {par:?}");
}

#[test]
fn properties_3_5_one_failure_small_n_every_disk() {
    let t0 = Instant::now();
    for n in [3usize, 4, 5, 7, 8, 9, 11, 13] {
        for k in 2..n {
            for order in ORDERS {
                let s = RaidPlus::new(n, k, 5, order).unwrap();
                for f in 0..n as Disk {
                    one_failure_uniform(&s, f);
                }
                if k >= 3 && k <= n - 2 && order == Order::Native {
                    let s6 = RaidPlus::new(n, k, 6, order).unwrap();
                    for f in 0..n as Disk {
                        one_failure_uniform(&s6, f);
                    }
                }
            }
        }
    }
    eprintln!("one failure, small n: {:?}", t0.elapsed());
}

/// The rows after one failure that a healthy layout states without relocating every unit
/// (asked of every member whenever an array is opened) are exactly the computed ones, for
/// every disk of every small pool; and it is stated whenever a spare square exists.
#[test]
fn one_failure_rows_stated_equal_computed() {
    for n in [3usize, 4, 5, 7, 8, 9, 11, 13, 16] {
        for k in 2..n {
            for (level, order) in ORDERS.iter().map(|&o| (5u8, o)).chain([(6, Order::Native)]) {
                if level == 6 && !(3..=n - 2).contains(&k) {
                    continue;
                }
                let s = RaidPlus::new(n, k, level, order).unwrap();
                for f in 0..n as Disk {
                    let case = format!("n {n} k {k} level {level} {order:?} disk {f}");
                    let computed =
                        Cycle::relocated_rows(s.cycle().rows, &s.relocate(&[f]).unwrap());
                    assert!(recovery_plan(&s, &[f]).is_ok(), "{case}");
                    let stated = s.recovery_rows_hint(&[f]);
                    assert_eq!(stated.is_some(), k + 1 < n, "{case}");
                    if let Some(rows) = stated {
                        assert_eq!(rows, computed, "{case}");
                    }
                    assert_eq!(layout::recovery_rows(&s, &[f]).unwrap(), computed, "{case}");
                }
                // Not stated for an interim layout or for two failures.
                if k + 2 < n {
                    let i = s.interim(&[0]).unwrap();
                    assert_eq!(i.recovery_rows_hint(&[1]), None);
                    assert_eq!(s.recovery_rows_hint(&[0, 1]), None);
                }
            }
        }
    }
}

#[test]
fn properties_3_5_one_failure_large_n_sample() {
    let t0 = Instant::now();
    for n in [16usize, 17, 25, 27, 32, 49, 64, 81, 127, 128] {
        let (ks, fs) = if n <= 32 {
            (
                vec![2, 3, 5, 8, n / 3, n - 1],
                vec![0, 1, n as Disk / 2, n as Disk - 1],
            )
        } else {
            (vec![2, 3, 8], vec![0, n as Disk - 1])
        };
        for k in ks {
            let s = RaidPlus::new(n, k, 5, Order::Native).unwrap();
            for &f in &fs {
                one_failure_uniform(&s, f);
            }
        }
        let s6 = RaidPlus::new(n, 6, 6, Order::Read).unwrap();
        one_failure_uniform(&s6, n as Disk / 3);
    }
    eprintln!("one failure, large n: {:?}", t0.elapsed());
}

/// The evaluation configuration: 59 disks, 7-wide stripes (6+1). Rebuild reads over one
/// template window are exactly uniform, where random and hash placement measure 12.7 % to
/// 38.9 % CoV in the paper.
#[test]
fn evaluation_configuration_n59_k7() {
    for order in ORDERS {
        let s = RaidPlus::new(59, 7, 5, order).unwrap();
        assert_eq!(s.cycle().stripes.len(), 59 * 58);
        assert_eq!(s.cycle().rows, 59 * 7);
        for f in [0, 30, 58] {
            let r = check(&s, &[f], 59 * 58).unwrap();
            assert_eq!(r.windowed.windows, 1);
            assert_eq!(r.windowed.read_cov_max, 0.0);
            assert_eq!(r.windowed.write_cov_max, 0.0);
            assert_eq!(r.rebuild_read_cov, 0.0);
            assert_eq!(r.disks_read, 58);
            assert!(r
                .rebuild_reads_per_disk
                .iter()
                .enumerate()
                .all(|(d, &c)| c == if d == f as usize { 0 } else { 42 }));
            assert!(r
                .rebuild_writes_per_disk
                .iter()
                .enumerate()
                .all(|(d, &c)| c == if d == f as usize { 0 } else { 7 }));
        }
    }
    // The same through the CLI's constructor.
    let p = Params {
        disks: Some(59),
        width: Some(7),
        ..Params::default()
    };
    let s = build(SchemeKind::RaidPlus, &p).unwrap();
    assert_eq!(check(&*s, &[], 59 * 58).unwrap().windowed.read_cov_max, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Section 5.3: several failures, one after another (interim mode), and level 6 pairs.
// ---------------------------------------------------------------------------------------------

#[derive(Default, Debug, Clone, Copy)]
struct Worst {
    read: f64,
    write: f64,
    units: f64,
}

impl Worst {
    fn max(&mut self, o: Worst) {
        self.read = self.read.max(o.read);
        self.write = self.write.max(o.write);
        self.units = self.units.max(o.units);
    }
}

/// Rebuild reads, writes (each source read once per stripe) and units per disk after the
/// rebuild, as CoV over the disks alive after `failed`.
fn measure(plan_failed: &[Disk], all_failed: &[Disk], scheme: &dyn Scheme) -> Worst {
    let plan = recovery_plan(scheme, plan_failed).unwrap();
    let n = scheme.cycle().disks;
    let mut reads = vec![0f64; n];
    let mut writes = vec![0f64; n];
    let mut once = HashSet::new();
    for r in &plan.repairs {
        writes[r.target.disk as usize] += 1.0;
        for s in &r.sources {
            if let Source::Disk(l) = s {
                if once.insert((r.stripe, *l)) {
                    reads[l.disk as usize] += 1.0;
                }
            }
        }
    }
    let mut units = vec![0f64; n];
    for st in &plan.rebuilt.stripes {
        let ds: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
        assert_eq!(
            ds.len(),
            st.units.len(),
            "distinct disks after {all_failed:?}"
        );
        for u in &st.units {
            assert!(!all_failed.contains(&u.disk), "unit left on a failed disk");
            units[u.disk as usize] += 1.0;
        }
    }
    let live = |v: &[f64]| -> Vec<f64> {
        (0..n)
            .filter(|d| !all_failed.contains(&(*d as Disk)))
            .map(|d| v[d])
            .collect()
    };
    Worst {
        read: cov(&live(&reads)),
        write: cov(&live(&writes)),
        units: cov(&live(&units)),
    }
}

/// A deterministic failure order for tests: a stride walk over the disks.
fn failure_order(n: usize, start: usize, stride: usize) -> Vec<Disk> {
    let mut v = Vec::new();
    let mut d = start % n;
    while v.len() < n {
        if !v.contains(&(d as Disk)) {
            v.push(d as Disk);
        }
        d = (d + stride) % n;
        if v.contains(&(d as Disk)) {
            d = (0..n).find(|x| !v.contains(&(*x as Disk))).unwrap_or(0);
        }
    }
    v
}

/// Sequential failures 2..=m (each rebuilt before the next, level 5): every interim layout
/// keeps distinct live disks per stripe, and the relocation of the whole sequence equals the
/// chain of interim layouts. Reports the worst CoV measured.
#[test]
fn sequential_failures_up_to_m() {
    let t0 = Instant::now();
    let mut worst_m = Worst::default(); // failures 2..=m, spare squares
    let mut worst_2 = Worst::default(); // second failure only
    let mut worst_beyond = Worst::default(); // failures m+1..=n-k, fallback
    let mut cases = 0;
    for (n, ks) in [
        (7usize, vec![2usize, 3, 4]),
        (8, vec![2, 3, 4, 5]),
        (9, vec![2, 3, 4, 6]),
        (11, vec![3, 5, 7]),
        (13, vec![3, 4, 8]),
        (16, vec![3, 4, 7]),
        (17, vec![5]),
        (25, vec![7]),
        (32, vec![7]),
    ] {
        for k in ks {
            for order in ORDERS {
                let s = RaidPlus::new(n, k, 5, order).unwrap();
                let m = s.spare_squares();
                assert_eq!(m, n - 1 - k);
                assert_eq!(s.max_failures(), n - k);
                for (start, stride) in [(0usize, 1usize), (3, 5), (n - 1, n - 2)] {
                    let seq = failure_order(n, start, stride);
                    let mut cur = s.clone();
                    for i in 1..=s.max_failures() {
                        let f = seq[i - 1];
                        let w = measure(&[f], &seq[..i], &cur);
                        cases += 1;
                        if i == 1 {
                            assert_eq!(w.read, 0.0);
                            assert_eq!(w.write, 0.0);
                            assert_eq!(w.units, 0.0);
                        } else if i <= m {
                            worst_m.max(w);
                            if i == 2 {
                                worst_2.max(w);
                            }
                        } else {
                            worst_beyond.max(w);
                        }
                        cur = cur.interim(&[f]).unwrap();
                        assert_eq!(cur.failed(), &seq[..i]);
                    }
                    // One relocation of the whole sequence gives the same layout.
                    let all = &seq[..s.max_failures()];
                    let moves = s.relocate(all).unwrap();
                    assert_eq!(&s.cycle().relocated(&moves), cur.cycle());
                    assert_eq!(cur.tolerance(), 0);
                    assert!(matches!(
                        cur.relocate(&[seq[s.max_failures()]]),
                        Err(LayoutError::NoSpareSpace(_))
                    ));
                }
            }
        }
    }
    eprintln!(
        "sequential failures ({cases} rebuilds, {:?}): worst CoV for failure 2 {worst_2:?}, failures 2..=m {worst_m:?}, beyond m {worst_beyond:?}",
        t0.elapsed()
    );
    // Near-uniform: a unit or two of difference between disks (n is small here).
    assert!(worst_m.write < 0.25, "{worst_m:?}");
    assert!(worst_m.units < 0.04, "{worst_m:?}");
    assert!(worst_beyond.units < 0.04, "{worst_beyond:?}");
}

/// Section 5.3: a pool that keeps losing disks without replacement stays nearly balanced; the
/// paper's Monte Carlo simulation found a data-distribution CoV of at most 0.29 %. Here the
/// evaluation configuration (n = 59, k = 7) loses disks one after another until no stripe can
/// move any more (n - k = 52 failures, the first 51 through spare squares).
#[test]
fn section53_n59_keeps_losing_disks() {
    let t0 = Instant::now();
    let s = RaidPlus::new(59, 7, 5, Order::Native).unwrap();
    assert_eq!(s.spare_squares(), 51);
    assert_eq!(s.max_failures(), 52);
    let seq = failure_order(59, 3, 17);
    let mut cur = s.clone();
    let mut worst = (0.0f64, 0usize);
    for i in 1..=s.max_failures() {
        cur = cur.interim(&[seq[i - 1]]).unwrap();
        let mut units = vec![0f64; 59];
        for st in &cur.cycle().stripes {
            for u in &st.units {
                units[u.disk as usize] += 1.0;
            }
        }
        let live: Vec<f64> = (0..59)
            .filter(|d| !seq[..i].contains(&(*d as Disk)))
            .map(|d| units[d])
            .collect();
        let c = cov(&live);
        if c > worst.0 {
            worst = (c, i);
        }
    }
    eprintln!(
        "n=59 k=7, 52 failures: worst unit CoV {:.4} % after {} failures ({:?})",
        worst.0 * 100.0,
        worst.1,
        t0.elapsed()
    );
    assert!(worst.0 <= 0.0029, "{worst:?}");
}

/// The second failure in detail on larger pools: every ordered pair of failures for n = 8 and
/// 9, a sample for n = 31 and 59.
#[test]
fn second_failure_near_uniform() {
    let t0 = Instant::now();
    let mut worst = Worst::default();
    for (n, k, pairs) in [
        (8usize, 3usize, None),
        (9, 4, None),
        (31, 7, Some(40usize)),
        (59, 7, Some(12)),
    ] {
        let s = RaidPlus::new(n, k, 5, Order::Native).unwrap();
        let mut all: Vec<(Disk, Disk)> = Vec::new();
        for a in 0..n as Disk {
            for b in 0..n as Disk {
                if a != b {
                    all.push((a, b));
                }
            }
        }
        let chosen: Vec<(Disk, Disk)> = match pairs {
            None => all,
            Some(c) => (0..c).map(|i| all[i * all.len() / c]).collect(),
        };
        for (a, b) in chosen {
            let im = s.interim(&[a]).unwrap();
            worst.max(measure(&[b], &[a, b], &im));
        }
    }
    eprintln!("second failure: worst CoV {worst:?} ({:?})", t0.elapsed());
    assert!(worst.units < 0.05, "{worst:?}");
}

/// Level 6 survives every pair of simultaneous failures (both rebuilt at once through the
/// spare squares), for every pair on small pools.
#[test]
fn level6_recovers_every_pair() {
    let t0 = Instant::now();
    let mut worst = Worst::default();
    for (n, ks) in [
        (5usize, vec![3usize]),
        (7, vec![3, 4, 5]),
        (8, vec![3, 4, 5, 6]),
        (9, vec![4, 5, 7]),
        (11, vec![5]),
    ] {
        for k in ks {
            for order in ORDERS {
                let s = RaidPlus::new(n, k, 6, order).unwrap();
                assert_eq!(s.tolerance(), 2);
                for a in 0..n as Disk {
                    for b in 0..n as Disk {
                        if a == b {
                            continue;
                        }
                        let w = measure(&[a, b], &[a, b], &s);
                        worst.max(w);
                    }
                }
                assert!(matches!(
                    recovery_plan(&s, &[0, 1, 2]),
                    Err(LayoutError::TooManyFailures { .. })
                ));
            }
        }
    }
    eprintln!("level 6 pairs: worst CoV {worst:?} ({:?})", t0.elapsed());
}

#[test]
fn relocate_errors() {
    let s = RaidPlus::new(7, 3, 5, Order::Native).unwrap();
    assert_eq!(s.tolerance(), 1);
    assert!(matches!(s.relocate(&[7]), Err(LayoutError::BadFailure(_))));
    assert!(matches!(
        s.relocate(&[1, 1]),
        Err(LayoutError::BadFailure(_))
    ));
    assert!(matches!(
        s.relocate(&[0, 1, 2, 3, 4]),
        Err(LayoutError::NoSpareSpace(_))
    ));
    assert!(s.relocate(&[0, 1, 2, 3]).is_ok(), "n - k = 4 failures");
    assert!(s.relocate(&[]).unwrap().is_empty());
    let im = s.interim(&[2]).unwrap();
    let e = im.relocate(&[2]).unwrap_err().to_string();
    assert!(e.contains("already failed"), "{e}");
    // Two simultaneous failures exceed level 5's tolerance.
    assert!(matches!(
        recovery_plan(&s, &[0, 1]),
        Err(LayoutError::TooManyFailures { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Section 4.4: pools of volumes with different widths and levels.
// ---------------------------------------------------------------------------------------------

#[test]
fn pool_of_volumes() {
    let pool = RaidPlusPool::new(7, "3:5, 4:6 ,2:5", Order::Native).unwrap();
    let vols = pool.volumes();
    assert_eq!(vols.len(), 3);
    assert_eq!((vols[1].width, vols[1].level), (4, 6));
    assert_eq!(pool.tolerance(), 1, "the minimum over the volumes");
    let c = pool.cycle();
    assert_eq!(c.stripes.len(), 3 * 42);
    assert_eq!(c.rows, 7 * (3 + 4 + 2) as u64);
    assert_eq!(pool.volume_rows(0), 0..21);
    assert_eq!(pool.volume_rows(1), 21..49);
    assert_eq!(pool.volume_rows(2), 49..63);
    assert_eq!(pool.reserved_rows(1), 45..49);
    for (v, spec) in vols.iter().enumerate() {
        let k = spec.width;
        assert_eq!(pool.volume_stripes(v), v * 42..(v + 1) * 42);
        // Each volume is its own template, shifted to its rows.
        let single = RaidPlus::new(7, k, spec.level, Order::Native).unwrap();
        let base = pool.volume_rows(v).start;
        for (i, si) in pool.volume_stripes(v).enumerate() {
            assert_eq!(pool.volume_of(si), v);
            let a = &c.stripes[si];
            let b = &single.cycle().stripes[i];
            assert_eq!(a.code, b.code);
            for (u, w) in a.units.iter().zip(&b.units) {
                assert_eq!(
                    (u.disk, u.offset, u.role),
                    (w.disk, w.offset + base, w.role)
                );
            }
        }
    }
    let r = check(&pool, &[3], 42).unwrap();
    assert!(r.stripes_on_distinct_disks);
    assert!(r.data_units_per_disk.iter().all(|&d| d == 6 * (2 + 2 + 1)));
    assert_eq!(r.rebuild_read_cov, 0.0);
    assert_eq!(r.rebuild_write_cov, 0.0);
    assert!(r
        .rebuild_writes_per_disk
        .iter()
        .enumerate()
        .all(|(d, &w)| w == if d == 3 { 0 } else { 9 }));
    // Each volume rebuilds into its own reserved rows.
    let plan = recovery_plan(&pool, &[3]).unwrap();
    for rep in &plan.repairs {
        let v = pool.volume_of(rep.stripe);
        assert!(pool.reserved_rows(v).contains(&rep.target.offset));
    }
    let json = pool.extra_json().unwrap();
    assert!(json.starts_with("\"raidplus\": {"), "{json}");
    assert!(json.contains("\"width\": 4, \"level\": 6"), "{json}");
    // The pool's own interim layout and a second failure.
    let im = pool.interim(&[3]).unwrap();
    assert_eq!(im.cycle(), &plan.rebuilt);
    assert!(recovery_plan(&im, &[5]).is_ok());
}

#[test]
fn level6_pool_survives_pairs() {
    let pool = RaidPlusPool::new(9, "4:6,6:6", Order::Write).unwrap();
    assert_eq!(pool.tolerance(), 2);
    for a in 0..9 {
        for b in 0..9 {
            if a != b {
                let w = measure(&[a, b], &[a, b], &pool);
                assert!(w.units < 0.1);
            }
        }
    }
}

#[test]
fn pool_through_build() {
    let p = Params {
        disks: Some(8),
        volumes: Some("3:5,5:6".into()),
        order: Order::Read,
        ..Params::default()
    };
    let s = build(SchemeKind::RaidPlus, &p).unwrap();
    assert_eq!(s.cycle().stripes.len(), 2 * 56);
    assert_eq!(s.cycle().rows, 8 * 8);
    assert_eq!(s.tolerance(), 1);
    assert!(s.describe().contains("raidplus pool"), "{}", s.describe());
}

/// Logical chunks map onto the template's data units, cycle after cycle.
#[test]
fn layout_maps_chunks_through_the_template() {
    let s = Arc::new(RaidPlus::new(5, 3, 5, Order::Native).unwrap());
    let l = Layout::new(s.clone(), 4096).unwrap();
    assert_eq!(l.capacity_chunks(30), 2 * 40, "two whole 15-row templates");
    let first = l.locate(0);
    assert_eq!(first.loc, Loc { disk: 1, offset: 0 });
    assert_eq!(first.stripe, 0);
    let c = l.locate(40 + 5);
    assert_eq!(c.cycle, 1);
    assert_eq!(c.loc.offset, 15 + s.cycle().data[5].offset);
}

// ---------------------------------------------------------------------------------------------
// Bad parameters: one-line errors naming the constraint, never a panic.
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_parameters() {
    for (n, k, level, needle) in [
        (
            6usize,
            3usize,
            5u8,
            "6 is not a prime power (RAID+ needs n = p^m",
        ),
        (1, 2, 5, "1 is not a prime power"),
        (0, 2, 5, "0 is not a prime power"),
        (12, 3, 5, "not a prime power"),
        (2048, 3, 5, "more than RAID+ supports"),
        (5, 5, 5, "width 5 must be below the 5 disks"),
        (5, 9, 5, "must be below"),
        (5, 1, 5, "at least 2 units"),
        (5, 0, 5, "at least 2 units"),
        (7, 2, 6, "at least 3 units"),
        (7, 6, 6, "level 6 needs width <= disks - 2 = 5"),
        (5, 3, 7, "level 7 is not supported"),
        (5, 3, 0, "level 0"),
    ] {
        let e = RaidPlus::new(n, k, level, Order::Native).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(needle),
            "n={n} k={k} l={level}: '{msg}' lacks '{needle}'"
        );
        assert!(!msg.contains('\n'));
        assert!(matches!(e, LayoutError::InvalidParam { .. }));
    }
    let e = RaidPlus::new(6, 3, 5, Order::Native)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid parameter --disks: 6 is not a prime power (RAID+ needs n = p^m, e.g. 5, 7, 8, 9, 11, 13, 16)"
    );
    for (spec, needle) in [
        ("", "empty volume list"),
        ("  ", "empty volume list"),
        ("3", "'3' is not width:level"),
        ("3:5:1", "is not width:level"),
        ("3:5,", "'' is not width:level"),
        ("x:5", "width 'x' is not a number"),
        ("3:y", "level 'y' is not 5 or 6"),
        ("3:7", "volume 1 (3:7): level 7 is not supported"),
        (
            "3:5,9:5",
            "volume 2 (9:5): width 9 must be below the 7 disks",
        ),
        (
            "3:5,6:6",
            "volume 2 (6:6): level 6 needs width <= disks - 2",
        ),
        (
            "1:5",
            "volume 1 (1:5): a level-5 RAID+ stripe needs at least 2 units",
        ),
    ] {
        let e = RaidPlusPool::new(7, spec, Order::Native).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(needle), "'{spec}': '{msg}' lacks '{needle}'");
        assert!(msg.starts_with("invalid parameter --volumes: "), "{msg}");
        assert!(!msg.contains('\n'));
    }
    let e = RaidPlusPool::new(10, "3:5", Order::Native)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--disks: 10 is not a prime power"), "{e}");
    // Through the CLI's constructor.
    let p = Params {
        disks: Some(6),
        width: Some(3),
        ..Params::default()
    };
    let e = build(SchemeKind::RaidPlus, &p).unwrap_err().to_string();
    assert!(e.contains("prime power"), "{e}");
}

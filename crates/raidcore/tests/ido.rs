//! raidcore::ido: zone table (rounding, bounds, epochs, hot zones), D-Map against a byte-level
//! reference model, the controller's newest-data property for every policy (random writes,
//! reads, copies completing late, rebuild steps, reclaims), and record round trips / damaged
//! record refusal.

use layout::{build, Params, SchemeKind};
use proptest::prelude::*;
use raidcore::ido::{
    chunk_needs_reconstruction, stripe_data_bytes, CopyJob, CopyKind, DMap, Epoch, Ido, IdoConfig,
    IdoError, LogHeader, Phase, Piece, RebuildPolicy, Source, ZoneFlag, ZoneTable,
    DEFAULT_ZONE_BYTES, MAX_ZONES,
};
use raidcore::{ArrayState, Geometry, RebuildOrder, RebuildScheduler, SpeedLimits};

fn raid5(disks: usize, chunk: u64, member: u64) -> Geometry {
    let p = Params {
        disks: Some(disks),
        ..Params::default()
    };
    Geometry::new(build(SchemeKind::Raid5, &p).unwrap(), chunk, member).unwrap()
}

#[test]
fn zone_size_is_a_stripe_multiple() {
    let geo = raid5(4, 64 << 10, 64 << 20);
    assert_eq!(stripe_data_bytes(&geo), 192 << 10);
    let t = ZoneTable::for_geometry(&geo, None).unwrap();
    // 12 MiB is 64 stripes of 192 KiB.
    assert_eq!(t.zone_bytes(), DEFAULT_ZONE_BYTES);
    assert_eq!(t.zones(), geo.capacity_bytes().div_ceil(12 << 20));
    let t = ZoneTable::for_geometry(&geo, Some(384 << 10)).unwrap();
    assert_eq!(t.zone_bytes(), 384 << 10);
    let e = ZoneTable::for_geometry(&geo, Some(1 << 20)).unwrap_err();
    assert_eq!(
        e,
        IdoError::BadZoneSize {
            zone_bytes: 1 << 20,
            granule: 192 << 10,
            suggest: 1152 << 10
        }
    );
    assert!(e.to_string().contains("multiple of the stripe data size"));
    // 6-disk RAID6: 4 data chunks per stripe, 12 MiB is a multiple of 256 KiB.
    let p = Params {
        disks: Some(6),
        ..Params::default()
    };
    let g6 = Geometry::new(build(SchemeKind::Raid6, &p).unwrap(), 64 << 10, 64 << 20).unwrap();
    assert_eq!(stripe_data_bytes(&g6), 256 << 10);
    assert_eq!(
        ZoneTable::for_geometry(&g6, None).unwrap().zone_bytes(),
        12 << 20
    );
    // The default rounds up for a stripe that does not divide 12 MiB (5-disk RAID5: 4 x 48 KiB).
    let g5 = raid5(5, 48 << 10, 16 << 20);
    let z = ZoneTable::for_geometry(&g5, None).unwrap().zone_bytes();
    assert_eq!(z % (192 << 10), 0);
    assert!((12 << 20..(12 << 20) + (192 << 10)).contains(&z));
}

#[test]
fn huge_arrays_get_larger_zones_within_the_bound() {
    // 4 KiB chunks on 64 GiB members: 192 GiB of data; 12 KiB zones would be 16 Mi zones.
    let geo = raid5(4, 4096, 64 << 30);
    let t = ZoneTable::for_geometry(&geo, Some(12 << 10)).unwrap();
    assert!(t.zones() <= MAX_ZONES, "{} zones", t.zones());
    assert_eq!(t.zone_bytes() % stripe_data_bytes(&geo), 0);
    assert!(t.zone_bytes() > 12 << 10);
}

#[test]
fn popularity_counts_requests_and_halves_at_epochs() {
    let mut t = ZoneTable::new(10 * 4096, 4096, 4096)
        .unwrap()
        .with_epoch(Epoch::Requests(4));
    // A request spanning zones 1..=2 counts once in each.
    t.record(4096 + 100, 4096, 0);
    t.record(0, 1, 0);
    t.record(0, 1, 0);
    t.record(0, 1, 0);
    assert_eq!(
        (0..4).map(|z| t.popularity(z)).collect::<Vec<_>>(),
        [3, 1, 1, 0]
    );
    // The fifth request starts a new epoch: halved first, then counted.
    t.record(3 * 4096, 10, 0);
    assert_eq!(t.epochs(), 1);
    assert_eq!(
        (0..4).map(|z| t.popularity(z)).collect::<Vec<_>>(),
        [1, 0, 0, 1]
    );
    assert_eq!(t.by_popularity(), vec![0, 3]);

    // Time epochs: several elapsed epochs halve several times.
    let mut t = ZoneTable::new(4 * 4096, 4096, 4096)
        .unwrap()
        .with_epoch(Epoch::Nanos(1000));
    for _ in 0..40 {
        t.record(0, 1, 10);
    }
    assert_eq!(t.popularity(0), 40);
    t.record(4096, 1, 999);
    assert_eq!((t.popularity(0), t.epochs()), (40, 0));
    t.record(4096, 1, 3010);
    // 3 epochs ended (at 1010, 2010, 3010): 40 -> 5, zone 1: 1 -> 0 then +1.
    assert_eq!((t.popularity(0), t.popularity(1), t.epochs()), (5, 1, 3));
    // A very long gap clears everything without looping per epoch.
    t.record(4096, 1, u64::MAX / 2);
    assert_eq!((t.popularity(0), t.popularity(1)), (0, 1));
}

#[test]
fn hot_zones_cover_the_popularity_within_the_budget() {
    let mut t = ZoneTable::new(8 * 100, 100, 100)
        .unwrap()
        .with_epoch(Epoch::Requests(u64::MAX));
    for (z, n) in [(5u64, 50), (2, 30), (7, 15), (0, 5)] {
        for _ in 0..n {
            t.record(z * 100, 1, 0);
        }
    }
    assert_eq!(t.hot_zones(0.8, u64::MAX), vec![5, 2]);
    assert_eq!(t.hot_zones(0.9, u64::MAX), vec![5, 2, 7]);
    assert_eq!(t.hot_zones(1.0, 250), vec![5, 2]);
    assert_eq!(t.hot_zones(0.0, u64::MAX), Vec::<u64>::new());
}

#[test]
fn zone_table_round_trips_and_refuses_damage() {
    let mut t = ZoneTable::new(7 * 4096 + 100, 4096, 4096).unwrap();
    for i in 0..30u64 {
        t.record((i * 7919) % (7 * 4096), 1 + i * 100, 0);
    }
    t.set_flag(1, ZoneFlag::Rebuilt);
    t.set_flag(6, ZoneFlag::Migrated);
    let b = t.encode();
    assert_eq!(b.len(), t.encoded_len());
    assert_eq!(ZoneTable::decode(&b).unwrap(), t);
    // Trailing bytes (a padded slot) are fine.
    let mut padded = b.clone();
    padded.resize(4096, 0);
    assert_eq!(ZoneTable::decode(&padded).unwrap(), t);
    // Every single-bit flip is refused; every truncation too.
    for i in 0..b.len() * 8 {
        let mut d = b.clone();
        d[i / 8] ^= 1 << (i % 8);
        assert!(ZoneTable::decode(&d).is_err(), "flip of bit {i} accepted");
    }
    for n in 0..b.len() {
        assert!(
            ZoneTable::decode(&b[..n]).is_err(),
            "truncation to {n} accepted"
        );
    }
}

/// A byte-level model of the D-Map: per byte, `None` or (s_off of that byte, dirty).
#[derive(Clone)]
struct DModel(Vec<Option<(u64, bool)>>);

impl DModel {
    fn check(&self, m: &DMap) {
        let mut dirty = 0;
        let mut clean = 0;
        for (i, e) in self.0.iter().enumerate() {
            let p = m.query(i as u64, 1);
            assert_eq!(p.len(), 1);
            match e {
                None => assert_eq!(p[0].source, Source::Array, "byte {i}"),
                Some((s, d)) => {
                    assert_eq!(p[0].source, Source::Surrogate { s_off: *s }, "byte {i}");
                    if *d {
                        dirty += 1
                    } else {
                        clean += 1
                    }
                }
            }
        }
        assert_eq!((m.dirty_bytes(), m.clean_bytes()), (dirty, clean));
        // Extents are sorted, disjoint, non-empty, and merged where they could be.
        let ex: Vec<_> = m.extents().collect();
        for w in ex.windows(2) {
            assert!(w[0].d_off + w[0].len <= w[1].d_off);
            assert!(
                !(w[0].d_off + w[0].len == w[1].d_off
                    && w[0].s_off + w[0].len == w[1].s_off
                    && w[0].dirty == w[1].dirty),
                "unmerged neighbours {:?}",
                w
            );
        }
        for e in &ex {
            assert!(e.len > 0);
            for i in 0..e.len {
                assert_eq!(self.0[(e.d_off + i) as usize], Some((e.s_off + i, e.dirty)));
            }
        }
        assert_eq!(DMap::decode(&m.encode()).unwrap(), *m);
    }
}

#[derive(Clone, Debug)]
enum DOp {
    Insert(u64, u64, u64, bool),
    Under(u64, u64, u64),
    Remove(u64, u64),
    Query(u64, u64),
}

fn dop() -> impl Strategy<Value = DOp> {
    let r = (0u64..200, 1u64..60);
    prop_oneof![
        (r.clone(), 0u64..1000, any::<bool>()).prop_map(|((o, l), s, d)| DOp::Insert(o, l, s, d)),
        (r.clone(), 0u64..1000).prop_map(|((o, l), s)| DOp::Under(o, l, s)),
        r.clone().prop_map(|(o, l)| DOp::Remove(o, l)),
        r.prop_map(|(o, l)| DOp::Query(o, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn dmap_matches_a_byte_model(ops in prop::collection::vec(dop(), 1..60)) {
        let mut m = DMap::new();
        let mut model = DModel(vec![None; 260]);
        for op in ops {
            match op {
                DOp::Insert(o, l, s, d) => {
                    m.insert(o, l, s, d);
                    for i in 0..l {
                        model.0[(o + i) as usize] = Some((s + i, d));
                    }
                }
                DOp::Under(o, l, s) => {
                    let before = model.0.iter().filter(|e| e.is_some()).count() as u64;
                    let n = m.insert_under(o, l, s, false);
                    for i in 0..l {
                        let e = &mut model.0[(o + i) as usize];
                        if e.is_none() {
                            *e = Some((s + i, false));
                        }
                    }
                    let after = model.0.iter().filter(|e| e.is_some()).count() as u64;
                    prop_assert_eq!(n, after - before);
                }
                DOp::Remove(o, l) => {
                    m.remove(o, l);
                    for i in 0..l {
                        model.0[(o + i) as usize] = None;
                    }
                }
                DOp::Query(o, l) => {
                    let p = m.query(o, l);
                    // Pieces tile the range in order; array pieces are maximal.
                    let mut at = o;
                    for (k, pc) in p.iter().enumerate() {
                        prop_assert_eq!(pc.offset, at);
                        prop_assert!(pc.len > 0);
                        if k > 0 && pc.source == Source::Array {
                            prop_assert!(p[k - 1].source != Source::Array);
                        }
                        at += pc.len;
                    }
                    prop_assert_eq!(at, o + l);
                }
            }
            model.check(&m);
        }
    }

    #[test]
    fn dmap_decode_refuses_damage(ops in prop::collection::vec(dop(), 1..20), bit in any::<u32>()) {
        let mut m = DMap::new();
        for op in ops {
            if let DOp::Insert(o, l, s, d) = op {
                m.insert(o, l, s, d);
            }
        }
        let b = m.encode();
        let i = bit as usize % (b.len() * 8);
        let mut d = b.clone();
        d[i / 8] ^= 1 << (i % 8);
        prop_assert!(DMap::decode(&d).is_err());
        prop_assert!(DMap::decode(&b[..b.len() - 1]).is_err());
    }
}

// ------------------------------------------------------------------------------------------
// The controller's newest-data property.

const SECTOR: u64 = 512;

/// A copy's data: (surrogate offset, versions) per target.
type CopyData = Vec<(u64, Vec<u64>)>;

/// The world the controller decides for: the array's and the surrogate's bytes (one version
/// number per sector), the reference (newest version per sector), the rebuild's state.
struct World {
    geo: Geometry,
    state: ArrayState,
    sched: RebuildScheduler,
    ido: Ido,
    array: Vec<u64>,
    surrogate: Vec<u64>,
    reference: Vec<u64>,
    /// Copies in flight with the data they read when they started.
    copies: Vec<(CopyJob, CopyData)>,
    version: u64,
}

impl World {
    fn new(policy: RebuildPolicy, surrogate_sectors: u64) -> World {
        // 4-disk RAID5, 4 KiB chunks, 16 cycles: 192 KiB of data, 24 KiB zones.
        let geo = raid5(4, 4096, 64 * 4096);
        let zones = ZoneTable::for_geometry(&geo, Some(24 << 10))
            .unwrap()
            .with_epoch(Epoch::Requests(50));
        let mut cfg = IdoConfig::new(policy, surrogate_sectors * SECTOR);
        cfg.vdf_cache_bytes = 8 * 4096;
        let sectors = (geo.capacity_bytes() / SECTOR) as usize;
        let state = ArrayState::new(&geo);
        World {
            sched: RebuildScheduler::new(
                RebuildOrder::Sequential,
                SpeedLimits {
                    min_bytes_per_sec: 0,
                    max_bytes_per_sec: 0,
                },
            ),
            state,
            ido: Ido::new(cfg, zones),
            array: vec![0; sectors],
            surrogate: vec![u64::MAX; surrogate_sectors as usize],
            reference: vec![0; sectors],
            copies: Vec::new(),
            version: 0,
            geo,
        }
    }

    fn write(&mut self, off: u64, len: u64) -> Option<u64> {
        self.version += 1;
        let r = self.ido.route_write(off, len);
        assert_eq!(r.pieces.iter().map(|p| p.len).sum::<u64>(), len);
        for p in &r.pieces {
            for i in 0..p.len / SECTOR {
                let v = self.version;
                match p.source {
                    Source::Array => self.array[(p.offset / SECTOR + i) as usize] = v,
                    Source::Surrogate { s_off } => {
                        self.surrogate[(s_off / SECTOR + i) as usize] = v
                    }
                }
            }
        }
        for i in off / SECTOR..(off + len) / SECTOR {
            self.reference[i as usize] = self.version;
        }
        match r.pieces[..] {
            [Piece {
                source: Source::Surrogate { s_off },
                ..
            }] => Some(s_off),
            _ => None,
        }
    }

    fn read(&mut self, off: u64, len: u64) {
        let (geo, state) = (&self.geo, &self.state);
        let on_failed = |c: u64| chunk_needs_reconstruction(geo, state, c);
        let r = self.ido.route_read(off, len, geo.chunk_bytes(), &on_failed);
        let mut at = off;
        for p in &r.pieces {
            assert_eq!(p.offset, at);
            for i in 0..p.len / SECTOR {
                let got = match p.source {
                    Source::Array => self.array[(p.offset / SECTOR + i) as usize],
                    Source::Surrogate { s_off } => self.surrogate[(s_off / SECTOR + i) as usize],
                };
                let s = p.offset / SECTOR + i;
                assert_eq!(
                    got, self.reference[s as usize],
                    "sector {s} read from {:?} is stale",
                    p.source
                );
            }
            at += p.len;
        }
        assert_eq!(at, off + len);
        if let Some(c) = r.copy {
            self.start_copy(c);
        }
    }

    fn start_copy(&mut self, c: CopyJob) {
        // The data comes from the array at the time the copy starts.
        let data = c
            .targets
            .iter()
            .map(|t| {
                assert!(t.d_off >= c.offset && t.d_off + t.len <= c.offset + c.len);
                let s = (t.d_off / SECTOR) as usize;
                (
                    t.s_off,
                    self.array[s..s + (t.len / SECTOR) as usize].to_vec(),
                )
            })
            .collect();
        self.copies.push((c, data));
    }

    fn finish_copy(&mut self, k: usize, ok: bool) {
        if self.copies.is_empty() {
            return;
        }
        let (c, data) = self.copies.remove(k % self.copies.len());
        if ok {
            for (s_off, d) in data {
                let s = (s_off / SECTOR) as usize;
                self.surrogate[s..s + d.len()].copy_from_slice(&d);
            }
        }
        self.ido.copy_done(c.id, ok);
    }

    fn rebuild_step(&mut self) {
        if self.ido.phase() != Phase::Rebuilding {
            return;
        }
        let pri = self.ido.priority_cycles(&self.geo, &self.state);
        self.sched.prioritize(pri);
        let plans = self.sched.next_plans(&self.geo, &self.state).unwrap();
        for p in plans {
            self.sched.complete(&mut self.state, &p);
            for c in self.ido.cycle_rebuilt(&self.geo, &self.state, p.cycle) {
                self.start_copy(c);
            }
        }
        if self.sched.is_finished(&self.state) {
            self.ido.finish_rebuild();
        }
    }

    /// Runs the rebuild to its end, every copy it starts completing at once.
    fn rebuild_to_end(&mut self) {
        let mut guard = 0;
        while self.ido.phase() == Phase::Rebuilding {
            self.rebuild_step();
            while !self.copies.is_empty() {
                self.finish_copy(0, true);
            }
            guard += 1;
            assert!(guard < 1000, "rebuild does not end");
        }
    }

    /// Copies, the rebuild, the reclaim, to their ends: every byte is then on the array.
    fn drain(&mut self) {
        while !self.copies.is_empty() {
            self.finish_copy(0, true);
        }
        self.rebuild_to_end();
        let mut guard = 0;
        while self.ido.phase() == Phase::Reclaiming {
            self.reclaim_step();
            guard += 1;
            assert!(guard < 100_000, "reclaim does not end");
        }
    }

    fn reclaim_step(&mut self) {
        let Some(r) = self.ido.next_reclaim(3 * SECTOR) else {
            return;
        };
        assert!(r.dirty);
        assert!(self.ido.reclaim_valid(&r));
        for i in 0..r.len / SECTOR {
            self.array[(r.d_off / SECTOR + i) as usize] =
                self.surrogate[(r.s_off / SECTOR + i) as usize];
        }
        assert!(self.ido.reclaim_done(&r));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(u64, u64),
    Read(u64, u64),
    Copy(usize, bool),
    Rebuild,
    Reclaim,
}

fn op(sectors: u64) -> impl Strategy<Value = Op> {
    // Half the requests repeat one of six popular 4 KiB requests in the first 24 KiB (so
    // zones get hot and WorkOut sees repeated reads), the rest anywhere.
    let range = (0u64..sectors, 1u64..24, any::<bool>()).prop_map(move |(s, l, hot)| {
        if hot {
            ((s % 6) * 8 * SECTOR, 8 * SECTOR)
        } else {
            (s * SECTOR, l.min(sectors - s) * SECTOR)
        }
    });
    prop_oneof![
        3 => range.clone().prop_map(|(o, l)| Op::Write(o, l)),
        4 => range.prop_map(|(o, l)| Op::Read(o, l)),
        2 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(k, ok)| Op::Copy(k, ok)),
        1 => Just(Op::Rebuild),
        1 => Just(Op::Reclaim),
    ]
}

fn run_property(policy: RebuildPolicy, surrogate: u64, warm: &[Op], ops: &[Op]) {
    let mut w = World::new(policy, surrogate);
    // Normal state: learn popularity (every route goes to the array).
    for o in warm {
        match *o {
            Op::Write(a, l) => {
                w.write(a, l);
            }
            Op::Read(a, l) => w.read(a, l),
            _ => {}
        }
    }
    assert!(w.ido.dmap().is_empty());
    w.state.fail(&w.geo, 2).unwrap();
    w.state.replace(&w.geo, 2).unwrap();
    w.ido.start_rebuild(false);
    let mut restored = false;
    for o in ops {
        match *o {
            Op::Write(a, l) => {
                w.write(a, l);
            }
            Op::Read(a, l) => w.read(a, l),
            Op::Copy(k, ok) => w.finish_copy(k, ok),
            Op::Rebuild => w.rebuild_step(),
            Op::Reclaim => w.reclaim_step(),
        }
        if !restored && w.ido.dmap().dirty_bytes() > 0 && w.copies.is_empty() {
            // A restart: the persisted state (zone flags, D-Map, log pointer) carries on.
            restored = true;
            let rec = w.ido.encode_state();
            let cfg = *w.ido.config();
            let like = w.ido.zones().clone();
            let phase = w.ido.phase();
            let mut back = Ido::decode_state(cfg, &like, &rec).unwrap();
            assert_eq!(back.dmap(), w.ido.dmap());
            assert_eq!(back.zones(), w.ido.zones());
            assert_eq!(back.phase(), phase);
            if phase == Phase::Rebuilding {
                back.start_rebuild(true);
            }
            w.ido = back;
        }
    }
    w.drain();
    assert!(w.ido.dmap().is_empty());
    assert_eq!(w.array, w.reference, "array differs after the reclaim");
    let stats = w.ido.stats();
    assert!(stats.reads_redirected <= stats.reads && stats.writes_redirected <= stats.writes);
    if !policy.uses_surrogate() {
        assert_eq!(stats.redirected_share(), 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_read_returns_the_newest_data(
        policy in prop::sample::select(RebuildPolicy::ALL.to_vec()),
        surrogate in prop::sample::select(vec![64u64, 160, 4096]),
        warm in prop::collection::vec(op(384), 0..80),
        ops in prop::collection::vec(op(384), 1..150),
    ) {
        // 384 sectors of data; a small surrogate makes writes fall back to the array while
        // copies (a migrated zone needs 48 sectors) are in flight.
        run_property(policy, surrogate, &warm, &ops);
    }
}

#[test]
fn ido_rebuilds_hot_zones_first_and_migrates_them() {
    let mut w = World::new(RebuildPolicy::Ido, 4096);
    let zb = 24 << 10;
    // Zone 5 is hottest, then zone 2.
    for _ in 0..20 {
        w.read(5 * zb + 4096, 4096);
    }
    for _ in 0..10 {
        w.read(2 * zb, 512);
    }
    w.read(0, 512);
    w.state.fail(&w.geo, 1).unwrap();
    w.state.replace(&w.geo, 1).unwrap();
    w.ido.start_rebuild(false);
    assert_eq!(w.ido.hot(), &[5, 2]);
    let pri = w.ido.priority_cycles(&w.geo, &w.state);
    // A cycle of a 4-disk RAID5 with 4 KiB chunks is 4 stripes, 48 KiB of data: zone 5 is in
    // cycle 2, zone 2 in cycle 1.
    assert_eq!(pri, vec![2, 1]);
    w.rebuild_step();
    assert!(w.state.is_clean(2) && !w.state.is_clean(0));
    assert_eq!(w.ido.zones().flag(5), ZoneFlag::Rebuilt);
    // Zone 4 shares cycle 2 but is cold: rebuilt, not migrated.
    assert_eq!(w.ido.zones().flag(4), ZoneFlag::Rebuilt);
    assert_eq!(w.copies.len(), 1);
    assert_eq!(w.copies[0].0.kind, CopyKind::Migrate { zone: 5 });
    w.finish_copy(0, true);
    assert_eq!(w.ido.zones().flag(5), ZoneFlag::Migrated);
    // Reads of the migrated zone are redirected; writes anywhere are redirected.
    let before = w.ido.stats();
    w.read(5 * zb, 8192);
    w.write(0, 1024);
    w.read(0, 2048);
    let s = w.ido.stats();
    assert_eq!(s.reads_redirected - before.reads_redirected, 1);
    assert_eq!(s.writes_redirected - before.writes_redirected, 1);
    // The split read: 1024 bytes from the surrogate, the rest from the degraded set.
    assert_eq!(s.reads_split - before.reads_split, 1);
    w.rebuild_to_end();
    assert_eq!(w.ido.phase(), Phase::Reclaiming);
    assert_eq!(w.ido.dmap().clean_bytes(), 0);
    assert_eq!(w.ido.dmap().dirty_bytes(), 1024);
    while w.ido.phase() == Phase::Reclaiming {
        w.reclaim_step();
    }
    assert_eq!(w.array, w.reference);
}

/// Redirected writes never take the surrogate space IDO's hot zones will be migrated to:
/// a write burst before the first hot zone is rebuilt falls back to the array once only
/// that space is left, and every hot zone is then migrated as it is rebuilt.
#[test]
fn redirected_writes_leave_room_for_the_hot_zones() {
    // 96 KiB of surrogate; hot zones are chosen within half of it (two 24 KiB zones).
    let mut w = World::new(RebuildPolicy::Ido, 192);
    let zb = 24 << 10;
    for _ in 0..20 {
        w.read(5 * zb, 4096);
        w.read(2 * zb, 4096);
    }
    w.state.fail(&w.geo, 1).unwrap();
    w.state.replace(&w.geo, 1).unwrap();
    w.ido.start_rebuild(false);
    let mut hot = w.ido.hot().to_vec();
    hot.sort();
    assert_eq!(hot, vec![2, 5]);
    let reserved = 2 * zb;
    let mut redirected = 0;
    for i in 0..64 {
        let before = w.ido.stats().writes_redirected;
        w.write((7 * zb + (i % 6) * 4096) as u64, 4096);
        redirected += w.ido.stats().writes_redirected - before;
        assert!(
            w.ido.surrogate_used() + reserved <= 192 * SECTOR,
            "write {i}: {} bytes used",
            w.ido.surrogate_used()
        );
    }
    assert!(redirected > 0 && w.ido.stats().writes_fallback > 0);
    let mut migrated = Vec::new();
    while w.ido.phase() == Phase::Rebuilding {
        w.rebuild_step();
        for c in &w.copies {
            if let CopyKind::Migrate { zone } = c.0.kind {
                migrated.push(zone);
            }
        }
        while !w.copies.is_empty() {
            w.finish_copy(0, true);
        }
    }
    migrated.sort();
    assert_eq!(migrated, hot);
}

#[test]
fn pro_follows_popularity_seen_during_the_rebuild() {
    let mut w = World::new(RebuildPolicy::Pro, 0);
    // Normal-state popularity is ignored by PRO.
    for _ in 0..10 {
        w.read(0, 512);
    }
    w.state.fail(&w.geo, 0).unwrap();
    w.state.replace(&w.geo, 0).unwrap();
    w.ido.start_rebuild(false);
    assert!(w.ido.priority_cycles(&w.geo, &w.state).is_empty());
    w.read(6 * (24 << 10), 512);
    w.read(6 * (24 << 10), 512);
    w.read(3 * (24 << 10), 512);
    // Zone 6 is in cycle 3, zone 3 in cycle 1 (48 KiB cycles).
    assert_eq!(w.ido.priority_cycles(&w.geo, &w.state), vec![3]);
    w.rebuild_step();
    assert!(w.state.is_clean(3) && !w.state.is_clean(0));
    assert_eq!(w.ido.priority_cycles(&w.geo, &w.state), vec![1]);
}

#[test]
fn workout_and_vdf_redirect_repeated_reads() {
    for policy in [RebuildPolicy::Workout, RebuildPolicy::Vdf] {
        let mut w = World::new(policy, 4096);
        w.state.fail(&w.geo, 3).unwrap();
        w.state.replace(&w.geo, 3).unwrap();
        w.ido.start_rebuild(false);
        for _ in 0..3 {
            w.read(40960, 4096);
            while !w.copies.is_empty() {
                w.finish_copy(0, true);
            }
        }
        let s = w.ido.stats();
        // WorkOut copies on the 2nd read, VDF admits on the 1st miss.
        let want = if policy == RebuildPolicy::Vdf { 2 } else { 1 };
        assert_eq!(s.reads_redirected, want, "{policy}");
        w.write(40960, 512);
        w.read(40960, 4096);
        assert_eq!(
            w.ido.stats().writes_redirected,
            (policy == RebuildPolicy::Workout) as u64
        );
    }
}

#[test]
fn vdf_evicts_surviving_disk_blocks_first() {
    // Cache of 8 blocks. Fill it with 4 blocks needing reconstruction and 4 that do not.
    let mut w = World::new(RebuildPolicy::Vdf, 4096);
    w.state.fail(&w.geo, 0).unwrap();
    w.ido.start_rebuild(false);
    let (geo, state) = (&w.geo, &w.state);
    let failed: Vec<u64> = (0..48)
        .filter(|&c| chunk_needs_reconstruction(geo, state, c))
        .collect();
    let alive: Vec<u64> = (0..48)
        .filter(|&c| !chunk_needs_reconstruction(geo, state, c))
        .collect();
    assert_eq!(failed.len(), 12);
    for &c in failed[..4].iter().chain(&alive[..4]) {
        w.read(c * 4096, 4096);
    }
    while !w.copies.is_empty() {
        w.finish_copy(0, true);
    }
    // Four more survivors evict the four older survivors, never the failed-disk blocks.
    for &c in &alive[4..8] {
        w.read(c * 4096, 4096);
    }
    while !w.copies.is_empty() {
        w.finish_copy(0, true);
    }
    let before = w.ido.stats().reads_redirected;
    for &c in &failed[..4] {
        w.read(c * 4096, 4096);
    }
    assert_eq!(w.ido.stats().reads_redirected - before, 4);
    let before = w.ido.stats().reads_redirected;
    w.read(alive[0] * 4096, 4096);
    assert_eq!(w.ido.stats().reads_redirected, before);
}

#[test]
fn state_record_refuses_damage_and_other_geometries() {
    let mut w = World::new(RebuildPolicy::Ido, 4096);
    for i in 0..40 {
        w.read((i % 7) * 4096, 4096);
    }
    w.state.fail(&w.geo, 1).unwrap();
    w.state.replace(&w.geo, 1).unwrap();
    w.ido.start_rebuild(false);
    w.write(1024, 2048);
    w.rebuild_step();
    let rec = w.ido.encode_state();
    let cfg = *w.ido.config();
    let like = w.ido.zones().clone();
    assert!(Ido::decode_state(cfg, &like, &rec).is_ok());
    for i in (0..rec.len() * 8).step_by(7) {
        let mut d = rec.clone();
        d[i / 8] ^= 1 << (i % 8);
        assert!(Ido::decode_state(cfg, &like, &d).is_err(), "bit {i}");
    }
    let other = ZoneTable::new(like.capacity(), like.zone_bytes() * 2, 4096).unwrap();
    assert!(matches!(
        Ido::decode_state(cfg, &other, &rec),
        Err(IdoError::Mismatch { .. })
    ));
}

#[test]
fn policies_parse_and_print() {
    for p in RebuildPolicy::ALL {
        assert_eq!(p.name().parse::<RebuildPolicy>().unwrap(), p);
    }
    let e = "fast".parse::<RebuildPolicy>().unwrap_err();
    assert!(e.to_string().contains("use pr, pro, workout, vdf or ido"));
}

#[test]
fn a_copy_overtaken_by_an_array_write_maps_nothing() {
    // WorkOut with room for the fill and one 4 KiB write: the next write falls back to the
    // array while the fill of the same range is still in flight.
    let mut w = World::new(RebuildPolicy::Workout, 16);
    w.state.fail(&w.geo, 2).unwrap();
    w.state.replace(&w.geo, 2).unwrap();
    w.ido.start_rebuild(false);
    w.read(8192, 4096);
    w.read(8192, 4096);
    assert_eq!(
        w.copies.len(),
        1,
        "the second read is popular: a fill starts"
    );
    w.write(65536, 4096);
    assert_eq!(w.ido.stats().writes_redirected, 1);
    w.write(8192, 1024);
    assert_eq!(w.ido.stats().writes_fallback, 1);
    w.finish_copy(0, true);
    // The fill read the old data: it must not be mapped.
    w.read(8192, 4096);
    assert_eq!(w.ido.dmap().query(8192, 4096)[0].source, Source::Array);

    // The same for an IDO migration overtaken by a fallback write.
    let mut w = World::new(RebuildPolicy::Ido, 112);
    for _ in 0..5 {
        w.read(0, 4096);
    }
    w.state.fail(&w.geo, 2).unwrap();
    w.state.replace(&w.geo, 2).unwrap();
    w.ido.start_rebuild(false);
    assert_eq!(w.ido.hot(), &[0]);
    w.rebuild_step();
    assert_eq!(w.copies.len(), 1);
    // 48 sectors of zone + 64 of writes fill the log; the next write falls back.
    w.write(100 * 1024, 32 * 1024);
    w.write(1024, 512);
    assert_eq!(w.ido.stats().writes_fallback, 1);
    w.finish_copy(0, true);
    assert_ne!(w.ido.zones().flag(0), ZoneFlag::Migrated);
    w.read(0, 4096);
}

#[test]
fn routing_in_normal_state_counts_at_the_latest_time() {
    let zones = ZoneTable::new(8 * 4096, 4096, 4096)
        .unwrap()
        .with_epoch(Epoch::Nanos(1000));
    let mut ido = Ido::new(IdoConfig::new(RebuildPolicy::Ido, 1 << 20), zones);
    for _ in 0..8 {
        ido.record(0, 1, 100);
    }
    // Routes carry no time: they count at the latest time seen, so epochs still end.
    let none = |_: u64| false;
    assert_eq!(ido.route_read(4096, 1, 4096, &none).pieces.len(), 1);
    assert_eq!(ido.route_write(4096, 1).pieces[0].source, Source::Array);
    assert_eq!(
        (ido.zones().popularity(0), ido.zones().popularity(1)),
        (8, 2)
    );
    ido.record(8192, 1, 2100);
    assert_eq!(ido.zones().epochs(), 2);
    assert_eq!(
        (ido.zones().popularity(0), ido.zones().popularity(1)),
        (2, 0)
    );
    ido.route_read(0, 1, 4096, &none);
    assert_eq!((ido.zones().popularity(0), ido.zones().epochs()), (3, 2));
}

/// The ranking and priority rules shared by the simulator's controller and the engine
/// (which schedules by zones and folds lock-free counts into the table).
#[test]
fn idocore_ranking_and_priority_zones_are_one_rule() {
    use raidcore::ido::{priority_zones, rank_zones};
    assert_eq!(rank_zones(&[0, 3, 1, 3, 0, 7]), vec![5, 1, 3, 2]);
    assert!(rank_zones(&[0, 0]).is_empty());
    // add_counts equals that many records within one epoch; end_epoch halves.
    let mut a = ZoneTable::new(8 << 20, 1 << 20, 1 << 20).unwrap();
    let mut b = a.clone();
    for _ in 0..5 {
        a.record(3 << 20, 1, 0);
    }
    b.add_counts(3, 5);
    assert_eq!(a.popularity(3), b.popularity(3));
    assert_eq!(a.by_popularity(), b.by_popularity());
    b.end_epoch();
    assert_eq!(b.popularity(3), 2);
    assert_eq!(b.epochs(), 1);
    // IDO: hot zones still to rebuild, in their order; PRO: ranked, batch-limited; others: none.
    let hot = [4, 1, 6];
    let todo = |z: u64| z != 1;
    assert_eq!(
        priority_zones(RebuildPolicy::Ido, &hot, &[], 1, todo),
        vec![4, 6]
    );
    let pro = [0, 9, 2, 9, 5];
    assert_eq!(
        priority_zones(RebuildPolicy::Pro, &[], &pro, 2, todo),
        vec![3, 4]
    );
    assert_eq!(
        priority_zones(RebuildPolicy::Pro, &[], &pro, usize::MAX, |_| true),
        vec![1, 3, 4, 2]
    );
    for p in [
        RebuildPolicy::Pr,
        RebuildPolicy::Workout,
        RebuildPolicy::Vdf,
    ] {
        assert!(priority_zones(p, &hot, &pro, 9, |_| true).is_empty());
    }
}

/// Executors that save and restore the controller: a rebuild resumed from its record keeps
/// its own policy (whatever the configuration it is decoded with), and a user write over the
/// last dirty range during the reclaim ends the reclaim (the phase is normal, nothing is left
/// to write back).
#[test]
fn a_resumed_rebuild_keeps_its_policy_and_a_write_can_end_the_reclaim() {
    let mut w = World::new(RebuildPolicy::Workout, 4096);
    w.state.fail(&w.geo, 1).unwrap();
    w.state.replace(&w.geo, 1).unwrap();
    w.ido.start_rebuild(false);
    w.write(1024, 2048);
    assert_eq!(w.ido.stats().writes_redirected, 1);
    let rec = w.ido.encode_state();
    let like = w.ido.zones().clone();
    let mut back =
        Ido::decode_state(IdoConfig::new(RebuildPolicy::Pr, 4096 * 512), &like, &rec).unwrap();
    back.start_rebuild(true);
    assert_eq!(back.active_policy(), RebuildPolicy::Workout);
    assert_eq!(back.dmap().dirty_bytes(), 2048);
    w.rebuild_to_end();
    assert_eq!(w.ido.phase(), Phase::Reclaiming);
    assert_eq!(w.ido.dmap().dirty_bytes(), 2048);
    w.write(0, 4096);
    assert_eq!(w.ido.phase(), Phase::Normal);
    assert!(w.ido.dmap().is_empty());
    assert_eq!(w.ido.next_reclaim(1 << 20), None);
    assert_eq!(w.array, w.reference);
}

/// An executor without NVRAM for the D-Map (the engine, `dev::ido`): the state is recorded
/// only where the engine records it (a rebuild's start and end, a migration, a reclaim step,
/// an array write over mapped ranges, and before a redirected write when something else took
/// log space since the chain's end), and each redirected write's mapping goes with its data
/// into the log ([`LogHeader`]). A crash (copies in flight lost) restores the last record and
/// maps the chain of redirected writes after it again ([`Ido::replay_redirected`]).
struct Logged {
    w: World,
    record: Vec<u8>,
    /// Redirected writes since the record: (offset, length, s_off).
    chain: Vec<(u64, u64, u64)>,
    chain_end: u64,
    crashes: u32,
}

impl Logged {
    fn record(&mut self) {
        self.record = self.w.ido.encode_state();
        self.chain.clear();
        self.chain_end = self.w.ido.surrogate_used();
    }

    fn write(&mut self, off: u64, len: u64) {
        let ido = &self.w.ido;
        let eligible = ido.phase() == Phase::Rebuilding
            && ido.surrogate_available()
            && matches!(
                ido.active_policy(),
                RebuildPolicy::Ido | RebuildPolicy::Workout
            );
        if eligible && ido.surrogate_used() != self.chain_end {
            self.record();
        }
        let mapped = (self.w.ido.dmap().query(off, len).iter()).any(|p| p.source != Source::Array);
        let header = self.w.ido.config().log_header_bytes;
        match self.w.write(off, len) {
            Some(s_off) => {
                assert_eq!(
                    s_off,
                    self.chain_end + header,
                    "a redirected write off its chain"
                );
                self.chain.push((off, len, s_off));
                self.chain_end = s_off + len;
            }
            None if mapped => self.record(),
            None => {}
        }
    }

    fn crash(&mut self) {
        self.crashes += 1;
        self.w.copies.clear();
        let cfg = *self.w.ido.config();
        let like = self.w.ido.zones().clone();
        let mut back = Ido::decode_state(cfg, &like, &self.record).unwrap();
        for &(off, len, s_off) in &self.chain {
            back.replay_redirected(off, len, s_off).unwrap();
        }
        let dirty = |i: &Ido| i.dmap().extents().filter(|e| e.dirty).collect::<Vec<_>>();
        assert_eq!(
            dirty(&back),
            dirty(&self.w.ido),
            "dirty ranges differ after the replay"
        );
        // Space of copies lost with the crash (never mapped) may be handed out again.
        assert!(back.surrogate_used() >= self.chain_end);
        assert!(back.surrogate_used() <= self.w.ido.surrogate_used());
        if back.phase() == Phase::Rebuilding {
            back.start_rebuild(true);
        }
        self.w.ido = back;
        // The engine's start resumes the rebuild and records (its chain continues until then).
        if self.w.ido.phase() == Phase::Rebuilding {
            self.record();
        }
    }
}

fn run_logged(policy: RebuildPolicy, surrogate: u64, warm: &[Op], ops: &[(Op, bool)]) -> u32 {
    let mut w = World::new(policy, surrogate);
    w.ido.set_log_header_bytes(4096);
    for o in warm {
        match *o {
            Op::Write(a, l) => {
                w.write(a, l);
            }
            Op::Read(a, l) => w.read(a, l),
            _ => {}
        }
    }
    w.state.fail(&w.geo, 2).unwrap();
    w.state.replace(&w.geo, 2).unwrap();
    w.ido.start_rebuild(false);
    let mut l = Logged {
        w,
        record: Vec::new(),
        chain: Vec::new(),
        chain_end: 0,
        crashes: 0,
    };
    l.record();
    for (o, crash) in ops {
        match *o {
            Op::Write(a, len) => l.write(a, len),
            Op::Read(a, len) => l.w.read(a, len),
            Op::Copy(k, ok) => {
                let migrates = !l.w.copies.is_empty()
                    && matches!(
                        l.w.copies[k % l.w.copies.len()].0.kind,
                        CopyKind::Migrate { .. }
                    );
                l.w.finish_copy(k, ok);
                if migrates && ok {
                    l.record();
                }
            }
            Op::Rebuild => {
                let was = l.w.ido.phase();
                l.w.rebuild_step();
                if was != l.w.ido.phase() {
                    l.record();
                }
            }
            Op::Reclaim => {
                if l.w.ido.phase() == Phase::Reclaiming {
                    l.w.reclaim_step();
                    l.record();
                }
            }
        }
        if *crash {
            l.crash();
        }
    }
    let crashes = l.crashes;
    let mut w = l.w;
    w.drain();
    assert_eq!(w.array, w.reference, "array differs after the reclaim");
    crashes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every read returns the newest data across crashes of an executor that keeps
    /// redirected writes' mappings in the log, not in a record per write.
    #[test]
    fn a_crash_maps_the_redirected_writes_in_the_log_again(
        policy in prop::sample::select(vec![RebuildPolicy::Ido, RebuildPolicy::Workout]),
        surrogate in prop::sample::select(vec![160u64, 4096]),
        warm in prop::collection::vec(op(384), 0..80),
        ops in prop::collection::vec((op(384), prop::bool::weighted(0.08)), 1..150),
    ) {
        run_logged(policy, surrogate, &warm, &ops);
    }
}

#[test]
fn log_headers_round_trip_and_refuse_damage() {
    let h = LogHeader {
        uuid: [7; 16],
        base: 41,
        index: 3,
        d_off: 1 << 20,
        len: 12288,
        s_off: 8192,
        data_crc: 0xdead_beef,
    };
    let b = h.encode();
    assert_eq!(b.len(), 4096);
    assert_eq!(LogHeader::decode(&b), Some(h));
    // Every bit of the header's fields and CRC counts; zeros and the padding do not make one.
    for bit in 0..80 * 8 {
        let mut d = b.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(
            LogHeader::decode(&d),
            None,
            "bit {bit} flipped was accepted"
        );
    }
    assert_eq!(LogHeader::decode(&[0u8; 4096]), None);
}

#[test]
fn replay_refuses_writes_off_the_log_or_outside_a_rebuild() {
    let geo = raid5(4, 4096, 64 * 4096);
    let zones = ZoneTable::for_geometry(&geo, Some(24 << 10)).unwrap();
    let mut cfg = IdoConfig::new(RebuildPolicy::Ido, 1 << 20);
    cfg.log_header_bytes = 4096;
    let mut ido = Ido::new(cfg, zones);
    assert!(
        ido.replay_redirected(0, 4096, 4096).is_err(),
        "in normal state"
    );
    ido.start_rebuild(false);
    let r = ido.route_write(8192, 4096);
    assert_eq!(r.pieces[0].source, Source::Surrogate { s_off: 4096 });
    assert_eq!(ido.surrogate_used(), 8192);
    let mut back = Ido::new(cfg, ido.zones().clone());
    back.start_rebuild(false);
    assert!(
        back.replay_redirected(8192, 4096, 0).is_err(),
        "no room for its header"
    );
    assert!(
        back.replay_redirected(8192, 4096, 8192).is_err(),
        "past the log's end"
    );
    assert!(
        back.replay_redirected(8192, 1 << 20, 4096).is_err(),
        "past the surrogate's end"
    );
    assert!(
        back.replay_redirected(geo.capacity_bytes() - 2048, 4096, 4096)
            .is_err(),
        "past the array's end"
    );
    back.replay_redirected(8192, 4096, 4096).unwrap();
    assert_eq!(back.dmap(), ido.dmap());
    assert_eq!(back.surrogate_used(), ido.surrogate_used());
}

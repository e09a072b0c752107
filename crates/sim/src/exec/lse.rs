//! Latent sector errors (LSE) on the simulated members (issue 8, the simulator side of the
//! dev layer's bad ranges).
//!
//! A member read overlapping a bad range takes its normal service time and then reports the
//! overlap as unreadable. When the plan's reads have drained, the executor repairs what was
//! hit with raidcore's pure repair planner ([`raidcore::repair::plan_repair`]: the bad places
//! are treated as unavailable, recomputed from the rest of their cycle and written back in
//! place, which remaps the sectors and clears the range), then re-plans the original work, which
//! queues behind the repair on the stripe locks. When the redundancy left cannot recompute a
//! bad place (RAID5 with a member failed), [`raidcore::repair::lost_with`] names every place
//! lost with it; their logical ranges are reported as lost, the bad range is dropped (the
//! sector is rewritten by whatever the rebuild computes) and the work goes on. Foreground reads
//! that overlap a lost range are failed requests, never good data.
//!
//! The data itself is not corrupted in the in-memory checker (`MemArray` keeps the right
//! bytes): LSE only changes timing, plans and what is reported, and the checker still compares
//! every read that is not reported lost.

use layout::Disk;
use raidcore::repair::{locate_member_byte, logical_offset, lost_with, plan_repair};

use super::{Owner, SimConfig, Simulator};
use crate::rng::SplitMix64;

/// One bad range of a member: data-area bytes `[offset, offset + len)` of `member`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LseRange {
    /// The member.
    pub member: Disk,
    /// First bad byte in the member's data area.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// Bad ranges drawn from the run's seed: `per_member` ranges of `len` bytes at random
/// (sector-aligned) offsets of every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LseRandom {
    /// Ranges per member.
    pub per_member: u32,
    /// Bytes of each range.
    pub len: u64,
}

/// What the latent sector errors did in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LseReport {
    /// Bad ranges placed on the members (given and drawn).
    pub injected: u64,
    /// Member reads that overlapped a bad range.
    pub hit: u64,
    /// Repair plans completed (each rewrites bad places of one cycle in place).
    pub repaired: u64,
    /// Logical ranges lost (`(logical_offset, length)`, merged, ascending).
    pub lost: Vec<(u64, u64)>,
    /// Foreground read requests failed because they overlapped a lost range.
    pub failed_reads: u64,
}

/// A repair in flight: the cycle, the places and the byte range within their chunk, and the
/// member bytes it rewrites (cleared from the bad ranges when it is planned).
pub(super) struct Repair {
    cycle: u64,
    places: Vec<usize>,
    ra: u64,
    rb: u64,
    clears: Vec<(Disk, u64, u64)>,
}

/// The executor's LSE state.
pub(super) struct LseRun {
    /// Bad ranges per member, `(start, end)`, disjoint.
    bad: Vec<Vec<(u64, u64)>>,
    /// Unreadable member bytes each plan met, by plan id.
    hits: super::FxHashMap<u32, Vec<(Disk, u64, u64)>>,
    repairs: super::Slab<Repair>,
    pub(super) report: LseReport,
}

impl LseRun {
    /// The run's bad ranges, or `None` when the configuration has none (the executor then
    /// does exactly what it did before LSE existed).
    pub(super) fn new(cfg: &SimConfig, disks: usize, member_bytes: u64) -> Option<LseRun> {
        if cfg.lse.is_empty() && cfg.lse_random.is_none() {
            return None;
        }
        let mut bad = vec![Vec::new(); disks];
        let mut injected = 0;
        for r in &cfg.lse {
            bad[r.member as usize].push((r.offset, r.offset + r.len));
            injected += 1;
        }
        if let Some(g) = cfg.lse_random {
            let mut rng = SplitMix64::new(cfg.seed ^ 0x15e_15e_15e);
            let sectors = member_bytes.saturating_sub(g.len) / 512;
            for b in bad.iter_mut() {
                for _ in 0..g.per_member {
                    let at = rng.below(sectors.max(1)) * 512;
                    b.push((at, at + g.len));
                    injected += 1;
                }
            }
        }
        for b in &mut bad {
            b.sort_unstable();
        }
        Some(LseRun {
            bad,
            hits: Default::default(),
            repairs: super::Slab::new(),
            report: LseReport {
                injected,
                ..LseReport::default()
            },
        })
    }

    fn clear(&mut self, member: Disk, a: u64, b: u64) {
        let mut out = Vec::new();
        for &(x, y) in &self.bad[member as usize] {
            if y <= a || x >= b {
                out.push((x, y));
            } else {
                if x < a {
                    out.push((x, a));
                }
                if y > b {
                    out.push((b, y));
                }
            }
        }
        self.bad[member as usize] = out;
    }

    fn add_lost(&mut self, off: u64, len: u64) {
        let l = &mut self.report.lost;
        l.push((off, len));
        l.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for &(o, n) in l.iter() {
            match merged.last_mut() {
                Some((mo, mn)) if *mo + *mn >= o => *mn = (*mn).max(o + n - *mo),
                _ => merged.push((o, n)),
            }
        }
        *l = merged;
    }

    /// A repair plan was abandoned (a member failed under it).
    pub(super) fn drop_repair(&mut self, r: u32) {
        self.repairs.remove(r);
    }

    /// The range overlaps a lost logical range.
    pub(super) fn overlaps_lost(&self, off: u64, len: u64) -> bool {
        self.report
            .lost
            .iter()
            .any(|&(o, n)| o < off + len && off < o + n)
    }
}

impl Simulator {
    /// A member read of plan `id` completed: records the bytes of it that are unreadable.
    pub(super) fn lse_read_done(&mut self, id: u32, member: Disk, offset: u64, len: u64) {
        let Some(l) = self.lse.as_mut() else { return };
        let mut any = false;
        for &(x, y) in &l.bad[member as usize] {
            let (a, b) = (x.max(offset), y.min(offset + len));
            if a < b {
                any = true;
                l.hits.entry(id).or_default().push((member, a, b));
            }
        }
        l.report.hit += u64::from(any);
    }

    /// Plan `id`'s reads have drained: if some were unreadable, repairs (or reports lost) what
    /// they hit, releases the plan and re-plans its work. Returns true when it took the plan.
    pub(super) fn lse_reads_done(&mut self, id: u32) -> bool {
        let Some(l) = self.lse.as_mut() else {
            return false;
        };
        let Some(hits) = l.hits.remove(&id) else {
            return false;
        };
        let cb = self.geo.chunk_bytes();
        // Per (cycle, range in chunk): the places hit and the member bytes to clear.
        let mut groups: Vec<Repair> = Vec::new();
        if let Owner::Repair(r) = self.plans.get(id).owner {
            // A repair met another bad place: repair them together (the old record goes with
            // the old plan, in `replan`).
            let r = self.lse.as_ref().expect("checked").repairs.get(r);
            groups.push(Repair {
                cycle: r.cycle,
                places: r.places.clone(),
                ra: r.ra,
                rb: r.rb,
                clears: r.clears.clone(),
            });
        }
        for (member, a, b) in hits {
            let mut x = a;
            while x < b {
                let end = b.min((x / cb + 1) * cb);
                if let Some((c, p, in_chunk)) =
                    locate_member_byte(&self.geo, &self.state, member, x)
                {
                    let (ra, rb) = self.geo.widen(in_chunk, in_chunk + (end - x));
                    match groups
                        .iter_mut()
                        .find(|g| g.cycle == c && g.ra == ra && g.rb == rb)
                    {
                        Some(g) => {
                            if !g.places.contains(&p) {
                                g.places.push(p);
                            }
                            g.clears.push((member, x, end));
                        }
                        None => groups.push(Repair {
                            cycle: c,
                            places: vec![p],
                            ra,
                            rb,
                            clears: vec![(member, x, end)],
                        }),
                    }
                } else {
                    // Nothing of the layout is there: the range holds nothing to repair.
                    self.lse.as_mut().expect("checked").clear(member, x, end);
                }
                x = end;
            }
        }
        self.unlock_run(id);
        for g in groups {
            match plan_repair(&self.geo, &self.state, g.cycle, &g.places, g.ra, g.rb) {
                Ok(plan) => {
                    // The range counts as remapped from here on: the re-planned work may take
                    // the stripe locks before the repair (re-planned plans go first), and must
                    // not meet the same error again.
                    let l = self.lse.as_mut().expect("checked");
                    for &(m, a, b) in &g.clears {
                        l.clear(m, a, b);
                    }
                    let r = l.repairs.insert(g);
                    self.submit(plan, Owner::Repair(r), 0, true, false);
                }
                // The planner's own refusal: what is left cannot recompute the places.
                Err(_) => {
                    let lost = lost_with(&self.geo, &self.state, g.cycle, &g.places);
                    let l = self.lse.as_mut().expect("checked");
                    for p in lost {
                        if let Some(off) = logical_offset(&self.geo, g.cycle, p, g.ra) {
                            l.add_lost(off, g.rb - g.ra);
                        }
                    }
                    for (m, a, b) in g.clears {
                        l.clear(m, a, b);
                    }
                }
            }
        }
        self.replan(id);
        self.retry_waiters();
        true
    }

    /// A repair plan completed (its ranges were cleared when it was planned).
    pub(super) fn lse_repair_done(&mut self, r: u32) {
        let l = self.lse.as_mut().expect("a repair runs with LSE on");
        l.repairs.remove(r);
        l.report.repaired += 1;
    }

    /// A foreground read of `[off, off + len)` completed: true when it overlaps a lost range
    /// (the request fails, its data is not good).
    pub(super) fn lse_read_lost(&mut self, off: u64, len: u64) -> bool {
        self.lse.as_ref().is_some_and(|l| l.overlaps_lost(off, len))
    }
}

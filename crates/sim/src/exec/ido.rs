//! IDO and the rebuild policies it is compared with (PR, PRO, WorkOut, VDF) in the executor.
//!
//! Every decision comes from [`raidcore::ido::Ido`]: popularity counting in normal state, the
//! cycles rebuilt first, where each piece of a user request is served, which copies go to the
//! surrogate set, and the write-back after the rebuild. This file only moves those decisions
//! through time: the **surrogate set** is simulated disks (a RAID1 of `mirrors` drives of the
//! members' model by default: a write goes to every mirror, a read to the mirror with the
//! shortest queue), optionally behind a network (`latency_ns` per operation plus the bytes at
//! `link_bytes_per_sec`). Pieces served by the array are planned by raidcore like any request.
//!
//! What counts as foreground load for the rebuild throttle (MD's minimum speed under load) is
//! only what reaches the array: a request served entirely by the surrogate leaves the degraded
//! set idle, which is how IDO and WorkOut let the rebuild run faster.
//!
//! Copies to the surrogate (a migrated hot zone, a WorkOut fill, a VDF admission) are surrogate
//! writes only: the rebuild plan (a migration) or the user read (a fill) already read the data.
//! The reclaimer runs after the rebuild, one extent (at most `reclaim_chunk_bytes`) at a time:
//! a surrogate read, then raidcore's write plans on the array.
//!
//! The in-memory data checker does not follow data through the surrogate, so runs with a
//! surrogate policy use plan validation only (`CheckMode::Validate`); the newest-data property
//! of the routing itself is raidcore's (`raidcore/tests/ido.rs`).

use std::collections::VecDeque;

use raidcore::ido::{
    chunk_needs_reconstruction, CopyJob, Epoch, Extent, Ido, IdoConfig, IdoStats, Phase as IPhase,
    RebuildPolicy, Source, ZoneTable,
};
use raidcore::{plan_read, plan_write, CoreError};

use super::{Kind, Owner, RequestRun, Simulator};
use crate::disk::{Disk as _, DiskIo, DiskModel, DriveParams};
use crate::Op;

/// The surrogate set and the policy of a run's rebuild.
#[derive(Clone, Debug, PartialEq)]
pub struct IdoSimConfig {
    /// The rebuild policy.
    pub policy: RebuildPolicy,
    /// Zone size (`None`: 12 MiB rounded to the stripe data size).
    pub zone_bytes: Option<u64>,
    /// Popularity halves every this many simulated nanoseconds.
    pub epoch_ns: u64,
    /// Mirrors of the surrogate set (RAID1; 1 = a single disk).
    pub mirrors: usize,
    /// Drive of the surrogate set (`None`: the members' drive).
    pub drive: Option<DriveParams>,
    /// Usable bytes of the surrogate set (`None`: one member's size).
    pub capacity_bytes: Option<u64>,
    /// Network round trip added to every surrogate operation (0: local).
    pub latency_ns: u64,
    /// Network bandwidth for a remote surrogate (0: no transfer time).
    pub link_bytes_per_sec: u64,
    /// Largest write-back the reclaimer issues at once.
    pub reclaim_chunk_bytes: u64,
    /// Bytes of mapping written in front of each redirected write, in the same surrogate
    /// I/O ([`raidcore::ido::IdoConfig::log_header_bytes`]). `None`: by the members' drive:
    /// the engine's header ([`raidcore::ido::LOG_HEADER_BYTES`]) on its emulated member, none
    /// on the seeds' drive models (the seed keeps the D-Map in NVRAM).
    pub log_header_bytes: Option<u64>,
}

impl IdoSimConfig {
    /// `policy` with a local 2-disk RAID1 surrogate, 12 MiB zones, 5-minute epochs.
    pub fn new(policy: RebuildPolicy) -> IdoSimConfig {
        IdoSimConfig {
            policy,
            zone_bytes: None,
            epoch_ns: 300_000_000_000,
            mirrors: 2,
            drive: None,
            capacity_bytes: None,
            latency_ns: 0,
            link_bytes_per_sec: 0,
            reclaim_chunk_bytes: 1 << 20,
            log_header_bytes: None,
        }
    }
}

/// What IDO did during a run.
#[derive(Clone, Debug, PartialEq)]
pub struct IdoReport {
    /// The policy.
    pub policy: RebuildPolicy,
    /// Zone size, bytes.
    pub zone_bytes: u64,
    /// Zones of the array.
    pub zones: u64,
    /// Hot zones chosen at the start of the rebuild (IDO).
    pub hot_zones: usize,
    /// The controller's counters for the rebuild.
    pub stats: IdoStats,
    /// Share of user requests during the rebuild served entirely by the surrogate.
    pub redirected_share: f64,
    /// Surrogate I/Os (per mirror disk: reads, writes).
    pub surrogate_ios: Vec<(u64, u64)>,
    /// Surrogate bytes allocated at the end of the rebuild.
    pub surrogate_used_bytes: u64,
    /// Most D-Map extents at once.
    pub dmap_max_extents: usize,
    /// When the reclaim finished (simulated seconds), if it ran and finished.
    pub reclaim_end_s: Option<f64>,
}

struct SurDisk {
    model: DiskModel,
    queue: VecDeque<SurIo>,
    /// The I/O in service.
    busy: Option<SurIo>,
    reads: u64,
    writes: u64,
}

#[derive(Clone, Copy, Debug)]
struct SurIo {
    op: u32,
    offset: u64,
    len: u64,
    write: bool,
    /// Copies and write-backs: served after every queued user I/O of the disk.
    background: bool,
}

/// Copies are written in pieces of at most this many bytes, so that user I/O waits for at
/// most one piece.
const COPY_PIECE: u64 = 256 << 10;

#[derive(Clone, Debug)]
enum SurOwner {
    Request(u32),
    Copy(u64),
    Reclaim(Extent),
}

struct SurOp {
    owner: SurOwner,
    /// I/Os (or the network delay) still pending.
    pending: u32,
    /// Issued after the network delay.
    ios: Vec<SurIo>,
}

/// IDO state of a run.
pub(super) struct IdoRun {
    cfg: IdoSimConfig,
    pub(super) ctl: Ido,
    disks: Vec<SurDisk>,
    ops: Vec<Option<SurOp>>,
    free_ops: Vec<u32>,
    reclaim: Option<(Extent, u32)>,
    dmap_max: usize,
    reclaim_end_s: Option<f64>,
    hot_zones: usize,
    used_at_rebuild_end: Option<u64>,
}

impl IdoRun {
    pub(super) fn new(
        cfg: &IdoSimConfig,
        geo: &raidcore::Geometry,
        member_drive: &DriveParams,
        seed: u64,
    ) -> Result<IdoRun, super::SimError> {
        let zones = ZoneTable::for_geometry(geo, cfg.zone_bytes)
            .map_err(|e| super::SimError::Config(e.to_string()))?
            .with_epoch(Epoch::Nanos(cfg.epoch_ns.max(1)));
        let cap = cfg.capacity_bytes.unwrap_or(geo.member_bytes_used());
        let drive = cfg.drive.as_ref().unwrap_or(member_drive);
        if cap > drive.capacity_bytes() {
            return Err(super::SimError::Config(format!(
                "a surrogate of {cap} bytes does not fit on a {} ({} bytes)",
                drive.name(),
                drive.capacity_bytes()
            )));
        }
        if cfg.mirrors == 0 {
            return Err(super::SimError::Config(
                "the surrogate set needs at least one disk".into(),
            ));
        }
        let disks = (0..cfg.mirrors)
            .map(|i| {
                Ok(SurDisk {
                    model: drive.build(seed ^ 0x5352_4741_5445 ^ i as u64)?,
                    queue: VecDeque::new(),
                    busy: None,
                    reads: 0,
                    writes: 0,
                })
            })
            .collect::<Result<Vec<_>, crate::disk::DiskParamError>>()?;
        let mut ctl_cfg = IdoConfig::new(cfg.policy, cap);
        ctl_cfg.log_header_bytes = cfg.log_header_bytes.unwrap_or(match member_drive {
            DriveParams::Emulated(_) => raidcore::ido::LOG_HEADER_BYTES,
            _ => 0,
        });
        Ok(IdoRun {
            ctl: Ido::new(ctl_cfg, zones),
            cfg: cfg.clone(),
            disks,
            ops: Vec::new(),
            free_ops: Vec::new(),
            reclaim: None,
            dmap_max: 0,
            reclaim_end_s: None,
            hot_zones: 0,
            used_at_rebuild_end: None,
        })
    }

    pub(super) fn report(&self) -> IdoReport {
        let stats = self.ctl.stats();
        IdoReport {
            policy: self.cfg.policy,
            zone_bytes: self.ctl.zones().zone_bytes(),
            zones: self.ctl.zones().zones(),
            hot_zones: self.hot_zones,
            redirected_share: stats.redirected_share(),
            stats,
            surrogate_ios: self.disks.iter().map(|d| (d.reads, d.writes)).collect(),
            // (The reclaim empties the log when it ends.)
            surrogate_used_bytes: self
                .used_at_rebuild_end
                .unwrap_or(self.ctl.surrogate_used()),
            dmap_max_extents: self.dmap_max,
            reclaim_end_s: self.reclaim_end_s,
        }
    }
}

impl Simulator {
    /// Admission hook: `true` when IDO served the request (during a rebuild or reclaim with a
    /// policy); in normal state it only counts popularity and returns `false`.
    pub(super) fn ido_admit(&mut self, r: &crate::trace::Request, arrival_ns: u64) -> bool {
        let now = self.now_ns;
        let Some(run) = self.ido.as_mut() else {
            return false;
        };
        if run.ctl.phase() == IPhase::Normal {
            run.ctl.record(r.offset_bytes, r.len_bytes, now);
            return false;
        }
        let route = match r.op {
            Op::Read => {
                let (geo, state) = (&self.geo, &self.state);
                let on_failed = |c: u64| chunk_needs_reconstruction(geo, state, c);
                run.ctl
                    .route_read(r.offset_bytes, r.len_bytes, geo.chunk_bytes(), &on_failed)
            }
            Op::Write => run.ctl.route_write(r.offset_bytes, r.len_bytes),
        };
        run.dmap_max = run.dmap_max.max(run.ctl.dmap().len());
        // Plan the array pieces.
        let mut plans = Vec::new();
        let mut sur: Vec<SurIo> = Vec::new();
        for p in &route.pieces {
            match p.source {
                Source::Array => {
                    let planned = match r.op {
                        Op::Read => plan_read(&self.geo, &self.state, p.offset, p.len),
                        Op::Write => plan_write(
                            &self.geo,
                            &self.state,
                            p.offset,
                            p.len,
                            &self.cfg.write_policy,
                        ),
                    };
                    match planned {
                        Ok(ps) => plans.extend(ps.into_iter().map(|pl| (p.offset, pl))),
                        Err(CoreError::DataLost { .. }) => {
                            self.failed_requests += 1;
                            return true;
                        }
                        Err(e) => panic!("the simulator mapped a request the planner refuses: {e}"),
                    }
                }
                Source::Surrogate { s_off } => {
                    // A redirected write's mapping goes in front of it, in the same I/O.
                    let header = match r.op {
                        Op::Write => self
                            .ido
                            .as_ref()
                            .map_or(0, |i| i.ctl.config().log_header_bytes),
                        Op::Read => 0,
                    };
                    sur.push(SurIo {
                        op: 0,
                        offset: s_off - header,
                        len: header + p.len,
                        write: r.op == Op::Write,
                        background: false,
                    })
                }
            }
        }
        self.serial += 1;
        let touches_array = !plans.is_empty();
        if touches_array {
            self.last_foreground_ns = Some(now);
        }
        let id = self.requests.insert(RequestRun {
            arrival_ns,
            op: r.op,
            phase: self.current_phase(),
            remaining: plans.len() as u32 + u32::from(!sur.is_empty()),
            failed: false,
            serial: self.serial,
            touches_array,
            volume: r.volume,
        });
        self.foreground_started();
        for (base, p) in plans {
            self.submit(p, Owner::Request(id), base, false, false);
        }
        if !sur.is_empty() {
            self.sur_start(SurOwner::Request(id), sur);
        }
        if let Some(c) = route.copy {
            self.sur_copy(c);
        }
        true
    }

    fn sur_copy(&mut self, c: CopyJob) {
        let mut ios = Vec::new();
        for t in &c.targets {
            let mut at = 0;
            while at < t.len {
                let len = (t.len - at).min(COPY_PIECE);
                ios.push(SurIo {
                    op: 0,
                    offset: t.s_off + at,
                    len,
                    write: true,
                    background: true,
                });
                at += len;
            }
        }
        self.sur_start(SurOwner::Copy(c.id), ios);
    }

    /// Starts a surrogate operation: after the network delay, its I/Os (a write goes to every
    /// mirror).
    fn sur_start(&mut self, owner: SurOwner, ios: Vec<SurIo>) {
        let run = self.ido.as_mut().expect("IDO run");
        let id = match run.free_ops.pop() {
            Some(i) => i,
            None => {
                run.ops.push(None);
                (run.ops.len() - 1) as u32
            }
        };
        let bytes: u64 = ios.iter().map(|i| i.len).sum();
        let delay = run.cfg.latency_ns
            + if run.cfg.link_bytes_per_sec > 0 {
                (bytes as u128 * 1_000_000_000 / run.cfg.link_bytes_per_sec as u128) as u64
            } else {
                0
            };
        run.ops[id as usize] = Some(SurOp {
            owner,
            pending: 0,
            ios: ios.into_iter().map(|io| SurIo { op: id, ..io }).collect(),
        });
        if delay > 0 {
            let t = self.now_ns + delay;
            self.schedule(t, Kind::SurrogateIssue { op: id });
        } else {
            self.sur_issue(id);
        }
    }

    /// Queues a surrogate operation's I/Os (after its network delay).
    pub(super) fn sur_issue(&mut self, id: u32) {
        let run = self.ido.as_mut().expect("IDO run");
        let op = run.ops[id as usize].as_mut().expect("a live op");
        let ios = std::mem::take(&mut op.ios);
        let mut n = 0;
        let mut kick = Vec::new();
        for io in ios {
            let targets: Vec<usize> = if io.write {
                (0..run.disks.len()).collect()
            } else {
                let best = (0..run.disks.len())
                    .min_by_key(|&d| {
                        (
                            run.disks[d].queue.len() + run.disks[d].busy.is_some() as usize,
                            d,
                        )
                    })
                    .expect("a mirror");
                vec![best]
            };
            for d in targets {
                run.disks[d].queue.push_back(io);
                n += 1;
                if run.disks[d].busy.is_none() {
                    kick.push(d);
                }
            }
        }
        run.ops[id as usize].as_mut().expect("live").pending = n;
        if n == 0 {
            self.sur_op_done(id);
            return;
        }
        kick.sort_unstable();
        kick.dedup();
        for d in kick {
            self.sur_dispatch(d);
        }
    }

    fn sur_dispatch(&mut self, d: usize) {
        let now = self.now_ns;
        let run = self.ido.as_mut().expect("IDO run");
        let disk = &mut run.disks[d];
        if disk.busy.is_some() {
            return;
        }
        // User I/O first, then copies and write-backs, each in arrival order.
        let pick = disk
            .queue
            .iter()
            .position(|q| !q.background)
            .or(if disk.queue.is_empty() { None } else { Some(0) });
        let Some(io) = pick.and_then(|i| disk.queue.remove(i)) else {
            return;
        };
        let dio = if io.write {
            DiskIo::write(io.offset, io.len)
        } else {
            DiskIo::read(io.offset, io.len)
        };
        let s = disk.model.submit(now, dio);
        disk.busy = Some(io);
        self.schedule(s.completion_ns, Kind::SurrogateDone { disk: d as u32 });
    }

    /// The I/O in service on surrogate disk `d` completed.
    pub(super) fn sur_disk_done(&mut self, d: u32) {
        let run = self.ido.as_mut().expect("IDO run");
        let disk = &mut run.disks[d as usize];
        let io = disk.busy.take().expect("an I/O in service");
        if io.write {
            disk.writes += 1;
        } else {
            disk.reads += 1;
        }
        let op = run.ops[io.op as usize].as_mut().expect("live op");
        op.pending -= 1;
        let finished = op.pending == 0;
        self.sur_dispatch(d as usize);
        if finished {
            self.sur_op_done(io.op);
        }
    }

    fn sur_op_done(&mut self, id: u32) {
        let run = self.ido.as_mut().expect("IDO run");
        let op = run.ops[id as usize].take().expect("live op");
        run.free_ops.push(id);
        match op.owner {
            SurOwner::Request(rid) => self.request_part_done(rid),
            SurOwner::Copy(cid) => run.ctl.copy_done(cid, true),
            SurOwner::Reclaim(e) => self.reclaim_write(e),
        }
    }

    /// The rebuild starts: hot zones are chosen.
    pub(super) fn ido_rebuild_started(&mut self) {
        if let Some(run) = self.ido.as_mut() {
            run.ctl.start_rebuild(false);
            run.hot_zones = run.ctl.hot().len();
        }
    }

    /// Before rebuild plans are handed out: the policy's cycles first.
    pub(super) fn ido_prioritize(&mut self) {
        let (Some(run), Some(r)) = (self.ido.as_ref(), self.rebuild.as_mut()) else {
            return;
        };
        if matches!(
            run.ctl.active_policy(),
            RebuildPolicy::Ido | RebuildPolicy::Pro
        ) {
            r.sched
                .prioritize(run.ctl.priority_cycles(&self.geo, &self.state));
        }
    }

    /// A rebuild plan of cycle `c` completed: flags, and migrations to start.
    pub(super) fn ido_cycle_rebuilt(&mut self, c: u64) {
        let Some(run) = self.ido.as_mut() else {
            return;
        };
        for copy in run.ctl.cycle_rebuilt(&self.geo, &self.state, c) {
            self.sur_copy(copy);
        }
    }

    /// The rebuild finished: start reclaiming.
    pub(super) fn ido_rebuild_finished(&mut self) {
        let Some(run) = self.ido.as_mut() else {
            return;
        };
        run.used_at_rebuild_end = Some(run.ctl.surrogate_used());
        if run.ctl.phase() == IPhase::Rebuilding {
            run.ctl.finish_rebuild();
            self.reclaim_next();
        }
    }

    fn reclaim_next(&mut self) {
        let now = self.now_ns;
        let run = self.ido.as_mut().expect("IDO run");
        if run.reclaim.is_some() {
            return;
        }
        match run.ctl.next_reclaim(run.cfg.reclaim_chunk_bytes) {
            None => {
                if run.reclaim_end_s.is_none() && run.ctl.phase() == IPhase::Normal {
                    run.reclaim_end_s = Some(now as f64 / 1e9);
                }
            }
            Some(e) => {
                run.reclaim = Some((e, 0));
                let io = SurIo {
                    op: 0,
                    offset: e.s_off,
                    len: e.len,
                    write: false,
                    background: true,
                };
                self.sur_start(SurOwner::Reclaim(e), vec![io]);
            }
        }
    }

    /// The surrogate read of a write-back is done: write it to the array.
    fn reclaim_write(&mut self, e: Extent) {
        let run = self.ido.as_mut().expect("IDO run");
        if !run.ctl.reclaim_valid(&e) {
            // A newer user write went to the array meanwhile.
            run.reclaim = None;
            self.reclaim_next();
            return;
        }
        let plans = plan_write(
            &self.geo,
            &self.state,
            e.d_off,
            e.len,
            &self.cfg.write_policy,
        )
        .expect("a write-back within the array");
        self.ido.as_mut().expect("IDO run").reclaim = Some((e, plans.len() as u32));
        for p in plans {
            self.submit(p, Owner::Reclaim, e.d_off, false, false);
        }
    }

    /// One write plan of the write-back completed.
    pub(super) fn reclaim_plan_done(&mut self) {
        let run = self.ido.as_mut().expect("IDO run");
        let (e, n) = run.reclaim.expect("a reclaim in flight");
        if n > 1 {
            run.reclaim = Some((e, n - 1));
            return;
        }
        run.reclaim = None;
        run.ctl.reclaim_done(&e);
        self.reclaim_next();
    }

    /// A reclaim write plan must be planned again (a failure): re-plan the same range.
    pub(super) fn reclaim_replan(&mut self, offset: u64, len: u64) {
        let plans = plan_write(&self.geo, &self.state, offset, len, &self.cfg.write_policy)
            .expect("a write-back within the array");
        let run = self.ido.as_mut().expect("IDO run");
        if let Some((_, n)) = run.reclaim.as_mut() {
            *n = *n - 1 + plans.len() as u32;
        }
        for p in plans {
            self.submit(p, Owner::Reclaim, offset, true, false);
        }
    }
}

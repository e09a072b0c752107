//! The healer of a served pool: failure handling without a human, like MD with hot spares and
//! `mdadm --monitor`.
//!
//! A thread ([`SharedPool::enable_auto_heal`]) looks at the pool every [`HEAL_TICK`]:
//!
//! - at its first look, each member the pool's open left out gives `StaleMember` (it missed
//!   updates: [`crate::pool::STALE_WHY`]), `DeviceDisappeared` (its file was missing:
//!   [`crate::pool::DISAPPEARED_WHY`]) or `Fail` (unusable), then `DegradedArray`; members
//!   failed before this open give no event but `DegradedArray`;
//! - members that failed since the last look (an I/O error failed them, or `raidforge fail`)
//!   give a `Fail` event with the reason, followed by `DeviceDisappeared` when the member's
//!   device is no longer there (its path names nothing or another file, or its NBD server
//!   could not be reached again within the I/O timeout), and the first failure of a healthy
//!   pool a `DegradedArray` event;
//! - once a failed member has been failed for the rebuild delay (default: at once) and no
//!   rebuild runs, the first usable hot spare takes its place ([`Pool::activate_spare`],
//!   `SpareActive`), and the rebuild starts in the background with the configured options
//!   (`RebuildStarted`, with the reason). Layouts with spare space (RAID+ and other
//!   declustered layouts) need no spare: their rebuild starts as soon as it can. With no
//!   spare left and nothing to rebuild into, `NoSpare` (once per set of failed members);
//! - a rebuild that the pool needs and that can start is started too: after a restart that
//!   interrupted one (the superblocks record its progress, so it resumes where it was);
//! - a member that fails while a rebuild runs does not stop it where the layout still has
//!   redundancy for it (`raidcore::plan_rebuild_cycle`: RAID6 losing a second member while
//!   the first is rebuilt onto a spare): the rebuild goes on degraded, the second member's
//!   units left lost until it is replaced, and the healer, seeing the new failure (`Fail`),
//!   gives it the next spare once that rebuild has ended (`NoSpare` if there is none);
//! - a rebuild that ends gives `RebuildFinished`; one that ends with an error (its planning
//!   fails, the pool lost data, survivor blocks keep reading wrong) gives `RebuildStopped`
//!   with the error, and the healer does not start it again until the failed members or the
//!   spares change.
//!
//! Every event goes to the sink given at enable time (`raidforge serve --events FILE` appends
//! JSON lines, `--on-event CMD` runs a program) and is counted in [`HealStatus`], which
//! `status` shows. The healer never waits for a rebuild under the pool mutex: it looks, then
//! acts through the same calls the control socket uses.

use super::*;
use layout::Disk;
use std::collections::BTreeSet;

/// How often the healer looks at the pool.
pub const HEAL_TICK: Duration = Duration::from_millis(100);

/// One thing that happened to a served pool's health.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HealthEvent {
    /// Milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    /// `Fail`, `DeviceDisappeared`, `StaleMember`, `DegradedArray`, `SpareActive`,
    /// `SpareRefused`, `RebuildStarted`, `RebuildFinished`, `RebuildStopped`, `NoSpare`.
    pub event: String,
    /// The member concerned, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<usize>,
    /// The spare concerned (`SpareActive`, `SpareRefused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare: Option<PathBuf>,
    /// What happened, in words (why a rebuild started, the error a rebuild stopped with).
    pub detail: String,
}

/// Where health events go.
pub type EventSink = Arc<dyn Fn(&HealthEvent) + Send + Sync>;

/// How the healer acts.
#[derive(Clone)]
pub struct HealOpts {
    /// How long a member stays failed before a spare takes its place and the rebuild starts.
    pub rebuild_delay: Duration,
    /// The rebuild's options (batch size, speed limits).
    pub rebuild: RebuildOpts,
    /// The rebuild policy of automatic rebuilds (`serve --rebuild-policy`): `None` is MD's
    /// plain rebuild. A policy rebuild that a restart interrupted resumes with its own.
    pub policy: Option<crate::ido::RebuildPolicy>,
    /// Where events go (besides the counts in [`HealStatus`]).
    pub sink: Option<EventSink>,
}

impl Default for HealOpts {
    fn default() -> Self {
        HealOpts {
            rebuild_delay: Duration::ZERO,
            rebuild: RebuildOpts::default(),
            policy: None,
            sink: None,
        }
    }
}

/// What the healer did, for `status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HealStatus {
    /// The healer runs (the pool is served with automatic failure handling).
    pub enabled: bool,
    /// The rebuild delay in milliseconds.
    pub rebuild_delay_ms: u64,
    /// Rebuilds the healer started.
    pub rebuilds_started: u64,
    /// Why the last automatic rebuild started.
    pub last_rebuild_reason: Option<String>,
    /// Spares put in the place of failed members: (member, spare).
    pub spares_activated: Vec<(usize, PathBuf)>,
    /// Events so far, by kind.
    pub events: BTreeMap<String, u64>,
    /// The newest events (at most [`HEAL_EVENTS_KEPT`]).
    pub recent: Vec<HealthEvent>,
}

/// How many recent events [`HealStatus::recent`] keeps.
pub const HEAL_EVENTS_KEPT: usize = 32;

/// The healer's memory between looks.
#[derive(Default)]
pub(super) struct Healer {
    pub(super) status: HealStatus,
    /// Failed members seen at the last look, and since when.
    failed: BTreeMap<Disk, Instant>,
    /// A rebuild was running at the last look.
    rebuild_running: bool,
    /// What the last failed attempt to start a rebuild looked at (failed members, spares):
    /// not tried again until it changes.
    refused_for: Option<(Vec<Disk>, usize)>,
    /// Failed members a spare-space rebuild was started for.
    handled: BTreeSet<Disk>,
    looked: bool,
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What the healer sees of the pool.
struct Look {
    failed: Vec<Disk>,
    /// Why each member failed (`failed_why`), by member.
    why: Vec<Option<String>>,
    /// The members the pool's open left out.
    left_out: Vec<usize>,
    spares: usize,
    /// The pool has cycles to rebuild and planning the first one succeeds.
    rebuild_ready: bool,
    data_lost: bool,
}

impl SharedPool {
    /// Starts the healer thread (see the module documentation). Calling it again changes the
    /// options.
    pub fn enable_auto_heal(self: &Arc<Self>, opts: HealOpts) {
        {
            let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            h.status.enabled = true;
            h.status.rebuild_delay_ms = opts.rebuild_delay.as_millis() as u64;
        }
        let first = self
            .heal_opts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(opts);
        if first.is_some() {
            return;
        }
        let weak = Arc::downgrade(self);
        let h = std::thread::spawn(move || loop {
            let Some(sp) = weak.upgrade() else { return };
            if sp.stop_heal.load(Ordering::SeqCst) {
                return;
            }
            sp.heal_tick();
            drop(sp);
            std::thread::sleep(HEAL_TICK);
        });
        *self.heal_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
    }

    /// What the healer did so far (`None` when it is off).
    pub fn heal_status(&self) -> Option<HealStatus> {
        let h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
        h.status.enabled.then(|| h.status.clone())
    }

    fn emit(&self, opts: &HealOpts, e: HealthEvent) {
        {
            let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            *h.status.events.entry(e.event.clone()).or_default() += 1;
            if h.status.recent.len() == HEAL_EVENTS_KEPT {
                h.status.recent.remove(0);
            }
            h.status.recent.push(e.clone());
        }
        if let Some(sink) = &opts.sink {
            sink(&e);
        }
    }

    fn event(
        &self,
        opts: &HealOpts,
        event: &str,
        member: Option<usize>,
        spare: Option<PathBuf>,
        detail: String,
    ) {
        self.emit(
            opts,
            HealthEvent {
                time_unix_ms: now_unix_ms(),
                event: event.into(),
                member,
                spare,
                detail,
            },
        );
    }

    fn look(&self) -> Result<Look> {
        self.with_pool(|p| {
            Ok(Look {
                failed: p.state.failed().to_vec(),
                why: (p.file.desc.members.iter())
                    .map(|m| m.failed_why.clone())
                    .collect(),
                left_out: p.left_out_at_open().to_vec(),
                spares: p.spares().len(),
                // `all_clean` first: no scan of the cycles under the mutex when healthy.
                rebuild_ready: !p.state.all_clean() && p.rebuild_can_start().unwrap_or(false),
                data_lost: p.state.data_lost(&p.geo),
            })
        })
    }

    /// One look at the pool, and what follows from it.
    pub(super) fn heal_tick(self: &Arc<Self>) {
        let Some(opts) = self
            .heal_opts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            return;
        };
        let Ok(look) = self.look() else { return };
        let info = self.rebuild_info();
        let now = Instant::now();
        let (new_failures, first_look, was_running) = {
            let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            let first_look = !h.looked;
            h.looked = true;
            let was_healthy = h.failed.is_empty();
            h.failed.retain(|d, _| look.failed.contains(d));
            let mut new = Vec::new();
            for &d in &look.failed {
                if let std::collections::btree_map::Entry::Vacant(v) = h.failed.entry(d) {
                    v.insert(now);
                    new.push(d);
                }
            }
            let was_running = std::mem::replace(&mut h.rebuild_running, info.running);
            (
                (new, was_healthy && !look.failed.is_empty()),
                first_look,
                was_running,
            )
        };
        let (new, degraded_now) = new_failures;
        let why = |d: usize| look.why.get(d).cloned().flatten().unwrap_or_default();
        if first_look {
            // What the open left out, and why.
            for &d in &look.left_out {
                let why = why(d);
                let event = if why.starts_with(crate::pool::STALE_WHY) {
                    "StaleMember"
                } else if why.starts_with(crate::pool::DISAPPEARED_WHY) {
                    "DeviceDisappeared"
                } else {
                    "Fail"
                };
                self.event(
                    &opts,
                    event,
                    Some(d),
                    None,
                    format!("member {d} left out when the pool was opened: {why}"),
                );
            }
        } else {
            for &d in &new {
                let why = why(d as usize);
                self.event(
                    &opts,
                    "Fail",
                    Some(d as usize),
                    None,
                    format!("member {d} failed: {why}"),
                );
                if why.starts_with(crate::pool::DISAPPEARED_WHY) {
                    self.event(
                        &opts,
                        "DeviceDisappeared",
                        Some(d as usize),
                        None,
                        format!("member {d}: {why}"),
                    );
                }
            }
        }
        if degraded_now {
            self.event(
                &opts,
                "DegradedArray",
                None,
                None,
                format!(
                    "members {:?} failed{}",
                    look.failed,
                    if look.data_lost {
                        "; the pool has lost data"
                    } else {
                        ""
                    }
                ),
            );
        }
        if was_running && !info.running {
            match (&info.error, info.finished) {
                (None, true) => self.event(
                    &opts,
                    "RebuildFinished",
                    None,
                    None,
                    "every cycle is in the target layout".into(),
                ),
                (Some(e), _) => {
                    // Not started again until something changes (a member fails, a spare
                    // comes).
                    self.healer
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .refused_for = Some((look.failed.clone(), look.spares));
                    self.event(&opts, "RebuildStopped", None, None, e.clone())
                }
                (None, false) => {}
            }
        }
        if info.running || look.data_lost {
            return;
        }
        // Failed members old enough for the delay get a spare, first failed first.
        let mut activated = Vec::new();
        let due: Vec<Disk> = {
            let h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            look.failed
                .iter()
                .copied()
                .filter(|d| {
                    h.failed
                        .get(d)
                        .is_some_and(|t| now - *t >= opts.rebuild_delay)
                })
                .collect()
        };
        if !due.is_empty() && !look.rebuild_ready && look.spares == 0 {
            let key = (look.failed.clone(), 0);
            let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            if h.refused_for.as_ref() != Some(&key) {
                h.refused_for = Some(key);
                drop(h);
                self.event(
                    &opts,
                    "NoSpare",
                    Some(due[0] as usize),
                    None,
                    format!(
                        "members {:?} failed and no hot spare is left: add one with \
                         `raidforge add POOL --spare PATH`",
                        look.failed
                    ),
                );
            }
        }
        for &d in due.iter().take(look.spares) {
            match self.with_pool(|p| p.activate_spare(d as usize)) {
                Ok((used, refused)) => {
                    for (path, why) in refused {
                        self.event(&opts, "SpareRefused", Some(d as usize), Some(path), why);
                    }
                    if let Some(path) = used {
                        self.event(
                            &opts,
                            "SpareActive",
                            Some(d as usize),
                            Some(path.clone()),
                            format!("spare {} took the place of member {d}", path.display()),
                        );
                        let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
                        h.status.spares_activated.push((d as usize, path.clone()));
                        h.failed.remove(&d);
                        activated.push((d, path));
                    }
                }
                Err(e) => self.event(
                    &opts,
                    "SpareRefused",
                    Some(d as usize),
                    None,
                    format!("activating a spare for member {d}: {e}"),
                ),
            }
        }
        // Start the rebuild when there is one to do and it can start.
        let look = if activated.is_empty() {
            look
        } else {
            match self.look() {
                Ok(l) => l,
                Err(_) => return,
            }
        };
        if !look.rebuild_ready {
            return;
        }
        // What the healer rebuilds for: a spare it activated; failed members it has not
        // rebuilt for yet, on a layout that rebuilds into spare space (once each, after the
        // delay); or, at its first look, a rebuild a restart interrupted. A replacement or a
        // rebuild an operator asked for is the operator's (`raidforge rebuild`).
        let key = (look.failed.clone(), look.spares);
        let reason = {
            let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
            let failed_now: Vec<Disk> = look.failed.clone();
            h.handled.retain(|d| failed_now.contains(d));
            let fresh: Vec<Disk> = look
                .failed
                .iter()
                .copied()
                .filter(|d| {
                    !h.handled.contains(d)
                        && h.failed
                            .get(d)
                            .is_some_and(|t| now - *t >= opts.rebuild_delay)
                })
                .collect();
            if !activated.is_empty() {
                Some(
                    activated
                        .iter()
                        .map(|(d, p)| {
                            format!("member {d} failed; spare {} took its place", p.display())
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            } else if !fresh.is_empty() && h.refused_for.as_ref() != Some(&key) {
                h.handled.extend(fresh.iter().copied());
                Some(format!(
                    "members {fresh:?} failed; the layout rebuilds into its spare space"
                ))
            } else if first_look && look.failed.is_empty() {
                Some(
                    "a rebuild was left unfinished when the pool was last served; resuming it"
                        .into(),
                )
            } else {
                None
            }
        };
        let Some(reason) = reason else { return };
        // An interrupted policy rebuild resumes with its own policy (naming another is refused).
        let policy = opts
            .policy
            .filter(|_| self.ido.phase() == crate::ido::Phase::Normal);
        match self.start_rebuild_with(opts.rebuild.clone(), policy, None) {
            Ok(_) => {
                {
                    let mut h = self.healer.lock().unwrap_or_else(|e| e.into_inner());
                    h.status.rebuilds_started += 1;
                    h.status.last_rebuild_reason = Some(reason.clone());
                    h.rebuild_running = true;
                    h.refused_for = None;
                }
                self.event(&opts, "RebuildStarted", None, None, reason);
            }
            Err(e) => {
                self.healer
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .refused_for = Some(key);
                self.event(
                    &opts,
                    "RebuildStopped",
                    None,
                    None,
                    format!("the automatic rebuild cannot start: {e}"),
                );
            }
        }
    }

    /// Stops automatic failure handling (the healer thread; a rebuild it started goes on).
    pub fn stop_auto_heal(&self) {
        self.stop_healer();
    }

    /// Stops the healer thread (before the pool closes: it must not start a rebuild then).
    pub(super) fn stop_healer(&self) {
        self.stop_heal.store(true, Ordering::SeqCst);
        let h = self
            .heal_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

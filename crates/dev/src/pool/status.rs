//! What a pool reports: status and verify.

use super::*;

/// Per-member status.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemberStatus {
    pub index: usize,
    pub path: PathBuf,
    /// "active", "failed", "rebuilding" (replaced, not yet rebuilt) or "spare".
    pub state: String,
    pub data_offset_bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Data-area read and write operations, and deferred-parity list writes.
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub writes: u64,
    #[serde(default)]
    pub meta_writes: u64,
    pub emulate: Option<String>,
    /// Why a failed member failed (see `MemberDesc::failed_why`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_why: Option<String>,
}

/// What `status` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// "clean", "degraded", "rebuilding" (some cycles not in the target layout) or "failed"
    /// (data lost).
    pub state: String,
    pub scheme: String,
    pub layout: String,
    pub uuid: String,
    pub size_bytes: u64,
    pub chunk_bytes: u64,
    pub cycles: u64,
    pub cycles_clean: u64,
    pub failed: Vec<Disk>,
    pub members: Vec<MemberStatus>,
    /// "eager" or "lazy".
    #[serde(default)]
    pub parity: String,
    /// Stripes whose background parity is deferred (the BPGL's length) and its bound.
    #[serde(default)]
    pub bpgl_len: usize,
    #[serde(default)]
    pub bpgl_capacity: usize,
    /// Member failures the pool survives now: the scheme's tolerance, 1 at most while parity
    /// updates are deferred, minus the members already failed.
    #[serde(default)]
    pub fault_tolerance: usize,
    /// Per-block checksums on (reads verify them).
    #[serde(default)]
    pub checksums: bool,
    /// Bad blocks found and repaired over the pool's life.
    #[serde(default)]
    pub repairs: RepairCounts,
    /// Logical ranges known lost: reads of them fail, naming them.
    #[serde(default)]
    pub lost: Vec<LostRange>,
    /// Write-hole protection: "journal" or "none".
    #[serde(default)]
    pub write_hole: String,
    /// Journal use since the pool was opened (`None` without a journal, or for a status peek
    /// of a pool another process has open).
    #[serde(default)]
    pub journal: Option<JournalStats>,
    /// Zone tracking, the rebuild policy, surrogate and D-Map (seed 003, `crate::ido`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ido: Option<IdoStatus>,
    /// The on-disk format when it is not raidforge's own: "md 1.2 raid5 left-symmetric".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// Write-intent regions marked now: what a crash would leave to resynchronise. Absent
    /// when the pool has no write-intent bitmap (a journal, or Linux MD's format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_regions_marked: Option<usize>,
    /// What follows a crash (an unclean shutdown) before the pool serves again:
    /// "journal-replay" (the journal's records are replayed), "resync-marked" (the regions
    /// the write-intent bitmap marked are resynchronised), "resync-whole" (Linux MD's
    /// format: no bitmap; writes mark the array dirty until it is closed, and the next
    /// assembly, raidforge's or the kernel's, resynchronises the whole array), "none" (MD
    /// RAID0: no parity or copies to disagree).
    #[serde(default)]
    pub after_crash: String,
    /// What the resync after an unclean shutdown did when the pool was opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync: Option<super::ResyncReport>,
    /// Hot spares, in the order they will be used.
    #[serde(default)]
    pub spares: Vec<PathBuf>,
    /// What a served pool's healer did (automatic failure handling: spares activated,
    /// rebuilds started and why); `None` for a pool that is not served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_heal: Option<crate::serve_support::HealStatus>,
}

/// Bytes of units `verify` and `scrub` read and check at a time: a cycle of a wide
/// declustered layout (RAID+ over 31 members, random placement over 255) is hundreds of MiB,
/// and verified whole it was held whole (a 255-member pool's verify peaked at 431 MB).
pub const VERIFY_PART_BYTES: u64 = 64 << 20;

/// Result of `verify`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    pub cycles_checked: u64,
    pub stripes_checked: u64,
    /// Stripes whose parity or mirrors disagree: (cycle, stripe).
    pub inconsistent: Vec<(u64, usize)>,
    /// Stripes that could not be checked fully because a unit is missing.
    pub stripes_degraded: u64,
}

impl Pool {
    /// Reads every stripe and checks parity and mirrors.
    /// Deferred parity is flushed first (a listed stripe's background parity is stale by
    /// design, not damaged).
    pub fn verify(&mut self) -> Result<VerifyReport> {
        self.flush_bpgl(0)?;
        let mut r = VerifyReport::default();
        for c in 0..self.geo.cycles() {
            self.verify_cycle(c, &mut r)?;
        }
        Ok(r)
    }

    /// Checks cycle `c`'s stripes into `r` (a served pool calls it under the cycle's stripe
    /// locks), [`VERIFY_PART_BYTES`] of units at a time. Stops, failing them, when members
    /// fail while reading, and at blocks that read wrong: `verify` checks parity, `scrub` is
    /// what repairs blocks.
    pub(crate) fn verify_cycle(&mut self, c: u64, r: &mut VerifyReport) -> Result<()> {
        for part in raidcore::verify_parts(&self.geo, &self.state, c, VERIFY_PART_BYTES) {
            let plan = raidcore::plan_verify_stripes(&self.geo, &self.state, c, part.clone());
            let bufs = match crate::exec::run_reads(&plan, &self.members_view()) {
                Ok(b) => b,
                Err(e) if e.read_errors.is_empty() => {
                    return Err(PoolError::Io(format!(
                        "verify stopped at cycle {c}: {} member blocks read wrong (checksum \
                         mismatches or read errors); run `raidforge scrub` to repair them",
                        e.bad.len()
                    )));
                }
                Err(e) => {
                    let failed = e.failed_members();
                    self.fail_members(&failed)?;
                    return Err(PoolError::Io(format!(
                        "verify stopped: members {failed:?} failed while reading"
                    )));
                }
            };
            let outcome = raidcore::check_verify_stripes(&self.state, &plan, &bufs, part);
            r.stripes_checked += outcome.checked as u64;
            r.stripes_degraded += outcome.degraded as u64;
            r.inconsistent
                .extend(outcome.inconsistent.iter().map(|&s| (c, s)));
        }
        r.cycles_checked += 1;
        Ok(())
    }

    /// Status for `raidforge status`.
    pub fn status(&self) -> Status {
        let mut s = self.status_without_ido();
        s.ido = Some(self.ido.status(self.zones_rebuilt()));
        s
    }

    /// [`Pool::status`] without the IDO section, and the zones rebuilt (a served pool adds
    /// the section outside the pool mutex: lock order).
    pub(crate) fn status_parts(&self) -> (Status, u64) {
        (self.status_without_ido(), self.zones_rebuilt())
    }

    /// The pool's state in one word (`status`'s `state`, and the state `raidforge serve
    /// --metrics` reports): "failed" (data lost), "degraded" (members failed and cycles not
    /// rebuilt, or their units lost until replaced), "rebuilding" (cycles not in the target layout) or "clean".
    pub(crate) fn health(&self) -> &'static str {
        if self.state.data_lost(&self.geo) {
            "failed"
        } else if !self.state.failed().is_empty()
            && (!self.state.all_clean() || !self.state.awaiting_replacement().is_empty())
        {
            // Failed members not rebuilt elsewhere: cycles still to move, or (a rebuild that
            // went on without them) their units lost until they are replaced.
            "degraded"
        } else if !self.state.all_clean() {
            "rebuilding"
        } else {
            "clean"
        }
    }

    /// The oldest layout generation any cycle is still in: a member replaced after it holds
    /// nothing yet for that cycle (even when a later failure changed the target).
    pub(crate) fn oldest_generation_in_use(&self) -> u32 {
        (0..self.state.generations().len() as u32)
            .find(|&g| self.state.cycles_in_generation(g) > 0)
            .unwrap_or(0)
    }

    /// Member `d`'s state in one word: "failed", "rebuilding" (replaced after the generation
    /// `oldest` some cycles are still in), "spare" (a layout's spare disk) or "active".
    pub(crate) fn member_state(&self, d: Disk, oldest: u32) -> &'static str {
        if self.state.failed().contains(&d) {
            "failed"
        } else if self.state.replaced_at(d) > oldest {
            "rebuilding"
        } else if self.geo.scheme().spare_disks().contains(&d) {
            "spare"
        } else {
            "active"
        }
    }

    pub(super) fn status_without_ido(&self) -> Status {
        let failed = self.state.failed().to_vec();
        let oldest = self.oldest_generation_in_use();
        let members = (0..self.members.handles.len())
            .map(|i| {
                let st = self.member_state(i as Disk, oldest);
                let md = &self.file.desc.members[i];
                MemberStatus {
                    index: i,
                    path: md.path.clone(),
                    state: st.into(),
                    data_offset_bytes: self
                        .md
                        .as_ref()
                        .and_then(|m| m.data_offset_bytes(i))
                        .unwrap_or(self.map.data_offset_bytes),
                    read_bytes: md.read_bytes
                        + self.members.counters[i].read_bytes.load(Ordering::Relaxed),
                    write_bytes: md.write_bytes
                        + self.members.counters[i].write_bytes.load(Ordering::Relaxed),
                    reads: md.reads + self.members.counters[i].reads.load(Ordering::Relaxed),
                    writes: md.writes + self.members.counters[i].writes.load(Ordering::Relaxed),
                    meta_writes: md.meta_writes
                        + self.members.counters[i].meta_writes.load(Ordering::Relaxed),
                    emulate: md.emulate.clone(),
                    failed_why: if st == "failed" {
                        md.failed_why.clone()
                    } else {
                        None
                    },
                }
            })
            .collect();
        Status {
            state: self.health().into(),
            scheme: self.sb.kind.name().into(),
            layout: layout::to_text(self.sb.kind, &self.sb.params),
            uuid: self.file.desc.uuid.clone(),
            size_bytes: self.capacity_bytes(),
            chunk_bytes: self.geo.chunk_bytes(),
            cycles: self.geo.cycles(),
            cycles_clean: self.state.clean_cycles(),
            failed,
            members,
            parity: self.lazy.parity.as_str().into(),
            bpgl_len: self.state.bpgl().len(),
            bpgl_capacity: self.state.bpgl().capacity(),
            fault_tolerance: self.state.fault_tolerance(&self.geo),
            checksums: self.integrity.checksums.is_some(),
            repairs: self.file.desc.repairs.clone(),
            lost: self.file.desc.lost.clone(),
            write_hole: self.wh.mode.as_str().into(),
            journal: self.wh.journal.as_ref().map(|j| j.stats()),
            ido: None,
            metadata: self.metadata_description(),
            intent_regions_marked: self.wh.intent.as_ref().map(|w| w.marked().len()),
            after_crash: match (&self.md, self.wh.mode) {
                (Some(md), _) => md.after_crash(),
                (None, WriteHole::Journal) => "journal-replay",
                (None, WriteHole::None) => "resync-marked",
            }
            .into(),
            resync: self.integrity.resync.clone(),
            spares: self.file.desc.spares.clone(),
            auto_heal: None,
        }
    }
}

//! Opening a pool from its descriptor or assembling it from member paths alone: the
//! superblocks read back into the array state.

use super::*;

/// Why assembly opens a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// For I/O: members locked, what assembly finds recorded, the journal replayed or the
    /// regions the write-intent bitmap marks resynchronised.
    Exclusive,
    /// [`Access::Exclusive`], and a pool that was not shut down cleanly while missing members
    /// is started all the same (`--force`; the stripes it cannot resynchronise are left as
    /// they are).
    Forced,
    /// A status peek: nothing locked or written, so it works while another process has the
    /// pool open.
    Peek,
}

impl Pool {
    /// Opens a pool from its descriptor, checking every member's superblock. The members stay
    /// locked against other raidforge processes until the pool is dropped.
    pub fn open(desc_path: &Path) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, Access::Exclusive, None)
    }

    /// [`Pool::open`] with every member wrapped by `wrap` once assembly has read the
    /// superblocks (before anything is written), and every replacement later.
    pub fn open_wrapped(desc_path: &Path, wrap: MemberWrap) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, Access::Exclusive, Some(wrap))
    }

    /// [`Pool::open`] (or [`Pool::open_wrapped`] with `wrap`), starting a pool that was not
    /// shut down cleanly and is missing members its unclean regions need (which a plain open
    /// refuses, as MD refuses to start a dirty degraded array): the regions are resynchronised
    /// where every unit is present, the rest left as they are (`--force`).
    pub fn open_forced(desc_path: &Path, wrap: Option<MemberWrap>) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, Access::Forced, wrap)
    }

    pub(super) fn apply_wrap(&mut self, wrap: Option<MemberWrap>) {
        if let Some(w) = &wrap {
            for (i, m) in self.members.handles.iter_mut().enumerate() {
                if let Some(inner) = m.take() {
                    *m = Some(w(i, inner));
                }
            }
        }
        self.members.wrap = wrap;
    }

    /// The pool as its members record it, opened for looking only: nothing locked or written
    /// (as for [`Pool::peek_status`]); what a command asks before it decides to refuse.
    pub fn peek(desc_path: &Path) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, Access::Peek, None)
    }

    /// The status of a pool without opening it for I/O: no lock taken, nothing written, so it
    /// works while another process (a rebuild, say) has the pool open; rebuild progress is then
    /// what that process last recorded (it does at least every second).
    pub fn peek_status(desc_path: &Path) -> Result<Status> {
        let desc = Self::read_descriptor(desc_path)?;
        let mut tries = 0;
        loop {
            match Self::from_members(desc_path, desc.clone(), Access::Peek, None) {
                Ok(p) => return Ok(p.status()),
                // A superblock being rewritten by the other process can read torn.
                Err(PoolError::Member { .. }) if tries < 3 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Recreates the descriptor from member paths alone (like `mdadm --assemble`) and opens
    /// the pool. Members may be given in any order; their superblocks say where each goes.
    pub fn assemble(desc_path: &Path, paths: &[PathBuf], emulate: Option<String>) -> Result<Pool> {
        Self::assemble_with(desc_path, paths, emulate, false)
    }

    /// [`Pool::assemble`]; with `force`, an unclean pool that lacks members its unclean
    /// regions need is started all the same (see [`Pool::open_forced`]).
    pub fn assemble_with(
        desc_path: &Path,
        paths: &[PathBuf],
        emulate: Option<String>,
        force: bool,
    ) -> Result<Pool> {
        if paths.is_empty() {
            return Err(PoolError::Usage("no --member given".into()));
        }
        // Members of a Linux MD array: adopted (`md/`).
        if md::is_md_member(&paths[0]) {
            return Self::assemble_md(desc_path, paths, emulate);
        }
        let mut found: Vec<(Superblock, PathBuf)> = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let m = super::membership::probe_member(p).map_err(|e| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let sb = read_superblock(&*m).map_err(|reason| PoolError::Member {
                index: i,
                path: p.clone(),
                // Not raidforge's, but MD's magic is there: what is wrong with it as an MD
                // member (two versions at once, a damaged superblock).
                reason: md::md_trouble(&*m).unwrap_or_else(|| {
                    format!("{reason} (leave it out to assemble the pool without it)")
                }),
            })?;
            found.push((sb, p.clone()));
        }
        let uuid = found[0].0.uuid;
        let count = found[0].0.member_count as usize;
        if let Some((sb, p)) = found.iter().find(|(sb, _)| sb.uuid != uuid) {
            return Err(PoolError::Member {
                index: sb.member_index as usize,
                path: p.clone(),
                reason: format!(
                    "belongs to pool {} while {} belongs to pool {}: members of two pools are mixed",
                    hex(&sb.uuid),
                    found[0].1.display(),
                    hex(&uuid)
                ),
            });
        }
        let mut slots: Vec<Option<PathBuf>> = vec![None; count];
        for (sb, p) in &found {
            let i = sb.member_index as usize;
            if let Some(prev) = &slots[i] {
                return Err(PoolError::Usage(format!(
                    "{} and {} both claim to be member {i}",
                    prev.display(),
                    p.display()
                )));
            }
            slots[i] = Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
        }
        let paths: Vec<PathBuf> = slots
            .into_iter()
            .enumerate()
            .map(|(i, p)| p.unwrap_or_else(|| PathBuf::from(format!("<missing member {i}>"))))
            .collect();
        let mut desc = Descriptor::new(&uuid, &paths, &emulate, false);
        // An existing descriptor of this pool keeps what the superblocks do not hold (member
        // speeds unless --emulate is given, O_DIRECT, I/O counters, repairs, lost ranges); one
        // of another pool is not overwritten. One that cannot be read is what assemble
        // rebuilds.
        if let Ok(old) = Self::read_descriptor(desc_path) {
            if old.uuid != desc.uuid {
                return Err(PoolError::Usage(format!(
                    "{} describes another pool ({}), not the pool of these members ({}): \
                     choose another descriptor path, or remove it first if that pool is gone",
                    desc_path.display(),
                    old.uuid,
                    desc.uuid
                )));
            }
            for (new, was) in desc.members.iter_mut().zip(&old.members) {
                let path = std::mem::take(&mut new.path);
                *new = was.clone();
                new.path = path;
                if emulate.is_some() {
                    new.emulate = emulate.clone();
                }
            }
            desc.direct = old.direct;
            desc.repairs = old.repairs;
            desc.lost = old.lost;
        }
        let access = if force {
            Access::Forced
        } else {
            Access::Exclusive
        };
        let pool = Self::from_members(desc_path, desc, access, None)?;
        pool.save_descriptor()?;
        Ok(pool)
    }

    /// Opens the members a descriptor names and restores the array state from their
    /// superblocks; wraps the members with `wrap` (before anything is written) and every
    /// replacement later. [`Access::Peek`] locks and writes nothing (a status peek).
    pub(super) fn from_members(
        desc_path: &Path,
        desc: Descriptor,
        access: Access,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        if desc.metadata.as_deref() == Some(md::MD_METADATA) {
            return Self::open_md(desc_path, desc, access, wrap);
        }
        let uuid = unhex(&desc.uuid).ok_or_else(|| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("bad uuid '{}'", desc.uuid),
        })?;
        let (best, opened) = newest_superblock(probe_members(&desc, &uuid, access))?;
        let has_checksums = best.features & FEATURE_CHECKSUMS != 0;
        let (geo, kind, params) = recorded_geometry(&best, desc.direct || has_checksums)?;
        let mut state = recorded_state(&geo, &best)?;
        let mut desc = desc;
        // A member one generation behind is used; its superblock is brought up to date at
        // once, or a second crash during the next update would leave it two behind (stale).
        let behind: Vec<usize> = (opened.iter().enumerate())
            .filter(|(_, p)| matches!(p, Probe::Good(_, sb) if sb.generation < best.generation))
            .map(|(i, _)| i)
            .collect();
        let failed_before = state.failed().to_vec();
        let (members, events) = judge_members(opened, &best, &geo, &mut state, &mut desc)?;
        let left_out: Vec<usize> = (state.failed().iter())
            .filter(|d| !failed_before.contains(d))
            .map(|&d| d as usize)
            .collect();
        // Only a member in use is brought up to date (a failed one is never written).
        let behind = behind.iter().any(|&i| members[i].is_some());
        // The deferred-parity list: the newest valid record on any present member (a crash
        // with updates deferred leaves them listed there).
        let (bpgl, bpgl_holders) = match newest_bpgl(&members, &uuid) {
            Some((r, holders)) => (Some(r), holders),
            None => (None, 0),
        };
        if let Some(r) = &bpgl {
            state.restore_bpgl(r);
        }
        let (ido, ido_holders) = restored_ido(&geo, &members, &uuid)?;
        let map = recorded_map(&best)?;
        let (checksums, torn_pages) = if has_checksums {
            let (c, torn) = Self::load_checksums(&geo, &map, &members)?;
            (Some(Arc::new(c)), torn)
        } else {
            (None, Default::default())
        };
        let (intent, dirty) = recorded_intent(&best, &uuid, &geo, &members);
        let mut pool = Pool {
            geo,
            state,
            file: DescriptorFile {
                path: desc_path.to_path_buf(),
                desc,
            },
            sb: SuperblockState {
                uuid,
                kind,
                params,
                events,
                generation: best.generation,
                created_unix_secs: best.created_unix_secs,
                rebuilt_unrecorded: Default::default(),
                moved_unrecorded: false,
            },
            map,
            members: MemberSet::new(members),
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: best.parity,
                seq: bpgl.as_ref().map_or(0, |r| r.sequence),
                dirty: false,
                on_disk: bpgl.map(|r| r.stripes).unwrap_or_default(),
                commit: Default::default(),
            },
            integrity: Integrity {
                checksums,
                lost_pending: Vec::new(),
                rewriting_lost: Vec::new(),
                resync: None,
            },
            wh: WriteHoleState {
                mode: if best.features & FEATURE_JOURNAL != 0 {
                    WriteHole::Journal
                } else {
                    WriteHole::None
                },
                journal: None,
                intent,
            },
            ido: Arc::new(ido),
            md: None,
        };
        pool.members.left_out = left_out;
        pool.apply_wrap(wrap);
        if access != Access::Peek {
            pool.settle_after_assembly(
                behind,
                best.events.len(),
                torn_pages,
                &dirty,
                access == Access::Forced,
                (bpgl_holders, ido_holders),
            )?;
        }
        Ok(pool)
    }

    /// The block checksums from their region, and the region pages whose every copy a crash
    /// tore (vouched for from their stripes once the pool is open).
    fn load_checksums(
        geo: &Geometry,
        map: &MemberMap,
        members: &[Option<Arc<dyn Member>>],
    ) -> Result<(Checksums, BTreeSet<(u32, u64)>)> {
        let copies = crate::csum::copies_for(geo.disks(), geo.scheme().tolerance());
        if map.checksums.bytes < crate::csum::region_bytes(map.data_bytes, copies) {
            return Err(PoolError::Usage(format!(
                "the superblock's checksum region ({} bytes) is too small for {} bytes of \
                 data: damaged superblock",
                map.checksums.bytes, map.data_bytes
            )));
        }
        Checksums::load(members, map.checksums.offset, map.data_bytes, copies)
            .map_err(|e| PoolError::Io(format!("reading the checksum regions: {e}")))
    }

    /// What an assembly for I/O does before anything else is written: resynchronises the
    /// regions the write-intent bitmap marks (a pool without a journal), replays the write
    /// journal (what a crash may have left half done), vouches for checksum pages a crash
    /// tore, records the failures assembly found (the newest record had `recorded_events`
    /// events) or brings superblocks that are `behind` up to date, and flushes deferred
    /// parity when a member is missing.
    fn settle_after_assembly(
        &mut self,
        behind: bool,
        recorded_events: usize,
        torn_pages: BTreeSet<(u32, u64)>,
        dirty: &BTreeSet<u64>,
        force: bool,
        (bpgl_holders, ido_holders): (usize, usize),
    ) -> Result<()> {
        // Before anything else is written (a refusal writes nothing).
        self.resync_marked(dirty, force)?;
        if self.wh.mode == WriteHole::Journal {
            // The replay vouches for the torn pages with the pages it touched.
            self.replay_journal(torn_pages)?;
        } else if !torn_pages.is_empty() {
            self.vouch_torn_checksum_pages(&torn_pages)?;
        }
        if self.sb.events.len() != recorded_events {
            self.persist(ArrayStateTag::Degraded)?;
        } else if behind {
            // Open for I/O: in use, not clean (closing records clean).
            let tag = match self.tag() {
                ArrayStateTag::Clean => ArrayStateTag::Active,
                t => t,
            };
            self.persist(tag)?;
        }
        // Assembled without a member, or with one replaced and not rebuilt yet, while
        // updates were deferred: those first (each listed stripe has one parity left). A
        // flush that cannot finish (the stripe's data is lost already) leaves its entries:
        // reads of them report the loss, and the rest of the pool stays readable.
        if !self.state.bpgl().is_empty() && !self.state.lazy_allowed() {
            let _ = self.flush_bpgl(0);
        }
        // The deferred-parity list in use must be on as many members as a record is written
        // to before a write depends on it. The newest record found may be on fewer: a crash
        // while it was being written left it on the members written first. It is the list
        // now (the older ones may name fewer stripes only because it was never acted on), and
        // writes to stripes it names write no record; should its members fail next, the start
        // after would take an older list, whose other stripes' parity it counts as current:
        // wrong bytes after a second failure (test
        // a_longer_newest_list_on_one_member_is_recorded_again_before_it_is_needed), or,
        // were the older list the longer, data reported lost that the array holds (served
        // fault harness, seed 0x6b099bac). So it is written again, to the members that take
        // records now. A newer record on a member missing now was never acted on either:
        // that member is recorded failed above and its slots are not read again.
        let present = self.members.handles.iter().flatten().count();
        let copies = self.record_copies().min(present);
        if self.lazy.seq > 0 && bpgl_holders < copies {
            self.persist_bpgl()?;
        }
        // The IDO record likewise: its D-Map says which ranges' newest data is on the
        // surrogate, and writes there rely on it.
        if ido_holders > 0 && ido_holders < copies && self.ido.records_enabled() {
            self.ido.record_again();
            let ido = Arc::clone(&self.ido);
            ido.persist_if_dirty(&RecordOnly(self), self.sb.uuid, true)?;
        }
        Ok(())
    }

    /// Replays the write journal and opens it; the checksums of the blocks replayed follow
    /// them. Then vouches for the checksum pages the replay touched and `torn_pages`.
    fn replay_journal(&mut self, torn_pages: BTreeSet<(u32, u64)>) -> Result<()> {
        let sums = self.integrity.checksums.clone();
        let members = self.members.handles.clone();
        // Checksum pages the replayed records touched (see `vouch_torn_checksum_pages`).
        let mut touched = torn_pages;
        let mut holders_failed: Vec<u32> = Vec::new();
        let per_page = crate::csum::ENTRIES_PER_PAGE;
        let b = crate::csum::BLOCK_BYTES;
        let j = Journal::recover(self.journal_geometry(), &members, |m, off, data| {
            let end = off + data.len() as u64;
            for page in off / b / per_page..=(end.saturating_sub(1)) / b / per_page {
                touched.insert((m, page));
            }
            // Replay rewrites whole blocks: their checksums follow.
            let (Some(c), Some(Some(_))) = (&sums, members.get(m as usize)) else {
                return Ok(());
            };
            c.record(m as usize, off, data);
            match c.write_pages(m as usize, &members, off / b, end / b) {
                // A copy on another member failed: that member is failed after the replay,
                // not the one replayed to.
                Err(e) if e.member != m as usize => {
                    holders_failed.push(e.member as u32);
                    Ok(())
                }
                r => r.map_err(std::io::Error::from),
            }
        })
        .map_err(|e| PoolError::Io(e.to_string()))?;
        // Members that failed during the replay (or its checkpoint) are failed now.
        let mut dead = j.take_failed_members();
        dead.extend(holders_failed);
        dead.sort_unstable();
        dead.dedup();
        self.wh.journal = Some(Arc::new(j));
        if !dead.is_empty() {
            self.fail_members(&dead)?;
        }
        if !touched.is_empty() {
            self.vouch_torn_checksum_pages(&touched)?;
        }
        Ok(())
    }
}

/// The geometry the newest superblock records, aligned for direct I/O when `align` (O_DIRECT
/// or block checksums), and its scheme.
fn recorded_geometry(best: &Superblock, align: bool) -> Result<(Geometry, SchemeKind, Params)> {
    let (kind, params) = layout::from_text(&best.layout)?;
    let scheme = layout::build(kind, &params)?;
    let geo = Geometry::new_spread(
        scheme,
        best.chunk_bytes,
        best.data_bytes,
        &crate::spread::Cores,
    )?;
    let geo = if align {
        geo.with_io_align(DIRECT_ALIGN_BYTES)?
    } else {
        geo
    };
    Ok((geo, kind, params))
}

/// Zone popularity, policy state and D-Map: the newest valid record on any member, or a new
/// state when there is none; and how many members hold that record.
fn restored_ido(
    geo: &Geometry,
    members: &[Option<Arc<dyn Member>>],
    uuid: &[u8; 16],
) -> Result<(Ido, usize)> {
    let (capacity, per_cycle) = (
        geo.capacity_bytes(),
        geo.data_per_cycle() * geo.chunk_bytes(),
    );
    let records = ido_records(members);
    let holders = Ido::newest_record_holders(&records, uuid);
    let records: Vec<Vec<u8>> = records.into_iter().map(|(_, b)| b).collect();
    let ido = match Ido::restore(capacity, per_cycle, &records, uuid)? {
        Some(ido) => ido,
        None => Ido::new(capacity, per_cycle, DEFAULT_ZONE_BYTES)?,
    };
    Ok((ido, holders))
}

/// Where the newest superblock says the member's regions lie, once they are checked.
fn recorded_map(best: &Superblock) -> Result<MemberMap> {
    let map = MemberMap {
        data_offset_bytes: best.data_offset_bytes,
        data_bytes: best.data_bytes,
        checksums: Region::new(best.checksum_offset_bytes, best.checksum_len_bytes),
        journal: Region::new(best.journal_offset_bytes, best.journal_len_bytes),
    };
    map.check()
        .map_err(|e| PoolError::Usage(format!("damaged superblock: {e}")))?;
    Ok(map)
}

/// A pool without a journal: its write-intent bitmap, and the regions to resynchronise (those
/// the bitmap marks; all of them for a pool made before the bitmap that was in use when it
/// stopped). A journaled pool has neither.
fn recorded_intent(
    best: &Superblock,
    uuid: &[u8; 16],
    geo: &Geometry,
    members: &[Option<Arc<dyn Member>>],
) -> (Option<Arc<WriteIntent>>, BTreeSet<u64>) {
    let journaled = best.features & FEATURE_JOURNAL != 0;
    let intent = (!journaled).then(|| Arc::new(WriteIntent::new(*uuid, geo)));
    let dirty = match &intent {
        None => BTreeSet::new(),
        Some(w) => match w.read(members) {
            Some(found) => {
                w.adopt(&found);
                found.dirty
            }
            None if best.features & FEATURE_WRITE_INTENT == 0
                && best.state == ArrayStateTag::Active =>
            {
                w.all_regions()
            }
            None => BTreeSet::new(),
        },
    };
    (intent, dirty)
}

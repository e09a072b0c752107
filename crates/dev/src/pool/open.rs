//! Opening a pool from its descriptor or assembling it from member paths alone: the
//! superblocks read back into the array state.

use super::*;

/// The member's superblock: of its two copies ([`SUPERBLOCK_SLOTS`]), the valid one with the
/// newest generation (a copy naming another pool than the first valid one is ignored). Fails
/// with the first copy's error when neither is valid.
pub(super) fn read_superblock(m: &dyn Member) -> std::result::Result<Superblock, String> {
    let mut best: Option<Superblock> = None;
    let mut first_err: Option<String> = None;
    for (k, &off) in SUPERBLOCK_SLOTS.iter().enumerate() {
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        if let Err(e) = m.read_at(&mut b, off) {
            if k == 0 {
                return Err(e.to_string());
            }
            continue; // a member too small for the second copy (not a raidforge member)
        }
        match Superblock::decode(&b) {
            Ok(sb) => {
                if best
                    .as_ref()
                    .is_none_or(|x| sb.uuid == x.uuid && sb.generation > x.generation)
                {
                    best = Some(sb);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    best.ok_or_else(|| first_err.unwrap_or_default())
}

/// The generation in the first 48 bytes of a member's superblock when they name pool `uuid`
/// (`desc_uuid`, the descriptor's text form), slot `i` of `n`, whatever the rest holds: a
/// superblock torn by a crash while it was being rewritten (its CRC fails) still says whose
/// it is. `None` when those bytes do not agree.
pub(super) fn torn_generation(
    m: &dyn Member,
    desc_uuid: &[u8; 16],
    i: usize,
    n: usize,
) -> Option<u64> {
    let mut b = [0u8; SUPERBLOCK_HEAD_BYTES];
    m.read_at(&mut b, 0).ok()?;
    let h = SuperblockHead::peek(&b)?;
    (h.uuid == *desc_uuid && h.member_index as usize == i && h.member_count as usize == n)
        .then_some(h.generation)
}

impl Pool {
    /// Opens a pool from its descriptor, checking every member's superblock. The members stay
    /// locked against other raidforge processes until the pool is dropped.
    pub fn open(desc_path: &Path) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members(desc_path, desc, true)
    }

    /// [`Pool::open`] with every member wrapped by `wrap` once assembly has read the
    /// superblocks (before anything is written), and every replacement later.
    pub fn open_wrapped(desc_path: &Path, wrap: MemberWrap) -> Result<Pool> {
        let desc = Self::read_descriptor(desc_path)?;
        Self::from_members_wrapped(desc_path, desc, true, Some(wrap))
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

    /// The status of a pool without opening it for I/O: no lock taken, nothing written, so it
    /// works while another process (a rebuild, say) has the pool open; rebuild progress is then
    /// what that process last recorded (it does at least every second).
    pub fn peek_status(desc_path: &Path) -> Result<Status> {
        let desc = Self::read_descriptor(desc_path)?;
        let mut tries = 0;
        loop {
            match Self::from_members(desc_path, desc.clone(), false) {
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
        if paths.is_empty() {
            return Err(PoolError::Usage("no --member given".into()));
        }
        let mut found: Vec<(Superblock, PathBuf)> = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let m = FileMember::open(p, OpenOpts::default()).map_err(|e| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let sb = read_superblock(&m).map_err(|reason| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: format!("{reason} (leave it out to assemble the pool without it)"),
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
        let desc = Descriptor::new(&uuid, &paths, &emulate, false);
        let pool = Self::from_members(desc_path, desc, true)?;
        pool.save_descriptor()?;
        Ok(pool)
    }

    /// Opens the members a descriptor names and restores the array state from their
    /// superblocks. `lock`: lock the members and record what assembly found (a member missing);
    /// without it nothing is locked or written (a status peek).
    pub(super) fn from_members(desc_path: &Path, desc: Descriptor, lock: bool) -> Result<Pool> {
        Self::from_members_wrapped(desc_path, desc, lock, None)
    }

    pub(super) fn from_members_wrapped(
        desc_path: &Path,
        desc: Descriptor,
        lock: bool,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let uuid = unhex(&desc.uuid).ok_or_else(|| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("bad uuid '{}'", desc.uuid),
        })?;
        let n = desc.members.len();
        // What each listed member turned out to be. A member that cannot be used is only an
        // error when the pool still counts on it (it has not failed).
        enum Probe {
            Missing,
            Bad(PoolError),
            Good(Arc<dyn Member>, Superblock),
            /// The superblock fails its CRC but its first sector names this pool, this slot
            /// and a generation: torn by a crash while it was being rewritten.
            Torn(u64, PoolError),
        }
        let mut opened: Vec<Probe> = Vec::new();
        for (i, md) in desc.members.iter().enumerate() {
            let bad = |reason: String| {
                Probe::Bad(PoolError::Member {
                    index: i,
                    path: md.path.clone(),
                    reason,
                })
            };
            let m = match open_member(&md.path, &md.emulate, None, lock, desc.direct) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    opened.push(Probe::Missing);
                    continue;
                }
                Err(e) => {
                    opened.push(bad(e.to_string()));
                    continue;
                }
            };
            let sb = match read_superblock(&*m) {
                Ok(sb) => sb,
                Err(reason) if torn_generation(&*m, &uuid, i, n).is_some() => {
                    let g = torn_generation(&*m, &uuid, i, n).expect("checked");
                    let e = PoolError::Member {
                        index: i,
                        path: md.path.clone(),
                        reason: format!(
                            "{reason} (to run without it, assemble the pool from its other \
                             members)"
                        ),
                    };
                    opened.push(Probe::Torn(g, e));
                    continue;
                }
                Err(reason) => {
                    opened.push(bad(format!(
                        "{reason} (to run without it, assemble the pool from its other members)"
                    )));
                    continue;
                }
            };
            if sb.uuid != uuid {
                opened.push(bad(format!(
                    "belongs to pool {}, not {}: a foreign member",
                    hex(&sb.uuid),
                    desc.uuid
                )));
            } else if sb.member_index as usize != i || sb.member_count as usize != n {
                opened.push(bad(format!(
                    "is member {} of {}, but the descriptor lists it as {i} of {n}",
                    sb.member_index, sb.member_count
                )));
            } else {
                opened.push(Probe::Good(m, sb));
            }
        }
        // The newest superblock is authoritative.
        let best = opened
            .iter()
            .filter_map(|p| match p {
                Probe::Good(_, sb) => Some(sb.clone()),
                _ => None,
            })
            .max_by_key(|sb| sb.generation);
        let best = match best {
            Some(b) => b,
            None => {
                // Nothing usable: say why about the first member that is there at all.
                let why = opened.into_iter().find_map(|p| match p {
                    Probe::Bad(e) => Some(e),
                    _ => None,
                });
                return Err(why.unwrap_or_else(|| {
                    PoolError::Usage("no member of the pool could be opened".into())
                }));
            }
        };
        let (kind, params) = layout::from_text(&best.layout)?;
        let scheme = layout::build(kind, &params)?;
        let geo = Geometry::new(scheme, best.chunk_bytes, best.data_bytes)?;
        let has_checksums = best.features & FEATURE_CHECKSUMS != 0;
        let geo = if desc.direct || has_checksums {
            geo.with_io_align(DIRECT_ALIGN_BYTES)?
        } else {
            geo
        };
        let mut state = ArrayState::new(&geo);
        for e in &best.events {
            match *e {
                Event::Fail(d) => {
                    state.fail(&geo, d)?;
                }
                Event::Replace(d) => {
                    state.replace(&geo, d)?;
                }
            }
        }
        for (i, &(start, gen)) in best.runs.iter().enumerate() {
            let end = best.runs.get(i + 1).map_or(geo.cycles(), |r| r.0);
            for c in start..end.min(geo.cycles()) {
                state.mark_rebuilt(c, gen);
            }
        }
        let mut members = Vec::new();
        let mut events = best.events.clone();
        for (i, o) in opened.into_iter().enumerate() {
            let failed = state.failed().contains(&(i as Disk));
            // The newest record says this slot was replaced: a file there that is stale, or
            // holds no valid superblock, is the disk replaced away or a replacement whose
            // first superblock never became durable (a crash during `replace`, before the
            // descriptor named the new file; found by the fault harness). Its contents are not
            // current either way: assemble degraded without it (it is then replaced again),
            // as for a missing member, instead of refusing the pool.
            let replaced_slot = best.events.contains(&Event::Replace(i as u32));
            let stale = match &o {
                Probe::Good(_, sb) => sb.generation + 1 < best.generation,
                Probe::Torn(g, _) => g + 1 < best.generation,
                Probe::Bad(_) => true,
                Probe::Missing => false,
            };
            if !failed && replaced_slot && stale && state.failed().len() < geo.scheme().tolerance()
            {
                state.fail(&geo, i as Disk)?;
                events.push(Event::Fail(i as u32));
                members.push(None);
                continue;
            }
            match o {
                _ if failed => members.push(None),
                Probe::Bad(e) => return Err(e),
                // A superblock that fails its CRC is refused, even when its first sector
                // still names this pool and slot (a crash can tear it while it is rewritten;
                // a flipped byte looks the same): the user assembles without it. Only a
                // replaced slot's file is assembled as failed (above).
                Probe::Torn(_, e) => return Err(e),
                Probe::Good(m, sb) => {
                    // One generation behind and not failed in the newest record: the member
                    // only missed the newest superblock write (a crash while the superblocks
                    // were being rewritten; found by the fault-injection harness). Every
                    // persist flushes the data before writing any superblock, and a member
                    // failed or replaced since would be failed in the newest record or hold
                    // no superblock of this pool, so its data is as current as the others'.
                    let missed_last_write = sb.generation + 1 == best.generation;
                    if sb.generation != best.generation && !missed_last_write {
                        return Err(PoolError::Member {
                            index: i,
                            path: desc.members[i].path.clone(),
                            reason: format!(
                                "is stale (generation {} but the pool is at {}): it missed updates; \
                                 assemble the pool without it, then `raidforge replace` it",
                                sb.generation, best.generation
                            ),
                        });
                    }
                    members.push(Some(m));
                }
                Probe::Missing => {
                    // A member vanished without being failed: assemble degraded, recording it.
                    state.fail(&geo, i as Disk)?;
                    events.push(Event::Fail(i as u32));
                    members.push(None);
                }
            }
        }
        state.set_bpgl_capacity(if best.bpgl_capacity == 0 {
            BPGL_DEFAULT_CAPACITY
        } else {
            best.bpgl_capacity as usize
        });
        // The deferred-parity list: the newest valid record on any present member (a crash
        // with updates deferred leaves them listed there).
        let bpgl = newest_bpgl(&members, &uuid);
        let bpgl_seq = bpgl.as_ref().map_or(0, |r| r.sequence);
        // Zone popularity, policy state and D-Map: the newest valid record on any member.
        let ido = Arc::new(
            Ido::restore(
                geo.capacity_bytes(),
                geo.data_per_cycle() * geo.chunk_bytes(),
                &ido_records(&members),
                &uuid,
            )?
            .map_or_else(
                || {
                    Ido::new(
                        geo.capacity_bytes(),
                        geo.data_per_cycle() * geo.chunk_bytes(),
                        DEFAULT_ZONE_BYTES,
                    )
                },
                Ok,
            )?,
        );
        if let Some(r) = &bpgl {
            state.restore_bpgl(r);
        }
        let map = MemberMap {
            data_offset_bytes: best.data_offset_bytes,
            data_bytes: best.data_bytes,
            checksums: Region::new(best.checksum_offset_bytes, best.checksum_len_bytes),
            journal: Region::new(best.journal_offset_bytes, best.journal_len_bytes),
        };
        map.check()
            .map_err(|e| PoolError::Usage(format!("damaged superblock: {e}")))?;
        // Region pages with entries every copy of which a crash tore (vouched for below).
        let mut torn_checksum_pages: std::collections::BTreeSet<(u32, u64)> = Default::default();
        let checksums = if has_checksums {
            let copies = crate::csum::copies_for(geo.disks(), geo.scheme().tolerance());
            if map.checksums.bytes < crate::csum::region_bytes(best.data_bytes, copies) {
                return Err(PoolError::Usage(format!(
                    "the superblock's checksum region ({} bytes) is too small for {} bytes of \
                     data: damaged superblock",
                    map.checksums.bytes, best.data_bytes
                )));
            }
            let (c, torn) =
                Checksums::load(&members, map.checksums.offset, best.data_bytes, copies)
                    .map_err(|e| PoolError::Io(format!("reading the checksum regions: {e}")))?;
            torn_checksum_pages = torn;
            Some(Arc::new(c))
        } else {
            None
        };
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
            },
            map,
            members: MemberSet {
                handles: members,
                counters: (0..n).map(|_| Counters::default()).collect(),
                wrap: None,
            },
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: best.parity,
                seq: bpgl_seq,
                dirty: false,
                on_disk: bpgl.map(|r| r.stripes).unwrap_or_default(),
            },
            integrity: Integrity {
                checksums,
                lost_pending: Vec::new(),
            },
            wh: WriteHoleState {
                mode: if best.features & FEATURE_JOURNAL != 0 {
                    WriteHole::Journal
                } else {
                    WriteHole::None
                },
                journal: None,
            },
            ido,
        };
        pool.apply_wrap(wrap);
        // The write journal before anything else is written: replay what a crash may have
        // left half done (a status peek changes nothing, so it leaves it to the next open).
        if lock && pool.wh.mode == WriteHole::Journal {
            let sums = pool.integrity.checksums.clone();
            let members = pool.members.handles.clone();
            // Checksum pages the replayed records touched (see `vouch_torn_checksum_pages`).
            let mut touched: std::collections::BTreeSet<(u32, u64)> = Default::default();
            let mut holders_failed: Vec<u32> = Vec::new();
            let per_page = crate::csum::ENTRIES_PER_PAGE;
            let j = Journal::recover(
                pool.journal_geometry(),
                &pool.members.handles,
                |m, off, data| {
                    let b = crate::csum::BLOCK_BYTES;
                    let end = off + data.len() as u64;
                    for page in off / b / per_page..=(end.saturating_sub(1)) / b / per_page {
                        touched.insert((m, page));
                    }
                    // Replay rewrites whole blocks: their checksums follow.
                    match (&sums, members.get(m as usize)) {
                        (Some(c), Some(Some(_))) => {
                            c.record(m as usize, off, data);
                            let b = crate::csum::BLOCK_BYTES;
                            match c.write_pages(
                                m as usize,
                                &members,
                                off / b,
                                (off + data.len() as u64) / b,
                            ) {
                                // A copy on another member failed: that member is failed after
                                // the replay, not the one replayed to.
                                Err(e) if e.member != m as usize => {
                                    holders_failed.push(e.member as u32);
                                    Ok(())
                                }
                                r => r.map_err(std::io::Error::from),
                            }
                        }
                        _ => Ok(()),
                    }
                },
            )
            .map_err(|e| PoolError::Io(e.to_string()))?;
            // Members that failed during the replay (or its checkpoint) are failed now.
            let mut dead = j.take_failed_members();
            dead.extend(holders_failed);
            dead.sort_unstable();
            dead.dedup();
            pool.wh.journal = Some(Arc::new(j));
            if !dead.is_empty() {
                pool.fail_members(&dead)?;
            }
            touched.extend(torn_checksum_pages.iter().copied());
            if !touched.is_empty() {
                pool.vouch_torn_checksum_pages(&touched)?;
            }
        }
        // Without a journal replay (which vouches for them with its own pages, above).
        if lock && pool.wh.mode != WriteHole::Journal && !torn_checksum_pages.is_empty() {
            pool.vouch_torn_checksum_pages(&torn_checksum_pages)?;
        }
        if lock && pool.sb.events.len() != best.events.len() {
            pool.persist(ArrayStateTag::Degraded)?;
        }
        // Assembled without a member while updates were deferred: those first.
        if lock && !pool.state.failed().is_empty() && !pool.state.bpgl().is_empty() {
            pool.flush_bpgl(0)?;
        }
        Ok(pool)
    }
}

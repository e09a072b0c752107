//! Assembling and opening an MD-format pool: members found, the array adopted, the pool
//! built over it, and settled (members left out recorded, a dirty array resynchronised).

use super::adopt::{adopt, Adoption};
use super::geometry::{geo_chunk, md_geometry};
use super::member::MdMember;
use super::*;

use layout::md::MdLayout;
use raidcore::md::ROLE_FAULTY;

impl Pool {
    /// The MD path of [`Pool::assemble`]: adopts an array mdadm made from its members
    /// (recognised by their superblocks) and writes a descriptor for it. Refusals write
    /// nothing.
    pub(in crate::pool) fn assemble_md(
        desc_path: &Path,
        paths: &[PathBuf],
        emulate: Option<String>,
    ) -> Result<Pool> {
        let mut found = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let how = MemberOpen {
                emulate: emulate.as_deref(),
                create_bytes: None,
                lock: true,
                direct: false,
            };
            let raw = open_member(p, &how).map_err(|e| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let (sb, version) = read_md_superblock(&*raw).map_err(|reason| PoolError::Member {
                index: i,
                path: p.clone(),
                reason: format!(
                    "{reason}: not a member of an MD array (leave it out to assemble without it)"
                ),
            })?;
            found.push(MdFound {
                path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
                raw,
                sb,
                version,
            });
        }
        let a = adopt(found, None)?;
        let uuid = a.array.set_uuid;
        let mut paths: Vec<PathBuf> = a
            .slots
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_ref().map_or_else(
                    || PathBuf::from(format!("<missing member {i}>")),
                    |f| f.path.clone(),
                )
            })
            .collect();
        let spare_paths: Vec<PathBuf> = a.spares.iter().map(|f| f.path.clone()).collect();
        let mut desc = Descriptor::new(&uuid, &paths, &emulate, false);
        desc.metadata = Some(MD_METADATA.into());
        desc.md_spares = spare_paths;
        paths.clear();
        let mut pool = Self::md_pool(desc_path, desc, a, None)?;
        pool.settle_md()?;
        pool.save_descriptor()?;
        Ok(pool)
    }

    /// The MD path of `Pool::open` (and of a status peek): the members the descriptor lists,
    /// their superblocks read again.
    pub(in crate::pool) fn open_md(
        desc_path: &Path,
        desc: Descriptor,
        access: Access,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let uuid = unhex(&desc.uuid).ok_or_else(|| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("bad uuid '{}'", desc.uuid),
        })?;
        let mut found = Vec::new();
        let mut listed = Vec::new();
        let entries = desc
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| (Some(i), m.path.clone(), m.emulate.clone()))
            .chain(desc.md_spares.iter().map(|p| (None, p.clone(), None)));
        for (slot, path, emulate) in entries {
            let how = MemberOpen {
                emulate: emulate.as_deref(),
                create_bytes: None,
                lock: access != Access::Peek,
                direct: desc.direct,
            };
            let raw = match open_member(&path, &how) {
                Ok(m) => m,
                // A member that is not there: its slot is missing.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(PoolError::Member {
                        index: slot.unwrap_or(usize::MAX),
                        path,
                        reason: e.to_string(),
                    })
                }
            };
            let (sb, version) = match read_md_superblock(&*raw) {
                Ok(x) => x,
                Err(reason) => {
                    return Err(PoolError::Member {
                        index: slot.unwrap_or(usize::MAX),
                        path,
                        reason: format!(
                            "{reason} (to run without it, assemble the pool from its other members)"
                        ),
                    })
                }
            };
            if sb.set_uuid != uuid {
                return Err(PoolError::Member {
                    index: slot.unwrap_or(usize::MAX),
                    path,
                    reason: format!(
                        "belongs to MD array {}, not {}: a foreign member",
                        hex(&sb.set_uuid),
                        desc.uuid
                    ),
                });
            }
            listed.push(slot);
            found.push(MdFound {
                path,
                raw,
                sb,
                version,
            });
        }
        let a = adopt(found, Some(&listed))?;
        if a.slots.len() != desc.members.len() {
            return Err(PoolError::Descriptor {
                path: desc_path.to_path_buf(),
                reason: format!(
                    "lists {} members but the MD array has {} slots",
                    desc.members.len(),
                    a.slots.len()
                ),
            });
        }
        let mut pool = Self::md_pool(desc_path, desc, a, wrap)?;
        if access != Access::Peek {
            pool.settle_md()?;
        }
        Ok(pool)
    }

    /// The pool over an adopted MD array: geometry, array state (missing slots failed, a
    /// recovering member replaced with its rebuilt cycles marked), member views.
    pub(super) fn md_pool(
        desc_path: &Path,
        desc: Descriptor,
        a: Adoption,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let (geo, kind, params, cycle_rows, near_rows) = md_geometry(&a.geo)?;
        let (state, events) = adopted_state(&geo, &a, near_rows, cycle_rows)?;
        let rows = geo.cycles() * cycle_rows;
        let (handles, slots) = member_views(a.slots, a.geo, cycle_rows, rows);
        // The dev numbers of missing slots are recorded faulty.
        let mut array = a.array;
        for (s, slot) in slots.iter().enumerate() {
            if slot.is_none() {
                for r in array.dev_roles.iter_mut() {
                    if *r == s as u16 {
                        *r = ROLE_FAULTY;
                    }
                }
            }
        }
        let sb = SuperblockState {
            uuid: array.set_uuid,
            kind,
            params,
            events,
            generation: array.events,
            created_unix_secs: array.ctime_secs(),
            rebuilt_unrecorded: Default::default(),
            moved_unrecorded: false,
        };
        let md = MdFormat {
            version: a.version,
            geo: a.geo,
            array,
            slots,
            spares: a
                .spares
                .into_iter()
                .map(|f| Spare {
                    sb: f.sb,
                    raw: f.raw,
                })
                .collect(),
            dirty: a.resync_from.is_some(),
            resync_from: a.resync_from,
            cycle_rows,
            near_rows,
            notes: a.notes,
        };
        let file = DescriptorFile {
            path: desc_path.to_path_buf(),
            desc,
        };
        let mut pool = Self::over_md(file, geo, state, sb, handles, md)?;
        pool.apply_wrap(wrap);
        Ok(pool)
    }

    /// The pool of an MD-format array, from its parts: none of raidforge's own metadata (no
    /// checksums, journal, write-intent bitmap, lazy parity or IDO records).
    fn over_md(
        file: DescriptorFile,
        geo: Geometry,
        state: ArrayState,
        sb: SuperblockState,
        handles: Vec<Option<Arc<dyn Member>>>,
        md: MdFormat,
    ) -> Result<Pool> {
        let n = handles.len();
        let capacity = geo.capacity_bytes();
        let per_cycle = geo.data_per_cycle() * geo.chunk_bytes();
        let ido = Ido::new(capacity, per_cycle, DEFAULT_ZONE_BYTES.max(per_cycle))?;
        // IDO keeps its state in raidforge's metadata: none on an MD pool.
        ido.disable_records();
        Ok(Pool {
            map: MemberMap {
                data_offset_bytes: MD_VIRTUAL_BASE,
                data_bytes: geo.cycles() * md.cycle_rows * geo_chunk(&md),
                checksums: Region::default(),
                journal: Region::default(),
            },
            geo,
            state,
            file,
            sb,
            members: MemberSet {
                handles,
                counters: (0..n).map(|_| Counters::default()).collect(),
                wrap: None,
                // MD's members left out are told by `md_notes`.
                left_out: Vec::new(),
            },
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: ParityPolicy::Eager,
                seq: 0,
                dirty: false,
                on_disk: Vec::new(),
                commit: Default::default(),
            },
            integrity: Integrity {
                checksums: None,
                lost_pending: Vec::new(),
                rewriting_lost: Vec::new(),
                resync: None,
            },
            wh: WriteHoleState {
                mode: WriteHole::None,
                journal: None,
                // MD's own bitmap is refused at adoption and never created; raidforge's lives
                // in its own metadata, which an MD member does not have.
                intent: None,
            },
            ido: Arc::new(ido),
            md: Some(Box::new(md)),
        })
    }

    /// What adoption does before the pool takes requests: records the members it left out
    /// (faulty in the superblocks), and resynchronises the parity of an array that was not
    /// shut down cleanly.
    fn settle_md(&mut self) -> Result<()> {
        let left_out = !self.state.failed().is_empty();
        if let Some(from) = self.md.as_mut().and_then(|m| m.resync_from.take()) {
            self.md_resync(from)?;
        } else if left_out {
            let tag = self.tag();
            self.persist(tag)?;
        }
        Ok(())
    }

    /// MD's resync: every stripe from array sector `from` on gets its parity recomputed from
    /// its data (mirrors: the first copy over the others), then the superblocks say clean.
    fn md_resync(&mut self, from: u64) -> Result<()> {
        let per_cycle = self.geo.data_per_cycle() * self.geo.chunk_bytes();
        let first = (from.saturating_mul(512) / per_cycle).min(self.geo.cycles());
        let opts = ScrubOpts {
            rewrite_parity: true,
            ..ScrubOpts::default()
        };
        let mut r = ScrubReport::default();
        for c in first..self.geo.cycles() {
            self.scrub_cycle(c, &opts, &mut r)?;
        }
        let rewritten = r.parity_mismatches.iter().filter(|m| m.repaired).count();
        if let Some(md) = self.md.as_mut() {
            md.notes.push(format!(
                "the array was not clean: parity resynchronised from array sector {from} \
                 ({rewritten} stripes rewritten)"
            ));
        }
        self.md_mark_clean();
        let tag = self.tag();
        self.persist(tag)
    }
}

/// The array state of an adopted array, and the events that made it: missing slots failed, a
/// recovering member replaced with the cycles below its recovery offset rebuilt. Refused when
/// too few members are left to run.
fn adopted_state(
    geo: &Geometry,
    a: &Adoption,
    near_rows: u64,
    cycle_rows: u64,
) -> Result<(ArrayState, Vec<Event>)> {
    let n = a.slots.len();
    let mut state = ArrayState::new(geo);
    let mut events = Vec::new();
    for s in 0..n {
        if a.slots[s].is_none() {
            state.fail(geo, s as Disk)?;
            events.push(Event::Fail(s as u32));
        }
    }
    for &(s, recovered) in &a.recovering {
        state.fail(geo, s as Disk)?;
        let to = state.replace(geo, s as Disk)?;
        events.push(Event::Fail(s as u32));
        events.push(Event::Replace(s as u32));
        // Cycles wholly below the recovered sectors are rebuilt (for the far layout, every
        // section of them).
        let rows = recovered / a.geo.chunk_sectors;
        let k = match a.geo.layout {
            MdLayout::Raid10(r) if r.far > 1 && !r.offset => {
                let last = (r.far as u64 - 1) * a.geo.far_stride_rows();
                rows.saturating_sub(last) / near_rows
            }
            _ => rows / cycle_rows,
        };
        for c in 0..k.min(geo.cycles()) {
            state.mark_rebuilt(c, to);
        }
    }
    if state.data_lost(geo) {
        let present: Vec<usize> = (0..n).filter(|&s| a.slots[s].is_some()).collect();
        return Err(PoolError::Usage(format!(
            "MD array {}: too few members to run: slots {present:?} of {n} are present and \
             current, and raid{} over {n} needs more; nothing was written",
            hex(&a.array.set_uuid),
            a.array.level
        )));
    }
    Ok((state, events))
}

/// Per slot, the pool's handle of its member and the slot's superblock state (`None` for a
/// missing slot).
type SlotViews = (Vec<Option<Arc<dyn Member>>>, Vec<Option<Slot>>);

/// Each slot's member view (the pool's handle) and its superblock state, `None` for a
/// missing slot.
fn member_views(
    found: Vec<Option<MdFound>>,
    geo: MdGeometry,
    cycle_rows: u64,
    rows: u64,
) -> SlotViews {
    found
        .into_iter()
        .map(|f| match f {
            Some(f) => {
                let view: Arc<dyn Member> = Arc::new(MdMember::new(
                    f.raw.clone(),
                    MD_VIRTUAL_BASE,
                    f.sb.data_offset * 512,
                    geo,
                    cycle_rows,
                    rows,
                ));
                let slot = Slot {
                    sb: f.sb,
                    raw: Some(f.raw),
                };
                (Some(view), Some(slot))
            }
            None => (None, None),
        })
        .unzip()
}

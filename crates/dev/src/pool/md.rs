//! Linux MD's v1.x superblock as a pool's on-disk format (issue 23).
//!
//! A pool records its state on its members in one of two formats. raidforge's own
//! (`raidcore::superblock`, `persist.rs`) is the default and carries what MD cannot: the write
//! journal, block checksums, lazy parity, IDO, declustered layouts. MD's v1.x superblock
//! (`raidcore::md`) is the other, behind the same seams: [`Pool::open`] / [`Pool::assemble`]
//! read it ([`Pool::assemble`] recognises MD members by themselves), [`Pool::create`] writes it
//! under `--metadata md`, and `Pool::persist` records the pool's state in it. The rest of the
//! pool (planning, I/O, fail, replace, rebuild, verify, scrub, serve) does not know which
//! format it runs on: its members are [`MdMember`] views that put the pool's data area where
//! MD has it, and the pool's own metadata never reaches an MD member.
//!
//! How the pool's state maps onto MD's (MD's rules, as md.c and mdadm keep them):
//!
//! - **Roles**: slot `s` is held by the member whose dev number has role `s`. A member the pool
//!   failed keeps its role slot marked faulty (0xfffe) in the other members' superblocks, and its
//!   own superblock is not written again (MD cannot write a failed device), so its event count
//!   falls behind. A replacement gets the first free dev number from `raid_disks` up (md.c's
//!   `bind_rdev_to_array`); the replaced member's dev number becomes unused (0xffff), as after
//!   `mdadm --remove`.
//! - **Events**: every superblock update bumps the count, the same on every member written.
//!   mdadm assembles members whose count is at most one behind the newest; older ones are left
//!   out (here too, at adoption).
//! - **Clean / dirty**: `resync_offset` is all ones when clean. Before the first write after
//!   the superblocks said clean, they are rewritten dirty (`resync_offset` 0); closing the pool
//!   records it clean again, after every member was flushed. A pool that stops without closing
//!   stays dirty, and the kernel resyncs it; an adopted dirty array has its parity
//!   resynchronised from its `resync_offset` before anything else (a dirty array that is also
//!   degraded is refused, as the kernel refuses to start one without `--force`).
//! - **Recovery**: a replacement not yet rebuilt carries `FEATURE_RECOVERY_OFFSET` and the
//!   member sectors already rebuilt (the cycles rebuilt from the start on, as member rows), so
//!   that the kernel resumes where raidforge stopped, and raidforge resumes from MD's recovery
//!   offset when it adopts an array the kernel was rebuilding.
//!
//! Refused, writing nothing (each names the feature): reshape in progress, write journal
//! device, PPL, clustered arrays, bad block log entries, an internal write-intent bitmap, a
//! replacement (`mdadm --replace`) in progress, layouts `layout::md` refuses, members of
//! different arrays, and arrays with too few members left.

use super::create::{now_unix, random_uuid, zeroed_members, CreatePlan};
use super::md_member::MdMember;
use super::*;

use layout::md::{MdGeometry, MdLayout};
use raidcore::md::{
    MdRole, MdSuperblock, MdVersion, FEATURE_BAD_BLOCKS, FEATURE_BITMAP_OFFSET, FEATURE_CLUSTERED,
    FEATURE_JOURNAL, FEATURE_MULTIPLE_PPLS, FEATURE_NEW_OFFSET, FEATURE_PPL,
    FEATURE_RECOVERY_BITMAP, FEATURE_RECOVERY_OFFSET, FEATURE_REPLACEMENT, FEATURE_RESHAPE_ACTIVE,
    FEATURE_RESHAPE_BACKWARDS, MD_SB_BLOCK_BYTES, RESYNC_CLEAN, ROLE_FAULTY, ROLE_SPARE,
};

/// Pool offset of an MD member's data area: where raidforge's own pools start theirs, so that
/// every access below it (raidforge's metadata) reaches the member view and is refused there.
pub(crate) const MD_VIRTUAL_BASE: u64 = DEFAULT_DATA_OFFSET_BYTES;

/// The descriptor's `metadata` for an MD-format pool.
pub(crate) const MD_METADATA: &str = "md";

/// Features raidforge refuses, each with what to do about it.
const REFUSED_FEATURES: [(u32, &str, &str); 10] = [
    (
        FEATURE_RESHAPE_ACTIVE,
        "a reshape in progress",
        "let the kernel finish it (mdadm --assemble) first",
    ),
    (
        FEATURE_RESHAPE_BACKWARDS,
        "a reshape in progress",
        "let the kernel finish it (mdadm --assemble) first",
    ),
    (
        FEATURE_NEW_OFFSET,
        "a reshape in progress (new data offset)",
        "let the kernel finish it (mdadm --assemble) first",
    ),
    (
        FEATURE_JOURNAL,
        "a write journal device",
        "raidforge's own format has a write journal (--write-hole journal)",
    ),
    (
        FEATURE_PPL,
        "a partial parity log (PPL)",
        "switch it off with mdadm --grow --consistency-policy=resync first",
    ),
    (
        FEATURE_MULTIPLE_PPLS,
        "a partial parity log (PPL)",
        "switch it off with mdadm --grow --consistency-policy=resync first",
    ),
    (
        FEATURE_CLUSTERED,
        "a clustered array (md-cluster)",
        "raidforge runs on one host",
    ),
    (
        FEATURE_BAD_BLOCKS,
        "bad block log entries",
        "replace the member with recorded bad blocks using mdadm first",
    ),
    (
        FEATURE_BITMAP_OFFSET,
        "an internal write-intent bitmap",
        "remove it with mdadm --grow --bitmap=none first",
    ),
    (
        FEATURE_REPLACEMENT,
        "a member replacement in progress (mdadm --replace)",
        "let the kernel finish it first",
    ),
];

/// One MD member found at a path: its raw handle, superblock and version.
pub(crate) struct MdFound {
    pub path: PathBuf,
    pub raw: Arc<dyn Member>,
    pub sb: MdSuperblock,
    pub version: MdVersion,
}

/// The MD superblock of a member (v1.2, v1.1 or v1.0, whichever is there and where its version
/// puts it), or why there is none. Two valid superblocks of different versions are refused as
/// ambiguous.
pub(crate) fn read_md_superblock(
    m: &dyn Member,
) -> std::result::Result<(MdSuperblock, MdVersion), String> {
    let dev_sectors = m.size_bytes() / 512;
    let mut found: Vec<(MdSuperblock, MdVersion)> = Vec::new();
    let mut why: Option<String> = None;
    for v in MdVersion::ALL {
        let Some(so) = v.super_offset(dev_sectors) else {
            continue;
        };
        let mut b = vec![0u8; MD_SB_BLOCK_BYTES];
        if so * 512 + MD_SB_BLOCK_BYTES as u64 > m.size_bytes() {
            continue;
        }
        if let Err(e) = m.read_at(&mut b, so * 512) {
            return Err(e.to_string());
        }
        match MdSuperblock::decode(&b) {
            Ok(sb) => match sb.check_placement(dev_sectors) {
                Ok(got) if got == v => found.push((sb, v)),
                Ok(_) => {}
                Err(e) => {
                    why.get_or_insert(format!("v{} superblock: {e}", v.name()));
                }
            },
            Err(raidcore::md::MdSuperblockError::NoMagic { .. }) => {}
            Err(e) => {
                why.get_or_insert(format!("v{} superblock: {e}", v.name()));
            }
        }
    }
    match found.len() {
        1 => Ok(found.pop().expect("one")),
        0 => Err(why.unwrap_or_else(|| "no Linux MD superblock (v1.0, v1.1 or v1.2)".into())),
        _ => Err(format!(
            "holds MD superblocks of versions {} and {} (of arrays {} and {}): ambiguous; wipe \
             the stale one with mdadm --zero-superblock --metadata=...",
            found[0].1.name(),
            found[1].1.name(),
            hex(&found[0].0.set_uuid),
            hex(&found[1].0.set_uuid)
        )),
    }
}

/// True when `p` holds a Linux MD v1.x superblock.
pub(crate) fn is_md_member(p: &Path) -> bool {
    FileMember::open(p, OpenOpts::default())
        .map(|m| read_md_superblock(&m).is_ok())
        .unwrap_or(false)
}

/// The member in one slot of an MD-format pool.
pub(crate) struct Slot {
    /// The member's superblock as last read or written (its own fields: dev number, device
    /// UUID, data offset and size, superblock offset, bad block log).
    sb: MdSuperblock,
    /// The member's raw handle, for superblock writes (`None` once failed).
    raw: Option<Arc<dyn Member>>,
}

/// A spare: its superblock is kept up to date, its space never used.
pub(crate) struct Spare {
    sb: MdSuperblock,
    raw: Arc<dyn Member>,
}

/// An MD-format pool's superblock state.
pub(crate) struct MdFormat {
    version: MdVersion,
    geo: MdGeometry,
    /// Array-wide fields, as the next superblocks will say them (events, roles, ...).
    array: MdSuperblock,
    /// Per slot, the member holding it (`None`: none since adoption).
    slots: Vec<Option<Slot>>,
    spares: Vec<Spare>,
    /// Writes may have run since the superblocks last said clean.
    dirty: bool,
    /// An adopted array not clean: its resync starts here (array sectors).
    resync_from: Option<u64>,
    /// Rows of one cycle of the pool's layout, and of the near layout within it.
    cycle_rows: u64,
    near_rows: u64,
    /// What adoption did that the user should know (members left out, a resync).
    notes: Vec<String>,
}

impl MdFormat {
    /// "md 1.2 raid5 left-symmetric" and such, for status.
    pub(crate) fn describe(&self) -> String {
        format!(
            "md {} raid{}{}",
            self.version.name(),
            self.array.level,
            self.geo
                .layout
                .name()
                .map(|l| format!(" {l}"))
                .unwrap_or_default()
        )
    }

    /// The member sector where slot `i`'s data starts.
    pub(crate) fn data_offset_bytes(&self, i: usize) -> Option<u64> {
        self.slots[i].as_ref().map(|s| s.sb.data_offset * 512)
    }
}

/// Refuses what raidforge does not implement, naming it; `who` says which member.
fn refuse_features(sb: &MdSuperblock, who: &str) -> Result<()> {
    for (bit, what, todo) in REFUSED_FEATURES {
        if sb.feature_map & bit != 0 {
            return Err(PoolError::Usage(format!(
                "{who}: the MD array has {what}, which raidforge does not implement; nothing \
                 was written ({todo})"
            )));
        }
    }
    if sb.feature_map & FEATURE_RECOVERY_BITMAP != 0 {
        return Err(PoolError::Usage(format!(
            "{who}: the MD array is recovering under its write-intent bitmap, which raidforge \
             does not implement; nothing was written (let the kernel finish it first)"
        )));
    }
    Ok(())
}

/// What adoption makes of the members found.
struct Adoption {
    version: MdVersion,
    array: MdSuperblock,
    geo: MdGeometry,
    /// Per slot, the member holding it.
    slots: Vec<Option<MdFound>>,
    spares: Vec<MdFound>,
    /// Slot recovering and the member sectors already recovered.
    recovering: Vec<(usize, u64)>,
    /// Where a resync must start (array sectors), for an array not clean.
    resync_from: Option<u64>,
    notes: Vec<String>,
}

/// Reads the state of an MD array from its members, the way mdadm and the kernel do, and
/// refuses what raidforge cannot run. `listed`: when opening from a descriptor, the slot each
/// member must hold. Writes nothing.
fn adopt(found: Vec<MdFound>, listed: Option<&[Option<usize>]>) -> Result<Adoption> {
    let Some(first) = found.first() else {
        return Err(PoolError::Usage(
            "no MD member given (or none could be opened)".into(),
        ));
    };
    let uuid = first.sb.set_uuid;
    for f in &found {
        if f.sb.set_uuid != uuid {
            return Err(PoolError::Usage(format!(
                "{} belongs to MD array {} while {} belongs to {}: members of different \
                 arrays are mixed; nothing was written",
                f.path.display(),
                hex(&f.sb.set_uuid),
                first.path.display(),
                hex(&uuid)
            )));
        }
        if f.version != first.version {
            return Err(PoolError::Usage(format!(
                "{} has a v{} superblock but {} a v{}: not one array; nothing was written",
                f.path.display(),
                f.version.name(),
                first.path.display(),
                first.version.name()
            )));
        }
        refuse_features(&f.sb, &f.path.display().to_string())?;
    }
    let freshest = found
        .iter()
        .max_by_key(|f| f.sb.events)
        .expect("not empty")
        .sb
        .clone();
    let n = freshest.raid_disks as usize;
    let layout = MdLayout::from_md(freshest.level, freshest.layout, n).map_err(|e| {
        PoolError::Usage(format!("MD array {}: {e}; nothing was written", hex(&uuid)))
    })?;
    let mut notes = Vec::new();
    let mut slots: Vec<Option<MdFound>> = (0..n).map(|_| None).collect();
    let mut spares = Vec::new();
    let mut recovering = Vec::new();
    for (k, f) in found.into_iter().enumerate() {
        let who = f.path.display().to_string();
        // mdadm assembles members at most one event behind the newest ("non-fresh" ones are
        // left out).
        if f.sb.events + 1 < freshest.events {
            notes.push(format!(
                "{who} is stale (events {} while the array is at {}): left out, as mdadm does",
                f.sb.events, freshest.events
            ));
            continue;
        }
        match freshest.role_of(f.sb.dev_number) {
            MdRole::Active(s) if (s as usize) < n => {
                let s = s as usize;
                if let Some(l) = listed {
                    if l[k] != Some(s) {
                        return Err(PoolError::Member {
                            index: k,
                            path: f.path.clone(),
                            reason: format!(
                                "holds slot {s} of the MD array, but the descriptor lists it \
                                 as {}: assemble the pool again from its members",
                                l[k].map_or("a spare".into(), |x| format!("slot {x}"))
                            ),
                        });
                    }
                }
                if let Some(prev) = &slots[s] {
                    return Err(PoolError::Usage(format!(
                        "{} and {who} both hold slot {s} of the MD array; nothing was written",
                        prev.path.display()
                    )));
                }
                if f.sb.feature_map & FEATURE_RECOVERY_OFFSET != 0 {
                    recovering.push((s, f.sb.recovery_offset));
                }
                slots[s] = Some(f);
            }
            MdRole::Spare => spares.push(f),
            MdRole::Faulty => notes.push(format!(
                "{who} is marked faulty in the array's newest superblock: left out"
            )),
            MdRole::Journal => {
                return Err(PoolError::Usage(format!(
                    "{who} is the MD array's write journal device, which raidforge does not \
                     implement; nothing was written"
                )))
            }
            r => {
                return Err(PoolError::Usage(format!(
                    "{who}: role {:#06x} in an array of {n} slots is not one MD defines; \
                     nothing was written",
                    r.raw()
                )))
            }
        }
    }
    let chunk_sectors = match layout {
        MdLayout::Raid1 => {
            // RAID1 has no chunk: the pool's unit is the largest power of two up to 64 KiB
            // that divides the member size.
            let mut c = 128u64;
            while c > 1 && !freshest.size.is_multiple_of(c) {
                c /= 2;
            }
            c
        }
        _ => u64::from(freshest.chunk_sectors),
    };
    if chunk_sectors == 0 {
        return Err(PoolError::Usage(format!(
            "MD array {}: chunk size 0 for raid{}; nothing was written",
            hex(&uuid),
            freshest.level
        )));
    }
    let dev_sectors = match layout {
        // RAID0 leaves `size` 0 and uses every member's data size, rounded to the chunk; a
        // RAID0 over members of different sizes has several zones, which raidforge does not
        // implement.
        MdLayout::Raid0 => {
            let sizes: BTreeSet<u64> = slots
                .iter()
                .flatten()
                .map(|f| f.sb.data_size / chunk_sectors * chunk_sectors)
                .collect();
            if sizes.len() > 1 {
                return Err(PoolError::Usage(format!(
                    "MD array {} is a RAID0 over members of different sizes ({sizes:?} \
                     sectors): several zones, which raidforge does not implement; nothing was \
                     written",
                    hex(&uuid)
                )));
            }
            sizes.into_iter().next().unwrap_or(0)
        }
        _ => freshest.size,
    };
    for f in slots.iter().flatten() {
        if f.sb.data_size < dev_sectors {
            return Err(PoolError::Usage(format!(
                "{}: {} data sectors, but the array uses {dev_sectors} per member; nothing was \
                 written",
                f.path.display(),
                f.sb.data_size
            )));
        }
    }
    let geo = MdGeometry {
        layout,
        raid_disks: n,
        chunk_sectors,
        dev_sectors,
    };
    let missing: Vec<usize> = (0..n).filter(|&s| slots[s].is_none()).collect();
    let resync_from = (!freshest.is_clean()).then_some(freshest.resync_offset);
    if resync_from.is_some() && !missing.is_empty() {
        return Err(PoolError::Usage(format!(
            "MD array {} was not shut down cleanly and is missing slots {missing:?}: its \
             parity cannot be trusted to rebuild them (the kernel refuses to start such an \
             array without --force, and raidforge does not start it even with --force: let \
             mdadm --assemble --force start it first); nothing was written",
            hex(&uuid)
        )));
    }
    Ok(Adoption {
        version: first_version(&slots, &spares),
        array: freshest,
        geo,
        slots,
        spares,
        recovering,
        resync_from,
        notes,
    })
}

fn first_version(slots: &[Option<MdFound>], spares: &[MdFound]) -> MdVersion {
    slots
        .iter()
        .flatten()
        .chain(spares)
        .map(|f| f.version)
        .next()
        .unwrap_or(MdVersion::V1_2)
}

/// MD's layout of a classic scheme with these parameters.
fn md_layout_of(kind: SchemeKind, params: &Params, n: usize) -> Result<MdLayout> {
    use layout::md::{Parity, Raid10};
    let l = params.md_layout.as_deref();
    Ok(match kind {
        SchemeKind::Raid0 => MdLayout::Raid0,
        SchemeKind::Raid1 => MdLayout::Raid1,
        SchemeKind::Raid4 => MdLayout::Raid4,
        SchemeKind::Raid5 => {
            MdLayout::Raid5(l.map_or(Ok(Parity::LeftSymmetric), |l| Parity::parse(5, l))?)
        }
        SchemeKind::Raid6 => {
            MdLayout::Raid6(l.map_or(Ok(Parity::LeftSymmetric), |l| Parity::parse(6, l))?)
        }
        SchemeKind::Raid10 => MdLayout::Raid10(Raid10::parse(l.unwrap_or("n2"), n)?),
        other => {
            return Err(PoolError::Usage(format!(
                "--scheme {} with --metadata md: Linux MD has raid0, raid1, raid4, raid5, raid6 \
                 and raid10 only",
                other.name()
            )))
        }
    })
}

/// The raidforge scheme of an MD layout.
fn scheme_of(layout: MdLayout, n: usize) -> Result<(SchemeKind, Params)> {
    let kind = match layout {
        MdLayout::Raid0 => SchemeKind::Raid0,
        MdLayout::Raid1 => SchemeKind::Raid1,
        MdLayout::Raid4 => SchemeKind::Raid4,
        MdLayout::Raid5(_) => SchemeKind::Raid5,
        MdLayout::Raid6(_) => SchemeKind::Raid6,
        MdLayout::Raid10(_) => SchemeKind::Raid10,
    };
    let params = Params {
        disks: Some(n),
        md_layout: layout.name(),
        ..Params::default()
    };
    Ok((kind, params))
}

/// The pool's geometry over an MD array: its cycles back to back over the rows MD uses (the
/// last one cut short at MD's array size), and the rows of a cycle and of its near layout.
fn md_geometry(geo: &MdGeometry) -> Result<(Geometry, SchemeKind, Params, u64, u64)> {
    let (kind, params) = scheme_of(geo.layout, geo.raid_disks)?;
    let scheme = layout::build(kind, &params)?;
    let cycle_rows = scheme.cycle().rows;
    let (near_rows, cycles) = match geo.layout {
        MdLayout::Raid10(r) if r.far > 1 && !r.offset => {
            let nr = cycle_rows / r.far as u64;
            (nr, geo.far_stride_rows().div_ceil(nr))
        }
        _ => (cycle_rows, geo.used_rows().div_ceil(cycle_rows)),
    };
    if cycles == 0 {
        return Err(PoolError::Usage(format!(
            "the MD array holds no whole chunk ({} sectors per member)",
            geo.dev_sectors
        )));
    }
    let chunk = geo.chunk_sectors * 512;
    let g = Geometry::new(scheme, chunk, cycles * cycle_rows * chunk)?
        .with_capacity(geo.array_sectors() * 512)?;
    assert_eq!(
        g.stride_rows(),
        cycle_rows,
        "MD layouts rebuild in place: no room past the healthy rows"
    );
    Ok((g, kind, params, cycle_rows, near_rows))
}

/// Member rows of slot `s` that hold current data from the start: the cycles from 0 on in
/// which its unit is available, as member rows.
fn valid_rows(geo: &Geometry, state: &ArrayState, s: Disk, md: &MdFormat) -> Option<u64> {
    let k = (0..geo.cycles())
        .take_while(|&c| state.member_available(s, state.cycle_generation(c)))
        .count() as u64;
    if k == geo.cycles() {
        return None; // in sync
    }
    Some((k * md.near_rows).min(md.geo.used_rows()))
}

impl Pool {
    /// The MD path of [`Pool::assemble`]: adopts an array mdadm made from its members
    /// (recognised by their superblocks) and writes a descriptor for it. Refusals write
    /// nothing.
    pub(super) fn assemble_md(
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
    pub(super) fn open_md(
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
    fn md_pool(
        desc_path: &Path,
        desc: Descriptor,
        a: Adoption,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let (geo, kind, params, cycle_rows, near_rows) = md_geometry(&a.geo)?;
        let n = a.slots.len();
        let mut state = ArrayState::new(&geo);
        let mut events = Vec::new();
        for s in 0..n {
            if a.slots[s].is_none() {
                state.fail(&geo, s as Disk)?;
                events.push(Event::Fail(s as u32));
            }
        }
        for &(s, recovered) in &a.recovering {
            state.fail(&geo, s as Disk)?;
            let to = state.replace(&geo, s as Disk)?;
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
        if state.data_lost(&geo) {
            let present: Vec<usize> = (0..n).filter(|&s| a.slots[s].is_some()).collect();
            return Err(PoolError::Usage(format!(
                "MD array {}: too few members to run: slots {present:?} of {n} are present \
                 and current, and raid{} over {n} needs more; nothing was written",
                hex(&a.array.set_uuid),
                a.array.level
            )));
        }
        let mut handles: Vec<Option<Arc<dyn Member>>> = Vec::new();
        let mut slots = Vec::new();
        let rows = geo.cycles() * cycle_rows;
        for f in a.slots {
            match f {
                Some(f) => {
                    let view: Arc<dyn Member> = Arc::new(MdMember::new(
                        f.raw.clone(),
                        MD_VIRTUAL_BASE,
                        f.sb.data_offset * 512,
                        a.geo,
                        cycle_rows,
                        rows,
                    ));
                    handles.push(Some(view));
                    slots.push(Some(Slot {
                        sb: f.sb,
                        raw: Some(f.raw),
                    }));
                }
                None => {
                    handles.push(None);
                    slots.push(None);
                }
            }
        }
        // The dev numbers of missing slots are recorded faulty.
        let mut array = a.array;
        for s in 0..n {
            if slots[s].is_none() {
                for r in array.dev_roles.iter_mut() {
                    if *r == s as u16 {
                        *r = ROLE_FAULTY;
                    }
                }
            }
        }
        let capacity = geo.capacity_bytes();
        let per_cycle = geo.data_per_cycle() * geo.chunk_bytes();
        let ido = Ido::new(capacity, per_cycle, DEFAULT_ZONE_BYTES.max(per_cycle))?;
        // IDO keeps its state in raidforge's metadata: none on an MD pool.
        ido.disable_records();
        let created = array.ctime_secs();
        let generation = array.events;
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
        let mut pool = Pool {
            geo,
            state,
            file: DescriptorFile {
                path: desc_path.to_path_buf(),
                desc,
            },
            sb: SuperblockState {
                uuid: md.array.set_uuid,
                kind,
                params,
                events,
                generation,
                created_unix_secs: created,
                rebuilt_unrecorded: Default::default(),
            },
            map: MemberMap {
                data_offset_bytes: MD_VIRTUAL_BASE,
                data_bytes: rows * geo_chunk(&md),
                checksums: Region::default(),
                journal: Region::default(),
            },
            members: MemberSet {
                handles,
                counters: (0..n).map(|_| Counters::default()).collect(),
                wrap: None,
            },
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: ParityPolicy::Eager,
                seq: 0,
                dirty: false,
                on_disk: Vec::new(),
            },
            integrity: Integrity {
                checksums: None,
                lost_pending: Vec::new(),
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
        };
        pool.apply_wrap(wrap);
        Ok(pool)
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

    /// What adoption found worth saying (members left out, a resync), for the command to print.
    pub fn md_notes(&self) -> Vec<String> {
        self.md
            .as_ref()
            .map(|m| m.notes.clone())
            .unwrap_or_default()
    }

    /// The on-disk format, for status: `None` for raidforge's own.
    pub(crate) fn metadata_description(&self) -> Option<String> {
        self.md.as_ref().map(|m| m.describe())
    }

    /// Before a write: the superblocks say dirty first (MD's rule), once until the pool is
    /// closed.
    pub(crate) fn md_before_write(&mut self) -> Result<()> {
        if self.md.as_ref().is_some_and(|m| !m.dirty) {
            self.persist(ArrayStateTag::Active)?;
        }
        Ok(())
    }

    /// The pool is closing: every write is over (flushed by the persist that follows).
    pub(crate) fn md_mark_clean(&mut self) {
        if let Some(m) = self.md.as_mut() {
            m.dirty = false;
        }
    }

    /// `persist` for an MD-format pool: flush, one superblock per present member (and spare)
    /// with the events bumped, roles, clean/dirty and recovery offsets as MD keeps them,
    /// flush, the descriptor.
    pub(super) fn persist_md(&mut self, tag: ArrayStateTag) -> Result<()> {
        if tag == ArrayStateTag::Active {
            if let Some(m) = self.md.as_mut() {
                m.dirty = true;
            }
        }
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        let now = now_unix();
        let mut writes: Vec<(usize, Arc<dyn Member>, MdSuperblock)> = Vec::new();
        {
            let n = self.members.handles.len();
            let recovery: Vec<Option<u64>> = {
                let md = self.md.as_ref().expect("an MD pool");
                (0..n)
                    .map(|s| valid_rows(&self.geo, &self.state, s as Disk, md))
                    .collect()
            };
            let md = self.md.as_mut().expect("an MD pool");
            md.array.events += 1;
            md.array.utime = now;
            md.array.resync_offset = if md.dirty { 0 } else { RESYNC_CLEAN };
            // Roles: present slots hold their role, failed ones are faulty.
            for s in 0..n {
                let Some(slot) = md.slots[s].as_mut() else {
                    continue;
                };
                let dn = slot.sb.dev_number as usize;
                if md.array.dev_roles.len() <= dn {
                    md.array.dev_roles.resize(dn + 1, ROLE_SPARE);
                }
                if self.members.handles[s].is_some() {
                    md.array.dev_roles[dn] = s as u16;
                } else {
                    md.array.dev_roles[dn] = ROLE_FAULTY;
                    slot.raw = None;
                }
            }
            let template = md.array.clone();
            let stamp = |own: &MdSuperblock| {
                let mut sb = template.clone();
                sb.data_offset = own.data_offset;
                sb.data_size = own.data_size;
                sb.super_offset = own.super_offset;
                sb.dev_number = own.dev_number;
                sb.cnt_corrected_read = own.cnt_corrected_read;
                sb.device_uuid = own.device_uuid;
                sb.devflags = own.devflags;
                sb.bblog_shift = own.bblog_shift;
                sb.bblog_size = own.bblog_size;
                sb.bblog_offset = own.bblog_offset;
                sb.feature_map &= !FEATURE_RECOVERY_OFFSET;
                sb.recovery_offset = 0;
                sb
            };
            for (s, slot) in md.slots.iter_mut().enumerate() {
                let Some(slot) = slot else { continue };
                let Some(raw) = slot.raw.clone() else {
                    continue;
                };
                let mut sb = stamp(&slot.sb);
                if let Some(rows) = recovery[s] {
                    sb.feature_map |= FEATURE_RECOVERY_OFFSET;
                    sb.recovery_offset = rows * md.geo.chunk_sectors;
                }
                slot.sb = sb.clone();
                writes.push((s, raw, sb));
            }
            for sp in md.spares.iter_mut() {
                let sb = stamp(&sp.sb);
                sp.sb = sb.clone();
                writes.push((usize::MAX, sp.raw.clone(), sb));
            }
        }
        let mut dead: Vec<(usize, std::io::Error)> = Vec::new();
        for (s, raw, sb) in &writes {
            let mut b = sb.encode().map_err(|e| PoolError::Io(e.to_string()))?;
            b.resize(MD_SB_BLOCK_BYTES, 0);
            let r = raw
                .write_at(&b, sb.super_offset * 512)
                .and_then(|_| raw.flush());
            match r {
                Err(e) if *s != usize::MAX => dead.push((*s, e)),
                // A spare that cannot take its superblock is only a spare less.
                _ => {}
            }
        }
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            return self.persist(self.tag_after_failure(tag));
        }
        self.sb.generation = self.md.as_ref().map_or(0, |m| m.array.events);
        self.sb.rebuilt_unrecorded.clear();
        self.save_descriptor()
    }

    /// `replace` for an MD-format pool: the new member gets an MD superblock of its own (a
    /// new dev number and device UUID, the replaced member's data offset) and is recorded
    /// recovering from sector 0.
    pub(super) fn replace_md(&mut self, i: usize, path: &Path) -> Result<()> {
        let member_err = |reason: String| PoolError::Member {
            index: i,
            path: path.to_path_buf(),
            reason,
        };
        if i >= self.members.handles.len() {
            return Err(PoolError::Usage(format!("member {i} does not exist")));
        }
        if self.members.handles[i].is_some() {
            return Err(PoolError::Usage(format!(
                "member {i} has not failed: fail it first with `raidforge fail`"
            )));
        }
        if let Ok(existing) = FileMember::open(path, OpenOpts::default()) {
            if let Ok((sb, v)) = read_md_superblock(&existing) {
                return Err(member_err(format!(
                    "already holds a v{} MD superblock (array {}); wipe it first (mdadm \
                     --zero-superblock)",
                    v.name(),
                    hex(&sb.set_uuid)
                )));
            }
            if let Ok(sb) = read_superblock(&existing) {
                return Err(member_err(format!(
                    "already holds a raidforge superblock (pool {}); wipe it first",
                    hex(&sb.uuid)
                )));
            }
        }
        let md = self.md.as_ref().expect("an MD pool");
        // The member it replaces says where data starts and how the end is laid out.
        let like = md
            .slots
            .iter()
            .flatten()
            .map(|s| &s.sb)
            .find(|sb| sb.dev_number == md.slots[i].as_ref().map_or(u32::MAX, |s| s.sb.dev_number))
            .or_else(|| md.slots.iter().flatten().map(|s| &s.sb).next())
            .expect("an MD pool has a member")
            .clone();
        let need_sectors = match md.version {
            MdVersion::V1_0 => {
                let gap = like.super_offset - (like.data_offset + like.data_size);
                md.geo.dev_sectors + gap + 16 + 8
            }
            _ => like.data_offset + md.geo.dev_sectors,
        };
        let how = MemberOpen {
            emulate: self.file.desc.members[i].emulate.as_deref(),
            create_bytes: Some(need_sectors * 512),
            lock: true,
            direct: self.file.desc.direct,
        };
        let raw = open_member(path, &how).map_err(|e| member_err(e.to_string()))?;
        let dev_sectors = raw.size_bytes() / 512;
        if dev_sectors < need_sectors {
            return Err(member_err(format!(
                "holds {} bytes, need {}",
                raw.size_bytes(),
                need_sectors * 512
            )));
        }
        // v1.0: the room between the data and the superblock at the end (bitmap, bad block
        // log) stays what the member it replaces had, so that its offsets hold.
        let gap = match md.version {
            MdVersion::V1_0 => like.super_offset - (like.data_offset + like.data_size),
            _ => 0,
        };
        let mut sb = like;
        sb.super_offset = md
            .version
            .super_offset(dev_sectors)
            .expect("large enough for its superblock");
        match md.version {
            MdVersion::V1_0 => {
                sb.data_offset = 0;
                sb.data_size = sb.super_offset - gap;
            }
            _ => sb.data_size = dev_sectors - sb.data_offset,
        }
        // md.c's choice: the first dev number from raid_disks up that no member holds.
        let n = self.members.handles.len() as u32;
        let taken: BTreeSet<u32> = md
            .slots
            .iter()
            .flatten()
            .map(|s| s.sb.dev_number)
            .chain(md.spares.iter().map(|s| s.sb.dev_number))
            .chain(
                md.array
                    .dev_roles
                    .iter()
                    .enumerate()
                    .filter(|(_, &r)| r == ROLE_FAULTY)
                    .map(|(d, _)| d as u32),
            )
            .collect();
        let old_dn = md.slots[i].as_ref().map(|s| s.sb.dev_number);
        let dn = (n..)
            .find(|d| !taken.contains(d))
            .expect("a free dev number");
        sb.dev_number = dn;
        sb.device_uuid = random_uuid();
        sb.cnt_corrected_read = 0;
        sb.recovery_offset = 0;
        let view: Arc<dyn Member> = Arc::new(MdMember::new(
            raw.clone(),
            MD_VIRTUAL_BASE,
            sb.data_offset * 512,
            md.geo,
            md.cycle_rows,
            self.geo.cycles() * md.cycle_rows,
        ));
        let view = match &self.members.wrap {
            Some(w) => w(i, view),
            None => view,
        };
        self.state.replace(&self.geo, i as Disk)?;
        let md = self.md.as_mut().expect("an MD pool");
        if let Some(old) = old_dn {
            // The replaced member leaves the array (mdadm --remove): its dev number is free.
            if let Some(r) = md.array.dev_roles.get_mut(old as usize) {
                *r = ROLE_SPARE;
            }
        }
        md.slots[i] = Some(Slot { sb, raw: Some(raw) });
        self.members.handles[i] = Some(view);
        self.sb.events.push(Event::Replace(i as u32));
        let d = &mut self.file.desc.members[i];
        d.path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        d.read_bytes = 0;
        d.write_bytes = 0;
        d.reads = 0;
        d.writes = 0;
        d.meta_writes = 0;
        let tag = self.tag();
        self.persist(tag)
    }
}

fn geo_chunk(md: &MdFormat) -> u64 {
    md.geo.chunk_sectors * 512
}

/// mdadm 4.x's defaults for a new v1.2 array (super1.c `avail_size1`, `choose_bm_space`):
/// the data offset in sectors for a member of `dev_sectors` with chunks of `chunk_sectors`
/// (0 for RAID1): room for the superblock, bad block log and a bitmap, plus reshape headroom
/// of about 0.1 % of the member (at most 128 MiB, at least two chunks), rounded up to 1 MiB.
pub fn mdadm_data_offset(dev_sectors: u64, chunk_sectors: u64) -> u64 {
    let bm_space = if dev_sectors < 64 * 2 {
        0
    } else if dev_sectors - 64 * 2 >= 200 * 1024 * 1024 * 2 {
        128 * 2
    } else if dev_sectors - 4 * 2 > 8 * 1024 * 1024 * 2 {
        64 * 2
    } else {
        4 * 2
    };
    let mut headroom: u64 = 128 * 1024 * 2;
    while (headroom << 10) > dev_sectors
        && (chunk_sectors == 0 || headroom / 2 >= chunk_sectors * 2)
    {
        headroom >>= 1;
    }
    (12 * 2 + bm_space + headroom).next_multiple_of(2048)
}

/// The array name mdadm would write: `host:name`, at most 32 bytes.
fn md_name(desc_path: &Path) -> [u8; 32] {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let stem = desc_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "raidforge".into());
    let text = format!("{host}:{stem}");
    let mut b = [0u8; 32];
    let t = text.as_bytes();
    let n = t.len().min(32);
    b[..n].copy_from_slice(&t[..n]);
    b
}

impl Pool {
    /// `Pool::create` under `--metadata md`: v1.2 superblocks with mdadm's defaults, so that
    /// `mdadm --examine` and `mdadm --assemble --scan` take the pool for an ordinary MD array.
    /// Everything raidforge's own format would add is refused, naming the option.
    pub(super) fn create_md(
        desc_path: &Path,
        opts: CreateOpts,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        let refuse = |what: &str| {
            Err(PoolError::Usage(format!(
                "{what} needs raidforge's own on-disk format; Linux MD's superblock (--metadata \
                 md) cannot record it"
            )))
        };
        if opts.checksums {
            return refuse("--checksums on");
        }
        if opts.write_hole != WriteHole::None {
            return refuse("--write-hole journal");
        }
        if opts.parity != ParityPolicy::Eager {
            return refuse("--parity lazy");
        }
        if opts.bpgl_capacity.is_some() {
            return refuse("--bpgl-capacity");
        }
        if opts.params.spares > 0 {
            return Err(PoolError::Usage(
                "--spares with --metadata md: MD's spares are separate devices (add one later \
                 with mdadm --add); give only the active members"
                    .into(),
            ));
        }
        let kind = opts.scheme;
        if !matches!(
            kind,
            SchemeKind::Raid0
                | SchemeKind::Raid1
                | SchemeKind::Raid4
                | SchemeKind::Raid5
                | SchemeKind::Raid6
                | SchemeKind::Raid10
        ) {
            return Err(PoolError::Usage(format!(
                "--scheme {} with --metadata md: Linux MD has raid0, raid1, raid4, raid5, raid6 \
                 and raid10 only",
                kind.name()
            )));
        }
        let n = opts.members.len();
        let mut params = opts.params.clone();
        match params.disks {
            None => params.disks = Some(n),
            Some(d) if d != n => {
                return Err(PoolError::Usage(format!(
                    "--disks {d} but {n} --member paths given: give one --member per disk"
                )))
            }
            _ => {}
        }
        // Builds (and so checks) the scheme, then MD's name for it.
        layout::build(kind, &params)?;
        let md_layout = md_layout_of(kind, &params, n)?;
        let chunk = opts.chunk_bytes;
        if chunk < 4096 || !chunk.is_power_of_two() {
            return Err(PoolError::Usage(format!(
                "--chunk {chunk} with --metadata md: MD needs a power of two of at least 4 KiB"
            )));
        }
        let chunk_sectors = chunk / 512;
        let site = Site::probe(desc_path, &opts.members);
        CreatePlan::check_options(&opts, &site)?;
        let size = CreatePlan::member_size(&opts, &site)?;
        CreatePlan::check_members(&opts, &site, size)?;
        for (i, (_, found)) in site.members.iter().enumerate() {
            if let Found::Present { .. } = found {
                if is_md_member(&opts.members[i]) && !opts.force {
                    return Err(PoolError::Member {
                        index: i,
                        path: opts.members[i].clone(),
                        reason: "already a member of an MD array (pass --force to overwrite it)"
                            .into(),
                    });
                }
            }
        }
        let dev_sectors = size / 512;
        let md_chunk = if md_layout == MdLayout::Raid1 {
            0
        } else {
            chunk_sectors
        };
        let data_offset = mdadm_data_offset(dev_sectors, md_chunk);
        // mdadm rounds the member size to the chunk (RAID1: to 64 KiB).
        let unit = if md_layout == MdLayout::Raid1 {
            128
        } else {
            chunk_sectors
        };
        let avail = dev_sectors.saturating_sub(data_offset);
        let used = avail / unit * unit;
        if used == 0 {
            return Err(PoolError::Usage(format!(
                "member size {size} bytes is too small: MD's data offset for it is {} bytes",
                data_offset * 512
            )));
        }
        let geo = MdGeometry {
            layout: md_layout,
            raid_disks: n,
            chunk_sectors: if md_layout == MdLayout::Raid1 {
                128
            } else {
                chunk_sectors
            },
            dev_sectors: used,
        };
        // The geometry must hold (no I/O yet).
        md_geometry(&geo)?;
        // The first write.
        let raws = zeroed_members(&opts, size)?;
        let uuid = random_uuid();
        let now = now_unix();
        let mut roles = vec![ROLE_SPARE; 128.max(n)];
        for (d, r) in roles.iter_mut().enumerate().take(n) {
            *r = d as u16;
        }
        let array = MdSuperblock {
            feature_map: 0,
            set_uuid: uuid,
            set_name: md_name(desc_path),
            ctime: now,
            level: md_layout.level(),
            layout: md_layout.md_value(),
            size: if md_layout == MdLayout::Raid0 {
                0
            } else {
                used
            },
            chunk_sectors: md_chunk as u32,
            raid_disks: n as u32,
            bitmap_offset: 0,
            new_level: 0,
            reshape_position: 0,
            delta_disks: 0,
            new_layout: 0,
            new_chunk: 0,
            new_offset: 0,
            data_offset,
            data_size: avail,
            super_offset: 8,
            recovery_offset: 0,
            dev_number: 0,
            cnt_corrected_read: 0,
            device_uuid: [0; 16],
            devflags: 0,
            bblog_shift: 0,
            bblog_size: 8,
            // mdadm leaves room for a bitmap between the superblock and the log, except on
            // RAID0 (which cannot have one).
            bblog_offset: if md_layout == MdLayout::Raid0 { 8 } else { 16 },
            utime: now,
            events: 0,
            resync_offset: RESYNC_CLEAN,
            dev_roles: roles,
        };
        let mut found = Vec::new();
        for (i, raw) in raws.into_iter().enumerate() {
            let raw = raw.expect("every member opened");
            let mut sb = array.clone();
            sb.dev_number = i as u32;
            sb.device_uuid = random_uuid();
            found.push(MdFound {
                path: opts.members[i].clone(),
                raw,
                sb,
                version: MdVersion::V1_2,
            });
        }
        let a = Adoption {
            version: MdVersion::V1_2,
            array,
            geo,
            slots: found.into_iter().map(Some).collect(),
            spares: Vec::new(),
            recovering: Vec::new(),
            resync_from: None,
            notes: Vec::new(),
        };
        let mut desc = Descriptor::new(&uuid, &opts.members, &opts.emulate, opts.direct);
        desc.metadata = Some(MD_METADATA.into());
        let mut pool = Self::md_pool(desc_path, desc, a, wrap)?;
        pool.persist(ArrayStateTag::Clean)?;
        Ok(pool)
    }
}

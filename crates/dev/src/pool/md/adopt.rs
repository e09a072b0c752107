//! Adoption: an MD array's state read from its members, the way mdadm and the kernel do,
//! and what raidforge refuses to run.

use super::*;

use layout::md::MdLayout;
use raidcore::md::{
    MdRole, FEATURE_BAD_BLOCKS, FEATURE_BITMAP_OFFSET, FEATURE_CLUSTERED, FEATURE_JOURNAL,
    FEATURE_MULTIPLE_PPLS, FEATURE_NEW_OFFSET, FEATURE_PPL, FEATURE_RECOVERY_BITMAP,
    FEATURE_RECOVERY_OFFSET, FEATURE_REPLACEMENT, FEATURE_RESHAPE_ACTIVE,
    FEATURE_RESHAPE_BACKWARDS,
};

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
pub(super) struct Adoption {
    pub(super) version: MdVersion,
    pub(super) array: MdSuperblock,
    pub(super) geo: MdGeometry,
    /// Per slot, the member holding it.
    pub(super) slots: Vec<Option<MdFound>>,
    pub(super) spares: Vec<MdFound>,
    /// Slot recovering and the member sectors already recovered.
    pub(super) recovering: Vec<(usize, u64)>,
    /// Where a resync must start (array sectors), for an array not clean.
    pub(super) resync_from: Option<u64>,
    pub(super) notes: Vec<String>,
}

/// Reads the state of an MD array from its members, the way mdadm and the kernel do, and
/// refuses what raidforge cannot run. `listed`: when opening from a descriptor, the slot each
/// member must hold. Writes nothing.
pub(super) fn adopt(found: Vec<MdFound>, listed: Option<&[Option<usize>]>) -> Result<Adoption> {
    let uuid = one_array(&found)?;
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
    let roles = Roles::assign(found, &freshest, listed)?;
    let chunk_sectors = chunk_sectors(layout, &freshest)?;
    let dev_sectors = member_sectors(layout, &freshest, &roles.slots, chunk_sectors)?;
    let geo = MdGeometry {
        layout,
        raid_disks: n,
        chunk_sectors,
        dev_sectors,
    };
    let missing: Vec<usize> = (0..n).filter(|&s| roles.slots[s].is_none()).collect();
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
        version: first_version(&roles.slots, &roles.spares),
        array: freshest,
        geo,
        slots: roles.slots,
        spares: roles.spares,
        recovering: roles.recovering,
        resync_from,
        notes: roles.notes,
    })
}

/// The array's UUID, once every member found is known to belong to it, with the same
/// superblock version, and to use nothing raidforge refuses.
fn one_array(found: &[MdFound]) -> Result<[u8; 16]> {
    let Some(first) = found.first() else {
        return Err(PoolError::Usage(
            "no MD member given (or none could be opened)".into(),
        ));
    };
    let uuid = first.sb.set_uuid;
    for f in found {
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
    Ok(uuid)
}

/// The members found, by the role the array's newest superblock gives them.
struct Roles {
    /// Per slot, the member holding it.
    slots: Vec<Option<MdFound>>,
    spares: Vec<MdFound>,
    /// Slot recovering and the member sectors already recovered.
    recovering: Vec<(usize, u64)>,
    /// The members left out, and why.
    notes: Vec<String>,
}

impl Roles {
    /// Each member found in its slot or among the spares, or left out (stale, faulty) with a
    /// note; a role raidforge cannot run is refused.
    fn assign(
        found: Vec<MdFound>,
        freshest: &MdSuperblock,
        listed: Option<&[Option<usize>]>,
    ) -> Result<Roles> {
        let n = freshest.raid_disks as usize;
        let mut roles = Roles {
            slots: (0..n).map(|_| None).collect(),
            spares: Vec::new(),
            recovering: Vec::new(),
            notes: Vec::new(),
        };
        for (k, f) in found.into_iter().enumerate() {
            let who = f.path.display().to_string();
            // mdadm assembles members at most one event behind the newest ("non-fresh" ones
            // are left out).
            if f.sb.events + 1 < freshest.events {
                roles.notes.push(format!(
                    "{who} is stale (events {} while the array is at {}): left out, as mdadm \
                     does",
                    f.sb.events, freshest.events
                ));
                continue;
            }
            match freshest.role_of(f.sb.dev_number) {
                MdRole::Active(s) if (s as usize) < n => {
                    let want = listed.map(|l| l[k]);
                    roles.hold(s as usize, k, f, want)?
                }
                MdRole::Spare => roles.spares.push(f),
                MdRole::Faulty => roles.notes.push(format!(
                    "{who} is marked faulty in the array's newest superblock: left out"
                )),
                MdRole::Journal => {
                    return Err(PoolError::Usage(format!(
                        "{who} is the MD array's write journal device, which raidforge does \
                         not implement; nothing was written"
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
        Ok(roles)
    }

    /// Member `k` found, `f`, holds slot `s`; `listed`: `Some` with the slot the descriptor
    /// lists it in, when opening from one.
    fn hold(
        &mut self,
        s: usize,
        k: usize,
        f: MdFound,
        listed: Option<Option<usize>>,
    ) -> Result<()> {
        if let Some(l) = listed {
            if l != Some(s) {
                return Err(PoolError::Member {
                    index: k,
                    path: f.path.clone(),
                    reason: format!(
                        "holds slot {s} of the MD array, but the descriptor lists it as {}: \
                         assemble the pool again from its members",
                        l.map_or("a spare".into(), |x| format!("slot {x}"))
                    ),
                });
            }
        }
        if let Some(prev) = &self.slots[s] {
            return Err(PoolError::Usage(format!(
                "{} and {} both hold slot {s} of the MD array; nothing was written",
                prev.path.display(),
                f.path.display()
            )));
        }
        if f.sb.feature_map & FEATURE_RECOVERY_OFFSET != 0 {
            self.recovering.push((s, f.sb.recovery_offset));
        }
        self.slots[s] = Some(f);
        Ok(())
    }
}

/// The array's chunk in sectors. RAID1 has no chunk: the pool's unit is the largest power of
/// two up to 64 KiB that divides the member size.
fn chunk_sectors(layout: MdLayout, freshest: &MdSuperblock) -> Result<u64> {
    let chunk_sectors = match layout {
        MdLayout::Raid1 => {
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
            hex(&freshest.set_uuid),
            freshest.level
        )));
    }
    Ok(chunk_sectors)
}

/// The sectors the array uses of every member, once each member holding a slot is known to
/// have them.
fn member_sectors(
    layout: MdLayout,
    freshest: &MdSuperblock,
    slots: &[Option<MdFound>],
    chunk_sectors: u64,
) -> Result<u64> {
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
                    hex(&freshest.set_uuid)
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
    Ok(dev_sectors)
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

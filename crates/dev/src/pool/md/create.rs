//! `create --metadata md`: an array mdadm takes for its own.

use super::adopt::Adoption;
use super::geometry::{md_geometry, md_layout_of, not_in_md};
use super::*;

use crate::pool::create::{now_unix, random_uuid, zeroed_members, CreatePlan};
use layout::md::MdLayout;
use raidcore::md::{RESYNC_CLEAN, ROLE_SPARE};

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
    pub(in crate::pool) fn create_md(
        desc_path: &Path,
        opts: CreateOpts,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        refuse_own_format(&opts)?;
        let md_layout = md_scheme(&opts)?;
        let chunk = opts.chunk_bytes;
        if chunk < 4096 || !chunk.is_power_of_two() {
            return Err(PoolError::Usage(format!(
                "--chunk {chunk} with --metadata md: MD needs a power of two of at least 4 KiB"
            )));
        }
        let site = Site::probe(desc_path, &opts.members);
        let size = check_site(&opts, &site)?;
        let new = NewArray::plan(md_layout, opts.members.len(), chunk / 512, size)?;
        // The first write.
        let raws = zeroed_members(&opts, size)?;
        let array = new.superblock(desc_path);
        let uuid = array.set_uuid;
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
            geo: new.geo,
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

/// Refuses what only raidforge's own format can record, and spares given at create, naming
/// the option.
fn refuse_own_format(opts: &CreateOpts) -> Result<()> {
    let refuse = |what: &str| {
        Err(PoolError::Usage(format!(
            "{what} needs raidforge's own on-disk format; Linux MD's superblock (--metadata md) \
             cannot record it"
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
            "--spares with --metadata md: MD's spares are separate devices (add one later with \
             mdadm --add); give only the active members"
                .into(),
        ));
    }
    Ok(())
}

/// MD's layout for the scheme asked for, once the scheme is one MD has and is checked.
fn md_scheme(opts: &CreateOpts) -> Result<MdLayout> {
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
        return Err(not_in_md(kind));
    }
    let params = opts.member_params()?;
    // Builds (and so checks) the scheme, then MD's name for it.
    layout::build(kind, &params)?;
    md_layout_of(kind, &params, opts.members.len())
}

/// The member size, once the paths are fit to create on (as for raidforge's own format) and
/// none holds an MD member unless `--force` says to overwrite it.
fn check_site(opts: &CreateOpts, site: &Site) -> Result<u64> {
    CreatePlan::check_options(opts, site)?;
    let size = CreatePlan::member_size(opts, site)?;
    CreatePlan::check_members(opts, site, size)?;
    if !opts.force {
        CreatePlan::check_room(opts, site, size)?;
    }
    for (i, (_, found)) in site.members.iter().enumerate() {
        if let Found::Present { .. } = found {
            if is_md_member(&opts.members[i]) && !opts.force {
                return Err(PoolError::Member {
                    index: i,
                    path: opts.members[i].clone(),
                    reason: "already a member of an MD array (pass --force to overwrite it)".into(),
                });
            }
        }
    }
    Ok(size)
}

/// A new array as mdadm would lay it out on members of one size.
struct NewArray {
    geo: MdGeometry,
    /// Sectors before the data area (mdadm's default data offset).
    data_offset: u64,
    /// Sectors of the data area, before rounding to the chunk.
    avail: u64,
}

impl NewArray {
    /// mdadm's layout on members of `size` bytes, with chunks of `chunk_sectors`; refused
    /// when no whole chunk fits or the pool's geometry over it does not hold (no I/O).
    fn plan(md_layout: MdLayout, n: usize, chunk_sectors: u64, size: u64) -> Result<NewArray> {
        let dev_sectors = size / 512;
        let raid1 = md_layout == MdLayout::Raid1;
        let data_offset = mdadm_data_offset(dev_sectors, if raid1 { 0 } else { chunk_sectors });
        // mdadm rounds the member size to the chunk (RAID1: to 64 KiB).
        let unit = if raid1 { 128 } else { chunk_sectors };
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
            chunk_sectors: unit,
            dev_sectors: used,
        };
        md_geometry(&geo)?;
        Ok(NewArray {
            geo,
            data_offset,
            avail,
        })
    }

    /// The array-wide superblock of the new array (dev number and device UUID 0: each
    /// member's are set apart), with a new set UUID, clean.
    fn superblock(&self, desc_path: &Path) -> MdSuperblock {
        let md_layout = self.geo.layout;
        let n = self.geo.raid_disks;
        let now = now_unix();
        let mut roles = vec![ROLE_SPARE; 128.max(n)];
        for (d, r) in roles.iter_mut().enumerate().take(n) {
            *r = d as u16;
        }
        MdSuperblock {
            feature_map: 0,
            set_uuid: random_uuid(),
            set_name: md_name(desc_path),
            ctime: now,
            level: md_layout.level(),
            layout: md_layout.md_value(),
            size: if md_layout == MdLayout::Raid0 {
                0
            } else {
                self.geo.dev_sectors
            },
            chunk_sectors: if md_layout == MdLayout::Raid1 {
                0
            } else {
                self.geo.chunk_sectors as u32
            },
            raid_disks: n as u32,
            bitmap_offset: 0,
            new_level: 0,
            reshape_position: 0,
            delta_disks: 0,
            new_layout: 0,
            new_chunk: 0,
            new_offset: 0,
            data_offset: self.data_offset,
            data_size: self.avail,
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
        }
    }
}

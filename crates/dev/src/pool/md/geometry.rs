//! MD's layouts as the pool's schemes and geometry, and mdadm's defaults for a new array.

use super::*;

use layout::md::MdLayout;

/// MD's layout of a classic scheme with these parameters.
pub(super) fn md_layout_of(kind: SchemeKind, params: &Params, n: usize) -> Result<MdLayout> {
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
        other => return Err(not_in_md(other)),
    })
}

/// The refusal of a scheme Linux MD does not have.
pub(super) fn not_in_md(kind: SchemeKind) -> PoolError {
    PoolError::Usage(format!(
        "--scheme {} with --metadata md: Linux MD has raid0, raid1, raid4, raid5, raid6 and \
         raid10 only",
        kind.name()
    ))
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
pub(super) fn md_geometry(geo: &MdGeometry) -> Result<(Geometry, SchemeKind, Params, u64, u64)> {
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
pub(super) fn valid_rows(
    geo: &Geometry,
    state: &ArrayState,
    s: Disk,
    md: &MdFormat,
) -> Option<u64> {
    let k = (0..geo.cycles())
        .take_while(|&c| state.member_available(s, state.cycle_generation(c)))
        .count() as u64;
    if k == geo.cycles() {
        return None; // in sync
    }
    Some((k * md.near_rows).min(md.geo.used_rows()))
}

pub(super) fn geo_chunk(md: &MdFormat) -> u64 {
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

//! Finding Linux MD's superblock on a member.

use super::*;

use raidcore::md::{MdSuperblock, MdVersion, MD_SB_BLOCK_BYTES};

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

/// Why a member that shows Linux MD's magic where one of the versions puts its superblock
/// cannot be read as an MD member (superblocks of two versions, a damaged one): None when it
/// holds one valid MD superblock, or no MD magic at all. Assembly tells this instead of "no
/// raidforge superblock" when the member is not raidforge's either.
pub(crate) fn md_trouble(m: &dyn Member) -> Option<String> {
    let reason = read_md_superblock(m).err()?;
    let dev_sectors = m.size_bytes() / 512;
    let magic = MdVersion::ALL.iter().any(|v| {
        let mut b = vec![0u8; MD_SB_BLOCK_BYTES];
        v.super_offset(dev_sectors).is_some_and(|so| {
            so * 512 + MD_SB_BLOCK_BYTES as u64 <= m.size_bytes()
                && m.read_at(&mut b, so * 512).is_ok()
                && b[..4] == raidcore::md::MD_MAGIC.to_le_bytes()
        })
    });
    magic.then_some(reason)
}

/// True when `p` holds a Linux MD v1.x superblock.
pub(crate) fn is_md_member(p: &Path) -> bool {
    FileMember::open(p, OpenOpts::default())
        .map(|m| read_md_superblock(&m).is_ok())
        .unwrap_or(false)
}

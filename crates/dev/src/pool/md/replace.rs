//! Replacing a failed member of an MD-format pool.

use super::member::MdMember;
use super::*;

use crate::pool::create::random_uuid;
use raidcore::md::{ROLE_FAULTY, ROLE_SPARE};

impl Pool {
    /// `replace` for an MD-format pool: the new member gets an MD superblock of its own (a
    /// new dev number and device UUID, the replaced member's data offset) and is recorded
    /// recovering from sector 0.
    pub(in crate::pool) fn replace_md(&mut self, i: usize, path: &Path) -> Result<()> {
        let member_err = |reason: String| PoolError::Member {
            index: i,
            path: path.to_path_buf(),
            reason,
        };
        self.check_replaceable(i)?;
        refuse_superblock(path).map_err(member_err)?;
        let md = self.md.as_ref().expect("an MD pool");
        let like = md.like(i);
        let how = MemberOpen {
            emulate: self.file.desc.members[i].emulate.as_deref(),
            create_bytes: Some(md.need_sectors(&like) * 512),
            lock: true,
            direct: self.file.desc.direct,
        };
        let raw = open_member(path, &how).map_err(|e| member_err(e.to_string()))?;
        let sb = md
            .replacement(like, raw.size_bytes(), self.members.handles.len())
            .map_err(member_err)?;
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
        if let Some(old) = md.slots[i].as_ref().map(|s| s.sb.dev_number) {
            // The replaced member leaves the array (mdadm --remove): its dev number is free.
            if let Some(r) = md.array.dev_roles.get_mut(old as usize) {
                *r = ROLE_SPARE;
            }
        }
        md.slots[i] = Some(Slot { sb, raw: Some(raw) });
        self.members.handles[i] = Some(view);
        self.record_replaced(i, path)
    }
}

/// Why `path` cannot take a replacement: it already holds an MD or a raidforge superblock.
fn refuse_superblock(path: &Path) -> std::result::Result<(), String> {
    let Ok(existing) = FileMember::open(path, OpenOpts::default()) else {
        return Ok(());
    };
    if let Ok((sb, v)) = read_md_superblock(&existing) {
        return Err(format!(
            "already holds a v{} MD superblock (array {}); wipe it first (mdadm \
             --zero-superblock)",
            v.name(),
            hex(&sb.set_uuid)
        ));
    }
    if let Ok(sb) = read_superblock(&existing) {
        return Err(format!(
            "already holds a raidforge superblock (pool {}); wipe it first",
            hex(&sb.uuid)
        ));
    }
    Ok(())
}

impl MdFormat {
    /// The superblock a replacement of slot `i` starts from: the replaced member's (it says
    /// where data starts and how the end is laid out), or any member's.
    fn like(&self, i: usize) -> MdSuperblock {
        let replaced = self.slots[i].as_ref().map_or(u32::MAX, |s| s.sb.dev_number);
        self.slots
            .iter()
            .flatten()
            .map(|s| &s.sb)
            .find(|sb| sb.dev_number == replaced)
            .or_else(|| self.slots.iter().flatten().map(|s| &s.sb).next())
            .expect("an MD pool has a member")
            .clone()
    }

    /// v1.0: the room between the data and the superblock at the end (bitmap, bad block
    /// log), which a replacement keeps as `like` has it, so that its offsets hold; 0 for the
    /// versions with the superblock at the start.
    fn end_gap(&self, like: &MdSuperblock) -> u64 {
        match self.version {
            MdVersion::V1_0 => like.super_offset - (like.data_offset + like.data_size),
            _ => 0,
        }
    }

    /// The sectors a replacement laid out like `like` needs.
    fn need_sectors(&self, like: &MdSuperblock) -> u64 {
        match self.version {
            MdVersion::V1_0 => self.geo.dev_sectors + self.end_gap(like) + 16 + 8,
            _ => like.data_offset + self.geo.dev_sectors,
        }
    }

    /// The superblock of a replacement of `size_bytes` laid out like `like`, in a pool of
    /// `n` slots: its own superblock offset and data size, a free dev number and a new device
    /// UUID. Refused (why) when the member is too small.
    fn replacement(
        &self,
        like: MdSuperblock,
        size_bytes: u64,
        n: usize,
    ) -> std::result::Result<MdSuperblock, String> {
        let dev_sectors = size_bytes / 512;
        let need = self.need_sectors(&like);
        if dev_sectors < need {
            return Err(format!("holds {size_bytes} bytes, need {}", need * 512));
        }
        let gap = self.end_gap(&like);
        let mut sb = like;
        sb.super_offset = self
            .version
            .super_offset(dev_sectors)
            .expect("large enough for its superblock");
        match self.version {
            MdVersion::V1_0 => {
                sb.data_offset = 0;
                sb.data_size = sb.super_offset - gap;
            }
            _ => sb.data_size = dev_sectors - sb.data_offset,
        }
        sb.dev_number = self.free_dev_number(n as u32);
        sb.device_uuid = random_uuid();
        sb.cnt_corrected_read = 0;
        sb.recovery_offset = 0;
        Ok(sb)
    }

    /// md.c's choice: the first dev number from `raid_disks` up that no member holds.
    fn free_dev_number(&self, raid_disks: u32) -> u32 {
        let taken: BTreeSet<u32> = self
            .slots
            .iter()
            .flatten()
            .map(|s| s.sb.dev_number)
            .chain(self.spares.iter().map(|s| s.sb.dev_number))
            .chain(
                self.array
                    .dev_roles
                    .iter()
                    .enumerate()
                    .filter(|(_, &r)| r == ROLE_FAULTY)
                    .map(|(d, _)| d as u32),
            )
            .collect();
        (raid_disks..)
            .find(|d| !taken.contains(d))
            .expect("a free dev number")
    }
}

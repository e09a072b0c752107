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

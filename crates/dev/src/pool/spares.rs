//! Hot spares: blank members listed in the descriptor that take the place of a failed member
//! without a human (as MD pulls in a spare). `raidforge create --spare` and `raidforge add
//! --spare` list them; a served pool's healer (`crate::serve_support`) calls
//! [`Pool::activate_spare`] when a member fails.
//!
//! A spare is checked when it is added (it opens, it is large enough, it holds no raidforge
//! superblock) and again when it is used ([`Pool::replace`]'s checks). Spares are recorded in
//! the descriptor only (MD writes a spare superblock): `raidforge assemble`, which rebuilds the
//! descriptor from the members, does not know them; add them again after it.

use super::membership::probe_member;
use super::*;

impl Pool {
    /// The hot spares, in the order they will be used.
    pub fn spares(&self) -> &[PathBuf] {
        &self.file.desc.spares
    }

    /// Lists `path` as a hot spare (recorded in the descriptor at once).
    pub fn add_spare(&mut self, path: &Path) -> Result<()> {
        let bad = |reason: String| PoolError::Usage(format!("spare {}: {reason}", path.display()));
        let id = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let want = id(path);
        if self.file.desc.members.iter().any(|m| id(&m.path) == want) {
            return Err(bad("is a member of this pool already".into()));
        }
        if self.file.desc.spares.iter().any(|s| id(s) == want) {
            return Err(bad("is listed as a spare already".into()));
        }
        let m = probe_member(path).map_err(|e| {
            bad(format!(
                "cannot be opened ({e}); create the file (e.g. `truncate -s SIZE PATH`) or \
                 name a device"
            ))
        })?;
        let need = self.map.data_offset_bytes + self.map.data_bytes;
        if m.size_bytes() < need {
            return Err(bad(format!(
                "holds {} bytes, a member needs {need}: give a larger file or device",
                m.size_bytes()
            )));
        }
        if let Ok(sb) = read_superblock(&*m) {
            return Err(bad(format!(
                "holds a raidforge superblock (pool {}): wipe it first, a spare must be blank",
                hex(&sb.uuid)
            )));
        }
        self.file.desc.spares.push(want);
        self.save_descriptor()
    }

    /// Puts the first usable spare in the place of failed member `i` ([`Pool::replace`]) and
    /// takes it off the list. Spares that cannot be used (gone, too small, no longer blank)
    /// are taken off the list too and returned with the reason. `Ok((None, _))`: no usable
    /// spare.
    pub fn activate_spare(
        &mut self,
        i: usize,
    ) -> Result<(Option<PathBuf>, Vec<(PathBuf, String)>)> {
        let mut refused = Vec::new();
        while !self.file.desc.spares.is_empty() {
            let spare = self.file.desc.spares.remove(0);
            match self.replace(i, &spare) {
                Ok(()) => {
                    self.save_descriptor()?;
                    return Ok((Some(spare), refused));
                }
                Err(e @ PoolError::Member { .. }) => refused.push((spare, e.to_string())),
                Err(e) => {
                    self.file.desc.spares.insert(0, spare);
                    return Err(e);
                }
            }
        }
        self.save_descriptor()?;
        Ok((None, refused))
    }
}

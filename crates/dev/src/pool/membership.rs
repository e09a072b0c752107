//! Members: opening them, failing, replacing, rewrapping, changing their emulated speed.

use super::*;
use crate::nbd_member::{is_nbd_path, NbdMember};

/// Opens a member to look at it (no lock, no emulation): a file, a device or an NBD export.
pub(super) fn probe_member(path: &Path) -> std::io::Result<Arc<dyn Member>> {
    open_member(
        path,
        &MemberOpen {
            emulate: None,
            create_bytes: None,
            lock: false,
            direct: false,
        },
    )
}

/// How a pool opens a member.
#[derive(Clone, Copy, Debug)]
pub(super) struct MemberOpen<'a> {
    /// Emulated speed (`hdd:150MB/s:8ms`), if any.
    pub emulate: Option<&'a str>,
    /// Create the file, or grow it, to this many bytes.
    pub create_bytes: Option<u64>,
    /// Lock it against other raidforge processes (every pool that does I/O; only a status
    /// peek does not).
    pub lock: bool,
    /// Open it with O_DIRECT.
    pub direct: bool,
}

/// Opens a member.
pub(super) fn open_member(path: &Path, how: &MemberOpen) -> std::io::Result<Arc<dyn Member>> {
    if is_nbd_path(path) {
        // An NBD export: its server owns the storage (no lock, no O_DIRECT, its size is fixed).
        return emulated(NbdMember::open(&path.to_string_lossy())?, how.emulate);
    }
    let f = FileMember::open(
        path,
        OpenOpts {
            direct: how.direct,
            create_bytes: how.create_bytes,
        },
    )?;
    if how.lock {
        f.lock_exclusive()?;
    }
    emulated(f, how.emulate)
}

/// Member `m`, at the emulated speed `spec` (`hdd:150MB/s:8ms`) when given.
fn emulated<M: Member + 'static>(m: M, spec: Option<&str>) -> std::io::Result<Arc<dyn Member>> {
    Ok(match spec {
        Some(spec) => {
            let speed = Speed::parse(spec).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            })?;
            Arc::new(Emulated::new(m, speed))
        }
        None => Arc::new(m),
    })
}

impl Pool {
    /// Changes (or removes, with `None`) the emulated speed of every member, now and in the
    /// descriptor.
    pub fn set_emulation(&mut self, spec: Option<String>) -> Result<()> {
        if self.md.is_some() {
            return Err(PoolError::Usage(
                "changing the emulated speed of an MD-format pool's members is not supported; \
                 give --emulate when assembling it"
                    .into(),
            ));
        }
        let direct = self.file.desc.direct;
        if let Some(s) = &spec {
            Speed::parse(s).map_err(|e| PoolError::Usage(e.to_string()))?;
        }
        for (i, md) in self.file.desc.members.iter_mut().enumerate() {
            md.emulate = spec.clone();
            // The old handle goes first: it holds the member's lock.
            if let Some(old) = self.members.handles[i].take() {
                drop(old);
                let how = MemberOpen {
                    emulate: spec.as_deref(),
                    create_bytes: None,
                    lock: true,
                    direct,
                };
                match open_member(&md.path, &how) {
                    Ok(m) => self.members.handles[i] = Some(m),
                    Err(e) => {
                        let reason = e.to_string();
                        // Put the member back as it was (without emulation) if possible.
                        let plain = MemberOpen {
                            emulate: None,
                            ..how
                        };
                        self.members.handles[i] = open_member(&md.path, &plain).ok();
                        return Err(PoolError::Member {
                            index: i,
                            path: md.path.clone(),
                            reason,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The members this open left out (missing, unusable or stale at assembly; their
    /// `failed_why` in [`Pool::status`] says which).
    pub fn left_out_at_open(&self) -> &[usize] {
        &self.members.left_out
    }

    /// Replaces member `i`'s handle with `f(handle)`, for fault injection (wrap it in
    /// [`crate::Faulty`]); nothing on disk changes. No-op for a failed member.
    pub fn wrap_member(&mut self, i: usize, f: impl FnOnce(Arc<dyn Member>) -> Arc<dyn Member>) {
        if let Some(m) = self.members.handles[i].take() {
            self.members.handles[i] = Some(f(m));
        }
    }

    /// Test support: replaces every present member handle with `f(index, handle)` (a
    /// [`crate::crash::CrashSim`] wrapper, say). The pool does not notice.
    pub fn wrap_members(&mut self, mut f: impl FnMut(usize, Arc<dyn Member>) -> Arc<dyn Member>) {
        for (i, m) in self.members.handles.iter_mut().enumerate() {
            if let Some(h) = m.take() {
                *m = Some(f(i, h));
            }
        }
    }

    pub(crate) fn fail_members(&mut self, which: &[u32]) -> Result<()> {
        for &d in which {
            if let Some(h) = self.members.handles[d as usize].take() {
                self.state.fail(&self.geo, d)?;
                self.sb.events.push(Event::Fail(d));
                self.file.desc.members[d as usize].failed_why = Some(failure_why(
                    &*h,
                    "I/O error (a read or write of it failed)".into(),
                ));
            }
        }
        let tag = self.tag();
        self.persist(tag)
    }

    /// Marks member `i` failed (as if it had died), then flushes the deferred parity.
    pub fn fail(&mut self, i: usize) -> Result<()> {
        self.fail_no_flush(i)?;
        // Deferred parity before anything else: then a second failure is survived again.
        self.flush_bpgl(0)?;
        Ok(())
    }

    /// [`Pool::fail`] without the flush (a served pool flushes under stripe locks itself).
    pub(crate) fn fail_no_flush(&mut self, i: usize) -> Result<()> {
        if i >= self.members.handles.len() {
            return Err(PoolError::Usage(format!(
                "member {i} does not exist (the pool has members 0..{})",
                self.members.handles.len() - 1
            )));
        }
        let outcome = self.state.fail(&self.geo, i as Disk)?;
        self.members.handles[i] = None;
        self.sb.events.push(Event::Fail(i as u32));
        self.file.desc.members[i].failed_why = Some("failed by `raidforge fail`".into());
        let tag = self.tag();
        self.persist(tag)?;
        if self.state.data_lost(&self.geo) {
            return Err(PoolError::Usage(format!(
                "member {i} is failed and the pool has lost data: with {} missing, some \
                 stripes cannot be reconstructed{}",
                self.state
                    .failed()
                    .iter()
                    .map(|d| format!("m{d}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if outcome.blocked.is_some() {
                    " (and no layout is left to rebuild into)"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }

    /// Replaces failed member `i` with a new (empty) member at `path`.
    pub fn replace(&mut self, i: usize, path: &Path) -> Result<()> {
        if self.md.is_some() {
            return self.replace_md(i, path);
        }
        self.check_replaceable(i)?;
        let size = self.map.data_offset_bytes + self.map.data_bytes;
        refuse_occupied(i, path)?;
        let how = MemberOpen {
            emulate: self.file.desc.members[i].emulate.as_deref(),
            create_bytes: Some(size),
            lock: true,
            direct: self.file.desc.direct,
        };
        let m = open_member(path, &how).map_err(|e| PoolError::Member {
            index: i,
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if m.size_bytes() < size {
            return Err(PoolError::Member {
                index: i,
                path: path.to_path_buf(),
                reason: format!("holds {} bytes, need {size}", m.size_bytes()),
            });
        }
        let m = match &self.members.wrap {
            Some(w) => w(i, m),
            None => m,
        };
        self.reset_checksums_of(i, &m, path)?;
        self.state.replace(&self.geo, i as Disk)?;
        self.members.handles[i] = Some(m);
        if let Some(j) = self.wh.journal.clone() {
            j.member_replaced(i as u32, &self.members.handles)
                .map_err(|e| PoolError::Io(e.to_string()))?;
            let failed = j.take_failed_members();
            if !failed.is_empty() {
                self.fail_members(&failed)?;
            }
        }
        self.record_replaced(i, path)
    }

    /// Lets failed member `i` rejoin without a rebuild when its file came back unchanged
    /// (`raidforge re-add`, like mdadm's `--re-add`): the file at the member's path must hold
    /// this pool's superblock for slot `i` from just before it failed (its history is the
    /// pool's up to that failure and its layout record the pool's now: it missed nothing
    /// else), nothing may have moved since ([`ArrayState::re_add`]), and every stripe,
    /// read with the member back, must be consistent: a write the pool took while the member
    /// was away changed a stripe's parity (or a mirror) and not the member, so a stale
    /// member shows there. Only reads until all that holds; then the superblocks record the
    /// member present. Refused, with nothing written, otherwise (then `replace` + `rebuild`).
    /// Returns the stripes checked.
    pub fn re_add(&mut self, i: usize) -> Result<u64> {
        let n = self.members.handles.len();
        if i >= n {
            return Err(PoolError::Usage(format!(
                "member {i} does not exist (the pool has members 0 to {})",
                n - 1
            )));
        }
        if self.members.handles[i].is_some() {
            return Err(PoolError::Usage(format!(
                "member {i} has not failed: there is nothing to re-add"
            )));
        }
        let path = self.file.desc.members[i].path.clone();
        let refuse = |why: String| {
            PoolError::Usage(format!(
                "member {i} ({}) cannot rejoin as it is: {why}; put a blank member in its place \
                 with `raidforge replace` and run `raidforge rebuild`",
                path.display()
            ))
        };
        let unsupported = if self.md.is_some() {
            Some("a pool in Linux MD's format")
        } else if self.integrity.checksums.is_some() {
            Some("a pool with checksums")
        } else if self.wh.mode == WriteHole::Journal {
            Some("a pool with a write journal")
        } else {
            None
        };
        if let Some(what) = unsupported {
            return Err(refuse(format!("re-add is not supported for {what} yet")));
        }
        if self.geo.scheme().tolerance() == 0 {
            return Err(refuse(
                "the layout has no redundancy to check it against".into(),
            ));
        }
        if self.state.bpgl().len() > 0 {
            return Err(refuse(
                "stripes with deferred parity cannot be checked against it".into(),
            ));
        }
        if self.ido.phase() != crate::ido::Phase::Normal {
            return Err(refuse("a rebuild with a policy is under way".into()));
        }
        let how = MemberOpen {
            emulate: self.file.desc.members[i].emulate.as_deref(),
            create_bytes: None,
            lock: true,
            direct: self.file.desc.direct,
        };
        let m = open_member(&path, &how).map_err(|e| refuse(format!("cannot open it: {e}")))?;
        let sb = read_superblock(&*m)
            .map_err(|e| refuse(format!("it holds no readable raidforge superblock ({e})")))?;
        if sb.uuid != self.sb.uuid || sb.member_index != i as u32 {
            return Err(refuse(format!(
                "it holds the superblock of {} (pool {}, member {})",
                if sb.uuid == self.sb.uuid {
                    "another member of this pool"
                } else {
                    "another pool"
                },
                hex(&sb.uuid),
                sb.member_index
            )));
        }
        let missed = self
            .sb
            .events
            .strip_prefix(sb.events.as_slice())
            .filter(|rest| *rest == [Event::Fail(i as u32)]);
        if missed.is_none() || sb.runs != self.state.layout_runs() {
            return Err(refuse(format!(
                "it is stale (superblock generation {}, the pool's {}): the pool recorded \
                 failures, replacements or rebuilt cycles it did not see",
                sb.generation, self.sb.generation
            )));
        }
        let mut state = self.state.clone();
        state
            .re_add(&self.geo, i as Disk)
            .map_err(|e| refuse(e.to_string()))?;
        let m = match &self.members.wrap {
            Some(w) => w(i, m),
            None => m,
        };
        // Every stripe read with the member back, under the state it would have; nothing is
        // written and nothing failed until every stripe agrees.
        let saved = std::mem::replace(&mut self.state, state);
        self.members.handles[i] = Some(m);
        let mut checked = 0u64;
        let mut inconsistent = 0u64;
        let mut trouble = None;
        for c in 0..self.geo.cycles() {
            let plan = raidcore::plan_verify_cycle(&self.geo, &self.state, c);
            match crate::exec::run_reads(&plan, &self.members_view()) {
                Ok(bufs) => {
                    let o = raidcore::check_verify(&self.state, &plan, &bufs);
                    checked += o.checked as u64;
                    inconsistent += o.inconsistent.len() as u64;
                    if o.degraded > 0 {
                        trouble = Some(format!(
                            "{} stripes of cycle {c} could not be read whole",
                            o.degraded
                        ));
                    }
                }
                Err(e) => {
                    trouble = Some(format!(
                        "reading cycle {c} failed ({} member blocks), so it could not be checked",
                        e.bad.len().max(e.failed_members().len())
                    ))
                }
            }
            if trouble.is_some() {
                break;
            }
        }
        if trouble.is_some() || inconsistent > 0 {
            self.members.handles[i] = None;
            self.state = saved;
            return Err(refuse(trouble.unwrap_or_else(|| {
                format!(
                    "it is stale: {inconsistent} of {checked} stripes disagree with it (the \
                     pool took writes while it was away)"
                )
            })));
        }
        self.file.desc.members[i].failed_why = None;
        let tag = self.tag();
        self.persist(tag)?;
        // Its deferred-parity records are from before it failed, and a start that took an
        // older list while it was away numbered the pool's from below them: the next record
        // is numbered after its own, or the next start could take its old list for the
        // newest.
        let back = self.members.handles[i].clone();
        if let Some((r, _)) = newest_bpgl(std::slice::from_ref(&back), &self.sb.uuid) {
            if r.sequence >= self.lazy.seq {
                self.lazy.seq = r.sequence;
                self.persist_bpgl()?;
            }
        }
        Ok(checked)
    }

    /// The end of a replace, in either format: member `i` replaced by `path` goes into the
    /// history and the descriptor (its path, no failure reason, counters from zero), and the
    /// superblocks record it.
    pub(super) fn record_replaced(&mut self, i: usize, path: &Path) -> Result<()> {
        self.sb.events.push(Event::Replace(i as u32));
        let d = &mut self.file.desc.members[i];
        d.path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        d.failed_why = None;
        d.read_bytes = 0;
        d.write_bytes = 0;
        d.reads = 0;
        d.writes = 0;
        d.meta_writes = 0;
        let tag = self.tag();
        self.persist(tag)
    }

    /// Refuses to replace member `i` unless it exists and has failed.
    pub(super) fn check_replaceable(&self, i: usize) -> Result<()> {
        if i >= self.members.handles.len() {
            return Err(PoolError::Usage(format!("member {i} does not exist")));
        }
        if self.members.handles[i].is_some() {
            return Err(PoolError::Usage(format!(
                "member {i} has not failed: fail it first with `raidforge fail`"
            )));
        }
        Ok(())
    }

    /// With checksums on, the replacement `m` of member `i` gets the checksums of zeros: it
    /// holds nothing valid until rebuilt, and the rebuild writes the real ones with the data.
    /// The copies of its entries on other members are rewritten too, and its region gets the
    /// copies of other members' entries it holds. A copy's holder that fails meanwhile is
    /// failed (as a failing write fails its member) and the copies are written again without
    /// it.
    fn reset_checksums_of(&mut self, i: usize, m: &Arc<dyn Member>, path: &Path) -> Result<()> {
        let Some(c) = self.integrity.checksums.clone() else {
            return Ok(());
        };
        loop {
            let mut slots = self.members.handles.clone();
            slots[i] = Some(m.clone());
            match c.reset_zeroed(i, &slots) {
                Ok(()) => return Ok(()),
                Err(e) if e.member != i && self.members.handles[e.member].is_some() => {
                    self.fail_members(&[e.member as u32])?;
                }
                Err(e) => {
                    return Err(PoolError::Member {
                        index: i,
                        path: path.to_path_buf(),
                        reason: format!("writing checksum region pages: {}", e.source),
                    })
                }
            }
        }
    }
}

/// Refuses a replacement for member `i` at `path` that holds something: any raidforge member
/// (another pool's, or a stale copy of this one), or content a replacement would overwrite.
/// A replacement starts from empty space.
fn refuse_occupied(i: usize, path: &Path) -> Result<()> {
    let Ok(existing) = probe_member(path) else {
        return Ok(());
    };
    if let Ok(sb) = read_superblock(&*existing) {
        return Err(PoolError::Member {
            index: i,
            path: path.to_path_buf(),
            reason: format!(
                "already holds a raidforge superblock (pool {}); erase it first with `raidforge \
                 wipe {}` if it is no longer needed",
                hex(&sb.uuid),
                path.display()
            ),
        });
    }
    if let Some(what) = super::site::foreign_content(&existing, path) {
        return Err(PoolError::Member {
            index: i,
            path: path.to_path_buf(),
            reason: format!(
                "is not a raidforge member and holds {what}: a replacement would overwrite it; \
                 choose an empty or new file or device"
            ),
        });
    }
    Ok(())
}

/// Erases a member that is no longer wanted (`raidforge wipe`, like `mdadm
/// --zero-superblock`), so that `create`, `replace` and `assemble` no longer see a pool there
/// and take it as blank: a file is emptied (truncated, then regrown sparse to its size: all
/// zeros); on a device every byte before the data area (superblocks, deferred parity lists,
/// write-intent bitmap, journal, checksums) and the last MiB are zeroed. Refused when a
/// running raidforge process holds the member, and when the path holds no raidforge
/// superblock (nothing is written then). Returns the pool's UUID.
pub fn wipe_member(path: &Path) -> Result<[u8; 16]> {
    let member_err = |reason: String| PoolError::Usage(format!("{}: {reason}", path.display()));
    let m = FileMember::open(path, OpenOpts::default()).map_err(|e| member_err(e.to_string()))?;
    if let Err(e) = m.lock_exclusive() {
        return Err(member_err(format!(
            "is in use by a running raidforge process ({e}); stop it first"
        )));
    }
    let sb = read_superblock(&m).map_err(|e| member_err(format!("nothing to wipe: {e}")))?;
    let io = |e: std::io::Error| member_err(e.to_string());
    let size = m.size_bytes();
    if std::fs::metadata(path).map_err(io)?.is_file() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io)?;
        f.set_len(0).and_then(|_| f.set_len(size)).map_err(io)?;
        f.sync_all().map_err(io)?;
        return Ok(sb.uuid);
    }
    let end = sb.data_offset_bytes.min(size);
    let tail = size.saturating_sub(1 << 20).max(end);
    let zero = vec![0u8; 1 << 20];
    for (mut off, stop) in [(0, end), (tail, size)] {
        while off < stop {
            let n = zero.len().min((stop - off) as usize);
            m.write_at(&zero[..n], off).map_err(io)?;
            off += n as u64;
        }
    }
    m.flush().map_err(io)?;
    Ok(sb.uuid)
}

/// Why an I/O error failed member `m`: [`DISAPPEARED_WHY`] when its device is no longer there
/// ([`Member::gone`]), `otherwise` if it is.
pub(crate) fn failure_why(m: &dyn Member, otherwise: String) -> String {
    match m.gone() {
        Some(g) => format!("{DISAPPEARED_WHY}: {g} ({otherwise})"),
        None => otherwise,
    }
}

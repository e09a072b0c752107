//! Creating a pool, in three steps: [`Site::probe`] (`site.rs`) looks at the descriptor path
//! and the member paths (reading, writing nothing); [`CreatePlan::check`] makes every decision and
//! every refusal from what was found, without I/O; only then are the members zeroed and the
//! first superblocks written. A refused create therefore changes nothing.

use super::*;

pub(super) fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = (&f).read_exact(&mut u);
    }
    // Fall back to the clock and pid if urandom was unreadable (never expected on Linux).
    if u == [0u8; 16] {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        u[..16].copy_from_slice(&(t ^ ((std::process::id() as u128) << 64)).to_le_bytes());
    }
    u
}

pub(super) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Everything create decided before its first write.
pub(super) struct CreatePlan {
    /// The layout parameters, the member count filled in.
    pub params: Params,
    /// Bytes of every member.
    pub size: u64,
    pub geo: Geometry,
    pub map: MemberMap,
    /// The array state, the deferred-parity bound set.
    pub state: ArrayState,
    pub ido: Ido,
}

impl CreateOpts {
    /// The scheme's parameters with `disks` set to the members given (`--disks`, when given,
    /// must agree).
    pub(super) fn member_params(&self) -> Result<Params> {
        let n = self.members.len();
        let mut params = self.params.clone();
        match params.disks {
            None => params.disks = Some(n),
            Some(d) if d != n => {
                return Err(PoolError::Usage(format!(
                    "--disks {d} but {n} --member paths given: give one --member per disk"
                )))
            }
            _ => {}
        }
        Ok(params)
    }
}

/// The most layout cycles a pool may have: the array state holds 4 bytes per cycle in memory
/// (4 GiB at this bound). With 64 KiB chunks that is 64 TiB per member on a mirror, whose
/// cycle is one chunk row, and more on layouts with longer cycles.
pub const MAX_CYCLES: u64 = 1 << 30;

impl CreatePlan {
    /// Checks `opts` against what `site` found and lays the members out. No I/O: every
    /// refusal of create is made here.
    pub fn check(opts: &CreateOpts, site: &Site) -> Result<CreatePlan> {
        let n = opts.members.len();
        let params = opts.member_params()?;
        if n == 0 {
            return Err(PoolError::Usage("no --member given".into()));
        }
        Self::check_options(opts, site)?;
        let scheme = layout::build(opts.scheme, &params)?;
        let size = Self::member_size(opts, site)?;
        let map = Self::lay_out(opts, &*scheme, size)?;
        let geo = Self::geometry(opts, scheme, &map, size)?;
        Self::check_members(opts, site, size)?;
        // The array state keeps a few bytes per layout cycle in memory: a size that makes
        // more cycles than that can hold is refused here, not met by an allocation failure.
        if geo.cycles() > MAX_CYCLES {
            return Err(PoolError::Usage(format!(
                "--member-size {size} bytes per member makes {} layout cycles; raidforge keeps the \
                 state of every cycle in memory and takes at most {MAX_CYCLES}: choose a \
                 smaller --member-size, or a larger --chunk (a cycle grows with the chunk)",
                geo.cycles()
            )));
        }
        if !opts.force {
            Self::check_room(opts, site, size)?;
        }
        let mut state = ArrayState::new(&geo);
        let cap = opts.bpgl_capacity.unwrap_or(BPGL_DEFAULT_CAPACITY);
        if cap > BPGL_MAX_CAPACITY {
            return Err(PoolError::Usage(format!(
                "--bpgl-capacity {cap} is too large (at most {BPGL_MAX_CAPACITY})"
            )));
        }
        state.set_bpgl_capacity(cap);
        if opts.parity == ParityPolicy::Lazy && !state.lazy_groups().supported() {
            return Err(PoolError::Usage(format!(
                "--parity lazy needs a two-parity layout (rm2, raid6, or raidplus/random/hash \
                 with --level 6); {} has no parity to defer",
                opts.scheme.name()
            )));
        }
        let ido = Ido::new(
            geo.capacity_bytes(),
            geo.data_per_cycle() * geo.chunk_bytes(),
            DEFAULT_ZONE_BYTES.max(Ido::min_zone_bytes(geo.capacity_bytes())),
        )?;
        Ok(CreatePlan {
            params,
            size,
            geo,
            map,
            state,
            ido,
        })
    }

    /// The options that need nothing but themselves and the descriptor path.
    pub(super) fn check_options(opts: &CreateOpts, site: &Site) -> Result<()> {
        if site.desc_exists && !opts.force {
            return Err(PoolError::Usage(format!(
                "{} already exists: choose another pool path or pass --force",
                site.desc_path.display()
            )));
        }
        if opts.chunk_bytes == 0 || !opts.chunk_bytes.is_multiple_of(4096) {
            return Err(PoolError::Usage(format!(
                "--chunk {} must be a positive multiple of 4096 bytes",
                opts.chunk_bytes
            )));
        }
        if let Some(spec) = &opts.emulate {
            Speed::parse(spec).map_err(|e| PoolError::Usage(format!("--emulate {spec}: {e}")))?;
        }
        Ok(())
    }

    /// Member size: given, or the smallest existing member.
    pub(super) fn member_size(opts: &CreateOpts, site: &Site) -> Result<u64> {
        if let Some(s) = opts.size_bytes {
            return Ok(s);
        }
        let mut min = u64::MAX;
        for (_, found) in &site.members {
            match found {
                Found::Present { size, .. } => min = min.min(*size),
                Found::Absent { open_error: e, .. } | Found::Unopenable(e) => {
                    return Err(PoolError::Usage(format!(
                        "{e}; pass --member-size to create member files"
                    )))
                }
            }
        }
        Ok(min)
    }

    /// Metadata regions from [`region::POOL_REGIONS_START`] up: the write journal first, then
    /// the block checksums; the data area after them, aligned to 1 MiB and to the chunk.
    fn lay_out(opts: &CreateOpts, scheme: &dyn layout::Scheme, size: u64) -> Result<MemberMap> {
        let journal = match opts.write_hole {
            WriteHole::None => Region::default(),
            WriteHole::Journal => {
                let j = opts
                    .journal_bytes
                    .unwrap_or_else(|| default_journal_bytes(size));
                if j < 64 << 10 || !j.is_multiple_of(4096) {
                    return Err(PoolError::Usage(format!(
                        "--journal-size {j} must be a multiple of 4096 bytes, at least 64 KiB"
                    )));
                }
                Region::new(JOURNAL_OFFSET_BYTES, j)
            }
        };
        let regions_start = (JOURNAL_OFFSET_BYTES + journal.bytes).max(DEFAULT_DATA_OFFSET_BYTES);
        let checksums = if opts.checksums {
            let copies = crate::csum::copies_for(scheme.cycle().disks, scheme.tolerance());
            let len = crate::csum::region_bytes(size.saturating_sub(regions_start), copies);
            Region::new(regions_start, len)
        } else {
            Region::default()
        };
        let regions_end = regions_start + checksums.bytes;
        let data_offset = if regions_end == DEFAULT_DATA_OFFSET_BYTES {
            DEFAULT_DATA_OFFSET_BYTES
        } else {
            regions_end
                .next_multiple_of(1 << 20)
                .next_multiple_of(opts.chunk_bytes.max(4096))
        };
        if size <= data_offset {
            return Err(PoolError::Usage(format!(
                "member size {size} bytes is too small: the first {data_offset} bytes hold metadata"
            )));
        }
        let map = MemberMap {
            data_offset_bytes: data_offset,
            // Whole chunks only.
            data_bytes: (size - data_offset) / opts.chunk_bytes * opts.chunk_bytes,
            checksums,
            journal,
        };
        if let Err(e) = map.check() {
            panic!("create laid the member's regions out wrong: {e}");
        }
        Ok(map)
    }

    /// The geometry of the data area `map` leaves.
    fn geometry(
        opts: &CreateOpts,
        scheme: Arc<dyn layout::Scheme>,
        map: &MemberMap,
        size: u64,
    ) -> Result<Geometry> {
        let geo = match Geometry::new_spread(
            scheme,
            opts.chunk_bytes,
            map.data_bytes,
            &crate::spread::Cores,
        ) {
            Err(raidcore::CoreError::MemberTooSmall { needed_bytes, .. }) => {
                return Err(PoolError::Usage(format!(
                    "member size {size} bytes is too small: this layout needs at least {} bytes \
                     per member ({} of metadata and one cycle of {needed_bytes})",
                    map.data_offset_bytes + needed_bytes,
                    map.data_offset_bytes
                )))
            }
            r => r?,
        };
        // O_DIRECT and checksums (verified per 4 KiB block) both need whole-block member I/O;
        // the planner then reads and merges partial blocks itself.
        Ok(if opts.direct || opts.checksums {
            geo.with_io_align(DIRECT_ALIGN_BYTES)?
        } else {
            geo
        })
    }

    /// Every member path: named once, not another pool's (without `--force`), not locked
    /// by another process, a device large enough, a file that can be created.
    pub(super) fn check_members(opts: &CreateOpts, site: &Site, size: u64) -> Result<()> {
        if let Some(dir) = &site.desc_dir_missing {
            return Err(PoolError::Usage(format!(
                "cannot write {}: directory {} does not exist",
                site.desc_path.display(),
                dir.display()
            )));
        }
        let mut seen: Vec<&PathBuf> = Vec::new();
        for (i, (p, (id, found))) in opts.members.iter().zip(&site.members).enumerate() {
            let member_err = |reason: String| PoolError::Member {
                index: i,
                path: p.clone(),
                reason,
            };
            if seen.contains(&id) {
                return Err(member_err(
                    "is given twice: every member needs its own file or device".into(),
                ));
            }
            seen.push(id);
            match found {
                Found::Present {
                    lock_error: Some(e),
                    ..
                }
                | Found::Unopenable(e) => return Err(member_err(e.clone())),
                Found::Present {
                    pool: Some(uuid), ..
                } if !opts.force => {
                    return Err(member_err(format!(
                        "already a member of pool {} (pass --force to overwrite it)",
                        hex(uuid)
                    )))
                }
                Found::Present {
                    foreign: Some(what),
                    size: have,
                    ..
                } if !opts.force => {
                    return Err(member_err(format!(
                        "is not a raidforge member and holds {what} ({have} bytes): create \
                         would overwrite it; pass --force to overwrite it, or choose an empty \
                         or new file"
                    )))
                }
                Found::Present {
                    size: have,
                    is_file: false,
                    ..
                } if *have < size => {
                    return Err(member_err(format!(
                        "device holds {have} bytes, need {size}"
                    )))
                }
                Found::Absent {
                    dir_missing: Some(dir),
                    ..
                } => {
                    return Err(member_err(format!(
                        "cannot create it: directory {} does not exist",
                        dir.display()
                    )))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl CreatePlan {
    /// Member files are made sparse: they take no room when created and fill as the pool is
    /// written, so a file system without room for them all would let create succeed and fail
    /// writes later (`ENOSPC`), or refuse the size outright (`EFBIG`, a 0-byte file). Refused
    /// here, before anything is written, when the files on one file system need more than it
    /// has free (plus what emptying the existing files frees); `--force` skips the check.
    pub(super) fn check_room(opts: &CreateOpts, site: &Site, size: u64) -> Result<()> {
        let mut by_fs: Vec<(u64, u64, u64, Vec<&Path>)> = Vec::new();
        for (p, room) in opts.members.iter().zip(&site.rooms) {
            let Some(r) = room else { continue };
            match by_fs.iter_mut().find(|(fs, ..)| *fs == r.fs) {
                Some((_, _, held, paths)) => {
                    *held += r.held_bytes;
                    paths.push(p);
                }
                None => by_fs.push((r.fs, r.free_bytes, r.held_bytes, vec![p])),
            }
        }
        for (_, free, held, paths) in by_fs {
            let need = size.saturating_mul(paths.len() as u64);
            let room = free.saturating_add(held);
            if need > room {
                let mut names: Vec<String> =
                    paths.iter().map(|p| p.display().to_string()).collect();
                // A large enclosure's list is cut: the first few and the last say which.
                if names.len() > 6 {
                    let last = names.pop().expect("more than six");
                    names.truncate(4);
                    names.push(format!("... {last}"));
                }
                let one = paths.len() == 1;
                return Err(PoolError::Usage(format!(
                    "member file{} {} need{} {} x {size} bytes ({}) when the pool is full, and \
                     {} file system has {} free{}: member files start sparse, so create would \
                     succeed and writes would fail later for lack of space; choose a smaller \
                     --member-size or another file system, or pass --force to create {} anyway",
                    if one { "" } else { "s" },
                    names.join(", "),
                    if one { "s" } else { "" },
                    paths.len(),
                    gib(need),
                    if one { "its" } else { "their" },
                    gib(free),
                    if held > 0 {
                        format!(" (and they hold {} now)", gib(held))
                    } else {
                        String::new()
                    },
                    if one { "it" } else { "them" },
                )));
            }
        }
        Ok(())
    }
}

/// Bytes in GiB, for messages.
fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Zeroes (or creates) every member and opens it: all-zero data is parity-consistent for
/// every code (all-zero data has all-zero P and Q). Files are truncated and grown (sparse),
/// devices written with zeros.
pub(super) fn zeroed_members(opts: &CreateOpts, size: u64) -> Result<Vec<Option<Arc<dyn Member>>>> {
    let mut members: Vec<Option<Arc<dyn Member>>> = Vec::new();
    for (i, p) in opts.members.iter().enumerate() {
        let member_err = |reason: String| PoolError::Member {
            index: i,
            path: p.clone(),
            reason,
        };
        if let Ok(existing) = super::membership::probe_member(p) {
            let io = |e: std::io::Error| PoolError::Io(format!("{}: {e}", p.display()));
            if !crate::nbd_member::is_nbd_path(p) && std::fs::metadata(p).map_err(io)?.is_file() {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map_err(io)?;
                f.set_len(0).and_then(|_| f.set_len(size)).map_err(io)?;
            } else {
                let zero = vec![0u8; 1 << 20];
                let mut off = 0;
                while off < size {
                    let n = zero.len().min((size - off) as usize);
                    existing.write_at(&zero[..n], off).map_err(io)?;
                    off += n as u64;
                }
            }
        }
        let how = MemberOpen {
            emulate: opts.emulate.as_deref(),
            create_bytes: Some(size),
            lock: true,
            direct: opts.direct,
        };
        let m = open_member(p, &how).map_err(|e| {
            member_err(match e.raw_os_error() {
                Some(libc::EFBIG) | Some(libc::ENOSPC) => format!(
                    "cannot be made {size} bytes long ({e}): choose a smaller --member-size, or a \
                     file system or device that holds it"
                ),
                _ => e.to_string(),
            })
        })?;
        if m.size_bytes() < size {
            return Err(member_err(format!(
                "holds {} bytes, need {size}",
                m.size_bytes()
            )));
        }
        members.push(Some(m));
    }
    Ok(members)
}

impl Pool {
    /// Creates a new pool: lays out the members, writes their superblocks and the descriptor.
    pub fn create(desc_path: &Path, opts: CreateOpts) -> Result<Pool> {
        Self::create_wrapped(desc_path, opts, None)
    }

    /// [`Pool::create`] with every member wrapped by `wrap` (before the first superblock is
    /// written), and every replacement later.
    pub fn create_wrapped(
        desc_path: &Path,
        opts: CreateOpts,
        wrap: Option<MemberWrap>,
    ) -> Result<Pool> {
        if opts.metadata == Metadata::Md {
            return Self::create_md(desc_path, opts, wrap);
        }
        let site = Site::probe(desc_path, &opts.members);
        let plan = CreatePlan::check(&opts, &site)?;
        // The first write. Member files this create made are removed again when it fails
        // there (a size the file system refuses, a full disk): nothing is left behind.
        let members = zeroed_members(&opts, plan.size).inspect_err(|_| {
            for (p, (_, found)) in opts.members.iter().zip(&site.members) {
                if matches!(found, Found::Absent { .. }) {
                    let _ = std::fs::remove_file(p);
                }
            }
        })?;
        let checksums = if opts.checksums {
            let copies = crate::csum::copies_for(plan.geo.disks(), plan.geo.scheme().tolerance());
            let c = Checksums::create_zeroed(
                &members,
                plan.map.checksums.offset,
                plan.map.data_bytes,
                copies,
            )
            .map_err(|e| PoolError::Io(format!("writing the checksum regions: {e}")))?;
            Some(Arc::new(c))
        } else {
            None
        };
        let uuid = random_uuid();
        // A pool without a journal marks the regions it writes, to resynchronise only those
        // after a crash; the journal makes that unnecessary.
        let intent = (opts.write_hole != WriteHole::Journal)
            .then(|| Arc::new(WriteIntent::new(uuid, &plan.geo)));
        let mut pool = Pool {
            geo: plan.geo,
            state: plan.state,
            file: DescriptorFile {
                path: desc_path.to_path_buf(),
                desc: Descriptor::new(&uuid, &opts.members, &opts.emulate, opts.direct),
            },
            sb: SuperblockState {
                uuid,
                kind: opts.scheme,
                params: plan.params,
                events: Vec::new(),
                generation: 0,
                created_unix_secs: now_unix(),
                rebuilt_unrecorded: Default::default(),
                moved_unrecorded: false,
            },
            map: plan.map,
            members: MemberSet::new(members),
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: opts.parity,
                seq: 0,
                dirty: true,
                on_disk: Vec::new(),
                commit: Default::default(),
            },
            integrity: Integrity {
                checksums,
                lost_pending: Vec::new(),
                rewriting_lost: Vec::new(),
                resync: None,
            },
            wh: WriteHoleState {
                mode: opts.write_hole,
                journal: None,
                intent,
            },
            ido: Arc::new(plan.ido),
            md: None,
        };
        pool.apply_wrap(wrap);
        pool.persist(ArrayStateTag::Clean)?;
        if opts.write_hole == WriteHole::Journal {
            let j = Journal::create(pool.journal_geometry(), &pool.members.handles)
                .map_err(|e| PoolError::Io(e.to_string()))?;
            pool.wh.journal = Some(Arc::new(j));
        }
        Ok(pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn absent() -> Found {
        Found::Absent {
            open_error: "No such file or directory".into(),
            dir_missing: None,
        }
    }

    fn site(found: Vec<Found>) -> Site {
        Site {
            desc_path: "/x/pool.json".into(),
            desc_exists: false,
            desc_dir_missing: None,
            members: found
                .into_iter()
                .enumerate()
                .map(|(i, f)| (PathBuf::from(format!("/x/m{i}.img")), f))
                .collect(),
            rooms: Vec::new(),
        }
    }

    /// Every kind of thing found at a member path, alone among two fresh members, with the
    /// verdict it gets: what the refusal says, or `None` for none.
    #[test]
    fn each_thing_found_at_a_member_path_gets_its_verdict() {
        let present = |pool: Option<[u8; 16]>, is_file: bool, size: u64| Found::Present {
            size,
            is_file,
            pool,
            lock_error: None,
            foreign: None,
        };
        let cases: Vec<(Found, bool, Option<&str>)> = vec![
            (absent(), false, None),
            (
                Found::Absent {
                    open_error: "gone".into(),
                    dir_missing: Some("/nowhere".into()),
                },
                false,
                Some("directory /nowhere does not exist"),
            ),
            (
                Found::Unopenable("Permission denied".into()),
                false,
                Some("Permission denied"),
            ),
            (present(None, true, 1 << 20), false, None),
            (
                present(Some([9; 16]), true, 4 << 20),
                false,
                Some("already a member of pool 0909"),
            ),
            (present(Some([9; 16]), true, 4 << 20), true, None),
            (present(None, false, 4 << 20), false, None),
            (
                present(None, false, 3 << 20),
                false,
                Some("device holds 3145728 bytes, need 4194304"),
            ),
            (
                Found::Present {
                    size: 4 << 20,
                    is_file: true,
                    pool: None,
                    lock_error: Some("Resource temporarily unavailable".into()),
                    foreign: None,
                },
                true,
                Some("Resource temporarily unavailable"),
            ),
        ];
        for (found, force, says) in cases {
            let opts = CreateOpts {
                force,
                ..test_opts(SchemeKind::Raid5, Path::new("/x"), 3, 4 << 20)
            };
            let s = site(vec![absent(), found.clone(), absent()]);
            match (CreatePlan::check(&opts, &s), says) {
                (Ok(_), None) => {}
                (Err(e), Some(says)) => {
                    assert!(e.to_string().contains(says), "{found:?}: {e}");
                    assert!(e.to_string().contains("member 1"), "{found:?}: {e}");
                }
                (Ok(_), Some(says)) => panic!("{found:?} (force {force}) accepted, not: {says}"),
                (Err(e), None) => panic!("{found:?} (force {force}) refused: {e}"),
            }
        }
    }

    #[test]
    fn paths_given_twice_and_an_existing_descriptor_are_refused() {
        let opts = test_opts(SchemeKind::Raid5, Path::new("/x"), 3, 4 << 20);
        let mut s = site(vec![absent(), absent(), absent()]);
        s.members[2].0 = s.members[0].0.clone();
        let e = CreatePlan::check(&opts, &s).err().unwrap();
        assert!(e.to_string().contains("member 2") && e.to_string().contains("given twice"));
        let mut s = site(vec![absent(), absent(), absent()]);
        s.desc_exists = true;
        let e = CreatePlan::check(&opts, &s).err().unwrap();
        assert!(e.to_string().contains("/x/pool.json already exists"), "{e}");
        let forced = CreateOpts {
            force: true,
            ..opts.clone()
        };
        assert!(CreatePlan::check(&forced, &s).is_ok());
        s.desc_dir_missing = Some("/x".into());
        let e = CreatePlan::check(&forced, &s).err().unwrap();
        assert!(e.to_string().contains("cannot write /x/pool.json"), "{e}");
    }

    /// Without `--member-size`, members are sized like the smallest one found; one that is not
    /// there is an error naming the way out.
    #[test]
    fn member_size_comes_from_the_smallest_member_found() {
        let opts = CreateOpts {
            size_bytes: None,
            ..test_opts(SchemeKind::Raid5, Path::new("/x"), 3, 0)
        };
        let dev = |size| Found::Present {
            size,
            is_file: false,
            pool: None,
            lock_error: None,
            foreign: None,
        };
        let plan = CreatePlan::check(&opts, &site(vec![dev(5 << 20), dev(4 << 20), dev(6 << 20)]))
            .unwrap();
        assert_eq!(plan.size, 4 << 20);
        let e = CreatePlan::check(&opts, &site(vec![dev(5 << 20), absent(), dev(6 << 20)]))
            .err()
            .unwrap();
        assert!(e.to_string().contains("pass --member-size"), "{e}");
    }
}

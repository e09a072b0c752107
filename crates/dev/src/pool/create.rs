//! Creating a pool: checks, member files zeroed, the first superblocks.

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

/// What a member path names, for spotting the same file given twice: the canonical path, or
/// for a file not created yet its canonical directory and name.
pub(super) fn path_identity(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p.to_path_buf(),
    }
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
        if n == 0 {
            return Err(PoolError::Usage("no --member given".into()));
        }
        if desc_path.exists() && !opts.force {
            return Err(PoolError::Usage(format!(
                "{} already exists: choose another pool path or pass --force",
                desc_path.display()
            )));
        }
        let scheme = layout::build(opts.scheme, &params)?;
        if opts.chunk_bytes == 0 || opts.chunk_bytes % 4096 != 0 {
            return Err(PoolError::Usage(format!(
                "--chunk {} must be a positive multiple of 4096 bytes",
                opts.chunk_bytes
            )));
        }
        // Sizes: given, or the smallest existing member.
        let size = match opts.size_bytes {
            Some(s) => s,
            None => {
                let mut min = u64::MAX;
                for p in &opts.members {
                    let m = FileMember::open(p, OpenOpts::default()).map_err(|e| {
                        PoolError::Usage(format!("{e}; pass --size to create member files"))
                    })?;
                    min = min.min(m.size_bytes());
                }
                min
            }
        };
        // Metadata regions from 1 MiB up: the write journal first, then the block checksums;
        // the data area after them, aligned to 1 MiB and to the chunk.
        let journal_region = match opts.write_hole {
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
        let regions_start =
            (JOURNAL_OFFSET_BYTES + journal_region.bytes).max(DEFAULT_DATA_OFFSET_BYTES);
        let checksum_region = if opts.checksums {
            let copies = crate::csum::copies_for(scheme.cycle().disks, scheme.tolerance());
            let len = crate::csum::region_bytes(size.saturating_sub(regions_start), copies);
            Region::new(regions_start, len)
        } else {
            Region::default()
        };
        let regions_end = regions_start + checksum_region.bytes;
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
        // Whole chunks only.
        let data_bytes = (size - data_offset) / opts.chunk_bytes * opts.chunk_bytes;
        let geo = match Geometry::new(scheme, opts.chunk_bytes, data_bytes) {
            Err(raidcore::CoreError::MemberTooSmall { needed_bytes, .. }) => {
                return Err(PoolError::Usage(format!(
                    "member size {size} bytes is too small: this layout needs at least {} bytes \
                     per member ({data_offset} of metadata and one cycle of {needed_bytes})",
                    data_offset + needed_bytes
                )))
            }
            r => r?,
        };
        // O_DIRECT needs block-aligned member I/O; the planner then reads and merges partial
        // blocks itself.
        // O_DIRECT and checksums (verified per 4 KiB block) both need whole-block member I/O.
        let geo = if opts.direct || opts.checksums {
            geo.with_io_align(DIRECT_ALIGN_BYTES)?
        } else {
            geo
        };
        if let Some(spec) = &opts.emulate {
            Speed::parse(spec).map_err(|e| PoolError::Usage(format!("--emulate {spec}: {e}")))?;
        }
        if let Some(dir) = desc_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(PoolError::Usage(format!(
                    "cannot write {}: directory {} does not exist",
                    desc_path.display(),
                    dir.display()
                )));
            }
        }
        // Check every member before touching any, so that a refused create changes nothing.
        let mut seen: Vec<PathBuf> = Vec::new();
        for (i, p) in opts.members.iter().enumerate() {
            let member_err = |reason: String| PoolError::Member {
                index: i,
                path: p.clone(),
                reason,
            };
            let id = path_identity(p);
            if seen.contains(&id) {
                return Err(member_err(
                    "is given twice: every member needs its own file or device".into(),
                ));
            }
            seen.push(id);
            match FileMember::open(p, OpenOpts::default()) {
                Ok(existing) => {
                    existing
                        .lock_exclusive()
                        .map_err(|e| member_err(e.to_string()))?;
                    if let Ok(sb) = read_superblock(&existing) {
                        if !opts.force {
                            return Err(member_err(format!(
                                "already a member of pool {} (pass --force to overwrite it)",
                                hex(&sb.uuid)
                            )));
                        }
                    }
                    let is_file = std::fs::metadata(p).is_ok_and(|m| m.is_file());
                    if !is_file && existing.size_bytes() < size {
                        return Err(member_err(format!(
                            "device holds {} bytes, need {size}",
                            existing.size_bytes()
                        )));
                    }
                }
                Err(e) if p.exists() => return Err(member_err(e.to_string())),
                Err(_) => {
                    let dir = p
                        .parent()
                        .filter(|d| !d.as_os_str().is_empty())
                        .unwrap_or(Path::new("."));
                    if !dir.is_dir() {
                        return Err(member_err(format!(
                            "cannot create it: directory {} does not exist",
                            dir.display()
                        )));
                    }
                }
            }
        }
        // Start every member zeroed, which is parity-consistent for every code (all-zero data
        // has all-zero P and Q).
        let mut members: Vec<Option<Arc<dyn Member>>> = Vec::new();
        for (i, p) in opts.members.iter().enumerate() {
            if let Ok(existing) = FileMember::open(p, OpenOpts::default()) {
                if let Ok(sb) = read_superblock(&existing) {
                    if !opts.force {
                        return Err(PoolError::Member {
                            index: i,
                            path: p.clone(),
                            reason: format!(
                                "already a member of pool {} (pass --force to overwrite it)",
                                hex(&sb.uuid)
                            ),
                        });
                    }
                }
                let meta = std::fs::metadata(p).map_err(|e| PoolError::Io(e.to_string()))?;
                if meta.is_file() {
                    // Truncate then grow: a sparse file of zeros.
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .map_err(|e| PoolError::Io(format!("{}: {e}", p.display())))?;
                    f.set_len(0)
                        .and_then(|_| f.set_len(size))
                        .map_err(|e| PoolError::Io(format!("{}: {e}", p.display())))?;
                } else {
                    if existing.size_bytes() < size {
                        return Err(PoolError::Member {
                            index: i,
                            path: p.clone(),
                            reason: format!(
                                "device holds {} bytes, need {size}",
                                existing.size_bytes()
                            ),
                        });
                    }
                    let zero = vec![0u8; 1 << 20];
                    let mut off = 0;
                    while off < size {
                        let n = zero.len().min((size - off) as usize);
                        existing
                            .write_at(&zero[..n], off)
                            .map_err(|e| PoolError::Io(e.to_string()))?;
                        off += n as u64;
                    }
                }
            }
            let m = open_member(p, &opts.emulate, Some(size), true, opts.direct).map_err(|e| {
                PoolError::Member {
                    index: i,
                    path: p.clone(),
                    reason: e.to_string(),
                }
            })?;
            if m.size_bytes() < size {
                return Err(PoolError::Member {
                    index: i,
                    path: p.clone(),
                    reason: format!("holds {} bytes, need {size}", m.size_bytes()),
                });
            }
            members.push(Some(m));
        }
        let uuid = random_uuid();
        let desc = Descriptor {
            format: "raidforge-pool".into(),
            version: 1,
            uuid: hex(&uuid),
            members: opts
                .members
                .iter()
                .map(|p| MemberDesc {
                    path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
                    emulate: opts.emulate.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    reads: 0,
                    writes: 0,
                    meta_writes: 0,
                })
                .collect(),
            direct: opts.direct,
            repairs: RepairCounts::default(),
            lost: Vec::new(),
        };
        let checksums = if opts.checksums {
            Some(Arc::new(
                Checksums::create_zeroed(
                    &members,
                    checksum_region.offset,
                    data_bytes,
                    crate::csum::copies_for(geo.disks(), geo.scheme().tolerance()),
                )
                .map_err(|e| PoolError::Io(format!("writing the checksum regions: {e}")))?,
            ))
        } else {
            None
        };
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
        let capacity_for_ido = geo.capacity_bytes();
        let data_per_cycle_for_ido = geo.data_per_cycle() * geo.chunk_bytes();
        let mut pool = Pool {
            geo,
            state,
            file: DescriptorFile {
                path: desc_path.to_path_buf(),
                desc,
            },
            sb: SuperblockState {
                uuid,
                kind: opts.scheme,
                params,
                events: Vec::new(),
                generation: 0,
                created_unix_secs: now_unix(),
            },
            map: MemberMap {
                data_offset_bytes: data_offset,
                data_bytes,
                checksums: checksum_region,
                journal: journal_region,
            },
            members: MemberSet {
                handles: members,
                counters: (0..n).map(|_| Counters::default()).collect(),
                wrap: None,
            },
            policy: WritePolicy::Md,
            lazy: LazyParity {
                parity: opts.parity,
                seq: 0,
                dirty: true,
                on_disk: Vec::new(),
            },
            integrity: Integrity {
                checksums,
                lost_pending: Vec::new(),
            },
            wh: WriteHoleState {
                mode: opts.write_hole,
                journal: None,
            },
            ido: Arc::new(Ido::new(
                capacity_for_ido,
                data_per_cycle_for_ido,
                DEFAULT_ZONE_BYTES,
            )?),
        };
        if let Err(e) = pool.map.check() {
            panic!("create laid the member's regions out wrong: {e}");
        }
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

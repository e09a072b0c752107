//! The descriptor file (the POOL path the commands take): a small JSON file naming the
//! members (paths, emulated speed) and their cumulative I/O counters.

use super::*;

/// The descriptor file's content.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Descriptor {
    /// Always "raidforge-pool".
    pub format: String,
    pub version: u32,
    /// Hex array UUID, the same as in every member's superblock.
    pub uuid: String,
    pub members: Vec<MemberDesc>,
    /// Members are opened with O_DIRECT (and every member I/O is 4 KiB aligned).
    #[serde(default)]
    pub direct: bool,
    /// Blocks found bad and repaired so far (checksums, read errors), over the pool's life.
    #[serde(default)]
    pub repairs: RepairCounts,
    /// Logical ranges known lost (reads of them fail until they are rewritten whole).
    #[serde(default)]
    pub lost: Vec<LostRange>,
    /// Hot spares: blank members that take a failed member's place without a human
    /// (`create --spare`, `raidforge add --spare`; a served pool uses them by itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<PathBuf>,
    /// On-disk format: absent for raidforge's own superblock, "md" for Linux MD's v1.x.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// Spares of an MD array (their superblocks are kept current; raidforge does not use
    /// their space).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub md_spares: Vec<PathBuf>,
}

/// One member in the descriptor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemberDesc {
    pub path: PathBuf,
    /// Why the member is failed, when it is: "file missing when the pool was opened",
    /// "I/O error: ...", "failed by `raidforge fail`". Cleared by `replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_why: Option<String>,
    /// Emulated speed (`hdd:150MB/s:8ms`), if any.
    #[serde(default)]
    pub emulate: Option<String>,
    /// Bytes read from this member by all commands so far.
    #[serde(default)]
    pub read_bytes: u64,
    /// Bytes written to this member by all commands so far.
    #[serde(default)]
    pub write_bytes: u64,
    /// Read operations on this member's data area by all commands so far.
    #[serde(default)]
    pub reads: u64,
    /// Write operations on this member's data area by all commands so far.
    #[serde(default)]
    pub writes: u64,
    /// Writes of the deferred-parity list (metadata) to this member so far.
    #[serde(default)]
    pub meta_writes: u64,
}

impl Descriptor {
    /// The descriptor of a new pool (or one assembled) of array `uuid` with these members,
    /// its counters at zero. Paths are kept canonical where they resolve.
    pub fn new(
        uuid: &[u8; 16],
        members: &[PathBuf],
        emulate: &Option<String>,
        direct: bool,
    ) -> Descriptor {
        Descriptor {
            format: "raidforge-pool".into(),
            version: 1,
            uuid: hex(uuid),
            members: members
                .iter()
                .map(|p| MemberDesc {
                    path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
                    failed_why: None,
                    emulate: emulate.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    reads: 0,
                    writes: 0,
                    meta_writes: 0,
                })
                .collect(),
            direct,
            repairs: RepairCounts::default(),
            lost: Vec::new(),
            spares: Vec::new(),
            metadata: None,
            md_spares: Vec::new(),
        }
    }
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(super) fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Pool {
    pub(super) fn read_descriptor(desc_path: &Path) -> Result<Descriptor> {
        let text = std::fs::read_to_string(desc_path).map_err(|e| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("{e} (create the pool with `raidforge create`, or rebuild this file with `raidforge assemble`)"),
        })?;
        let desc: Descriptor = serde_json::from_str(&text).map_err(|e| PoolError::Descriptor {
            path: desc_path.to_path_buf(),
            reason: format!("not a raidforge pool descriptor: {e}"),
        })?;
        if desc.format != "raidforge-pool" || desc.version != 1 {
            return Err(PoolError::Descriptor {
                path: desc_path.to_path_buf(),
                reason: format!("unknown format {} version {}", desc.format, desc.version),
            });
        }
        Ok(desc)
    }

    pub(crate) fn save_descriptor(&self) -> Result<()> {
        let mut d = self.file.desc.clone();
        for (md, c) in d.members.iter_mut().zip(self.members.counters.iter()) {
            md.read_bytes += c.read_bytes.load(Ordering::Relaxed);
            md.write_bytes += c.write_bytes.load(Ordering::Relaxed);
            md.reads += c.reads.load(Ordering::Relaxed);
            md.writes += c.writes.load(Ordering::Relaxed);
            md.meta_writes += c.meta_writes.load(Ordering::Relaxed);
        }
        let text = serde_json::to_string_pretty(&d).expect("descriptor serializes");
        replace_file_durably(&self.file.path, text.as_bytes()).map_err(|e| PoolError::Descriptor {
            path: self.file.path.clone(),
            reason: e.to_string(),
        })
    }
}

/// Replaces `path` by a file holding `bytes`, atomically and durably: a temporary file beside
/// it is written and synced, renamed over it, and the directory synced, so that a crash leaves
/// the old file or the new one, never a torn or an empty one, and a rename that returned
/// survives the crash (issue 21, item 5: the rename was not synced).
pub(crate) fn replace_file_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}

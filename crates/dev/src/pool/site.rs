//! What `create` finds at its paths before it touches anything ([`Site::probe`]): the facts
//! [`super::create::CreatePlan::check`] decides on.

use super::*;

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

/// What was at one member path before create touched it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Nothing: `open_error` says why it could not be opened, `dir_missing` names its
    /// directory when that does not exist either.
    Absent {
        open_error: String,
        dir_missing: Option<PathBuf>,
    },
    /// Something that cannot be opened.
    Unopenable(String),
    /// A file or a device of `size` bytes; `pool` is the pool its superblock names, if it has
    /// one; `lock_error` says why it could not be locked (another process has it).
    Present {
        size: u64,
        is_file: bool,
        pool: Option<[u8; 16]>,
        lock_error: Option<String>,
    },
}

/// What create found at its paths.
#[derive(Clone, Debug)]
pub(super) struct Site {
    /// The descriptor file's path.
    pub desc_path: PathBuf,
    /// The descriptor file exists already.
    pub desc_exists: bool,
    /// The descriptor's directory, when it does not exist.
    pub desc_dir_missing: Option<PathBuf>,
    /// Per member path: what it names (for spotting one file given twice) and what is there.
    pub members: Vec<(PathBuf, Found)>,
}

impl Site {
    /// Looks at the paths: reads, locks each existing member for a moment, writes nothing.
    pub fn probe(desc_path: &Path, members: &[PathBuf]) -> Site {
        let desc_dir_missing = desc_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
            .map(Path::to_path_buf);
        Site {
            desc_path: desc_path.to_path_buf(),
            desc_exists: desc_path.exists(),
            desc_dir_missing,
            members: members
                .iter()
                .map(|p| (path_identity(p), Self::probe_member(p)))
                .collect(),
        }
    }

    fn probe_member(p: &Path) -> Found {
        match FileMember::open(p, OpenOpts::default()) {
            Ok(m) => Found::Present {
                size: m.size_bytes(),
                is_file: std::fs::metadata(p).is_ok_and(|m| m.is_file()),
                pool: read_superblock(&m).ok().map(|sb| sb.uuid),
                lock_error: m.lock_exclusive().err().map(|e| e.to_string()),
            },
            Err(e) if p.exists() => Found::Unopenable(e.to_string()),
            Err(e) => {
                let dir = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                Found::Absent {
                    open_error: e.to_string(),
                    dir_missing: (!dir.is_dir()).then(|| dir.to_path_buf()),
                }
            }
        }
    }
}

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
        /// Not a raidforge member but not blank either: what it seems to hold
        /// ([`foreign_content`]).
        foreign: Option<String>,
    },
}

/// What a file or device that is not a raidforge member holds, when it is not blank: `None`
/// for a file or device whose first and last MiB are zeros, and for a file whose first MiB of
/// allocated data is zeros too (a sparse or zero-filled file, what `truncate` or `fallocate`
/// make); otherwise a partition table or file system named by its signature (the checks of
/// `wipefs`), or "data". Create and replace refuse such paths without `--force`, as `mdadm
/// --create` and `mkfs` warn.
pub fn foreign_content(m: &dyn Member, path: &Path) -> Option<String> {
    let size = m.size_bytes();
    let mut starts = vec![0, size.saturating_sub(1 << 20)];
    if let Some(d) = first_data(path).filter(|&d| d < size) {
        starts.push(d);
    }
    let mut nonzero = false;
    let mut head = Vec::new();
    for (i, &at) in starts.iter().enumerate() {
        let len = (size - at.min(size)).min(1 << 20) as usize;
        let mut buf = vec![0u8; len];
        if m.read_at(&mut buf, at).is_err() {
            return Some("data that cannot be read".into());
        }
        nonzero |= buf.iter().any(|&b| b != 0);
        if i == 0 {
            head = buf;
        }
    }
    if !nonzero {
        return None;
    }
    let at = |off: usize, sig: &[u8]| head.get(off..off + sig.len()) == Some(sig);
    let what = if at(512, b"EFI PART") {
        "a GPT partition table"
    } else if at(1080, &[0x53, 0xEF]) {
        "an ext2/3/4 file system"
    } else if at(0, b"XFSB") {
        "an XFS file system"
    } else if at(65600, b"_BHRfS_M") {
        "a Btrfs file system"
    } else if at(3, b"NTFS    ") {
        "an NTFS file system"
    } else if at(82, b"FAT32   ") || at(54, b"FAT1") {
        "a FAT file system"
    } else if at(4086, b"SWAPSPACE2") || at(4086, b"SWAP-SPACE") {
        "swap space"
    } else if at(4096, &[0xfc, 0x4e, 0x2b, 0xa9]) {
        "a Linux MD (mdadm) member"
    } else if at(510, &[0x55, 0xAA]) {
        "a DOS partition table"
    } else {
        "data"
    };
    Some(what.into())
}

/// Offset of the first allocated data of a file (`SEEK_DATA`), when the file system tells.
fn first_data(path: &Path) -> Option<u64> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: a valid descriptor owned by `f`; lseek changes only its offset.
    let off = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_DATA) };
    (off >= 0).then_some(off as u64)
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
    /// Per member path: the file system a member file lives on (or would be created on) and
    /// its room; `None` for devices, NBD exports and paths whose file system is unknown.
    pub rooms: Vec<Option<Room>>,
}

/// The room a member file has on its file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Room {
    /// The file system (`st_dev`).
    pub fs: u64,
    /// Bytes an unprivileged writer may still allocate there (`statvfs`: `f_bavail *
    /// f_frsize`).
    pub free_bytes: u64,
    /// Bytes the file holds now, which create frees when it empties the file.
    pub held_bytes: u64,
}

impl Room {
    /// The room of member path `p` (an existing file, or a file to be made in its directory).
    fn of(p: &Path) -> Option<Room> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        if crate::nbd_member::is_nbd_path(p) {
            return None;
        }
        let (at, held) = match std::fs::metadata(p) {
            Ok(m) if m.is_file() => (p.to_path_buf(), m.blocks() * 512),
            Ok(_) => return None,
            Err(_) => (
                p.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf(),
                0,
            ),
        };
        let fs = std::fs::metadata(&at).ok()?.dev();
        let c = std::ffi::CString::new(at.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a valid NUL-terminated path; statvfs fills `st` and reads nothing else.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some(Room {
            fs,
            free_bytes: (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
            held_bytes: held,
        })
    }
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
            rooms: members.iter().map(|p| Room::of(p)).collect(),
        }
    }

    fn probe_member(p: &Path) -> Found {
        if crate::nbd_member::is_nbd_path(p) {
            return match super::membership::probe_member(p) {
                Ok(m) => {
                    let pool = read_superblock(&*m).ok().map(|sb| sb.uuid);
                    Found::Present {
                        size: m.size_bytes(),
                        is_file: false,
                        foreign: pool.is_none().then(|| foreign_content(&*m, p)).flatten(),
                        pool,
                        lock_error: None,
                    }
                }
                Err(e) => Found::Unopenable(e.to_string()),
            };
        }
        match FileMember::open(p, OpenOpts::default()) {
            Ok(m) => {
                let pool = read_superblock(&m).ok().map(|sb| sb.uuid);
                Found::Present {
                    size: m.size_bytes(),
                    is_file: std::fs::metadata(p).is_ok_and(|m| m.is_file()),
                    foreign: pool.is_none().then(|| foreign_content(&m, p)).flatten(),
                    pool,
                    lock_error: m.lock_exclusive().err().map(|e| e.to_string()),
                }
            }
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

//! Compressed traces, read as they come: gzip, zstd, xz and bzip2 files are decompressed while
//! they are read (streaming, constant memory), recognised by their first bytes, so that neither
//! the name nor the user has to say so. Files of several concatenated streams (`cat a.gz b.gz`,
//! `pigz`, `pbzip2`, `xz -T`, `zstd` of several frames) read as one. A stream that ends early
//! or does not decode is an error naming the compression, never a quietly shorter trace.
//!
//! The decoders are pure-Rust crates (`flate2` on `miniz_oxide`, `ruzstd`, `lzma-rust2`,
//! `bzip2` on `libbz2-rs-sys`): no C library to install or build.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// How a trace file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`.gz`), one or more members.
    Gzip,
    /// Zstandard (`.zst`), one or more frames.
    Zstd,
    /// xz (`.xz`), one or more streams.
    Xz,
    /// bzip2 (`.bz2`), one or more streams.
    Bzip2,
}

impl Compression {
    /// The compression whose magic number `head` (the file's first bytes) starts with.
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else if head.len() >= 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
            Compression::Bzip2
        } else {
            Compression::None
        }
    }

    /// The name used in messages ("gzip", "zstd", "xz", "bzip2"; "none").
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
        }
    }

    /// The file name extension this compression usually carries.
    pub fn extension(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some("gz"),
            Compression::Zstd => Some("zst"),
            Compression::Xz => Some("xz"),
            Compression::Bzip2 => Some("bz2"),
        }
    }
}

/// `path` without a compression extension (`web.csv.gz` is `web.csv`): format detection
/// breaks ties on the extension of what is inside.
pub(crate) fn inner_name(path: &Path) -> std::path::PathBuf {
    let compressed = ["gz", "zst", "zstd", "xz", "bz2"];
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if compressed.contains(&e.to_ascii_lowercase().as_str()) => path.with_extension(""),
        _ => path.to_path_buf(),
    }
}

/// The bytes of the trace at `path`, decompressed if they are compressed, and how.
pub(crate) fn open_decompressed(path: &Path) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    let mut file = BufReader::with_capacity(64 * 1024, File::open(path)?);
    // (A file fills whole buffers: one fill holds the magic number unless the file is shorter.)
    let compression = Compression::sniff(file.fill_buf()?);
    let input: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(file),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(file)),
        Compression::Zstd => Box::new(ZstdFrames {
            frame: Some(new_zstd_frame(file)?),
        }),
        Compression::Xz => Box::new(lzma_rust2::XzReader::new(file, true)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(file)),
    };
    let input = match compression {
        Compression::None => input,
        c => Box::new(Decoding {
            inner: input,
            compression: c,
            out_bytes: 0,
        }),
    };
    Ok((input, compression))
}

type ZstdDecoder =
    ruzstd::decoding::StreamingDecoder<BufReader<File>, ruzstd::decoding::FrameDecoder>;

fn new_zstd_frame(file: BufReader<File>) -> io::Result<ZstdDecoder> {
    ruzstd::decoding::StreamingDecoder::new(file)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// One zstd frame after the other (`ruzstd`'s decoder reads one).
struct ZstdFrames {
    frame: Option<ZstdDecoder>,
}

impl Read for ZstdFrames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(frame) = self.frame.as_mut() else {
                return Ok(0);
            };
            let n = frame.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            if !frame.decoder.is_finished() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the frame ends before its last block",
                ));
            }
            // The frame is over: another may follow.
            let mut source = self.frame.take().expect("checked").into_inner();
            if source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.frame = Some(new_zstd_frame(source)?);
        }
    }
}

/// A decoder whose errors say what was being decompressed and how far it got.
struct Decoding {
    inner: Box<dyn Read + Send>,
    compression: Compression,
    out_bytes: u64,
}

impl Read for Decoding {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.out_bytes += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "the {} stream is truncated or corrupt after {} decompressed bytes ({e})",
                    self.compression.name(),
                    self.out_bytes
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_name_the_compression() {
        assert_eq!(Compression::sniff(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
        assert_eq!(
            Compression::sniff(&[0xfd, b'7', b'z', b'X', b'Z', 0]),
            Compression::Xz
        );
        assert_eq!(Compression::sniff(b"BZh91AY&SY"), Compression::Bzip2);
        // Text that merely starts alike is text.
        assert_eq!(Compression::sniff(b"BZh,1,2"), Compression::None);
        assert_eq!(Compression::sniff(b"0,20941264,8192,W"), Compression::None);
        assert_eq!(Compression::sniff(b""), Compression::None);
    }

    #[test]
    fn the_inner_name_drops_the_compression_extension_only() {
        assert_eq!(
            inner_name(Path::new("a/web.csv.gz")),
            Path::new("a/web.csv")
        );
        assert_eq!(inner_name(Path::new("t.mqsim.ZST")), Path::new("t.mqsim"));
        assert_eq!(inner_name(Path::new("t.csv")), Path::new("t.csv"));
    }
}

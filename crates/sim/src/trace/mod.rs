//! Streaming readers for block I/O traces.
//!
//! A trace is a text file with one I/O a line. Each format says when the I/O was issued, where,
//! how large and whether it read or wrote, in its own units; a reader turns every line into a
//! common [`Request`] (bytes and nanoseconds) and never holds more than one line, so a trace of
//! any length replays in constant memory. Times are relative to the first request (the first one
//! the reader returns), so every replay starts at 0.
//!
//! | [`TraceFormat`] | line | units |
//! |---|---|---|
//! | `Spc` | `ASU,LBA,Size,Opcode,Timestamp[,...]` | LBA in 512-byte sectors, size in bytes, opcode `r`/`w`, seconds |
//! | `Msr` | `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime` | 100 ns ticks, `Read`/`Write`, bytes |
//! | `MqSim` | `arrival_ns device lba_sectors size_sectors type` | ns, sectors, type 1 read, 0 write |
//! | `Tencent` | `Timestamp,Offset,Size,IOType,VolumeID` | seconds, sectors, 0 read, 1 write |
//! | `Systor` | header `Timestamp,Response,IOType,LUN,Offset,Size` | seconds, `R`/`W`, bytes |
//! | `Blkparse` | `maj,min cpu seq time pid action RWBS sector + nsectors [process]` | seconds, sectors; Q or D events |
//! | `FioIolog` | `fio version 2 iolog` or `fio version 3 iolog` header, then file and I/O actions | bytes; v3 stamps in us, v2 `wait` in us |
//! | `Alibaba` | `device_id,opcode,offset,length,timestamp` | bytes, `R`/`W`, microseconds |
//! | `Csv` | any CSV; the columns and units given ([`CsvColumns`]) | as given |
//!
//! Files compressed with gzip, zstd, xz or bzip2 are decompressed as they are read
//! ([`Compression`]).
//!
//! The volume of a request is the SPC ASU, the MSR disk number, the MQSim device, the Tencent
//! volume, the SYSTOR LUN, the blkparse device (`major << 20 | minor`, the kernel's `dev_t`) or
//! the index of the fio file in the order the log names them.
//!
//! Lines a format defines but that carry no data I/O are skipped and counted
//! ([`TraceReader::skipped_lines`]): headers, blank lines, blkparse events other than the one
//! replayed and its summary section, flushes and discards, fio file actions, `sync` and `trim`.
//! A line that should carry an I/O and does not parse is a [`TraceError`] naming the file, the
//! line and the problem; the reader then goes on with the next line, so the caller chooses
//! whether to stop or to count and skip. Errors reading the input end the stream.
//!
//! [`ReadOptions`] replays faster or slower ([`ReadOptions::speedup`]), folds addresses onto an
//! array of a given capacity ([`Fold`]), stops after a number of requests
//! ([`ReadOptions::limit`]) and decides what happens when timestamps go backwards
//! ([`TimeOrder`]; Tencent's traces are not sorted within a second).

mod columns;
mod compress;
mod dir;
mod formats;
mod merge;
pub mod stats;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use crate::Op;
pub use columns::{CsvColumns, OpWords, Sep, SizeUnit, TimeUnit, CSV_COLUMNS_MAX};
pub use compress::Compression;
pub use dir::{locate_traces_dir, repository_traces_dir, TraceDirError, TRACES_ENV};
use formats::{Parser, Problem, RawRequest};
pub use merge::Merge;

/// One I/O of a trace or a synthetic workload, in bytes and nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Arrival time, relative to the first request, after any speed-up.
    pub time_ns: u64,
    /// First byte, within the volume (after any folding).
    pub offset_bytes: u64,
    /// Number of bytes.
    pub len_bytes: u64,
    /// Read or write.
    pub op: Op,
    /// Volume, ASU, LUN or device number (see the table in the module documentation).
    pub volume: u32,
}

/// The formats the readers understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// SPC (UMass Financial, WebSearch): `ASU,LBA,Size,Opcode,Timestamp[,...]`.
    Spc,
    /// MSR Cambridge CSV.
    Msr,
    /// MQSim / DiskSim ASCII: `arrival_ns device lba_sectors size_sectors type`.
    MqSim,
    /// Tencent Cloud Block Storage CSV.
    Tencent,
    /// SYSTOR'17 enterprise VDI CSV.
    Systor,
    /// `blkparse` default text output; replays the chosen event.
    Blkparse(BlkEvent),
    /// fio `read_iolog` files, version 2 or 3.
    FioIolog,
    /// Alibaba block traces: `device_id,opcode,offset,length,timestamp` (bytes,
    /// microseconds).
    Alibaba,
    /// Any CSV dialect, its columns given (`csv:SPEC`, see [`CsvColumns`]).
    Csv(CsvColumns),
}

/// Which blktrace event of each I/O a blkparse replay uses as its arrival.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BlkEvent {
    /// `Q`: the I/O was queued by the application (its arrival at the block layer).
    #[default]
    Queue,
    /// `D`: the I/O was issued to the device driver (after merging and scheduling).
    Issue,
}

impl TraceFormat {
    /// Every format (blkparse with both events).
    /// (Not [`TraceFormat::Csv`], which needs its columns.)
    pub const ALL: [TraceFormat; 9] = [
        TraceFormat::Spc,
        TraceFormat::Msr,
        TraceFormat::MqSim,
        TraceFormat::Tencent,
        TraceFormat::Systor,
        TraceFormat::Blkparse(BlkEvent::Queue),
        TraceFormat::Blkparse(BlkEvent::Issue),
        TraceFormat::FioIolog,
        TraceFormat::Alibaba,
    ];

    /// The short name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Spc => "spc",
            TraceFormat::Msr => "msr",
            TraceFormat::MqSim => "mqsim",
            TraceFormat::Tencent => "tencent",
            TraceFormat::Systor => "systor",
            TraceFormat::Blkparse(BlkEvent::Queue) => "blkparse-q",
            TraceFormat::Blkparse(BlkEvent::Issue) => "blkparse-d",
            TraceFormat::FioIolog => "fio",
            TraceFormat::Alibaba => "alibaba",
            TraceFormat::Csv(_) => "csv",
        }
    }

    /// The format a command line names: a short name ([`TraceFormat::from_name`]) or
    /// `csv:SPEC` ([`CsvColumns::parse`]). The error says what is wrong and what is known.
    pub fn parse(name: &str) -> Result<TraceFormat, String> {
        if name.eq_ignore_ascii_case("csv") {
            return Err(
                "csv needs its columns: csv:time=COL[:s|ms|us|ns|100ns],offset=COL[:bytes|sectors|blocks],size=COL[:...],op=COL[:rw|01|10|scsi][,device=COL][,header][,sep=tab|semicolon|space] (columns from 1)"
                    .into(),
            );
        }
        if name
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("csv:"))
        {
            return CsvColumns::parse(&name[4..])
                .map(TraceFormat::Csv)
                .map_err(|e| format!("{name:?}: {e}"));
        }
        TraceFormat::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = TraceFormat::ALL.iter().map(|f| f.name()).collect();
            format!(
                "unknown trace format {name:?}; known: {}, or csv:SPEC with the columns given",
                names.join(", ")
            )
        })
    }

    /// The format with this short name (case-insensitive; `disksim` and `blkparse` are aliases
    /// of `mqsim` and `blkparse-q`).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "disksim" | "ascii" => Some(TraceFormat::MqSim),
            "blkparse" => Some(TraceFormat::Blkparse(BlkEvent::Queue)),
            "fio-iolog" | "iolog" => Some(TraceFormat::FioIolog),
            _ => TraceFormat::ALL.into_iter().find(|f| f.name() == lower),
        }
    }

    /// Guess the format from the first bytes of a trace (a few lines are enough) and, to break
    /// ties, the file name's extension. `None` if no format reads those lines.
    ///
    /// Headers decide at once (`fio version N iolog`, SYSTOR's and MSR's column names);
    /// otherwise the format whose parser accepts every sampled line and finds a request in at
    /// least one wins, the extension (`.spc`, `.csv`, `.trace`, `.mqsim`, `.iolog`, `.blkparse`)
    /// deciding between several.
    pub fn detect(path: Option<&Path>, head: &[u8]) -> Option<TraceFormat> {
        formats::detect(path, head)
    }
}

impl fmt::Display for TraceFormat {
    /// The short name; a column-mapped CSV shows its spec (`csv:time=...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceFormat::Csv(c) => write!(f, "{c}"),
            other => f.write_str(other.name()),
        }
    }
}

/// Where in a trace something happened: the file (when known) and the 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The trace's file name, if the reader was given one.
    pub file: Option<Arc<str>>,
    /// Line number, from 1; 0 when the problem is not on a line (opening the file).
    pub line: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), 0) => write!(f, "{file}"),
            (Some(file), line) => write!(f, "{file}:{line}"),
            (None, 0) => write!(f, "trace"),
            (None, line) => write!(f, "trace line {line}"),
        }
    }
}

/// A trace that cannot be read, or bad reader options.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The input could not be opened or read. Ends the stream.
    #[error("{location}: cannot read the trace: {error}")]
    Io {
        /// Where.
        location: Location,
        /// The operating system's or the decompressor's error. (Shown in the message, not
        /// chained as its source: `{:#}` would print it twice.)
        error: io::Error,
    },
    /// A line is longer than [`LINE_BYTES_MAX`]; it is skipped.
    #[error("{location}: line longer than {max} bytes")]
    LineTooLong {
        /// Where.
        location: Location,
        /// The limit.
        max: usize,
    },
    /// A line is not valid UTF-8 (these formats are ASCII).
    #[error("{location}: line is not valid UTF-8 text")]
    NotText {
        /// Where.
        location: Location,
    },
    /// A line has the wrong number of fields for its format.
    #[error("{location}: {format} line needs {expected} fields, found {found}")]
    FieldCount {
        /// Where.
        location: Location,
        /// The format being read.
        format: TraceFormat,
        /// What the format wants ("5", "at least 5", "2 or 4").
        expected: &'static str,
        /// How many the line has.
        found: usize,
    },
    /// A field does not hold what the format says it holds.
    #[error("{location}: bad {field} {value:?}: {reason}")]
    BadField {
        /// Where.
        location: Location,
        /// The field's name in the format's documentation.
        field: &'static str,
        /// The field as found (at most 64 characters of it).
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A header line is missing or wrong (fio iologs must start with their version line).
    #[error("{location}: {reason}")]
    BadHeader {
        /// Where.
        location: Location,
        /// What was expected and found.
        reason: String,
    },
    /// `offset + length` or the relative time does not fit in 64 bits.
    #[error("{location}: {what} does not fit in 64 bits")]
    Overflow {
        /// Where.
        location: Location,
        /// Which quantity.
        what: &'static str,
    },
    /// With [`Fold`], a request is longer than the capacity it should be folded onto.
    #[error("{location}: request of {len_bytes} bytes is larger than the fold capacity of {capacity_bytes} bytes")]
    TooLargeToFold {
        /// Where.
        location: Location,
        /// The request's length.
        len_bytes: u64,
        /// The fold capacity.
        capacity_bytes: u64,
    },
    /// More distinct volumes (fio files) than a reader keeps track of ([`VOLUMES_MAX`]).
    #[error("{location}: more than {max} distinct {what}")]
    TooManyVolumes {
        /// Where.
        location: Location,
        /// What is being counted ("fio files").
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// [`open`] without a format could not tell the format from the file's first lines.
    #[error(
        "{location}: cannot tell the trace format from its first lines ({seen}); name it \
         explicitly (--format on the command line, format= in Python): one of spc, msr, \
         mqsim, tencent, systor, blkparse-q, blkparse-d, fio, alibaba, or csv:SPEC with the \
         columns given (see `raidforge trace read --help`)"
    )]
    UnknownFormat {
        /// The file.
        location: Location,
        /// What its beginning holds: "an empty file", "binary data (starts ff d8 ff e0)" or
        /// the first line.
        seen: String,
    },
    /// A [`ReadOptions`] value is out of range.
    #[error("invalid trace option {option}: {reason}")]
    InvalidOption {
        /// The option's field name.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Longest line a reader accepts; longer lines are an error and are skipped (constant memory
/// even for a file with no newlines).
pub const LINE_BYTES_MAX: usize = 64 * 1024;

/// Most distinct fio files a reader maps to volumes.
pub const VOLUMES_MAX: usize = 4096;

/// Most requests a [`TimeOrder::Window`] may hold.
pub const WINDOW_MAX: usize = 1 << 20;

/// What a reader does with timestamps that go backwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimeOrder {
    /// Return times as recorded, even if they go backwards. A request stamped before the
    /// first request gets time 0.
    AsRecorded,
    /// Never go backwards: a request stamped before its predecessor gets its predecessor's time.
    #[default]
    Clamp,
    /// Sort through a window of up to this many requests (a bounded priority queue), then clamp
    /// what still arrives too late. Equal times keep their order in the file. The first request
    /// (the time origin) is the earliest of the first window.
    Window(usize),
}

/// Folding a trace's addresses onto a smaller (or differently sized) array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fold {
    /// Capacity to fold onto.
    pub capacity_bytes: u64,
    /// Folded offsets are multiples of this (512 for sectors, a chunk size, ...).
    pub align_bytes: u64,
}

impl Fold {
    /// Fold `offset` for a request of `len` bytes: `offset mod capacity`, rounded down to the
    /// alignment, then moved down (staying aligned) if the request would run past the capacity.
    /// `None` if the request is longer than the capacity.
    pub fn apply(&self, offset_bytes: u64, len_bytes: u64) -> Option<u64> {
        if len_bytes > self.capacity_bytes {
            return None;
        }
        let align = self.align_bytes;
        let folded = offset_bytes % self.capacity_bytes / align * align;
        if folded + len_bytes <= self.capacity_bytes {
            Some(folded)
        } else {
            // capacity is a multiple of align (checked), so this stays within bounds.
            Some((self.capacity_bytes - len_bytes) / align * align)
        }
    }
}

/// How a reader transforms what it reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadOptions {
    /// Replay `speedup` times faster than recorded (0.5 is twice as slow). Positive and finite.
    pub speedup: f64,
    /// Fold addresses onto this capacity.
    pub fold: Option<Fold>,
    /// Stop after this many requests (errors do not count).
    pub limit: Option<u64>,
    /// What to do when timestamps go backwards.
    pub order: TimeOrder,
    /// Merge adjacent requests as the kernel's block layer would before issuing them
    /// ([`Merge`]; for replays of queue-level traces such as blkparse `Q` events).
    pub merge: Option<Merge>,
    /// Which volumes (devices, LUNs, ASUs) are kept, and whether they are folded into one.
    pub volumes: Volumes,
}

/// Which of a trace's volumes a reader keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Volumes {
    /// Every volume, as recorded.
    #[default]
    All,
    /// Only this volume's requests; the others are counted as skipped lines.
    Only(u32),
    /// Every volume's requests on volume 0, at their own offsets (one device seeing them all).
    Fold,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            speedup: 1.0,
            fold: None,
            limit: None,
            order: TimeOrder::default(),
            merge: None,
            volumes: Volumes::All,
        }
    }
}

impl ReadOptions {
    fn check(&self) -> Result<(), TraceError> {
        let invalid = |option, reason| Err(TraceError::InvalidOption { option, reason });
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return invalid("speedup", "must be positive and finite");
        }
        if let Some(fold) = self.fold {
            if fold.capacity_bytes == 0 || fold.align_bytes == 0 {
                return invalid("fold", "capacity and alignment must be positive");
            }
            if fold.capacity_bytes % fold.align_bytes != 0 {
                return invalid("fold", "capacity must be a multiple of the alignment");
            }
        }
        if let Some(m) = self.merge {
            if m.max_bytes == 0 || m.held_max == 0 {
                return invalid(
                    "merge",
                    "the largest request and the queue must be positive",
                );
            }
        }
        if let TimeOrder::Window(n) = self.order {
            if n == 0 || n > WINDOW_MAX {
                return invalid("order", "window must hold 1 to 1,048,576 requests");
            }
        }
        Ok(())
    }
}

/// A streaming trace reader: an iterator of `Result<Request, TraceError>` over the lines of any
/// [`BufRead`].
pub struct TraceReader<R> {
    input: R,
    options: ReadOptions,
    file: Option<Arc<str>>,
    parser: Parser,
    line_number: u64,
    line: Vec<u8>,
    input_done: bool,
    emitted: u64,
    skipped: u64,
    /// Raw time (ns, in the trace's own epoch) of the first request returned.
    origin_ns: Option<u128>,
    /// Raw time of the last request returned.
    last_ns: u128,
    window: BinaryHeap<Reverse<Pending>>,
    sequence: u64,
    /// Requests held for merging ([`ReadOptions::merge`]).
    merger: merge::Merger,
    /// A request read and not yet given to the merger (older held ones leave first).
    merge_next: Option<Request>,
    /// Requests returned (after merging).
    returned: u64,
}

/// A request waiting in the sort window, ordered by time and then by its place in the file.
#[derive(Debug)]
struct Pending {
    time_ns: u128,
    sequence: u64,
    line: u64,
    raw: RawRequest,
}

impl Pending {
    fn key(&self) -> (u128, u64) {
        (self.time_ns, self.sequence)
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Pending) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Pending) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `format` over `input`.
    pub fn new(input: R, format: TraceFormat, options: ReadOptions) -> Result<Self, TraceError> {
        options.check()?;
        let window_capacity = match options.order {
            TimeOrder::Window(n) => n.min(4096),
            _ => 0,
        };
        Ok(TraceReader {
            input,
            options,
            file: None,
            parser: Parser::new(format),
            line_number: 0,
            line: Vec::new(),
            input_done: false,
            emitted: 0,
            skipped: 0,
            origin_ns: None,
            last_ns: 0,
            window: BinaryHeap::with_capacity(window_capacity),
            sequence: 0,
            merger: merge::Merger::default(),
            merge_next: None,
            returned: 0,
        })
    }

    /// Name the input in error messages.
    pub fn with_file_name(mut self, name: impl Into<String>) -> Self {
        self.file = Some(Arc::from(name.into()));
        self
    }

    /// The format being read.
    pub fn format(&self) -> TraceFormat {
        self.parser.format()
    }

    /// Lines read so far that carried no data I/O (headers, other events, file actions, ...),
    /// or the I/O of a volume not kept ([`ReadOptions::volumes`]).
    pub fn skipped_lines(&self) -> u64 {
        self.skipped
    }

    /// Requests returned so far.
    pub fn requests_returned(&self) -> u64 {
        self.returned
    }

    /// Requests that merged into others ([`ReadOptions::merge`]).
    pub fn requests_merged(&self) -> u64 {
        self.merger.merged
    }

    /// Pieces split off requests larger than the merging's limit (beyond the first of each):
    /// the trace's requests read so far are [`TraceReader::requests_returned`] plus
    /// [`TraceReader::requests_merged`] minus these (plus those still held).
    pub fn requests_split(&self) -> u64 {
        self.merger.split
    }

    fn location(&self, line: u64) -> Location {
        Location {
            file: self.file.clone(),
            line,
        }
    }

    /// Read the next line into `self.line`, without its line ending. `Ok(false)` at the end.
    /// Lines longer than the limit are consumed and reported.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        self.line.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(TraceError::Io {
                        location: self.location(self.line_number + 1),
                        error,
                    })
                }
            };
            if available.is_empty() {
                break;
            }
            any = true;
            let (chunk, found_newline) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], true),
                None => (available, false),
            };
            if !too_long {
                if self.line.len() + chunk.len() > LINE_BYTES_MAX {
                    too_long = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            let used = chunk.len() + usize::from(found_newline);
            self.input.consume(used);
            if found_newline {
                break;
            }
        }
        if !any {
            return Ok(false);
        }
        self.line_number += 1;
        if too_long {
            return Err(TraceError::LineTooLong {
                location: self.location(self.line_number),
                max: LINE_BYTES_MAX,
            });
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(true)
    }

    /// Parse the next line that yields something: `Ok(Some(raw))`, an error, or `Ok(None)` at
    /// the end of the input.
    fn next_raw(&mut self) -> Result<Option<(u64, RawRequest)>, TraceError> {
        loop {
            if self.input_done {
                return Ok(None);
            }
            match self.read_line() {
                Ok(true) => {}
                Ok(false) => {
                    self.input_done = true;
                    return Ok(None);
                }
                Err(e @ TraceError::Io { .. }) => {
                    self.input_done = true;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
            let line_number = self.line_number;
            let text = match std::str::from_utf8(&self.line) {
                Ok(t) => t,
                Err(_) => {
                    return Err(TraceError::NotText {
                        location: self.location(line_number),
                    })
                }
            };
            match self.parser.parse(text) {
                Ok(Some(mut raw)) => match self.options.volumes {
                    Volumes::Only(v) if raw.volume != v => self.skipped += 1,
                    Volumes::Fold => {
                        raw.volume = 0;
                        return Ok(Some((line_number, raw)));
                    }
                    _ => return Ok(Some((line_number, raw))),
                },
                Ok(None) => self.skipped += 1,
                Err(problem) => return Err(self.located(problem, line_number)),
            }
        }
    }

    fn located(&self, problem: Problem, line: u64) -> TraceError {
        let location = self.location(line);
        let format = self.parser.format();
        match problem {
            Problem::FieldCount { expected, found } => TraceError::FieldCount {
                location,
                format,
                expected,
                found,
            },
            Problem::BadField {
                field,
                value,
                reason,
            } => TraceError::BadField {
                location,
                field,
                value,
                reason,
            },
            Problem::BadHeader(reason) => TraceError::BadHeader { location, reason },
            Problem::Overflow(what) => TraceError::Overflow { location, what },
            Problem::TooManyVolumes { what, max } => TraceError::TooManyVolumes {
                location,
                what,
                max,
            },
        }
    }

    /// Turn a raw request into a [`Request`]: time origin, ordering, speed-up, folding.
    fn finish(&mut self, line: u64, raw: RawRequest) -> Result<Request, TraceError> {
        let origin = *self.origin_ns.get_or_insert(raw.time_ns);
        let time_ns = match self.options.order {
            TimeOrder::AsRecorded => raw.time_ns,
            TimeOrder::Clamp | TimeOrder::Window(_) => raw.time_ns.max(self.last_ns),
        };
        let relative = time_ns.saturating_sub(origin);
        let scaled = if self.options.speedup == 1.0 {
            relative
        } else {
            (relative as f64 / self.options.speedup).round() as u128
        };
        let time_ns = u64::try_from(scaled).map_err(|_| TraceError::Overflow {
            location: self.location(line),
            what: "time since the first request in nanoseconds",
        })?;
        let mut offset_bytes = raw.offset_bytes;
        if let Some(fold) = self.options.fold {
            offset_bytes =
                fold.apply(raw.offset_bytes, raw.len_bytes)
                    .ok_or(TraceError::TooLargeToFold {
                        location: self.location(line),
                        len_bytes: raw.len_bytes,
                        capacity_bytes: fold.capacity_bytes,
                    })?;
        }
        self.last_ns = self.last_ns.max(raw.time_ns);
        self.emitted += 1;
        Ok(Request {
            time_ns,
            offset_bytes,
            len_bytes: raw.len_bytes,
            op: raw.op,
            volume: raw.volume,
        })
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self
            .options
            .limit
            .is_some_and(|limit| self.returned >= limit)
        {
            return None;
        }
        let r = match self.options.merge {
            None => self.next_read(),
            Some(m) => self.next_merged(&m),
        };
        if matches!(r, Some(Ok(_))) {
            self.returned += 1;
        }
        r
    }
}

impl<R: BufRead> TraceReader<R> {
    /// The next request as merging leaves it: a held one whose time is up before the next
    /// read one is taken, or, at the end, the held ones in order.
    fn next_merged(&mut self, m: &Merge) -> Option<Result<Request, TraceError>> {
        loop {
            if let Some(r) = self.merge_next.take() {
                if let Some(out) = self.merger.leaving_before(m, r.time_ns) {
                    self.merge_next = Some(r);
                    return Some(Ok(out));
                }
                self.merger.take(m, r);
            }
            match self.next_read() {
                Some(Ok(r)) => self.merge_next = Some(r),
                Some(Err(e)) => return Some(Err(e)),
                None => return self.merger.drain().map(Ok),
            }
        }
    }

    /// The next request read (ordered, scaled and folded), before any merging.
    fn next_read(&mut self) -> Option<Result<Request, TraceError>> {
        match self.options.order {
            TimeOrder::Window(size) => {
                while self.window.len() < size {
                    match self.next_raw() {
                        Ok(Some((line, raw))) => {
                            self.sequence += 1;
                            let pending = Pending {
                                time_ns: raw.time_ns,
                                sequence: self.sequence,
                                line,
                                raw,
                            };
                            self.window.push(Reverse(pending));
                        }
                        Ok(None) => break,
                        Err(e) => return Some(Err(e)),
                    }
                }
                let Reverse(pending) = self.window.pop()?;
                Some(self.finish(pending.line, pending.raw))
            }
            TimeOrder::AsRecorded | TimeOrder::Clamp => match self.next_raw() {
                Ok(Some((line, raw))) => Some(self.finish(line, raw)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            },
        }
    }
}

/// What [`open`] reads: the file's bytes, decompressed when they are compressed.
pub type TraceInput = BufReader<Box<dyn Read + Send>>;

/// Open a trace file, detecting its format from its first lines when `format` is `None`. A
/// file compressed with gzip, zstd, xz or bzip2 is decompressed as it is read
/// ([`Compression`]; recognised by its first bytes).
pub fn open(
    path: &Path,
    format: Option<TraceFormat>,
    options: ReadOptions,
) -> Result<TraceReader<TraceInput>, TraceError> {
    let name = path.display().to_string();
    let location = Location {
        file: Some(Arc::from(name.as_str())),
        line: 0,
    };
    let (input, _) = compress::open_decompressed(path).map_err(|error| TraceError::Io {
        location: location.clone(),
        error,
    })?;
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let format = match format {
        Some(f) => f,
        None => {
            let head = fill_head(&mut input).map_err(|error| TraceError::Io {
                location: location.clone(),
                error,
            })?;
            let inner = compress::inner_name(path);
            TraceFormat::detect(Some(&inner), head).ok_or_else(|| TraceError::UnknownFormat {
                location,
                seen: describe_head(head),
            })?
        }
    };
    Ok(TraceReader::new(input, format, options)?.with_file_name(name))
}

/// The first bytes of `input` for format detection. A decompressor may return little at a
/// time, so the buffer is filled up to its capacity (or the end of the input) first.
fn fill_head(input: &mut TraceInput) -> io::Result<&[u8]> {
    let want = input.capacity();
    let mut head = Vec::with_capacity(want);
    while head.len() < want {
        let inner = input.get_mut();
        let n = inner
            .by_ref()
            .take((want - head.len()) as u64)
            .read_to_end(&mut head)?;
        if n == 0 {
            break;
        }
    }
    // Put what was read back in front of the rest: a reader over the bytes read, then the
    // decompressor.
    let rest = std::mem::replace(input.get_mut(), Box::new(io::empty()));
    *input = BufReader::with_capacity(want, Box::new(io::Cursor::new(head).chain(rest)));
    input.fill_buf()
}

/// What the beginning of a file holds, for [`TraceError::UnknownFormat`].
fn describe_head(head: &[u8]) -> String {
    if head.is_empty() {
        return "an empty file".into();
    }
    let text = std::str::from_utf8(&head[..head.len().min(4096)])
        .ok()
        .filter(|t| !t.chars().any(|c| c.is_control() && !c.is_whitespace()));
    match text {
        Some(t) => {
            let line = t.lines().next().unwrap_or("").trim_end();
            let short: String = line.chars().take(60).collect();
            let more = if short.len() < line.len() { "..." } else { "" };
            format!("first line {short:?}{more}")
        }
        None => {
            let bytes: Vec<String> = head.iter().take(4).map(|b| format!("{b:02x}")).collect();
            format!("binary data, starting {}", bytes.join(" "))
        }
    }
}

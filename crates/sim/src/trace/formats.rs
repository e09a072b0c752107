//! Line parsers, one per format, and format detection.
//!
//! A parser sees one line at a time and answers: a request, nothing (a header, a skipped event),
//! or a [`Problem`]. Only the fio parser keeps state (its version and file table), bounded by
//! [`VOLUMES_MAX`]. Absolute times are nanoseconds in the trace's own epoch, as `u128` so that
//! no format's epoch can overflow (MSR counts 100 ns ticks since 1601).

use std::path::Path;

use super::columns::CsvColumns;
use super::{BlkEvent, TraceFormat, VOLUMES_MAX};
use crate::Op;

/// A request in the trace's own time epoch, before origin, ordering, speed-up and folding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawRequest {
    pub(crate) time_ns: u128,
    pub(crate) offset_bytes: u64,
    pub(crate) len_bytes: u64,
    pub(crate) op: Op,
    pub(crate) volume: u32,
}

/// What is wrong with a line; the reader adds the location.
#[derive(Debug)]
pub(crate) enum Problem {
    FieldCount {
        expected: &'static str,
        found: usize,
    },
    BadField {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    BadHeader(String),
    Overflow(&'static str),
    TooManyVolumes {
        what: &'static str,
        max: usize,
    },
}

/// Bytes in the sectors that SPC, MQSim, Tencent and blkparse count in.
const SECTOR_BYTES: u64 = 512;
/// Fields kept per line; further fields are counted but not stored (SPC allows extra fields).
pub(super) const FIELDS_KEPT: usize = 32;
/// Characters of a bad field quoted in an error.
const QUOTE_CHARS_MAX: usize = 64;

pub(crate) struct Parser {
    format: TraceFormat,
    fio: FioState,
    /// A column-mapped CSV's header line is still to come.
    csv_header: bool,
}

#[derive(Default)]
struct FioState {
    version: Option<u8>,
    files: Vec<String>,
    last_file: usize,
    wait_us: u128,
}

pub(super) type ParseResult = Result<Option<RawRequest>, Problem>;

impl Parser {
    pub(crate) fn new(format: TraceFormat) -> Parser {
        Parser {
            format,
            fio: FioState::default(),
            csv_header: matches!(format, TraceFormat::Csv(c) if c.header),
        }
    }

    pub(crate) fn format(&self) -> TraceFormat {
        self.format
    }

    /// Parse one line (without its line ending).
    pub(crate) fn parse(&mut self, line: &str) -> ParseResult {
        if line.trim().is_empty() {
            return Ok(None);
        }
        match self.format {
            TraceFormat::Spc => parse_spc(line),
            TraceFormat::Msr => parse_msr(line),
            TraceFormat::MqSim => parse_mqsim(line),
            TraceFormat::Tencent => parse_tencent(line),
            TraceFormat::Systor => parse_systor(line),
            TraceFormat::Blkparse(event) => parse_blkparse(line, event),
            TraceFormat::FioIolog => self.fio.parse(line),
            TraceFormat::Alibaba => CsvColumns::ALIBABA.parse_line(line),
            TraceFormat::Csv(c) => {
                if std::mem::take(&mut self.csv_header) {
                    return Ok(None);
                }
                c.parse_line(line)
            }
        }
    }
}

/// Split `line` at `sep` (or at runs of whitespace when `sep` is `None`), trimming each field.
/// Returns the first [`FIELDS_KEPT`] fields and the total count, without allocating.
pub(super) fn split<'a>(line: &'a str, sep: Option<char>) -> ([&'a str; FIELDS_KEPT], usize) {
    let mut fields = [""; FIELDS_KEPT];
    let mut count = 0;
    let mut keep = |f: &'a str| {
        if count < FIELDS_KEPT {
            fields[count] = f;
        }
        count += 1;
    };
    if !line.is_ascii() || sep.is_some_and(|c| !c.is_ascii()) {
        match sep {
            Some(c) => line.split(c).for_each(|f| keep(f.trim())),
            None => line.split_whitespace().for_each(&mut keep),
        }
        return (fields, count);
    }
    // ASCII lines (all real traces) are split on bytes: the same fields as `str::split` /
    // `split_whitespace` + `trim` (whose ASCII whitespace is tab, LF, VT, FF, CR and space),
    // several times faster, which matters when replaying millions of lines.
    let bytes = line.as_bytes();
    let ws = |b: u8| b == b' ' || (b'\t'..=b'\r').contains(&b);
    match sep {
        Some(c) => {
            let c = c as u8;
            let mut start = 0;
            loop {
                let end = bytes[start..]
                    .iter()
                    .position(|&b| b == c)
                    .map_or(bytes.len(), |i| start + i);
                let (mut a, mut b) = (start, end);
                while a < b && ws(bytes[a]) {
                    a += 1;
                }
                while b > a && ws(bytes[b - 1]) {
                    b -= 1;
                }
                keep(&line[a..b]);
                if end == bytes.len() {
                    break;
                }
                start = end + 1;
            }
        }
        None => {
            let mut i = 0;
            while i < bytes.len() {
                while i < bytes.len() && ws(bytes[i]) {
                    i += 1;
                }
                let a = i;
                while i < bytes.len() && !ws(bytes[i]) {
                    i += 1;
                }
                if i > a {
                    keep(&line[a..i]);
                }
            }
        }
    }
    (fields, count)
}

pub(super) fn bad(field: &'static str, value: &str, reason: &'static str) -> Problem {
    let value = value.chars().take(QUOTE_CHARS_MAX).collect();
    Problem::BadField {
        field,
        value,
        reason,
    }
}

pub(super) fn uint(field: &'static str, s: &str) -> Result<u64, Problem> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(field, s, "not a non-negative integer"));
    }
    // Digits only (checked): accumulate directly instead of `str::parse` validating again.
    // Up to 19 digits cannot overflow a u64.
    if s.len() <= 19 {
        return Ok(s.bytes().fold(0u64, |v, b| v * 10 + u64::from(b - b'0')));
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| bad(field, s, "too large"))?;
    }
    Ok(v)
}

pub(super) fn uint32(field: &'static str, s: &str) -> Result<u32, Problem> {
    let v = uint(field, s)?;
    u32::try_from(v).map_err(|_| bad(field, s, "larger than 4294967295"))
}

/// A decimal number of a unit of `unit_ns` nanoseconds (`12`, `1.5`) to nanoseconds; the
/// fraction is kept to the nanosecond (digits past the ninth decimal are checked and dropped).
pub(super) fn decimal_ns(field: &'static str, s: &str, unit_ns: u128) -> Result<u128, Problem> {
    decimal_in(field, s, unit_ns, "not a non-negative decimal number")
}

/// Decimal seconds (`123`, `123.456789012`) to nanoseconds, exactly.
fn seconds_ns(field: &'static str, s: &str) -> Result<u128, Problem> {
    decimal_in(
        field,
        s,
        1_000_000_000,
        "not a non-negative decimal number of seconds",
    )
}

fn decimal_in(
    field: &'static str,
    s: &str,
    unit_ns: u128,
    not_a_number: &'static str,
) -> Result<u128, Problem> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(bad(field, s, not_a_number));
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad(field, s, "too large"))?
    };
    // The fraction as billionths of the unit.
    let mut frac_e9: u128 = 0;
    for i in 0..9 {
        let digit = frac.as_bytes().get(i).map_or(0, |b| b - b'0');
        frac_e9 = frac_e9 * 10 + u128::from(digit);
    }
    whole
        .checked_mul(unit_ns)
        .and_then(|ns| ns.checked_add(frac_e9 * unit_ns / 1_000_000_000))
        .ok_or_else(|| bad(field, s, "too large"))
}

fn sectors(field: &'static str, s: &str) -> Result<u64, Problem> {
    uint(field, s)?
        .checked_mul(SECTOR_BYTES)
        .ok_or(Problem::Overflow("sectors in bytes"))
}

pub(super) fn request(
    time_ns: u128,
    offset_bytes: u64,
    len_bytes: u64,
    op: Op,
    volume: u32,
) -> ParseResult {
    if offset_bytes.checked_add(len_bytes).is_none() {
        return Err(Problem::Overflow("offset + length"));
    }
    Ok(Some(RawRequest {
        time_ns,
        offset_bytes,
        len_bytes,
        op,
        volume,
    }))
}

fn expect_fields(count: usize, ok: bool, expected: &'static str) -> Result<(), Problem> {
    if ok {
        Ok(())
    } else {
        Err(Problem::FieldCount {
            expected,
            found: count,
        })
    }
}

/// `ASU,LBA,Size,Opcode,Timestamp[,...]`.
fn parse_spc(line: &str) -> ParseResult {
    let (f, n) = split(line, Some(','));
    expect_fields(n, n >= 5, "at least 5")?;
    let volume = uint32("ASU", f[0])?;
    let offset = sectors("LBA", f[1])?;
    let len = uint("size", f[2])?;
    let op = match f[3] {
        "r" | "R" => Op::Read,
        "w" | "W" => Op::Write,
        other => return Err(bad("opcode", other, "expected r or w")),
    };
    let time = seconds_ns("timestamp", f[4])?;
    request(time, offset, len, op, volume)
}

/// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, optional header.
fn parse_msr(line: &str) -> ParseResult {
    if line.trim_start().starts_with("Timestamp") {
        return Ok(None);
    }
    let (f, n) = split(line, Some(','));
    expect_fields(n, n == 7, "7")?;
    let ticks = uint("timestamp", f[0])?;
    let volume = uint32("disk number", f[2])?;
    let op = if f[3].eq_ignore_ascii_case("read") {
        Op::Read
    } else if f[3].eq_ignore_ascii_case("write") {
        Op::Write
    } else {
        return Err(bad("type", f[3], "expected Read or Write"));
    };
    let offset = uint("offset", f[4])?;
    let len = uint("size", f[5])?;
    request(u128::from(ticks) * 100, offset, len, op, volume)
}

/// `arrival_ns device lba_sectors size_sectors type`.
fn parse_mqsim(line: &str) -> ParseResult {
    let (f, n) = split(line, None);
    expect_fields(n, n == 5, "5")?;
    let time = uint("arrival time", f[0])?;
    let volume = uint32("device", f[1])?;
    let offset = sectors("LBA", f[2])?;
    let len = sectors("size", f[3])?;
    let op = match f[4] {
        "1" => Op::Read,
        "0" => Op::Write,
        other => return Err(bad("type", other, "expected 1 (read) or 0 (write)")),
    };
    request(u128::from(time), offset, len, op, volume)
}

/// `Timestamp,Offset,Size,IOType,VolumeID`.
fn parse_tencent(line: &str) -> ParseResult {
    let (f, n) = split(line, Some(','));
    expect_fields(n, n == 5, "5")?;
    let time = seconds_ns("timestamp", f[0])?;
    let offset = sectors("offset", f[1])?;
    let len = sectors("size", f[2])?;
    let op = match f[3] {
        "0" => Op::Read,
        "1" => Op::Write,
        other => return Err(bad("I/O type", other, "expected 0 (read) or 1 (write)")),
    };
    let volume = uint32("volume", f[4])?;
    request(time, offset, len, op, volume)
}

/// `Timestamp,Response,IOType,LUN,Offset,Size` with a header line.
fn parse_systor(line: &str) -> ParseResult {
    if line.trim_start().starts_with("Timestamp") {
        return Ok(None);
    }
    let (f, n) = split(line, Some(','));
    expect_fields(n, n == 6, "6")?;
    let time = seconds_ns("timestamp", f[0])?;
    let op = match f[2] {
        "R" | "r" => Op::Read,
        "W" | "w" => Op::Write,
        other => return Err(bad("I/O type", other, "expected R or W")),
    };
    let volume = uint32("LUN", f[3])?;
    let offset = uint("offset", f[4])?;
    let len = uint("size", f[5])?;
    request(time, offset, len, op, volume)
}

/// `maj,min` of a blkparse event line, if `token` is one.
fn device(token: &str) -> Option<(u64, u64)> {
    let (major, minor) = token.split_once(',')?;
    let number = |t: &str| {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse::<u64>().ok()
        } else {
            None
        }
    };
    Some((number(major)?, number(minor)?))
}

/// `maj,min cpu seq time pid action RWBS sector + nsectors [process]`.
fn parse_blkparse(line: &str, event: BlkEvent) -> ParseResult {
    let (f, n) = split(line, None);
    let Some((major, minor)) = device(f[0]) else {
        // Summary section, per-CPU statistics and notices: not events.
        return Ok(None);
    };
    expect_fields(n, n >= 7, "at least 7")?;
    let wanted = match event {
        BlkEvent::Queue => "Q",
        BlkEvent::Issue => "D",
    };
    if f[5] != wanted {
        return Ok(None);
    }
    let rwbs = f[6];
    let (read, write) = (rwbs.contains('R'), rwbs.contains('W'));
    if rwbs.contains('D') || !(read || write) {
        // Discards and requests without data (flush-only, 'N').
        return Ok(None);
    }
    if read && write {
        return Err(bad("RWBS", rwbs, "both read and write"));
    }
    if n < 10 || f[8] != "+" {
        if rwbs.contains('F') {
            // A pre-flush with no payload.
            return Ok(None);
        }
        return Err(Problem::FieldCount {
            expected: "at least 10 (sector + count)",
            found: n,
        });
    }
    if major >= 1 << 12 || minor >= 1 << 20 {
        return Err(bad(
            "device",
            f[0],
            "major must be below 4096 and minor below 1048576",
        ));
    }
    let time = seconds_ns("time", f[3])?;
    let offset = sectors("sector", f[7])?;
    let len = sectors("sector count", f[9])?;
    let op = if read { Op::Read } else { Op::Write };
    request(time, offset, len, op, ((major << 20) | minor) as u32)
}

impl FioState {
    fn parse(&mut self, line: &str) -> ParseResult {
        let Some(version) = self.version else {
            let header = line.trim();
            self.version = match header {
                "fio version 2 iolog" => Some(2),
                "fio version 3 iolog" => Some(3),
                _ => {
                    let found: String = header.chars().take(QUOTE_CHARS_MAX).collect();
                    return Err(Problem::BadHeader(format!(
                        "expected \"fio version 2 iolog\" or \"fio version 3 iolog\", found {found:?}"
                    )));
                }
            };
            return Ok(None);
        };
        let (f, n) = split(line, None);
        // Version 3 puts a timestamp (microseconds since the start) in front of every line.
        let (time_us, rest) = if version == 3 {
            expect_fields(n, n == 3 || n == 5, "3 or 5")?;
            (Some(uint("timestamp", f[0])?), &f[1..n])
        } else {
            expect_fields(n, n == 2 || n == 4, "2 or 4")?;
            (None, &f[..n])
        };
        let (file, action) = (rest[0], rest[1]);
        if rest.len() == 2 {
            return match action {
                "add" | "open" | "close" => {
                    self.volume(file)?;
                    Ok(None)
                }
                other => Err(bad("action", other, "expected add, open or close")),
            };
        }
        let offset = uint("offset", rest[2])?;
        let len = uint("length", rest[3])?;
        let op = match action {
            "read" => Op::Read,
            "write" => Op::Write,
            "wait" if version == 2 => {
                self.wait_us = self.wait_us.saturating_add(u128::from(offset));
                return Ok(None);
            }
            "sync" | "datasync" | "trim" => return Ok(None),
            other => {
                return Err(bad(
                    "action",
                    other,
                    "expected read, write, sync, datasync, trim or wait",
                ))
            }
        };
        let volume = self.volume(file)?;
        let time_us = time_us.map_or(self.wait_us, u128::from);
        request(time_us * 1000, offset, len, op, volume)
    }

    /// The volume number of `file`, registering it on first sight.
    fn volume(&mut self, file: &str) -> Result<u32, Problem> {
        if self.files.get(self.last_file).is_some_and(|f| f == file) {
            return Ok(self.last_file as u32);
        }
        let index = match self.files.iter().position(|f| f == file) {
            Some(i) => i,
            None => {
                if self.files.len() >= VOLUMES_MAX {
                    return Err(Problem::TooManyVolumes {
                        what: "fio files",
                        max: VOLUMES_MAX,
                    });
                }
                self.files.push(file.to_string());
                self.files.len() - 1
            }
        };
        self.last_file = index;
        Ok(index as u32)
    }
}

/// Lines sampled by [`detect`].
const DETECT_LINES: usize = 16;

pub(crate) fn detect(path: Option<&Path>, head: &[u8]) -> Option<TraceFormat> {
    let text = String::from_utf8_lossy(head);
    let mut lines: Vec<&str> = text.split('\n').collect();
    // The last piece may be a partial line, unless it is all there is.
    if lines.len() > 1 && !text.ends_with('\n') {
        lines.pop();
    }
    let lines: Vec<&str> = lines
        .into_iter()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .take(DETECT_LINES)
        .collect();
    let first = lines.first()?.trim();
    if first == "fio version 2 iolog" || first == "fio version 3 iolog" {
        return Some(TraceFormat::FioIolog);
    }
    if first.starts_with("Timestamp,Response,IOType") {
        return Some(TraceFormat::Systor);
    }
    if first.starts_with("Timestamp,Hostname") {
        return Some(TraceFormat::Msr);
    }
    // (requests, malformed lines) among the sniffed lines, read as `format`.
    let tally = |format: TraceFormat| {
        let mut parser = Parser::new(format);
        let (mut requests, mut bad) = (0usize, 0usize);
        for line in &lines {
            match parser.parse(line) {
                Ok(Some(_)) => requests += 1,
                Ok(None) => {}
                Err(_) => bad += 1,
            }
        }
        (requests, bad)
    };
    let blkparse_like = {
        let events = lines
            .iter()
            .filter(|l| {
                let (f, n) = split(l, None);
                n >= 7 && device(f[0]).is_some() && uint("cpu", f[1]).is_ok()
            })
            .count();
        events * 2 >= lines.len()
    };
    let tallies = [
        TraceFormat::Msr,
        TraceFormat::Spc,
        TraceFormat::Tencent,
        TraceFormat::Systor,
        TraceFormat::MqSim,
        TraceFormat::Alibaba,
    ]
    .map(|f| (f, tally(f)));
    let mut candidates: Vec<TraceFormat> = tallies
        .iter()
        .filter(|&&(_, (requests, bad))| requests > 0 && bad == 0)
        .map(|&(f, _)| f)
        .chain(blkparse_like.then_some(TraceFormat::Blkparse(BlkEvent::Queue)))
        .collect();
    // A malformed line among the first ones should not hide the format: the reader then names
    // that line (or skips it under `--lenient`) instead of failing to detect anything. So when
    // no format reads every line, one that reads all but at most a quarter of them still counts.
    if candidates.is_empty() {
        candidates = tallies
            .iter()
            .filter(|&&(_, (requests, bad))| requests >= 2 && bad * 4 <= lines.len())
            .map(|&(f, _)| f)
            .collect();
    }
    let extension = path
        .and_then(|p| p.extension())
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    let hinted = |f: &TraceFormat| {
        matches!(
            (extension.as_deref(), f),
            (Some("spc"), TraceFormat::Spc)
                | (Some("trace" | "mqsim" | "ascii"), TraceFormat::MqSim)
                | (Some("blkparse" | "txt"), TraceFormat::Blkparse(_))
                | (
                    Some("csv"),
                    TraceFormat::Msr | TraceFormat::Tencent | TraceFormat::Systor
                )
        )
    };
    candidates
        .iter()
        .copied()
        .find(hinted)
        .or_else(|| candidates.first().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(format: TraceFormat, line: &str) -> ParseResult {
        Parser::new(format).parse(line)
    }

    #[test]
    fn byte_split_matches_str_split() {
        fn reference(line: &str, sep: Option<char>) -> Vec<&str> {
            match sep {
                Some(c) => line.split(c).map(str::trim).collect(),
                None => line.split_whitespace().collect(),
            }
        }
        let lines = [
            "",
            " ",
            "a",
            "1 2  3\t4\x0b5\x0c6\r",
            "  lead and trail  ",
            ",,a, b ,\tc\t,",
            "1,2,3,4,5,6,7,8,9,10,11,12",
            "x y z w v u t s r q p o n m",
            "caf\u{e9} \u{2003}b,\u{a0}c",
        ];
        for line in lines {
            for sep in [None, Some(','), Some(' ')] {
                let (f, n) = split(line, sep);
                let want = reference(line, sep);
                assert_eq!(n, want.len(), "{line:?} {sep:?}");
                for (i, w) in want.iter().take(FIELDS_KEPT).enumerate() {
                    assert_eq!(f[i], *w, "{line:?} {sep:?} field {i}");
                }
            }
        }
        assert!(uint("f", "18446744073709551615").is_ok());
        assert!(uint("f", "18446744073709551616").is_err());
    }

    #[test]
    fn decimal_seconds_are_exact() {
        assert_eq!(seconds_ns("t", "0").unwrap(), 0);
        assert_eq!(seconds_ns("t", "1.5").unwrap(), 1_500_000_000);
        assert_eq!(seconds_ns("t", ".000000001").unwrap(), 1);
        assert_eq!(
            seconds_ns("t", "1456095145.133076000").unwrap(),
            1_456_095_145_133_076_000
        );
        assert_eq!(seconds_ns("t", "2.1234567899").unwrap(), 2_123_456_789);
        for bad in ["", ".", "-1", "1e3", "1.2.3", "abc", " 1"] {
            assert!(seconds_ns("t", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_format_parses_a_line() {
        let r = one(TraceFormat::Spc, "3,100,4096,W,1.25,extra")
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.volume, r.offset_bytes, r.len_bytes, r.op),
            (3, 51_200, 4096, Op::Write)
        );
        assert_eq!(r.time_ns, 1_250_000_000);
        let r = one(
            TraceFormat::Msr,
            "128166385295514663,hm,0,Write,9056014336,2048,2833",
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.time_ns, 12_816_638_529_551_466_300);
        assert_eq!(
            (r.offset_bytes, r.len_bytes, r.op),
            (9_056_014_336, 2048, Op::Write)
        );
        let r = one(TraceFormat::MqSim, "11413000 0 657728 16 1")
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.time_ns, r.offset_bytes, r.len_bytes, r.op),
            (11_413_000, 657_728 * 512, 8192, Op::Read)
        );
        let r = one(TraceFormat::Tencent, "1538323199,13896880,128,0,1063")
            .unwrap()
            .unwrap();
        assert_eq!((r.volume, r.len_bytes, r.op), (1063, 65_536, Op::Read));
        let r = one(
            TraceFormat::Systor,
            "1456095145.133076000,0.000806000,R,0,899056122368,131072",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.offset_bytes, r.len_bytes, r.op),
            (899_056_122_368, 131_072, Op::Read)
        );
        assert!(one(
            TraceFormat::Systor,
            "Timestamp,Response,IOType,LUN,Offset,Size"
        )
        .unwrap()
        .is_none());
    }

    #[test]
    fn blkparse_events() {
        let q = TraceFormat::Blkparse(BlkEvent::Queue);
        let d = TraceFormat::Blkparse(BlkEvent::Issue);
        let line = "  8,16   3        1     0.000000000  4162  Q  WS 3417048 + 8 [kjournald]";
        let r = one(q, line).unwrap().unwrap();
        assert_eq!(
            (r.offset_bytes, r.len_bytes, r.op),
            (3_417_048 * 512, 4096, Op::Write)
        );
        assert_eq!(r.volume, (8 << 20) | 16);
        assert!(one(d, line).unwrap().is_none());
        assert!(
            one(q, "  8,0    1        5     0.100000000   123  Q FWS [jbd2]")
                .unwrap()
                .is_none()
        );
        assert!(one(
            q,
            "  8,0    1        5     0.100000000   123  Q   D 100 + 8 [fstrim]"
        )
        .unwrap()
        .is_none());
        assert!(one(q, "CPU0 (8,0):").unwrap().is_none());
        assert!(one(
            q,
            " Reads Queued:           3,       12KiB\t Writes Queued:           1,        4KiB"
        )
        .unwrap()
        .is_none());
        assert!(one(q, "  8,0    1        5     0.1   123  Q   R 100 + [x]").is_err());
    }

    #[test]
    fn detects_formats_from_content() {
        let cases: [(&str, TraceFormat); 7] = [
            ("0,20941264,8192,W,0.551706\n0,20939840,8192,W,0.554041\n", TraceFormat::Spc),
            ("128166385295514663,hm,0,Write,9056014336,2048,2833\n", TraceFormat::Msr),
            ("938513000 4 264719034 16 0\n938828000 3 197570570 16 0\n", TraceFormat::MqSim),
            ("1538323200,4247200,128,1,1058\n1538323199,13896880,128,0,1063\n", TraceFormat::Tencent),
            ("Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0.1,R,0,0,512\n", TraceFormat::Systor),
            (
                "  8,0    3        1     0.000000000  4162  Q  WS 3417048 + 8 [kjournald]\n  8,0    3        2     0.000002000  4162  G  WS 3417048 + 8 [kjournald]\n",
                TraceFormat::Blkparse(BlkEvent::Queue),
            ),
            ("fio version 2 iolog\n/dev/sda add\n", TraceFormat::FioIolog),
        ];
        for (text, format) in cases {
            assert_eq!(detect(None, text.as_bytes()), Some(format), "{text}");
        }
        assert_eq!(detect(None, b"hello world\n"), None);
        // One malformed line among the first ones still leaves the format recognisable (the
        // reader then names that line); a file of mostly unreadable lines is not recognised.
        let one_bad = "938513000 4 264719034 16 0\n938828000 3 197570570 16 0\ngarbage here\n\
                       939000000 3 197570578 16 1\n939100000 3 197570586 16 0\n";
        assert_eq!(detect(None, one_bad.as_bytes()), Some(TraceFormat::MqSim));
        let mostly_bad = "938513000 4 264719034 16 0\nnot a trace\nnor this\nnor that\n";
        assert_eq!(detect(None, mostly_bad.as_bytes()), None);
        assert_eq!(detect(None, b""), None);
    }
}

//! Traces in CSV dialects no named format covers: the columns are given on the command line
//! (`--format csv:SPEC`, [`CsvColumns::parse`]), and the Alibaba block traces
//! (`device_id,opcode,offset,length,timestamp`), which are one such column map with a name.
//!
//! A spec is a comma-separated list of `key=COLUMN[:UNIT]` (columns count from 1, as `cut`
//! and `awk` count them) and flags:
//!
//! | key | unit (default first) |
//! |---|---|
//! | `time` | `s`, `ms`, `us`, `ns`, `100ns` (Windows ticks); decimals allowed |
//! | `offset` | `bytes`, `sectors` (512 bytes), `blocks` (4 KiB), or a number of bytes |
//! | `size` | as `offset` |
//! | `op` | `rw` (`R`/`W`, `Read`/`Write`, any case: the first letter decides), `01` (0 read, 1 write), `10` (1 read, 0 write), `scsi` (opcodes in hex: 08/28/88/a8 read, 0a/2a/8a/aa write; other commands are skipped) |
//! | `device` | the volume (optional; a non-negative integer) |
//! | `header` | flag: the first line names the columns and is skipped |
//! | `sep=` | `comma` (default), `semicolon`, `tab`, `space` (runs of blanks) |
//!
//! Example, the Alibaba layout spelled out:
//! `csv:device=1,op=2:rw,offset=3:bytes,size=4:bytes,time=5:us`.

use std::fmt;

use super::formats::{bad, decimal_ns, request, split, uint, uint32, ParseResult, Problem};
use crate::Op;

/// Unit of a time column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Seconds (`s`).
    Seconds,
    /// Milliseconds (`ms`).
    Millis,
    /// Microseconds (`us`).
    Micros,
    /// Nanoseconds (`ns`).
    Nanos,
    /// 100 ns (Windows FILETIME ticks, as MSR Cambridge).
    Ticks100ns,
}

impl TimeUnit {
    fn ns(self) -> u128 {
        match self {
            TimeUnit::Seconds => 1_000_000_000,
            TimeUnit::Millis => 1_000_000,
            TimeUnit::Micros => 1_000,
            TimeUnit::Nanos => 1,
            TimeUnit::Ticks100ns => 100,
        }
    }
    fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Millis => "ms",
            TimeUnit::Micros => "us",
            TimeUnit::Nanos => "ns",
            TimeUnit::Ticks100ns => "100ns",
        }
    }
}

/// Unit of an offset or size column, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizeUnit(pub u32);

impl SizeUnit {
    /// Bytes (`bytes`).
    pub const BYTES: SizeUnit = SizeUnit(1);
    /// 512-byte sectors (`sectors`).
    pub const SECTORS: SizeUnit = SizeUnit(512);
    /// 4 KiB blocks (`blocks`).
    pub const BLOCKS: SizeUnit = SizeUnit(4096);
}

/// How an op column says read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpWords {
    /// `R`/`W`, `Read`/`Write`, any case (the first letter decides).
    Letters,
    /// `0` read, `1` write.
    ZeroRead,
    /// `1` read, `0` write.
    OneRead,
    /// SCSI opcodes in hex (`28`, `0x2a`): READ/WRITE(6/10/12/16); other commands are skipped.
    Scsi,
}

impl OpWords {
    fn name(self) -> &'static str {
        match self {
            OpWords::Letters => "rw",
            OpWords::ZeroRead => "01",
            OpWords::OneRead => "10",
            OpWords::Scsi => "scsi",
        }
    }
}

/// What separates the fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sep {
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// A tab.
    Tab,
    /// Runs of blanks.
    Space,
}

impl Sep {
    fn char(self) -> Option<char> {
        match self {
            Sep::Comma => Some(','),
            Sep::Semicolon => Some(';'),
            Sep::Tab => Some('\t'),
            Sep::Space => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sep::Comma => "comma",
            Sep::Semicolon => "semicolon",
            Sep::Tab => "tab",
            Sep::Space => "space",
        }
    }
}

/// Most columns a line may have for its fields to be used (columns past this are counted,
/// not kept).
pub const CSV_COLUMNS_MAX: usize = super::formats::FIELDS_KEPT;

/// Where a CSV dialect keeps each quantity (columns from 0 here; specs count from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CsvColumns {
    /// The arrival time's column and unit.
    pub time: (u8, TimeUnit),
    /// The first byte's column and unit.
    pub offset: (u8, SizeUnit),
    /// The length's column and unit.
    pub size: (u8, SizeUnit),
    /// The read-or-write column and its words.
    pub op: (u8, OpWords),
    /// The volume's column, if any (volume 0 otherwise).
    pub device: Option<u8>,
    /// The first non-blank line is a header.
    pub header: bool,
    /// What separates the fields.
    pub sep: Sep,
}

impl CsvColumns {
    /// The Alibaba block traces (2020): `device_id,opcode,offset,length,timestamp`, opcode
    /// `R`/`W`, offset and length in bytes, timestamp in microseconds.
    pub const ALIBABA: CsvColumns = CsvColumns {
        device: Some(0),
        op: (1, OpWords::Letters),
        offset: (2, SizeUnit::BYTES),
        size: (3, SizeUnit::BYTES),
        time: (4, TimeUnit::Micros),
        header: false,
        sep: Sep::Comma,
    };

    /// Reads a spec (see the module documentation), with or without its `csv:` prefix.
    pub fn parse(spec: &str) -> Result<CsvColumns, String> {
        let spec = spec.strip_prefix("csv:").unwrap_or(spec);
        let mut time = None;
        let mut offset = None;
        let mut size = None;
        let mut op = None;
        let mut device = None;
        let mut header = false;
        let mut sep = Sep::Comma;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "header" {
                header = true;
                continue;
            }
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!(
                    "{item:?} is not key=COLUMN[:UNIT] (keys: time, offset, size, op, device; \
                     flags: header, sep=comma|semicolon|tab|space)"
                ));
            };
            if key == "sep" {
                sep = match value {
                    "comma" | "," => Sep::Comma,
                    "semicolon" | ";" => Sep::Semicolon,
                    "tab" => Sep::Tab,
                    "space" => Sep::Space,
                    _ => return Err(format!("sep={value:?}: use comma, semicolon, tab or space")),
                };
                continue;
            }
            let (col, unit) = match value.split_once(':') {
                Some((c, u)) => (c, Some(u)),
                None => (value, None),
            };
            let col: usize = col.parse().ok().filter(|&c| c >= 1).ok_or_else(|| {
                format!("{key}={value}: the column is a number from 1 (the first column)")
            })?;
            if col > CSV_COLUMNS_MAX {
                return Err(format!(
                    "{key}={value}: column {col} is past the last one read ({CSV_COLUMNS_MAX})"
                ));
            }
            let col = (col - 1) as u8;
            let unknown_unit = |u: &str, known: &str| {
                format!("{key}={value}: unknown unit {u:?} (known: {known})")
            };
            match key {
                "time" => {
                    let u = match unit.unwrap_or("s") {
                        "s" => TimeUnit::Seconds,
                        "ms" => TimeUnit::Millis,
                        "us" => TimeUnit::Micros,
                        "ns" => TimeUnit::Nanos,
                        "100ns" => TimeUnit::Ticks100ns,
                        u => return Err(unknown_unit(u, "s, ms, us, ns, 100ns")),
                    };
                    time = Some((col, u));
                }
                "offset" | "size" => {
                    let u = match unit.unwrap_or("bytes") {
                        "bytes" | "b" => SizeUnit::BYTES,
                        "sectors" | "sector" => SizeUnit::SECTORS,
                        "blocks" | "4k" => SizeUnit::BLOCKS,
                        u => match u.parse::<u32>() {
                            Ok(n) if n > 0 => SizeUnit(n),
                            _ => {
                                return Err(unknown_unit(
                                    u,
                                    "bytes, sectors (512), blocks (4096), or a number of bytes",
                                ))
                            }
                        },
                    };
                    if key == "offset" {
                        offset = Some((col, u));
                    } else {
                        size = Some((col, u));
                    }
                }
                "op" => {
                    let w = match unit.unwrap_or("rw") {
                        "rw" => OpWords::Letters,
                        "01" => OpWords::ZeroRead,
                        "10" => OpWords::OneRead,
                        "scsi" => OpWords::Scsi,
                        u => return Err(unknown_unit(u, "rw, 01, 10, scsi")),
                    };
                    op = Some((col, w));
                }
                "device" => {
                    if unit.is_some() {
                        return Err(format!("{key}={value}: a device column has no unit"));
                    }
                    device = Some(col);
                }
                _ => {
                    return Err(format!(
                        "unknown key {key:?} (keys: time, offset, size, op, device; flags: \
                         header, sep=...)"
                    ))
                }
            }
        }
        let missing = |what: &str| format!("the spec names no {what} column ({what}=COLUMN)");
        Ok(CsvColumns {
            time: time.ok_or_else(|| missing("time"))?,
            offset: offset.ok_or_else(|| missing("offset"))?,
            size: size.ok_or_else(|| missing("size"))?,
            op: op.ok_or_else(|| missing("op"))?,
            device,
            header,
            sep,
        })
    }

    /// Columns a line must have.
    fn needed(&self) -> usize {
        [self.time.0, self.offset.0, self.size.0, self.op.0]
            .into_iter()
            .chain(self.device)
            .max()
            .map_or(0, |c| c as usize + 1)
    }

    /// Parses one line (not a header).
    pub(super) fn parse_line(&self, line: &str) -> ParseResult {
        let (f, n) = split(line, self.sep.char());
        if n < self.needed() {
            return Err(Problem::FieldCount {
                expected: "at least as many as the column map names",
                found: n,
            });
        }
        let op = match op_of(self.op.1, f[self.op.0 as usize])? {
            Some(op) => op,
            None => return Ok(None),
        };
        let (tc, tu) = self.time;
        let time = decimal_ns("time", f[tc as usize], tu.ns())?;
        let bytes = |field: &'static str, (c, u): (u8, SizeUnit)| {
            uint(field, f[c as usize])?
                .checked_mul(u64::from(u.0))
                .ok_or(Problem::Overflow("offset or size in bytes"))
        };
        let offset = bytes("offset", self.offset)?;
        let len = bytes("size", self.size)?;
        let volume = match self.device {
            Some(c) => uint32("device", f[c as usize])?,
            None => 0,
        };
        request(time, offset, len, op, volume)
    }
}

fn op_of(words: OpWords, s: &str) -> Result<Option<Op>, Problem> {
    match words {
        OpWords::Letters => match s.bytes().next().map(|b| b.to_ascii_lowercase()) {
            Some(b'r') => Ok(Some(Op::Read)),
            Some(b'w') => Ok(Some(Op::Write)),
            _ => Err(bad("op", s, "expected R/W or Read/Write")),
        },
        OpWords::ZeroRead | OpWords::OneRead => {
            let read = if words == OpWords::ZeroRead { "0" } else { "1" };
            match s {
                "0" | "1" if s == read => Ok(Some(Op::Read)),
                "0" | "1" => Ok(Some(Op::Write)),
                _ => Err(bad("op", s, "expected 0 or 1")),
            }
        }
        OpWords::Scsi => {
            let hex = s.strip_prefix("0x").or(s.strip_prefix("0X")).unwrap_or(s);
            let code = u8::from_str_radix(hex, 16)
                .map_err(|_| bad("op", s, "expected a SCSI opcode in hex (28, 0x2a)"))?;
            Ok(match code {
                0x08 | 0x28 | 0x88 | 0xa8 => Some(Op::Read),
                0x0a | 0x2a | 0x8a | 0xaa => Some(Op::Write),
                // Not a data transfer (SYNCHRONIZE CACHE, INQUIRY, ...).
                _ => None,
            })
        }
    }
}

impl fmt::Display for CsvColumns {
    /// The spec that reads back as `self` (columns from 1).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |u: SizeUnit| match u {
            SizeUnit::BYTES => "bytes".to_string(),
            SizeUnit::SECTORS => "sectors".to_string(),
            SizeUnit::BLOCKS => "blocks".to_string(),
            SizeUnit(n) => n.to_string(),
        };
        write!(
            f,
            "csv:time={}:{},offset={}:{},size={}:{},op={}:{}",
            self.time.0 + 1,
            self.time.1.name(),
            self.offset.0 + 1,
            size(self.offset.1),
            self.size.0 + 1,
            size(self.size.1),
            self.op.0 + 1,
            self.op.1.name()
        )?;
        if let Some(d) = self.device {
            write!(f, ",device={}", d + 1)?;
        }
        if self.header {
            write!(f, ",header")?;
        }
        if self.sep != Sep::Comma {
            write!(f, ",sep={}", self.sep.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_back_from_its_display() {
        for spec in [
            "csv:time=5:us,offset=3:bytes,size=4:bytes,op=2:rw,device=1",
            "csv:time=1:100ns,offset=2:sectors,size=3:4096,op=4:scsi,header,sep=tab",
            "csv:time=2:ms,offset=1:blocks,size=1:blocks,op=3:10,sep=space",
        ] {
            let c = CsvColumns::parse(spec).unwrap();
            assert_eq!(CsvColumns::parse(&c.to_string()).unwrap(), c, "{spec}");
        }
        assert_eq!(
            CsvColumns::parse("device=1,op=2:rw,offset=3:bytes,size=4:bytes,time=5:us").unwrap(),
            CsvColumns::ALIBABA
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let e = |s: &str| CsvColumns::parse(s).unwrap_err();
        assert!(e("time=1,offset=2,size=3").contains("no op column"));
        assert!(e("time=0,offset=2,size=3,op=4").contains("number from 1"));
        assert!(e("time=1:h,offset=2,size=3,op=4").contains("unknown unit \"h\""));
        assert!(e("time=1,offset=2,size=3,op=4,lba=5").contains("unknown key \"lba\""));
        assert!(e("time=1,offset=2,size=3,op=4:yes").contains("rw, 01, 10, scsi"));
        assert!(e("time=1,offset=2,size=3,op=99").contains("past the last"));
        assert!(e("time").contains("key=COLUMN"));
    }

    #[test]
    fn lines_read_in_their_units() {
        let c = CsvColumns::parse("time=1:ms,offset=2:sectors,size=3:blocks,op=4:scsi,device=5")
            .unwrap();
        let r = c.parse_line("1.5,8,2,0x2A,7").unwrap().unwrap();
        assert_eq!(
            (r.time_ns, r.offset_bytes, r.len_bytes, r.op, r.volume),
            (1_500_000, 4096, 8192, Op::Write, 7)
        );
        let r = c.parse_line("2,0,1,28,0").unwrap().unwrap();
        assert_eq!(r.op, Op::Read);
        // SYNCHRONIZE CACHE carries no data: skipped.
        assert!(c.parse_line("3,0,0,35,0").unwrap().is_none());
        assert!(matches!(
            c.parse_line("3,0,0,zz,0"),
            Err(Problem::BadField { field: "op", .. })
        ));
        assert!(matches!(
            c.parse_line("3,0,0"),
            Err(Problem::FieldCount { found: 3, .. })
        ));
        let zero = CsvColumns::parse("time=1,offset=2,size=3,op=4:01").unwrap();
        assert_eq!(zero.parse_line("0,0,1,0").unwrap().unwrap().op, Op::Read);
        assert_eq!(zero.parse_line("0,0,1,1").unwrap().unwrap().op, Op::Write);
        let one = CsvColumns::parse("time=1,offset=2,size=3,op=4:10").unwrap();
        assert_eq!(one.parse_line("0,0,1,1").unwrap().unwrap().op, Op::Read);
    }
}

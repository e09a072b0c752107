//! Fuzz target: the trace readers of `sim::trace` (every format, every reading option).
//!
//! Included by `crates/sim/examples/fuzz_traces.rs` (the campaign driver) and
//! `crates/sim/tests/fuzz_traces.rs` (bounded cases in CI). Properties, from the formats'
//! documentation (the table in `sim/src/trace/mod.rs`), not from the parsers:
//!
//! - any bytes, any format, any valid options: no panic, and the stream ends; every line is
//!   accounted for exactly once: requests returned + errors + skipped lines = lines in the input
//!   (a last line without a newline counts);
//! - every error names the file and its line (`fuzz.trace:N`, lines in increasing order);
//! - every request fits in 64 bits (`offset + len`), lies in the fold capacity and on its
//!   alignment when folding, and times never go backwards unless `AsRecorded`;
//! - a well-formed line generated from known values (time, offset, length, op, volume) reads
//!   back as exactly those values, relative to the first request's time; lines that carry no
//!   data I/O are skipped and counted, and a malformed line among them is one error naming its
//!   line while the requests around it are unaffected.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::{Path, PathBuf};

use crate::fuzzutil::{mutate, CaseResult, Rng};
use sim::{
    BlkEvent, Fold, Op, ReadOptions, Request, TimeOrder, TraceError, TraceFormat, TraceReader,
};

pub const FILE: &str = "fuzz.trace";

/// One request as generated: absolute time in ns (in the format's resolution), bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    pub time_ns: u64,
    pub offset: u64,
    pub len: u64,
    pub op: Op,
    pub volume: u32,
}

/// Decimal seconds with `digits` fractional digits (the value must be representable).
fn secs(ns: u64, digits: u32) -> String {
    let whole = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    if digits == 0 {
        return whole.to_string();
    }
    let frac = frac / 10u64.pow(9 - digits);
    format!("{whole}.{frac:0width$}", width = digits as usize)
}

/// A separator of whitespace-separated formats.
fn ws(rng: &mut Rng) -> &'static str {
    const SEPARATORS: [&str; 5] = [" ", " ", "  ", "\t", " \t "];
    SEPARATORS[rng.index(SEPARATORS.len())]
}

/// A generated trace: its text, the requests it holds (in file order), the lines that must be
/// skipped, and the lines that must be errors.
pub struct Generated {
    pub text: String,
    pub requests: Vec<Known>,
    pub skipped: u64,
    pub error_lines: Vec<u64>,
}

/// Draws a request the format can express exactly: times in its resolution, offsets and
/// lengths in its units.
fn known(rng: &mut Rng, format: TraceFormat, prev_time: u64) -> Known {
    let (time_unit, addr_unit) = match format {
        TraceFormat::Spc => (1, 512),
        TraceFormat::Msr => (100, 1),
        TraceFormat::MqSim => (1, 512),
        TraceFormat::Tencent => (1_000_000_000, 512),
        TraceFormat::Systor => (1, 1),
        TraceFormat::Blkparse(_) => (1, 512),
        TraceFormat::FioIolog => (1000, 1),
        TraceFormat::Alibaba => (1000, 1),
        TraceFormat::Csv(_) => unreachable!("the generator covers the named formats"),
    };
    // Mostly forward in time, sometimes backwards (Tencent and SYSTOR are not sorted).
    let step = rng.below(5_000_000_000) / time_unit * time_unit;
    let time_ns = if rng.chance(1, 5) {
        prev_time.saturating_sub(step)
    } else {
        prev_time.saturating_add(step).min(u64::MAX / 4)
    };
    let time_ns = time_ns / time_unit * time_unit;
    let len_units = match rng.below(4) {
        0 => 0,
        1 => 1 + rng.below(8),
        2 => 1 + rng.below(4096),
        _ => rng.below(1 << 30),
    };
    let len = len_units * if addr_unit == 512 { 512 } else { 1 };
    let max_offset_units = (u64::MAX - len) / addr_unit;
    let offset_units = match rng.below(3) {
        0 => rng.below(1 << 20),
        1 => rng.skewed().min(max_offset_units),
        _ => max_offset_units,
    };
    let volume = match format {
        TraceFormat::Blkparse(_) => {
            let major = rng.below(4096) as u32;
            let minor = if rng.chance(1, 2) {
                rng.below(16) as u32
            } else {
                rng.below(1 << 20) as u32
            };
            (major << 20) | minor
        }
        // fio volumes are file indexes, assigned by the caller.
        TraceFormat::FioIolog => 0,
        _ => match rng.below(3) {
            0 => 0,
            1 => rng.below(64) as u32,
            _ => rng.next_u64() as u32,
        },
    };
    Known {
        time_ns,
        offset: offset_units * addr_unit,
        len,
        op: if rng.chance(1, 2) {
            Op::Read
        } else {
            Op::Write
        },
        volume,
    }
}

/// The line of one request, in the format's units, with some of each format's allowed variety
/// (case of opcodes, extra fields, separators, fewer decimals when exact).
fn render(rng: &mut Rng, format: TraceFormat, k: &Known, fio_file: &str) -> String {
    let read = k.op == Op::Read;
    let digits = |rng: &mut Rng, ns: u64| -> u32 {
        // As few fractional digits as represent the time exactly, or more.
        let mut d = 9;
        while d > 0 && (ns % 1_000_000_000).is_multiple_of(10u64.pow(10 - d)) {
            d -= 1;
        }
        d + rng.below(u64::from(9 - d) + 1) as u32
    };
    match format {
        TraceFormat::Spc => {
            let op = *rng.pick(if read { &["r", "R"] } else { &["w", "W"] });
            let d = digits(rng, k.time_ns);
            let mut line = format!(
                "{},{},{},{op},{}",
                k.volume,
                k.offset / 512,
                k.len,
                secs(k.time_ns, d)
            );
            for _ in 0..rng.below(3) {
                line.push_str(",extra");
            }
            line
        }
        TraceFormat::Msr => {
            let op = *rng.pick(if read {
                &["Read", "read", "READ"]
            } else {
                &["Write", "write"]
            });
            format!(
                "{},host{},{},{op},{},{},{}",
                k.time_ns / 100,
                rng.below(9),
                k.volume,
                k.offset,
                k.len,
                rng.below(100_000)
            )
        }
        TraceFormat::MqSim => {
            let s = [ws(rng), ws(rng), ws(rng), ws(rng)];
            let lead = if rng.chance(1, 4) { " " } else { "" };
            format!(
                "{lead}{}{}{}{}{}{}{}{}{}",
                k.time_ns,
                s[0],
                k.volume,
                s[1],
                k.offset / 512,
                s[2],
                k.len / 512,
                s[3],
                if read { 1 } else { 0 }
            )
        }
        TraceFormat::Alibaba => {
            let op = *rng.pick(if read {
                &["R", "r", "Read"]
            } else {
                &["W", "w"]
            });
            format!(
                "{},{op},{},{},{}",
                k.volume,
                k.offset,
                k.len,
                k.time_ns / 1000
            )
        }
        TraceFormat::Tencent => format!(
            "{},{},{},{},{}",
            k.time_ns / 1_000_000_000,
            k.offset / 512,
            k.len / 512,
            if read { 0 } else { 1 },
            k.volume
        ),
        TraceFormat::Systor => {
            let d = digits(rng, k.time_ns);
            let op = *rng.pick(if read { &["R", "r"] } else { &["W", "w"] });
            format!(
                "{},0.000{},{op},{},{},{}",
                secs(k.time_ns, d),
                rng.below(1000),
                k.volume,
                k.offset,
                k.len
            )
        }
        TraceFormat::Blkparse(event) => {
            let action = match event {
                BlkEvent::Queue => "Q",
                BlkEvent::Issue => "D",
            };
            let rwbs = if read {
                *rng.pick(&["R", "RS", "RA", "RM"])
            } else {
                *rng.pick(&["W", "WS", "WM", "FWS", "WFS"])
            };
            let d = digits(rng, k.time_ns);
            format!(
                "{:>3},{:<3}{}{:>2}{}{:>8}{}{}{}{}{}{action}{}{rwbs} {} + {}{}",
                k.volume >> 20,
                k.volume & 0xfffff,
                ws(rng),
                rng.below(64),
                ws(rng),
                1 + rng.below(1 << 20),
                ws(rng),
                secs(k.time_ns, d),
                ws(rng),
                rng.below(99999),
                ws(rng),
                ws(rng),
                k.offset / 512,
                k.len / 512,
                if rng.chance(1, 2) { " [proc]" } else { "" }
            )
        }
        TraceFormat::FioIolog => {
            let action = if read { "read" } else { "write" };
            // The caller decides v2/v3 through the file name's prefix: "3:" means version 3.
            if let Some(file) = fio_file.strip_prefix("3:") {
                format!(
                    "{} {file} {action} {} {}",
                    k.time_ns / 1000,
                    k.offset,
                    k.len
                )
            } else {
                format!("{fio_file} {action} {} {}", k.offset, k.len)
            }
        }
        TraceFormat::Csv(_) => unreachable!("the generator covers the named formats"),
    }
}

/// A line of the format that must be skipped (no data I/O).
fn noise(rng: &mut Rng, format: TraceFormat, fio_file: &str) -> String {
    if rng.chance(1, 4) {
        return (*rng.pick(&["", " ", "\t", "  \t "])).to_string();
    }
    match format {
        TraceFormat::Msr => "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime".into(),
        TraceFormat::Systor => "Timestamp,Response,IOType,LUN,Offset,Size".into(),
        TraceFormat::Blkparse(event) => {
            let other = match event {
                BlkEvent::Queue => *rng.pick(&["D", "C", "G", "I", "M", "P", "U"]),
                BlkEvent::Issue => *rng.pick(&["Q", "C", "G", "I", "M"]),
            };
            match rng.below(4) {
                0 => format!("  8,0    1   {}     0.000100000  77  {other}   W 100 + 8 [x]", rng.below(100)),
                1 => "  8,0    1        5     0.100000000   123  Q FWS [jbd2]".replace('Q', if event == BlkEvent::Queue { "Q" } else { "D" }),
                2 => "CPU0 (8,0):".into(),
                _ => " Reads Queued:           3,       12KiB\t Writes Queued:           1,        4KiB".into(),
            }
        }
        TraceFormat::FioIolog => {
            let (v3, file) = match fio_file.strip_prefix("3:") {
                Some(f) => (true, f),
                None => (false, fio_file),
            };
            let body = match rng.below(4) {
                0 => format!("{file} open"),
                1 => format!("{file} sync 0 0"),
                2 => format!("{file} trim 4096 4096"),
                _ => format!("{file} datasync 0 0"),
            };
            if v3 {
                format!("{} {body}", rng.below(1 << 40))
            } else {
                body
            }
        }
        // The others have no skipped lines but blank ones.
        _ => String::new(),
    }
}

/// A line that must be an error: a well-formed line with one numeric field made invalid.
fn broken(rng: &mut Rng, format: TraceFormat, k: &Known, fio_file: &str) -> String {
    let good = render(rng, format, k, fio_file);
    let bad = *rng.pick(&["x1", "-1", "1e3", "99999999999999999999999", "0x10"]);
    // The field to spoil: (separator, index) of a numeric field every format checks.
    let (sep, index) = match format {
        TraceFormat::Spc => (Some(','), 1),
        TraceFormat::Msr => (Some(','), 4),
        TraceFormat::MqSim => (None, 2),
        TraceFormat::Tencent => (Some(','), 1),
        TraceFormat::Systor => (Some(','), 4),
        TraceFormat::Blkparse(_) => (None, 7),
        TraceFormat::FioIolog => (None, if fio_file.starts_with("3:") { 3 } else { 2 }),
        TraceFormat::Alibaba => (Some(','), 2),
        TraceFormat::Csv(_) => unreachable!("the generator covers the named formats"),
    };
    match sep {
        Some(c) => {
            let mut fields: Vec<&str> = good.split(c).collect();
            fields[index] = bad;
            fields.join(&c.to_string())
        }
        None => {
            let mut fields: Vec<&str> = good.split_whitespace().collect();
            fields[index] = bad;
            fields.join(" ")
        }
    }
}

/// A trace of `format` with known requests, noise lines and (when `with_errors`) broken lines.
pub fn generate(rng: &mut Rng, format: TraceFormat, with_errors: bool) -> Generated {
    let mut text = String::new();
    let mut requests = Vec::new();
    let mut skipped = 0;
    let mut error_lines = Vec::new();
    let mut line = 0u64;
    let push = |text: &mut String, s: &str| {
        text.push_str(s);
        text.push_str(if rng_crlf(s) { "\r\n" } else { "\n" });
    };
    let v3 = rng.chance(1, 2);
    let files = ["/dev/sda", "/dev/nvme0n1", "data.bin", "f"];
    let mut fio_files: Vec<&str> = Vec::new();
    let mut fio_wait_us = 0u64;
    let mut fio_current = "";
    if format == TraceFormat::FioIolog {
        line += 1;
        skipped += 1;
        push(
            &mut text,
            if v3 {
                "fio version 3 iolog"
            } else {
                "fio version 2 iolog"
            },
        );
    } else if format == TraceFormat::Systor || (format == TraceFormat::Msr && rng.chance(1, 2)) {
        line += 1;
        skipped += 1;
        let h = noise(&mut Rng::new(1), format, "");
        push(&mut text, &h);
    }
    let n = 1 + rng.index(20);
    let mut prev = rng.below(1 << 50);
    for _ in 0..n {
        // fio: file actions first, and version 2 "wait" lines for time.
        let mut k = known(rng, format, prev);
        if format == TraceFormat::FioIolog {
            let f = *rng.pick(&files);
            if !fio_files.contains(&f) || rng.chance(1, 8) {
                if !fio_files.contains(&f) {
                    fio_files.push(f);
                }
                line += 1;
                skipped += 1;
                let action = *rng.pick(&["add", "open"]);
                let l = if v3 {
                    format!("{} {f} {action}", rng.below(1 << 30))
                } else {
                    format!("{f} {action}")
                };
                push(&mut text, &l);
            }
            fio_current = f;
            k.volume = fio_files.iter().position(|x| *x == f).unwrap() as u32;
            if !v3 {
                // Version 2: time is the sum of the waits so far.
                let wait = rng.below(1 << 20);
                if wait > 0 || rng.chance(1, 2) {
                    line += 1;
                    skipped += 1;
                    push(&mut text, &format!("{f} wait {wait} 0"));
                }
                fio_wait_us += wait;
                k.time_ns = fio_wait_us * 1000;
            }
        }
        let file_arg = if v3 {
            format!("3:{fio_current}")
        } else {
            fio_current.to_string()
        };
        while rng.chance(1, 4) {
            line += 1;
            skipped += 1;
            let l = noise(rng, format, &file_arg);
            push(&mut text, &l);
        }
        if with_errors && rng.chance(1, 5) {
            line += 1;
            error_lines.push(line);
            let l = broken(rng, format, &k, &file_arg);
            push(&mut text, &l);
        }
        line += 1;
        let l = render(rng, format, &k, &file_arg);
        push(&mut text, &l);
        requests.push(k);
        prev = k.time_ns;
    }
    if rng.chance(1, 3) && text.ends_with('\n') {
        // No newline after the last line.
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Generated {
        text,
        requests,
        skipped,
        error_lines,
    }
}

/// Some lines end in CRLF (a deterministic choice, so `generate` stays a function of its rng).
fn rng_crlf(s: &str) -> bool {
    s.len() % 7 == 3
}

/// The requests a reader must return for `known`, with `order` (AsRecorded or Clamp): times
/// relative to the first request's, clamped to the latest so far under Clamp.
pub fn expected(known: &[Known], order: TimeOrder) -> Vec<Request> {
    let origin = known.first().map_or(0, |k| k.time_ns);
    let mut latest = 0u64;
    known
        .iter()
        .map(|k| {
            latest = latest.max(k.time_ns);
            let t = match order {
                TimeOrder::AsRecorded => k.time_ns,
                _ => latest,
            };
            Request {
                time_ns: t.saturating_sub(origin),
                offset_bytes: k.offset,
                len_bytes: k.len,
                op: k.op,
                volume: k.volume,
            }
        })
        .collect()
}

/// The line an error is about.
pub fn error_line(e: &TraceError) -> Option<u64> {
    let loc = match e {
        TraceError::Io { location, .. }
        | TraceError::LineTooLong { location, .. }
        | TraceError::NotText { location }
        | TraceError::FieldCount { location, .. }
        | TraceError::BadField { location, .. }
        | TraceError::BadHeader { location, .. }
        | TraceError::Overflow { location, .. }
        | TraceError::TooLargeToFold { location, .. }
        | TraceError::TooManyVolumes { location, .. }
        | TraceError::UnknownFormat { location, .. } => location,
        _ => return None,
    };
    Some(loc.line)
}

pub fn error_kind(e: &TraceError) -> String {
    match e {
        TraceError::Io { .. } => "io".into(),
        TraceError::LineTooLong { .. } => "line-too-long".into(),
        TraceError::NotText { .. } => "not-text".into(),
        TraceError::FieldCount { expected, .. } => format!("field-count({expected})"),
        TraceError::BadField { field, reason, .. } => format!("bad-field({field}: {reason})"),
        TraceError::BadHeader { .. } => "bad-header".into(),
        TraceError::Overflow { what, .. } => format!("overflow({what})"),
        TraceError::TooLargeToFold { .. } => "too-large-to-fold".into(),
        TraceError::TooManyVolumes { .. } => "too-many-volumes".into(),
        TraceError::UnknownFormat { .. } => "unknown-format".into(),
        TraceError::InvalidOption { .. } => "invalid-option".into(),
        _ => "other".into(),
    }
}

/// Lines in `input` as the format defines them: pieces ended by `\n`, and a last piece without.
pub fn count_lines(input: &[u8]) -> u64 {
    let newlines = input.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(input.last().is_some_and(|&b| b != b'\n'))
}

/// What reading `input` gave.
pub struct Read {
    pub requests: Vec<Request>,
    pub errors: Vec<TraceError>,
    pub skipped: u64,
}

/// Reads all of `input` and checks the properties that hold for any input.
pub fn read_checked(
    input: &[u8],
    format: TraceFormat,
    options: ReadOptions,
) -> Result<Read, String> {
    let lines = count_lines(input);
    let mut reader = TraceReader::new(Cursor::new(input), format, options)
        .map_err(|e| format!("valid options refused: {e}"))?
        .with_file_name(FILE);
    let mut requests = Vec::new();
    let mut errors = Vec::new();
    let mut items = 0u64;
    let mut last_error_line = 0;
    let mut error_lines = std::collections::BTreeSet::new();
    // A sort window returns a request's late error (folding, overflow) after the parse errors
    // of the lines read after it: lines are then distinct but not in order.
    let windowed = matches!(options.order, TimeOrder::Window(_));
    for item in reader.by_ref() {
        items += 1;
        if items > lines + 1 {
            return Err(format!("more items than the {lines} lines"));
        }
        match item {
            Ok(r) => {
                if r.offset_bytes.checked_add(r.len_bytes).is_none() {
                    return Err(format!("{r:?} overflows 64 bits"));
                }
                if let Some(f) = options.fold {
                    if r.offset_bytes % f.align_bytes != 0
                        || r.offset_bytes
                            .checked_add(r.len_bytes)
                            .is_none_or(|end| end > f.capacity_bytes)
                    {
                        return Err(format!("{r:?} outside the fold {f:?}"));
                    }
                }
                if options.order != TimeOrder::AsRecorded {
                    if let Some(p) = requests.last() {
                        let p: &Request = p;
                        if r.time_ns < p.time_ns {
                            return Err(format!("time went backwards: {p:?} then {r:?}"));
                        }
                    }
                }
                requests.push(r);
            }
            Err(e) => {
                let line = error_line(&e).ok_or_else(|| format!("error without a place: {e}"))?;
                if line == 0
                    || line > lines
                    || !error_lines.insert(line)
                    || (!windowed && line <= last_error_line)
                {
                    return Err(format!("error on line {line} (of {lines}, previous error on {last_error_line}): {e}"));
                }
                let text = e.to_string();
                if !text.starts_with(&format!("{FILE}:{line}: ")) {
                    return Err(format!("error does not name {FILE}:{line}: {text}"));
                }
                last_error_line = line;
                errors.push(e);
            }
        }
    }
    let skipped = reader.skipped_lines();
    if let Some(limit) = options.limit {
        if requests.len() as u64 > limit {
            return Err("more requests than the limit".into());
        }
    } else {
        let accounted = requests.len() as u64 + errors.len() as u64 + skipped;
        if accounted != lines {
            return Err(format!(
                "{} requests + {} errors + {skipped} skipped = {accounted}, but the input has {lines} lines",
                requests.len(),
                errors.len()
            ));
        }
    }
    if reader.requests_returned() != requests.len() as u64 {
        return Err("requests_returned() disagrees".into());
    }
    Ok(Read {
        requests,
        errors,
        skipped,
    })
}

/// The options change how requests are returned, not which: a sort window returns the same
/// requests as reading them as recorded (in another order), and a limit returns the first ones.
pub fn check_consistency(
    rng: &mut Rng,
    input: &[u8],
    format: TraceFormat,
    fold: Option<Fold>,
) -> Result<(), String> {
    let base = ReadOptions {
        fold,
        order: TimeOrder::AsRecorded,
        ..ReadOptions::default()
    };
    let recorded = read_checked(input, format, base)?;
    let window = TimeOrder::Window(1 + rng.index(8));
    let windowed = read_checked(
        input,
        format,
        ReadOptions {
            order: window,
            ..base
        },
    )?;
    let overflow = |r: &Read| {
        r.errors
            .iter()
            .any(|e| matches!(e, TraceError::Overflow { .. }))
    };
    // The time origin differs (the earliest of the first window), so whether a time overflows
    // may differ; compare only when none did.
    if !overflow(&recorded) && !overflow(&windowed) {
        let key = |r: &Request| (r.offset_bytes, r.len_bytes, r.op == Op::Read, r.volume);
        let mut a: Vec<_> = recorded.requests.iter().map(key).collect();
        let mut b: Vec<_> = windowed.requests.iter().map(key).collect();
        a.sort_unstable();
        b.sort_unstable();
        if a != b || recorded.errors.len() != windowed.errors.len() {
            return Err(format!(
                "{window:?} returned other requests or errors than AsRecorded: {} vs {} requests, {} vs {} errors",
                b.len(),
                a.len(),
                windowed.errors.len(),
                recorded.errors.len()
            ));
        }
    }
    let limit = rng.below(recorded.requests.len() as u64 + 2);
    let limited = read_checked(
        input,
        format,
        ReadOptions {
            limit: Some(limit),
            ..base
        },
    )?;
    let n = (limit as usize).min(recorded.requests.len());
    if limited.requests[..] != recorded.requests[..n] {
        return Err(format!(
            "limit {limit} returned {} requests, not the first {n}",
            limited.requests.len()
        ));
    }
    Ok(())
}

/// Checks a generated trace reads back exactly.
pub fn check_generated(g: &Generated, format: TraceFormat, order: TimeOrder) -> CaseResult {
    let options = ReadOptions {
        order,
        ..ReadOptions::default()
    };
    let read = read_checked(g.text.as_bytes(), format, options)?;
    let want = expected(&g.requests, order);
    if read.requests != want {
        let i = read
            .requests
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(read.requests.len()));
        return Err(format!(
            "{format}: request {i} read as {:?}, generated {:?} ({} read, {} generated; errors {:?})\n{}",
            read.requests.get(i),
            want.get(i),
            read.requests.len(),
            want.len(),
            read.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            g.text
        ));
    }
    let lines: Vec<u64> = read.errors.iter().filter_map(error_line).collect();
    if lines != g.error_lines {
        return Err(format!(
            "{format}: errors on lines {lines:?}, broken lines {:?}: {:?}\n{}",
            g.error_lines,
            read.errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>(),
            g.text
        ));
    }
    if read.skipped != g.skipped {
        return Err(format!(
            "{format}: {} lines skipped, {} noise lines\n{}",
            read.skipped, g.skipped, g.text
        ));
    }
    Ok(format!("{format}:generated"))
}

/// The repository's trace folder (`data/traces`: the real MQSim traces and the synthetic
/// MSR, Tencent and SYSTOR fixtures).
pub fn traces_dir() -> PathBuf {
    sim::repository_traces_dir()
}

/// The format of a trace of `data/traces` (or of the SNIA samples' usual names), from its
/// name; `None` for other files (the README, the generator script, the licence).
pub fn format_of(p: &Path) -> Option<TraceFormat> {
    let name = p.file_name()?.to_str()?;
    let stem = name.strip_prefix("synthetic-").unwrap_or(name);
    match p.extension().and_then(|e| e.to_str())? {
        "mqsim" => Some(TraceFormat::MqSim),
        "csv" if stem.starts_with("msr") => Some(TraceFormat::Msr),
        "csv" if stem.starts_with("systor") => Some(TraceFormat::Systor),
        "csv" if stem.starts_with("tencent") => Some(TraceFormat::Tencent),
        _ => None,
    }
}

/// The first lines (at most `bytes` bytes, whole lines) of every trace of `data/traces`, with
/// the format that reads it. Panics if the folder cannot be read: it is part of the
/// repository.
pub fn real_samples(bytes: usize) -> Vec<(TraceFormat, Vec<u8>)> {
    let dir = traces_dir();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|p| {
            let format = format_of(&p)?;
            let mut head = read_prefix(&p, bytes)?;
            if let Some(end) = head.iter().rposition(|&b| b == b'\n') {
                head.truncate(end + 1);
            }
            Some((format, head))
        })
        .collect()
}

fn read_prefix(p: &Path, bytes: usize) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    std::fs::File::open(p)
        .ok()?
        .take(bytes as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

/// Random valid reading options.
pub fn options(rng: &mut Rng) -> ReadOptions {
    let fold = if rng.chance(1, 4) {
        let align = *rng.pick(&[1u64, 512, 4096, 65536]);
        let capacity = align * (1 + rng.skewed() % (u64::MAX / align));
        Some(Fold {
            capacity_bytes: capacity,
            align_bytes: align,
        })
    } else {
        None
    };
    ReadOptions {
        speedup: *rng.pick(&[1.0, 1.0, 2.0, 0.5, 1e-9, 1e9, 3.7]),
        fold,
        limit: if rng.chance(1, 8) {
            Some(rng.below(10))
        } else {
            None
        },
        order: match rng.below(4) {
            0 => TimeOrder::AsRecorded,
            1 => TimeOrder::Window(1 + rng.index(16)),
            _ => TimeOrder::Clamp,
        },
        // (The model the output is checked against does not merge; merging has its own
        // property test in sim::trace::merge.)
        merge: None,
        volumes: sim::Volumes::All,
    }
}

/// Tokens the trace formats are made of.
pub const DICT: [&[u8]; 24] = [
    b",",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b".",
    b"+",
    b"Read",
    b"Write",
    b"R",
    b"W",
    b"r",
    b"w",
    b"Q",
    b"D",
    b"0",
    b"1",
    b"18446744073709551615",
    b"18446744073709551616",
    b"4294967296",
    b"fio version 3 iolog\n",
    b"fio version 2 iolog\n",
    b"/dev/sda wait ",
    b"\xff\xfe",
];

/// One campaign case.
pub fn case(seed: u64, input: &mut Vec<u8>, samples: &[(TraceFormat, Vec<u8>)]) -> CaseResult {
    let mut rng = Rng::new(seed);
    let format = *rng.pick(&TraceFormat::ALL);
    match rng.below(4) {
        // Round trip of generated lines.
        0 => {
            let with_errors = rng.chance(1, 2);
            let g = generate(&mut rng, format, with_errors);
            input.extend_from_slice(g.text.as_bytes());
            let order = if rng.chance(1, 2) {
                TimeOrder::AsRecorded
            } else {
                TimeOrder::Clamp
            };
            check_generated(&g, format, order)
        }
        // Mutated generated lines, or mutated lines of a real trace, read as their format or
        // another.
        mode => {
            let (mut read_as, base): (TraceFormat, Vec<u8>) = if mode == 1 || samples.is_empty() {
                let g = generate(&mut rng, format, true);
                (format, g.text.into_bytes())
            } else {
                let (f, text) = rng.pick(samples);
                // A window of up to 40 lines from the prefix.
                let starts: Vec<usize> = std::iter::once(0)
                    .chain(
                        text.iter()
                            .enumerate()
                            .filter(|(_, &b)| b == b'\n')
                            .map(|(i, _)| i + 1),
                    )
                    .filter(|&i| i < text.len())
                    .collect();
                let a = *rng.pick(&starts);
                let b = starts
                    .iter()
                    .copied()
                    .filter(|&s| s > a)
                    .nth(rng.index(40))
                    .unwrap_or(text.len());
                (*f, text[a..b].to_vec())
            };
            if rng.chance(1, 8) {
                read_as = *rng.pick(&TraceFormat::ALL);
            }
            let other_format = *rng.pick(&TraceFormat::ALL);
            let other = generate(&mut rng, other_format, false).text.into_bytes();
            *input = base;
            mutate(&mut rng, input, 1 << 16, &DICT, &[&other]);
            if rng.chance(1, 64) {
                // A very long line.
                let n = 60_000 + rng.index(10_000);
                input.extend(std::iter::repeat_n(b'1', n));
            }
            let _ = TraceFormat::detect(Some(Path::new("x.csv")), input);
            let _ = TraceFormat::detect(None, input);
            let opts = options(&mut rng);
            let read = read_checked(input, read_as, opts)?;
            if rng.chance(1, 2) {
                check_consistency(&mut rng, input, read_as, opts.fold)?;
            }
            let outcome = match read.errors.first() {
                Some(e) => error_kind(e),
                None if read.requests.is_empty() => "nothing".into(),
                None => "ok".into(),
            };
            Ok(format!("{read_as}:{outcome}"))
        }
    }
}

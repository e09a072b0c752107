//! Fuzz target: the NBD server state machine (`nbd::ServerConn`: bytes in, events and replies
//! out).
//!
//! Included by `crates/nbd/examples/fuzz_nbd.rs` (the campaign driver) and
//! `crates/nbd/tests/fuzz_nbd.rs` (bounded cases in CI). Properties:
//!
//! - any byte stream, split anywhere: no panic; the same events and the same output bytes
//!   whether it arrives in one piece, in random pieces or byte by byte (with or without the
//!   end of the stream); nothing comes out once the connection is closed;
//! - no reply it should not send: after the greeting, every piece of output answers the one
//!   message just completed (fed byte by byte, each byte completes at most one message): in the
//!   handshake a run of well-formed option replies all naming one option, or the
//!   `EXPORT_NAME` answer (size and flags of the export just selected); in transmission at most
//!   one error reply (simple, or a final structured error chunk), and never for a message that
//!   also produced a request; `Selected` comes once and first, requests only after it, `Fatal`
//!   or `Disconnect` last; every request handed to the transport is one the export can execute
//!   (flags allowed, inside the export, within the maximum payload, not a write to a read-only
//!   export, write data as long as asked);
//! - a valid handshake followed by random commands (a model written from the protocol's
//!   rules, not from the server): option replies of the predicted types (metadata contexts
//!   listed and selected included), then exactly the predicted requests (block status only
//!   when `base:allocation` was selected for the export chosen), and for each refused request
//!   one error reply carrying its handle and one of the errors the protocol allows for it.
#![allow(dead_code)]

use crate::fuzzutil::{mutate, random_pieces, CaseResult, Rng, INTERESTING};
use nbd::proto::*;
use nbd::server::MAX_DISCARD_BYTES;
use nbd::{
    BlockSize, Command, Event, ExportInfo, ProtocolError, Request, ServerConfig, ServerConn,
};

// Refused long writes (up to 70,000 bytes) are skipped, not fatal.
const _: () = assert!(MAX_DISCARD_BYTES > 70_000);

/// Three exports: a writable one of a drawn size, a small read-only one, and one with a
/// small maximum payload (so refused long writes are cheap to send).
pub fn config(rng: &mut Rng) -> ServerConfig {
    let size = *rng.pick(&[0u64, 1, 4096, 1 << 20, 1 << 20, u64::MAX, u64::MAX - 4095]);
    let mut a = ExportInfo::new("a", size);
    a.description = "first".into();
    let mut b = ExportInfo::new("b", 4096);
    b.read_only = true;
    b.block.maximum = 8192;
    let mut c = ExportInfo::new("c", 100_000);
    c.block = BlockSize {
        minimum: 512,
        preferred: 4096,
        maximum: 4096,
    };
    c.multi_conn = false;
    ServerConfig::new(vec![a, b, c])
}

pub fn opt(option: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&option.to_be_bytes());
    v.extend_from_slice(&(data.len() as u32).to_be_bytes());
    v.extend_from_slice(data);
    v
}

pub fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

pub fn req(flags: u16, cmd: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    v.extend_from_slice(&flags.to_be_bytes());
    v.extend_from_slice(&cmd.to_be_bytes());
    v.extend_from_slice(&handle.to_be_bytes());
    v.extend_from_slice(&offset.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    v
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Option replies in `b`: (option, type, data); `None` if `b` is not exactly a run of them.
pub fn option_replies(mut b: &[u8]) -> Option<Vec<(u32, u32, Vec<u8>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 20 || be64(b, 0) != REP_MAGIC {
            return None;
        }
        let len = be32(b, 16) as usize;
        if b.len() < 20 + len {
            return None;
        }
        out.push((be32(b, 8), be32(b, 12), b[20..20 + len].to_vec()));
        b = &b[20 + len..];
    }
    Some(out)
}

/// Transmission error replies in `b`: (handle, error); `None` if `b` is not exactly a run of
/// simple replies with an error (or, when `structured`, of final structured error chunks).
pub fn error_replies(mut b: &[u8], structured: bool) -> Option<Vec<(u64, u32)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 16 {
            return None;
        }
        match be32(b, 0) {
            SIMPLE_REPLY_MAGIC => {
                let error = be32(b, 4);
                if error == 0 {
                    return None;
                }
                out.push((be64(b, 8), error));
                b = &b[16..];
            }
            STRUCTURED_REPLY_MAGIC if structured => {
                if b.len() < 26 {
                    return None;
                }
                let (flags, kind, handle, len) =
                    (be16(b, 4), be16(b, 6), be64(b, 8), be32(b, 16) as usize);
                let error = be32(b, 20);
                let mlen = be16(b, 24) as usize;
                if flags != REPLY_FLAG_DONE
                    || kind != REPLY_TYPE_ERROR
                    || error == 0
                    || len != 6 + mlen
                    || b.len() < 20 + len
                {
                    return None;
                }
                std::str::from_utf8(&b[26..20 + len]).ok()?;
                out.push((handle, error));
                b = &b[20 + len..];
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Commands and flags a request may carry, by the protocol's rules: (allowed flags).
/// `block_status`: a metadata context was selected for the export in use.
fn allowed_flags(cmd: u16, structured: bool, block_status: bool) -> Option<u16> {
    match cmd {
        CMD_READ if structured => Some(CMD_FLAG_FUA | CMD_FLAG_DF),
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM => Some(CMD_FLAG_FUA),
        CMD_WRITE_ZEROES => Some(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE),
        CMD_BLOCK_STATUS if block_status => Some(CMD_FLAG_FUA | CMD_FLAG_REQ_ONE),
        _ => None,
    }
}

/// Every error the protocol allows for this request (empty: it must be executed).
pub fn allowed_errors(
    e: &ExportInfo,
    (structured, block_status): (bool, bool),
    flags: u16,
    cmd: u16,
    offset: u64,
    len: u32,
) -> Vec<u32> {
    let mut errs = Vec::new();
    let Some(allowed) = allowed_flags(cmd, structured, block_status) else {
        return vec![EINVAL];
    };
    if flags & !allowed != 0 {
        errs.push(EINVAL);
    }
    if cmd == CMD_FLUSH {
        return errs;
    }
    // A block status of nothing is unspecified; this server refuses it.
    if cmd == CMD_BLOCK_STATUS && len == 0 {
        errs.push(EINVAL);
    }
    let writes = matches!(cmd, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
    if writes && e.read_only {
        errs.push(EPERM);
    }
    if matches!(cmd, CMD_READ | CMD_WRITE) && len > e.block.maximum {
        errs.push(EOVERFLOW);
    }
    if offset
        .checked_add(u64::from(len))
        .is_none_or(|end| end > e.size)
    {
        errs.push(if matches!(cmd, CMD_WRITE | CMD_WRITE_ZEROES) {
            ENOSPC
        } else {
            EINVAL
        });
    }
    errs
}

/// A request the transport receives must be executable on the export.
fn check_request(r: &Request, e: &ExportInfo, negotiated: (bool, bool)) -> Result<(), String> {
    let (cmd, offset, len) = match &r.command {
        Command::Read { offset, len } => (CMD_READ, *offset, *len),
        Command::Write { offset, data } => (
            CMD_WRITE,
            *offset,
            u32::try_from(data.len()).map_err(|_| "huge write")?,
        ),
        Command::Flush => (CMD_FLUSH, 0, 0),
        Command::Trim { offset, len } => (CMD_TRIM, *offset, *len),
        Command::WriteZeroes { offset, len } => (CMD_WRITE_ZEROES, *offset, *len),
        Command::BlockStatus { offset, len } => (CMD_BLOCK_STATUS, *offset, *len),
    };
    let errs = allowed_errors(e, negotiated, r.flags, cmd, offset, len);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "request {r:?} handed to the transport, but it deserves one of {errs:?}"
        ))
    }
}

/// What feeding a stream produced.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    pub output: Vec<u8>,
    pub events: Vec<Event>,
}

/// Feeds `pieces` (then the end of the stream, if `eof`) and collects everything.
pub fn feed<'a>(
    config: &ServerConfig,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    eof: bool,
    shutdown_at: Option<usize>,
) -> Run {
    let mut c = ServerConn::new(config.clone());
    let mut output = c.take_output();
    let mut events = Vec::new();
    let mut fed = 0usize;
    for p in pieces {
        if shutdown_at.is_some_and(|s| fed >= s) {
            c.begin_shutdown();
        }
        c.receive(p);
        fed += p.len();
        output.extend_from_slice(&c.take_output());
        events.extend(std::iter::from_fn(|| c.poll_event()));
    }
    if eof {
        c.receive_eof();
        output.extend_from_slice(&c.take_output());
        events.extend(std::iter::from_fn(|| c.poll_event()));
    }
    Run { output, events }
}

/// Feeds `stream` byte by byte, checking after each byte that the output and the events are
/// ones the server may produce for the message that byte completed.
pub fn check_bytewise(config: &ServerConfig, stream: &[u8], eof: bool) -> Result<Run, String> {
    let mut c = ServerConn::new(config.clone());
    let greeting = c.take_output();
    if greeting.len() != 18 || be64(&greeting, 0) != NBDMAGIC || be64(&greeting, 8) != IHAVEOPT {
        return Err(format!("bad greeting {greeting:?}"));
    }
    let mut output = greeting;
    let mut events: Vec<Event> = Vec::new();
    let mut selected: Option<usize> = None;
    let mut closed = false;
    let mut structured = false;
    let last = stream.len();
    for (i, byte) in stream
        .iter()
        .enumerate()
        .map(|(i, b)| (i, std::slice::from_ref(b)))
        .chain((eof).then_some((last, &[][..])))
    {
        let before_transmission = c.in_transmission();
        if i == last {
            c.receive_eof();
        } else {
            c.receive(byte);
        }
        let out = c.take_output();
        let evs: Vec<Event> = std::iter::from_fn(|| c.poll_event()).collect();
        if closed && (!out.is_empty() || !evs.is_empty()) {
            return Err(format!(
                "byte {i}: output {out:?} / events {evs:?} after the connection closed"
            ));
        }
        if !before_transmission {
            if let Some(replies) = option_replies(&out) {
                if replies.iter().any(|r| r.0 != replies[0].0) {
                    return Err(format!(
                        "byte {i}: replies to several options at once: {replies:?}"
                    ));
                }
                if replies
                    .iter()
                    .any(|r| r.0 == OPT_STRUCTURED_REPLY && r.1 == REP_ACK)
                {
                    structured = true;
                }
            } else {
                // Only the EXPORT_NAME answer is not an option reply.
                let Some(Event::Selected { export }) = evs.first() else {
                    return Err(format!(
                        "byte {i}: handshake output is not option replies: {out:?}"
                    ));
                };
                let e = &config.exports[*export];
                if !(out.len() == 10 || out.len() == 134)
                    || be64(&out, 0) != e.size
                    || out[10..].iter().any(|&b| b != 0)
                {
                    return Err(format!("byte {i}: bad EXPORT_NAME answer {out:?}"));
                }
                let tflags = be16(&out, 8);
                if (tflags & TFLAG_READ_ONLY != 0) != e.read_only
                    || (tflags & TFLAG_SEND_DF != 0) != structured
                {
                    return Err(format!(
                        "byte {i}: transmission flags {tflags:#x} for {e:?}"
                    ));
                }
            }
        } else {
            let replies = error_replies(&out, structured).ok_or_else(|| {
                format!("byte {i}: transmission output is not error replies: {out:?}")
            })?;
            if replies.len() > 1 {
                return Err(format!(
                    "byte {i}: {} replies for one message",
                    replies.len()
                ));
            }
            for (handle, _) in &replies {
                if !sent_request(&stream[..(i + 1).min(last)], *handle) {
                    return Err(format!("byte {i}: error reply for handle {handle:#x}, which no request header carried"));
                }
            }
            if !replies.is_empty() && evs.iter().any(|e| matches!(e, Event::Request(_))) {
                return Err(format!(
                    "byte {i}: a request both refused and executed: {replies:?} {evs:?}"
                ));
            }
        }
        for ev in &evs {
            if closed {
                return Err(format!("byte {i}: event {ev:?} after the end"));
            }
            match ev {
                Event::Selected { export } => {
                    if selected.is_some() || *export >= config.exports.len() {
                        return Err(format!("byte {i}: second or bad Selected {ev:?}"));
                    }
                    selected = Some(*export);
                }
                Event::Request(r) => {
                    let Some(x) = selected else {
                        return Err(format!(
                            "byte {i}: request {r:?} before an export was selected"
                        ));
                    };
                    check_request(
                        r,
                        &config.exports[x],
                        (c.encoder().structured, c.block_status()),
                    )?;
                    if !sent_request(&stream[..(i + 1).min(last)], r.handle) {
                        return Err(format!(
                            "byte {i}: request {r:?} with a handle no request header carried"
                        ));
                    }
                }
                // The generated configurations run without TLS (STARTTLS is refused).
                Event::StartTls => {
                    return Err(format!("byte {i}: StartTls on a server without TLS"));
                }
                Event::Disconnect | Event::Fatal(_) => {
                    closed = true;
                    if !c.is_closed() {
                        return Err(format!("byte {i}: {ev:?} but not closed"));
                    }
                }
            }
        }
        if evs
            .iter()
            .filter(|e| matches!(e, Event::Request(_)))
            .count()
            > 1
        {
            return Err(format!("byte {i}: several requests from one byte"));
        }
        if c.is_closed() && !closed {
            return Err(format!("byte {i}: closed without an event"));
        }
        if c.encoder().structured != structured && c.in_transmission() {
            return Err(format!(
                "byte {i}: structured replies {} but negotiated {structured}",
                c.encoder().structured
            ));
        }
        output.extend_from_slice(&out);
        events.extend(evs);
    }
    Ok(Run { output, events })
}

/// Whether some request header in `fed` (the request magic, then flags, type and this handle)
/// carries `handle`.
fn sent_request(fed: &[u8], handle: u64) -> bool {
    let magic = REQUEST_MAGIC.to_be_bytes();
    let h = handle.to_be_bytes();
    fed.windows(16).any(|w| w[..4] == magic && w[8..] == h)
}

/// The properties for any stream: the byte-by-byte checks, and the same result in one piece
/// and in random pieces.
pub fn check_stream(rng: &mut Rng, config: &ServerConfig, stream: &[u8]) -> CaseResult {
    let eof = rng.chance(1, 2);
    let bytewise = check_bytewise(config, stream, eof)?;
    let whole = feed(config, [stream], eof, None);
    if whole != bytewise {
        return Err(format!(
            "one piece and byte by byte differ:\n{whole:?}\n{bytewise:?}"
        ));
    }
    let pieces = random_pieces(rng, stream);
    let n = pieces.len();
    let split = feed(config, pieces, eof, None);
    if split != whole {
        return Err(format!(
            "{n} random pieces and one piece differ:\n{split:?}\n{whole:?}"
        ));
    }
    Ok(match whole.events.last() {
        None => "open".into(),
        Some(Event::Selected { .. }) | Some(Event::Request(_)) => "transmitting".into(),
        Some(Event::Disconnect) => "disconnect".into(),
        Some(Event::StartTls) => "starttls".into(),
        Some(Event::Fatal(ProtocolError::Truncated(what))) => format!("truncated:{what}"),
        Some(Event::Fatal(e)) => format!(
            "fatal:{}",
            match e {
                ProtocolError::BadClientFlags(_) => "client-flags",
                ProtocolError::BadOptionMagic(_) => "option-magic",
                ProtocolError::BadRequestMagic(_) => "request-magic",
                ProtocolError::UnknownExport(_) => "unknown-export",
                ProtocolError::OptionTooLong { .. } => "option-too-long",
                ProtocolError::PayloadTooLong { .. } => "payload-too-long",
                _ => "other",
            }
        ),
    })
}

/// A conversation and what the protocol says must come of it.
pub struct Conversation {
    pub stream: Vec<u8>,
    /// Option replies expected: (option, type), in order.
    pub option_replies: Vec<(u32, u32)>,
    pub export: Option<usize>,
    /// Bytes of the EXPORT_NAME answer (0 if GO was used).
    pub export_name_answer: usize,
    pub structured: bool,
    /// `base:allocation` is selected for the export chosen: block status is allowed.
    pub block_status: bool,
    /// Requests the transport must receive, in order.
    pub requests: Vec<Request>,
    /// Refused requests: (handle, allowed errors), in order.
    pub refused: Vec<(u64, Vec<u32>)>,
    pub disconnect: bool,
}

/// A valid handshake (some optional options, then GO or EXPORT_NAME) and random commands.
pub fn conversation(rng: &mut Rng, config: &ServerConfig) -> Conversation {
    let mut conv = Conversation {
        stream: Vec::new(),
        option_replies: Vec::new(),
        export: None,
        export_name_answer: 0,
        structured: false,
        block_status: false,
        requests: Vec::new(),
        refused: Vec::new(),
        disconnect: false,
    };
    let flags = *rng.pick(&[0u32, 1, 2, 3]);
    conv.stream.extend_from_slice(&flags.to_be_bytes());
    let names = ["a", "b", "c", "", "zz"];
    // The export `base:allocation` is selected for.
    let mut meta: Option<usize> = None;
    for _ in 0..rng.below(5) {
        match rng.below(6) {
            0 => {
                conv.stream.extend(opt(OPT_STRUCTURED_REPLY, &[]));
                conv.structured = true;
                conv.option_replies.push((OPT_STRUCTURED_REPLY, REP_ACK));
            }
            1 => {
                conv.stream.extend(opt(OPT_LIST, &[]));
                for _ in &config.exports {
                    conv.option_replies.push((OPT_LIST, REP_SERVER));
                }
                conv.option_replies.push((OPT_LIST, REP_ACK));
            }
            2 => {
                let name = *rng.pick(&names);
                let infos: Vec<u16> = (0..rng.below(4)).map(|_| rng.below(5) as u16).collect();
                conv.stream.extend(opt(OPT_INFO, &go_data(name, &infos)));
                info_replies(&mut conv, config, OPT_INFO, name, &infos);
            }
            3 => {
                let o = *rng.pick(&[OPT_STARTTLS, 11, 42, 0x8000_0000]);
                let n = rng.index(8);
                let data = rng.bytes(n);
                conv.stream.extend(opt(o, &data));
                conv.option_replies.push((o, REP_ERR_UNSUP));
            }
            4 => {
                let set = rng.chance(1, 2);
                let o = if set {
                    OPT_SET_META_CONTEXT
                } else {
                    OPT_LIST_META_CONTEXT
                };
                let name = *rng.pick(&names);
                let queries: Vec<&str> = (0..rng.below(4))
                    .map(|_| {
                        *rng.pick(&[
                            META_BASE_ALLOCATION,
                            "base:",
                            "base:nope",
                            "x-foo:bar",
                            "qemu:dirty-bitmap:x",
                            "nocolon",
                        ])
                    })
                    .collect();
                conv.stream.extend(opt(o, &meta_data(name, &queries)));
                if set {
                    // A SET replaces the selection, whatever comes of it.
                    meta = None;
                }
                let found = find(config, name);
                if !conv.structured {
                    conv.option_replies.push((o, REP_ERR_INVALID));
                } else if found.is_none() {
                    conv.option_replies.push((o, REP_ERR_UNKNOWN));
                } else if queries.contains(&"nocolon") {
                    conv.option_replies.push((o, REP_ERR_INVALID));
                } else {
                    let listed = if set {
                        queries.contains(&META_BASE_ALLOCATION)
                    } else {
                        queries.is_empty()
                            || queries.contains(&META_BASE_ALLOCATION)
                            || queries.contains(&"base:")
                    };
                    if listed {
                        conv.option_replies.push((o, REP_META_CONTEXT));
                        if set {
                            meta = found;
                        }
                    }
                    conv.option_replies.push((o, REP_ACK));
                }
            }
            _ => {
                // Malformed INFO data: name length past the end.
                let mut d = go_data("a", &[]);
                d[3] = 200;
                conv.stream.extend(opt(OPT_INFO, &d));
                conv.option_replies.push((OPT_INFO, REP_ERR_INVALID));
            }
        }
    }
    if rng.chance(1, 2) {
        // A selection that succeeds (random ones mostly fail or select nothing), often for
        // the export then chosen, so that block status requests are executed too.
        if !conv.structured {
            conv.stream.extend(opt(OPT_STRUCTURED_REPLY, &[]));
            conv.structured = true;
            conv.option_replies.push((OPT_STRUCTURED_REPLY, REP_ACK));
        }
        let name = *rng.pick(&["a", "b", "c", ""]);
        let mut queries = vec![META_BASE_ALLOCATION];
        if rng.chance(1, 2) {
            queries.insert(
                rng.index(2),
                *rng.pick(&["base:", "x-foo:bar", "base:nope"]),
            );
        }
        conv.stream
            .extend(opt(OPT_SET_META_CONTEXT, &meta_data(name, &queries)));
        conv.option_replies
            .push((OPT_SET_META_CONTEXT, REP_META_CONTEXT));
        conv.option_replies.push((OPT_SET_META_CONTEXT, REP_ACK));
        meta = find(config, name);
    }
    let export = match meta {
        Some(m) if rng.chance(2, 3) => m,
        _ => rng.index(config.exports.len()),
    };
    let name = if export == 0 && rng.chance(1, 3) {
        ""
    } else {
        config.exports[export].name.as_str()
    };
    if rng.chance(1, 3) {
        conv.stream.extend(opt(OPT_EXPORT_NAME, name.as_bytes()));
        conv.export_name_answer = if flags & 2 != 0 { 10 } else { 134 };
    } else {
        let infos: Vec<u16> = (0..rng.below(4)).map(|_| rng.below(5) as u16).collect();
        conv.stream.extend(opt(OPT_GO, &go_data(name, &infos)));
        info_replies(&mut conv, config, OPT_GO, name, &infos);
    }
    conv.export = Some(export);
    conv.block_status = conv.structured && meta == Some(export);
    let e = &config.exports[export];
    for _ in 0..rng.below(12) {
        let cmd = match rng.below(11) {
            0..=2 => CMD_READ,
            3..=5 => CMD_WRITE,
            6 => CMD_FLUSH,
            7 => CMD_TRIM,
            8 => CMD_WRITE_ZEROES,
            9 => CMD_BLOCK_STATUS,
            _ => *rng.pick(&[CMD_CACHE, CMD_BLOCK_STATUS, 8, 0xffff]),
        };
        let flags = match rng.below(4) {
            0 | 1 => 0,
            2 => 1 << rng.below(5),
            _ => rng.next_u64() as u16,
        };
        let handle = rng.next_u64();
        let offset = match rng.below(4) {
            0 => rng.below(e.size.saturating_add(1).max(1)),
            1 => e.size.saturating_sub(rng.below(9000)),
            2 => *rng.pick(&INTERESTING),
            _ => rng.below(1 << 16),
        };
        let len = match rng.below(4) {
            0 => 0,
            1 => rng.below(9000) as u32,
            2 => e
                .block
                .maximum
                .saturating_add(rng.below(3) as u32)
                .saturating_sub(1),
            _ => rng.below(70_000) as u32,
        };
        // Long writes cost their payload (and byte-by-byte feeding): mostly up to 9000 bytes,
        // which is past the maximum payload of exports b and c.
        let len = if cmd == CMD_WRITE && len > 9000 && (len > 70_000 || !rng.chance(1, 16)) {
            rng.below(9000) as u32
        } else {
            len
        };
        conv.stream.extend(req(flags, cmd, handle, offset, len));
        let mut data = Vec::new();
        if cmd == CMD_WRITE {
            data = rng.bytes(len as usize);
            conv.stream.extend_from_slice(&data);
        }
        let errs = allowed_errors(
            e,
            (conv.structured, conv.block_status),
            flags,
            cmd,
            offset,
            len,
        );
        if errs.is_empty() {
            let command = match cmd {
                CMD_READ => Command::Read { offset, len },
                CMD_WRITE => Command::Write { offset, data },
                CMD_FLUSH => Command::Flush,
                CMD_TRIM => Command::Trim { offset, len },
                CMD_BLOCK_STATUS => Command::BlockStatus { offset, len },
                _ => Command::WriteZeroes { offset, len },
            };
            conv.requests.push(Request {
                handle,
                flags,
                command,
            });
        } else {
            conv.refused.push((handle, errs));
        }
    }
    if rng.chance(1, 2) {
        conv.stream.extend(req(0, CMD_DISC, rng.next_u64(), 0, 0));
        conv.disconnect = true;
    }
    conv
}

/// The export a name selects (the empty name: the default export).
fn find(config: &ServerConfig, name: &str) -> Option<usize> {
    if name.is_empty() {
        config.default_export
    } else {
        config.exports.iter().position(|e| e.name == name)
    }
}

/// `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` data.
pub fn meta_data(export: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(export.len() as u32).to_be_bytes());
    d.extend_from_slice(export.as_bytes());
    d.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend_from_slice(&(q.len() as u32).to_be_bytes());
        d.extend_from_slice(q.as_bytes());
    }
    d
}

fn info_replies(
    conv: &mut Conversation,
    config: &ServerConfig,
    option: u32,
    name: &str,
    infos: &[u16],
) {
    let found = find(config, name);
    let Some(i) = found else {
        conv.option_replies.push((option, REP_ERR_UNKNOWN));
        return;
    };
    // NBD_INFO_EXPORT always, NAME and DESCRIPTION when asked (and there is one), BLOCK_SIZE
    // always (this server sends it unasked), then ACK.
    conv.option_replies.push((option, REP_INFO));
    if infos.contains(&INFO_NAME) {
        conv.option_replies.push((option, REP_INFO));
    }
    if infos.contains(&INFO_DESCRIPTION) && !config.exports[i].description.is_empty() {
        conv.option_replies.push((option, REP_INFO));
    }
    conv.option_replies.push((option, REP_INFO));
    conv.option_replies.push((option, REP_ACK));
}

/// Checks an unmutated conversation against its predictions.
pub fn check_conversation(config: &ServerConfig, conv: &Conversation, run: &Run) -> CaseResult {
    let out = &run.output[18..];
    // The handshake's option replies come first, then (EXPORT_NAME) its answer.
    let mut at = 0;
    let mut replies = Vec::new();
    while replies.len() < conv.option_replies.len() {
        let r = out.get(at..).filter(|r| r.len() >= 20).ok_or_else(|| {
            format!(
                "option reply {} missing; expected {:?}, output {out:?}",
                replies.len(),
                conv.option_replies
            )
        })?;
        if be64(r, 0) != REP_MAGIC {
            return Err(format!("option reply {} has a bad magic", replies.len()));
        }
        let (o, t, len) = (be32(r, 8), be32(r, 12), be32(r, 16) as usize);
        let data = r.get(20..20 + len).ok_or("option reply cut short")?;
        if t == REP_INFO && data.len() == 12 && be16(data, 0) == INFO_EXPORT {
            let flags = be16(data, 10);
            let want_df = replies
                .iter()
                .any(|&(o, t)| o == OPT_STRUCTURED_REPLY && t == REP_ACK);
            if (flags & TFLAG_SEND_DF != 0) != want_df || flags & TFLAG_HAS_FLAGS == 0 {
                return Err(format!(
                    "INFO_EXPORT flags {flags:#x}, structured replies {want_df}"
                ));
            }
        }
        replies.push((o, t));
        at += 20 + len;
    }
    if replies != conv.option_replies {
        return Err(format!(
            "option replies {replies:?}, expected {:?}",
            conv.option_replies
        ));
    }
    let export = conv.export.unwrap();
    let e = &config.exports[export];
    if conv.export_name_answer > 0 {
        let ans = out
            .get(at..at + conv.export_name_answer)
            .ok_or("EXPORT_NAME answer missing")?;
        if be64(ans, 0) != e.size {
            return Err(format!("EXPORT_NAME answered size {}", be64(ans, 0)));
        }
        at += conv.export_name_answer;
    }
    let errors = error_replies(&out[at..], conv.structured)
        .ok_or_else(|| format!("transmission output is not error replies: {:?}", &out[at..]))?;
    if errors.len() != conv.refused.len() {
        return Err(format!(
            "{} error replies, {} refused requests expected: {errors:?} vs {:?}",
            errors.len(),
            conv.refused.len(),
            conv.refused
        ));
    }
    for ((h, err), (want_h, allowed)) in errors.iter().zip(&conv.refused) {
        if h != want_h || !allowed.contains(err) {
            return Err(format!(
                "error reply ({h:#x}, {err}), expected handle {want_h:#x} with one of {allowed:?}"
            ));
        }
    }
    // NBD_CMD_DISC, or the end of the stream between messages: a clean disconnect.
    let mut want = vec![Event::Selected { export }];
    want.extend(conv.requests.iter().cloned().map(Event::Request));
    want.push(Event::Disconnect);
    let got = &run.events;
    if *got != want {
        return Err(format!("events {got:?}\nexpected {want:?}"));
    }
    Ok(format!(
        "conversation:{}requests",
        if conv.requests.is_empty() { "no-" } else { "" }
    ))
}

/// Tokens of the protocol.
pub fn dict() -> Vec<Vec<u8>> {
    let mut d: Vec<Vec<u8>> = vec![
        IHAVEOPT.to_be_bytes().to_vec(),
        REQUEST_MAGIC.to_be_bytes().to_vec(),
        opt(OPT_GO, &go_data("a", &[3])),
        opt(OPT_STRUCTURED_REPLY, &[]),
        opt(OPT_EXPORT_NAME, b"c"),
        opt(OPT_LIST, &[]),
        opt(OPT_ABORT, &[]),
        opt(
            OPT_SET_META_CONTEXT,
            &meta_data("a", &[META_BASE_ALLOCATION]),
        ),
        opt(OPT_LIST_META_CONTEXT, &meta_data("", &["base:"])),
        req(CMD_FLAG_REQ_ONE, CMD_BLOCK_STATUS, 6, 0, 4096),
        req(0, CMD_READ, 7, 0, 512),
        req(0, CMD_DISC, 8, 0, 0),
    ];
    d.push(req(1, CMD_WRITE, 9, 4096, 4));
    d.last_mut().unwrap().extend_from_slice(b"abcd");
    for v in [
        0u32,
        1,
        0xffff_ffff,
        4096,
        4097,
        8193,
        MAX_DISCARD_BYTES,
        MAX_DISCARD_BYTES + 1,
        64 << 10,
        (64 << 10) + 1,
        16 << 20,
    ] {
        d.push(v.to_be_bytes().to_vec());
    }
    d
}

/// One campaign case.
pub fn case(seed: u64, input: &mut Vec<u8>) -> CaseResult {
    let mut rng = Rng::new(seed);
    let config = config(&mut rng);
    let conv = conversation(&mut rng, &config);
    *input = conv.stream.clone();
    if rng.chance(1, 4) {
        // The conversation as generated: exactly what the protocol predicts, in any pieces.
        let pieces = random_pieces(&mut rng, &conv.stream);
        let run = feed(&config, pieces, true, None);
        let outcome = check_conversation(&config, &conv, &run)?;
        check_stream(&mut rng, &config, &conv.stream)?;
        return Ok(outcome);
    }
    let dict = dict();
    let dict: Vec<&[u8]> = dict.iter().map(Vec::as_slice).collect();
    let other = conversation(&mut rng, &config).stream;
    if rng.chance(1, 16) {
        // Random bytes after a valid prefix.
        let cut = rng.index(input.len() + 1);
        input.truncate(cut);
        let n = rng.index(300);
        let junk = rng.bytes(n);
        input.extend_from_slice(&junk);
    } else {
        mutate(&mut rng, input, 1 << 17, &dict, &[&other]);
    }
    let outcome = check_stream(&mut rng, &config, input)?;
    if rng.chance(1, 8) {
        // A shutdown in the middle: still no panic, nothing after the end.
        let at = rng.index(input.len() + 1);
        let _ = feed(&config, random_pieces(&mut rng, input), true, Some(at));
    }
    Ok(outcome)
}

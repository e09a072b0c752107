//! The block layer's merging, for replays of queue-level traces.
//!
//! A blkparse trace's `Q` events are the I/Os an application queued; the kernel merges
//! adjacent ones (a task's plug, then the I/O scheduler's queue) before it issues them to the
//! device (`D` events). Page-cache writeback queues 4 KiB pages back to back, and a device
//! sees one large request for each run of them: replayed at Q, such a trace floods an array
//! with requests no device would have received. This model merges as the block layer does,
//! in the simplest form that captures it:
//!
//! - A request is held for [`Merge::window_ns`] after it arrives (the plug and queue time in
//!   which the kernel can merge into it), then leaves at its arrival time.
//! - A request that arrives while one of the same volume and direction is held, ending where
//!   it starts (back merge) or starting where it ends (front merge), joins it, while the
//!   merged request stays within [`Merge::max_bytes`] (the device's `max_sectors_kb`). A join
//!   that closes the gap between two held requests joins those too.
//! - A request larger than [`Merge::max_bytes`] is split into pieces of that size (the
//!   kernel splits such a bio, blktrace's `X` events), each a request of its own.
//! - At most [`Merge::held_max`] requests are held (the queue's `nr_requests`): beyond that
//!   the oldest leaves.
//!
//! Requests leave in arrival order; a merged request keeps the arrival of its first part.

use std::collections::VecDeque;

use super::Request;

/// How requests are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Merge {
    /// How long after its arrival a request can still take others (ns).
    pub window_ns: u64,
    /// Largest merged request (bytes).
    pub max_bytes: u64,
    /// Most requests held at once.
    pub held_max: usize,
}

impl Default for Merge {
    /// A 1 ms window, 1280 KiB requests (`max_sectors_kb` by default in recent kernels,
    /// `BLK_DEF_MAX_SECTORS`; many disks' drivers set 512), 64 held (`nr_requests` of
    /// mq-deadline).
    fn default() -> Merge {
        Merge {
            window_ns: 1_000_000,
            max_bytes: 1280 << 10,
            held_max: 64,
        }
    }
}

/// Requests held for merging.
#[derive(Debug, Default)]
pub(crate) struct Merger {
    held: VecDeque<Request>,
    /// Requests that joined another.
    pub(crate) merged: u64,
    /// Pieces split off requests larger than the limit (beyond the first of each).
    pub(crate) split: u64,
}

impl Merger {
    /// The oldest held request, if it must leave before a request arriving at `now_ns` is
    /// taken: its window is over, or the queue is full.
    pub(crate) fn leaving_before(&mut self, m: &Merge, now_ns: u64) -> Option<Request> {
        let front = self.held.front()?;
        if front.time_ns.saturating_add(m.window_ns) < now_ns || self.held.len() >= m.held_max {
            return self.held.pop_front();
        }
        None
    }

    /// The oldest held request (at the end of the trace).
    pub(crate) fn drain(&mut self) -> Option<Request> {
        self.held.pop_front()
    }

    /// Takes `r`: split if it is larger than the limit, each piece joined to a held request
    /// it is adjacent to or held itself. (Pieces may make the queue longer than its bound for
    /// a moment: the next arrival lets the oldest go.)
    pub(crate) fn take(&mut self, m: &Merge, r: Request) {
        if r.len_bytes <= m.max_bytes {
            return self.take_one(m, r);
        }
        let mut at = 0;
        while at < r.len_bytes {
            let len = m.max_bytes.min(r.len_bytes - at);
            let piece = Request {
                offset_bytes: r.offset_bytes + at,
                len_bytes: len,
                ..r
            };
            if len == m.max_bytes {
                // A whole piece takes nothing more: held as it is, without a search (a huge
                // request makes many, which leave one per arrival before the next is taken).
                self.held.push_back(piece);
            } else {
                self.take_one(m, piece);
            }
            if at > 0 {
                self.split += 1;
            }
            at += len;
        }
    }

    fn take_one(&mut self, m: &Merge, r: Request) {
        let fits = |a: &Request, b: &Request| {
            a.volume == b.volume
                && a.op == b.op
                && a.len_bytes > 0
                && b.len_bytes > 0
                && a.len_bytes.saturating_add(b.len_bytes) <= m.max_bytes
        };
        // Back merge (r follows a held one) or front merge (r precedes one).
        let joined = self
            .held
            .iter()
            .position(|h| fits(h, &r) && adjacent(h, &r));
        let Some(i) = joined else {
            self.held.push_back(r);
            return;
        };
        join(&mut self.held[i], &r);
        self.merged += 1;
        // The joined request may now close the gap to another held one.
        let h = self.held[i];
        let other = (self.held.iter().enumerate())
            .position(|(j, o)| j != i && fits(&h, o) && adjacent(&h, o));
        if let Some(j) = other {
            // The earlier arrival keeps the union.
            let (keep, gone) = if j < i { (j, i) } else { (i, j) };
            let g = self.held[gone];
            join(&mut self.held[keep], &g);
            self.held.remove(gone);
            self.merged += 1;
        }
    }
}

/// One ends where the other starts.
fn adjacent(a: &Request, b: &Request) -> bool {
    a.offset_bytes.checked_add(a.len_bytes) == Some(b.offset_bytes)
        || b.offset_bytes.checked_add(b.len_bytes) == Some(a.offset_bytes)
}

/// `a` grows to cover `b` (adjacent, same volume and direction); it keeps its arrival.
fn join(a: &mut Request, b: &Request) {
    debug_assert!(adjacent(a, b));
    a.offset_bytes = a.offset_bytes.min(b.offset_bytes);
    a.len_bytes += b.len_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    fn req(t: u64, off: u64, len: u64, op: Op) -> Request {
        Request {
            time_ns: t,
            offset_bytes: off,
            len_bytes: len,
            op,
            volume: 0,
        }
    }

    /// Runs `input` through the model: what leaves, in order.
    fn run(m: &Merge, input: &[Request]) -> Vec<Request> {
        let mut g = Merger::default();
        let mut out = Vec::new();
        for &r in input {
            while let Some(l) = g.leaving_before(m, r.time_ns) {
                out.push(l);
            }
            g.take(m, r);
        }
        while let Some(l) = g.drain() {
            out.push(l);
        }
        out
    }

    #[test]
    fn a_run_of_pages_becomes_requests_of_the_largest_size() {
        let m = Merge::default();
        // 700 pages of 4 KiB, 1 us apart: 1280 KiB requests (320 pages), then the rest.
        let input: Vec<Request> = (0..700)
            .map(|i| req(i * 1000, i * 4096, 4096, Op::Write))
            .collect();
        let out = run(&m, &input);
        let lens: Vec<u64> = out.iter().map(|r| r.len_bytes).collect();
        assert_eq!(lens, [1280 << 10, 1280 << 10, 60 * 4096]);
        assert_eq!(out[1].offset_bytes, 320 * 4096);
        assert_eq!(
            out[1].time_ns, 320_000,
            "a merged request arrives with its first part"
        );
    }

    #[test]
    fn a_request_over_the_limit_is_split_into_pieces_of_the_limit() {
        let m = Merge {
            max_bytes: 128 << 10,
            ..Merge::default()
        };
        let mut g = Merger::default();
        g.take(&m, req(0, 0, 300 << 10, Op::Write));
        let mut out = Vec::new();
        while let Some(r) = g.drain() {
            out.push((r.offset_bytes, r.len_bytes));
        }
        assert_eq!(
            out,
            [
                (0, 128 << 10),
                (128 << 10, 128 << 10),
                (256 << 10, 44 << 10)
            ]
        );
        assert_eq!((g.merged, g.split), (0, 2));
    }

    /// A request of many times the limit is split without a search per piece (a fuzzed
    /// trace's 256 GiB request hung the reader), and every byte still leaves once.
    #[test]
    fn a_huge_request_is_split_quickly() {
        let m = Merge::default();
        let huge = 256u64 << 30;
        let out = run(
            &m,
            &[req(0, 0, huge, Op::Write), req(5, huge, 4096, Op::Write)],
        );
        assert_eq!(out.len() as u64, huge.div_ceil(m.max_bytes));
        assert_eq!(out.iter().map(|r| r.len_bytes).sum::<u64>(), huge + 4096);
    }

    #[test]
    fn only_adjacent_requests_of_one_volume_and_direction_within_the_window_merge() {
        let m = Merge::default();
        let mut other_volume = req(20, 8192, 4096, Op::Write);
        other_volume.volume = 1;
        let input = [
            req(0, 0, 4096, Op::Write),
            req(10, 4096, 4096, Op::Read), // other direction
            other_volume,
            req(30, 12288, 4096, Op::Write),       // a gap
            req(40, 4096, 4096, Op::Write),        // back merge onto the first
            req(2_000_000, 8192, 4096, Op::Write), // after the window: a request of its own
        ];
        let out = run(&m, &input);
        let got: Vec<(u64, u64, u64, Op)> = out
            .iter()
            .map(|r| (r.time_ns, r.offset_bytes, r.len_bytes, r.op))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 8192, Op::Write),
                (10, 4096, 4096, Op::Read),
                (20, 8192, 4096, Op::Write),
                (30, 12288, 4096, Op::Write),
                (2_000_000, 8192, 4096, Op::Write),
            ]
        );
    }

    #[test]
    fn a_request_filling_a_gap_joins_both_neighbours_and_bytes_are_kept() {
        let m = Merge::default();
        let input = [
            req(0, 0, 4096, Op::Write),
            req(5, 8192, 4096, Op::Write),
            req(9, 4096, 4096, Op::Write), // joins both
            req(12, 16384, 4096, Op::Write),
        ];
        let out = run(&m, &input);
        assert_eq!(
            out.iter()
                .map(|r| (r.time_ns, r.offset_bytes, r.len_bytes))
                .collect::<Vec<_>>(),
            [(0, 0, 12288), (12, 16384, 4096)]
        );
        let bytes_in: u64 = input.iter().map(|r| r.len_bytes).sum();
        assert_eq!(out.iter().map(|r| r.len_bytes).sum::<u64>(), bytes_in);
    }

    /// Whatever comes in: every byte leaves exactly once, in the same volume and direction,
    /// requests leave in arrival order, none is larger than the limit.
    #[test]
    fn merging_keeps_every_byte_and_the_order() {
        let m = Merge {
            window_ns: 50,
            max_bytes: 16 << 10,
            held_max: 8,
        };
        let mut rng = crate::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next_u64();
        for _ in 0..200 {
            let mut t = 0;
            let input: Vec<Request> = (0..60)
                .map(|_| {
                    t += next() % 40;
                    let mut r = req(
                        t,
                        (next() % 16) * 4096,
                        4096 * (1 + next() % 6),
                        if next() % 3 == 0 { Op::Read } else { Op::Write },
                    );
                    r.volume = (next() % 2) as u32;
                    r
                })
                .collect();
            let out = run(&m, &input);
            let bytes = |v: &[Request], vol: u32, op: Op| -> Vec<u64> {
                let mut b: Vec<u64> = v
                    .iter()
                    .filter(|r| r.volume == vol && r.op == op)
                    .flat_map(|r| r.offset_bytes / 4096..(r.offset_bytes + r.len_bytes) / 4096)
                    .collect();
                b.sort_unstable();
                b
            };
            for vol in 0..2 {
                for op in [Op::Read, Op::Write] {
                    assert_eq!(bytes(&out, vol, op), bytes(&input, vol, op));
                }
            }
            assert!(out.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
            assert!(out.iter().all(|r| r.len_bytes <= m.max_bytes));
        }
    }
}

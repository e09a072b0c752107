//! Records kept in two alternating slots on the members: sequence `s` is written to slot
//! `s % 2`, so a crash that tears one write leaves the other, one sequence older, whole.
//! Readers read both slots of every member they can and take the valid copy with the newest
//! sequence. The deferred-parity list and the IDO record use this store (each on the first
//! `tolerance + 1` present members, `Pool::record_copies`); the superblock's two copies follow the same rule on every member
//! (`pool::assembly::read_superblock`), the journal's checkpoints within its region.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use raidcore::region::Region;

use crate::exec::Counters;
use crate::Member;

/// Two slots of one record kind on every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DualSlot {
    /// What the record is, for errors ("deferred-parity list").
    pub name: &'static str,
    /// Both slots: the region's two halves.
    pub region: Region,
}

/// No member took a slot of the record `name`: the last one to fail writing or flushing it
/// and why, or none at all present.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SlotWriteError {
    #[error("{name} on member {member}: {source}")]
    Failed {
        name: &'static str,
        member: usize,
        source: std::io::Error,
    },
    #[error("{name}: no member is present to hold it (every member has failed)")]
    NoMember { name: &'static str },
}

impl DualSlot {
    /// The store in `region`'s two halves.
    pub const fn new(name: &'static str, region: Region) -> DualSlot {
        DualSlot { name, region }
    }

    /// Bytes of one slot.
    pub const fn slot_bytes(&self) -> u64 {
        self.region.bytes / 2
    }

    /// The member offset of the slot sequence `seq` goes to.
    pub const fn at(&self, seq: u64) -> u64 {
        self.region.half(seq % 2).offset
    }

    /// Writes `bytes` (sequence `seq`) to the first `copies` present members that take it,
    /// each flushed when `sync`, and counts a metadata write on each. A member whose write or
    /// flush fails is passed over (the next one takes its copy) and returned, for the caller
    /// to fail like a member failing a data write; an error only when no member took it.
    pub fn write(
        &self,
        members: &[Option<Arc<dyn Member>>],
        counters: &[Counters],
        copies: usize,
        seq: u64,
        bytes: &[u8],
        sync: bool,
    ) -> Result<Vec<(usize, std::io::Error)>, SlotWriteError> {
        assert!(
            bytes.len() as u64 <= self.slot_bytes(),
            "{} record larger than its slot",
            self.name
        );
        let at = self.at(seq);
        let mut written = 0;
        let mut dead: Vec<(usize, std::io::Error)> = Vec::new();
        let present: Vec<(usize, &Arc<dyn Member>)> = members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((i, m.as_ref()?)))
            .collect();
        let put = |m: &Arc<dyn Member>| {
            m.write_at(bytes, at)
                .and_then(|_| if sync { m.flush() } else { Ok(()) })
        };
        let mut next = 0;
        while written < copies && next < present.len() {
            // The copies still wanted, on the next members, side by side as the executor runs
            // member I/O (`exec::per_member`): each waits for its member's queue, and one
            // after the other a record paid every queue's wait (IDO's record beside a rebuild
            // on members emulated at 4 ms per request). Members served from memory write in
            // turn (a thread would cost more than the copy).
            let round = &present[next..(next + copies - written).min(present.len())];
            next += round.len();
            let mut by_member: Vec<Vec<&Arc<dyn Member>>> = vec![Vec::new(); members.len()];
            for &(i, m) in round {
                by_member[i].push(m);
            }
            let parallel = round.iter().any(|(_, m)| !m.completes_in_memory());
            // In member order, as `round` is.
            let results = crate::exec::per_member(by_member, parallel, |_, m| put(m[0]));
            for (&(i, _), r) in round.iter().zip(results) {
                match r {
                    Ok(()) => {
                        counters[i].meta_writes.fetch_add(1, Ordering::Relaxed);
                        written += 1;
                    }
                    Err(e) => dead.push((i, e)),
                }
            }
        }
        if written == 0 && copies > 0 {
            return Err(match dead.pop() {
                Some((member, source)) => SlotWriteError::Failed {
                    name: self.name,
                    member,
                    source,
                },
                None => SlotWriteError::NoMember { name: self.name },
            });
        }
        Ok(dead)
    }

    /// Both slots of every present member, as far as a record there reaches: the first
    /// 4 KiB of each slot are read, `len_of` says from them how many bytes the record there
    /// occupies (`None`: no record), and that many are returned (read again when more than
    /// 4 KiB). Slots that fail to read are left out.
    pub fn read_all(
        &self,
        members: &[Option<Arc<dyn Member>>],
        len_of: impl Fn(&[u8]) -> Option<usize>,
    ) -> Vec<Vec<u8>> {
        (self.read_each(members, len_of).into_iter())
            .map(|(_, b)| b)
            .collect()
    }

    /// [`DualSlot::read_all`], each record with the index of the member it was read from.
    pub fn read_each(
        &self,
        members: &[Option<Arc<dyn Member>>],
        len_of: impl Fn(&[u8]) -> Option<usize>,
    ) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        for (i, m) in (members.iter().enumerate()).filter_map(|(i, m)| Some((i, m.as_ref()?))) {
            for slot in 0..2 {
                let at = self.at(slot);
                let mut head = vec![0u8; 4096];
                if m.read_at(&mut head, at).is_err() {
                    continue;
                }
                let Some(len) = len_of(&head) else { continue };
                let len = len.min(self.slot_bytes() as usize);
                if len <= head.len() {
                    out.push((i, head));
                    continue;
                }
                let mut b = vec![0u8; len.next_multiple_of(4096)];
                if m.read_at(&mut b, at).is_ok() {
                    out.push((i, b));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemMember;

    /// With every member gone, the error says so (it named member 18446744073709551615).
    #[test]
    fn a_record_with_no_member_left_says_so() {
        let store = DualSlot::new("IDO record", Region::new(8192, 16384));
        let members: Vec<Option<Arc<dyn Member>>> = vec![None, None, None];
        let counters: Vec<Counters> = (0..3).map(|_| Counters::default()).collect();
        let e = store
            .write(&members, &counters, 2, 1, &[1u8; 512], true)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "IDO record: no member is present to hold it (every member has failed)"
        );
    }

    #[test]
    fn alternates_and_reads_back_both_slots() {
        let store = DualSlot::new("test", Region::new(8192, 16384));
        let members: Vec<Option<Arc<dyn Member>>> = vec![
            None,
            Some(Arc::new(MemMember::new(64 << 10))),
            Some(Arc::new(MemMember::new(64 << 10))),
            Some(Arc::new(MemMember::new(64 << 10))),
        ];
        let counters: Vec<Counters> = (0..4).map(|_| Counters::default()).collect();
        assert_eq!((store.at(4), store.at(5)), (8192, 16384));
        store
            .write(&members, &counters, 2, 4, &[4u8; 4096], true)
            .unwrap();
        store
            .write(&members, &counters, 2, 5, &[5u8; 8192], false)
            .unwrap();
        let meta: Vec<u64> = counters
            .iter()
            .map(|c| c.meta_writes.load(Ordering::Relaxed))
            .collect();
        assert_eq!(meta, [0, 2, 2, 0], "the first two present members");
        let got = store.read_all(&members, |head| match head[0] {
            4 => Some(4096),
            5 => Some(8192),
            _ => None,
        });
        assert_eq!(got.len(), 4, "two slots on each of two members");
        assert!(got
            .iter()
            .filter(|b| b.len() == 4096)
            .all(|b| b == &[4u8; 4096]));
        assert!(got
            .iter()
            .filter(|b| b.len() == 8192)
            .all(|b| b == &[5u8; 8192]));
    }
    /// On members that are devices (not memory), the copies are written side by side: the
    /// two first members' writes are in flight at once. A member that fails its copy is
    /// passed over and returned, and the next member takes the copy.
    #[test]
    fn copies_go_out_side_by_side_and_a_failing_member_is_passed_over() {
        use crate::test_meeting::Meeting;
        struct Dev {
            inner: MemMember,
            fail: bool,
            meeting: Arc<Meeting>,
        }
        impl Member for Dev {
            fn read_at(&self, b: &mut [u8], o: u64) -> std::io::Result<()> {
                self.inner.read_at(b, o)
            }
            fn write_at(&self, b: &[u8], o: u64) -> std::io::Result<()> {
                self.meeting.arrive();
                if self.fail {
                    return Err(std::io::Error::other("injected write error"));
                }
                self.inner.write_at(b, o)
            }
            fn flush(&self) -> std::io::Result<()> {
                Ok(())
            }
            fn size_bytes(&self) -> u64 {
                self.inner.size_bytes()
            }
            fn describe(&self) -> String {
                "device".into()
            }
        }
        let meeting = Arc::new(Meeting::default());
        let members: Vec<Option<Arc<dyn Member>>> = [false, true, false, false]
            .into_iter()
            .map(|fail| {
                Some(Arc::new(Dev {
                    inner: MemMember::new(64 << 10),
                    fail,
                    meeting: meeting.clone(),
                }) as Arc<dyn Member>)
            })
            .collect();
        let counters: Vec<Counters> = (0..4).map(|_| Counters::default()).collect();
        let store = DualSlot::new("test", Region::new(8192, 16384));
        let dead = store
            .write(&members, &counters, 2, 7, &[7u8; 4096], true)
            .unwrap();
        assert!(meeting.met(), "the copies were written one after the other");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].0, 1);
        let meta: Vec<u64> = counters
            .iter()
            .map(|c| c.meta_writes.load(Ordering::Relaxed))
            .collect();
        assert_eq!(meta, [1, 0, 1, 0], "member 2 took the failed member's copy");
        let got = store.read_all(&members, |head| (head[0] == 7).then_some(4096));
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|b| b == &[7u8; 4096]));
    }
}

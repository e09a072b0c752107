//! Assembly's reading of the members: what each listed member turned out to be, the newest
//! superblock, the array state it records, and the verdict on every member (the table
//! [`verdict`]).

use super::*;

/// The member's superblock: of its two copies ([`SUPERBLOCK_SLOTS`]), the valid one with the
/// newest generation (a copy naming another pool than the first valid one is ignored). Fails
/// with the first copy's error when neither is valid.
pub(super) fn read_superblock(m: &dyn Member) -> std::result::Result<Superblock, String> {
    let mut best: Option<Superblock> = None;
    let mut first_err: Option<String> = None;
    for (k, &off) in SUPERBLOCK_SLOTS.iter().enumerate() {
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        if let Err(e) = m.read_at(&mut b, off) {
            if k == 0 {
                return Err(e.to_string());
            }
            continue; // a member too small for the second copy (not a raidforge member)
        }
        match Superblock::decode(&b) {
            Ok(sb) => {
                if best
                    .as_ref()
                    .is_none_or(|x| sb.uuid == x.uuid && sb.generation > x.generation)
                {
                    best = Some(sb);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    best.ok_or_else(|| first_err.unwrap_or_default())
}

/// The generation in the first 48 bytes of a member's superblock when they name pool `uuid`
/// (`desc_uuid`, the descriptor's text form), slot `i` of `n`, whatever the rest holds: a
/// superblock torn by a crash while it was being rewritten (its CRC fails) still says whose
/// it is. `None` when those bytes do not agree.
pub(super) fn torn_generation(
    m: &dyn Member,
    desc_uuid: &[u8; 16],
    i: usize,
    n: usize,
) -> Option<u64> {
    let mut b = [0u8; SUPERBLOCK_HEAD_BYTES];
    m.read_at(&mut b, 0).ok()?;
    let h = SuperblockHead::peek(&b)?;
    (h.uuid == *desc_uuid && h.member_index as usize == i && h.member_count as usize == n)
        .then_some(h.generation)
}

/// What one listed member turned out to be. A member that cannot be used is only an error
/// when the pool still counts on it (it has not failed).
pub(super) enum Probe {
    Missing,
    Bad(PoolError),
    Good(Arc<dyn Member>, Superblock),
    /// The superblock fails its CRC but its first sector names this pool, this slot and a
    /// generation: torn by a crash while it was being rewritten.
    Torn(u64, PoolError),
}

/// Opens every member the descriptor lists (locked when `access` is exclusive) and reads its
/// superblock.
pub(super) fn probe_members(desc: &Descriptor, uuid: &[u8; 16], access: Access) -> Vec<Probe> {
    let n = desc.members.len();
    let mut opened: Vec<Probe> = Vec::new();
    for (i, md) in desc.members.iter().enumerate() {
        let err = |reason: String| PoolError::Member {
            index: i,
            path: md.path.clone(),
            reason,
        };
        let how = MemberOpen {
            emulate: md.emulate.as_deref(),
            create_bytes: None,
            lock: access == Access::Exclusive,
            direct: desc.direct,
        };
        let m = match open_member(&md.path, &how) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                opened.push(Probe::Missing);
                continue;
            }
            Err(e) => {
                opened.push(Probe::Bad(err(e.to_string())));
                continue;
            }
        };
        let way_out = "(to run without it, assemble the pool from its other members)";
        opened.push(match read_superblock(&*m) {
            Err(reason) => match torn_generation(&*m, uuid, i, n) {
                Some(g) => Probe::Torn(g, err(format!("{reason} {way_out}"))),
                None => Probe::Bad(err(format!("{reason} {way_out}"))),
            },
            Ok(sb) if sb.uuid != *uuid => Probe::Bad(err(format!(
                "belongs to pool {}, not {}: a foreign member",
                hex(&sb.uuid),
                desc.uuid
            ))),
            Ok(sb) if sb.member_index as usize != i || sb.member_count as usize != n => {
                Probe::Bad(err(format!(
                    "is member {} of {}, but the descriptor lists it as {i} of {n}",
                    sb.member_index, sb.member_count
                )))
            }
            Ok(sb) => Probe::Good(m, sb),
        });
    }
    opened
}

/// The newest valid superblock among the members: it is authoritative. With none, the
/// error says why about the first member that is there at all.
pub(super) fn newest_superblock(
    opened: Vec<Probe>,
) -> std::result::Result<(Superblock, Vec<Probe>), PoolError> {
    let best = opened
        .iter()
        .filter_map(|p| match p {
            Probe::Good(_, sb) => Some(sb.clone()),
            _ => None,
        })
        .max_by_key(|sb| sb.generation);
    match best {
        Some(b) => Ok((b, opened)),
        None => Err(opened
            .into_iter()
            .find_map(|p| match p {
                Probe::Bad(e) => Some(e),
                _ => None,
            })
            .unwrap_or_else(|| PoolError::Usage("no member of the pool could be opened".into()))),
    }
}

/// The array state the superblock `best` records: its events replayed, its runs of cycles
/// marked in their generations.
pub(super) fn recorded_state(geo: &Geometry, best: &Superblock) -> Result<ArrayState> {
    let mut state = ArrayState::new(geo);
    for e in &best.events {
        match *e {
            Event::Fail(d) => {
                state.fail(geo, d)?;
            }
            Event::Replace(d) => {
                state.replace(geo, d)?;
            }
        }
    }
    for (i, &(start, gen)) in best.runs.iter().enumerate() {
        let known = state.generations().get(gen as usize);
        if known.is_none_or(|g| g.blocked.is_some()) {
            return Err(PoolError::Io(format!(
                "the superblock puts cycles from {start} in layout generation {gen}, which \
                 its {} events do not make a place for cycles (damaged, or written by a \
                 raidforge that counted generations otherwise)",
                best.events.len()
            )));
        }
        let end = best.runs.get(i + 1).map_or(geo.cycles(), |r| r.0);
        for c in start..end.min(geo.cycles()) {
            state.mark_rebuilt(c, gen);
        }
    }
    state.set_bpgl_capacity(if best.bpgl_capacity == 0 {
        BPGL_DEFAULT_CAPACITY
    } else {
        best.bpgl_capacity as usize
    });
    Ok(state)
}

/// How old a member's superblock is against the newest one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Age {
    /// The newest generation (or, for a torn one, newer).
    Current,
    /// One generation behind: the member only missed the newest superblock write.
    OneBehind,
    /// Two or more behind: it missed updates.
    Older,
}

impl Age {
    pub fn of(generation: u64, newest: u64) -> Age {
        if generation + 1 < newest {
            Age::Older
        } else if generation + 1 == newest {
            Age::OneBehind
        } else {
            Age::Current
        }
    }
}

/// What assembly saw of a listed member, as the verdict needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Not there.
    Missing,
    /// There, but it cannot be opened or holds no superblock of this slot.
    Unusable,
    /// Its superblock is torn (fails its CRC) but names this pool and slot.
    Torn(Age),
    /// A valid superblock of this pool and slot.
    Valid(Age),
}

impl Seen {
    pub fn of(p: &Probe, newest: u64) -> Seen {
        match p {
            Probe::Missing => Seen::Missing,
            Probe::Bad(_) => Seen::Unusable,
            Probe::Torn(g, _) => Seen::Torn(Age::of(*g, newest)),
            Probe::Good(_, sb) => Seen::Valid(Age::of(sb.generation, newest)),
        }
    }

    /// Its contents are not current: no superblock at all, or one that missed updates.
    fn stale(self) -> bool {
        match self {
            Seen::Missing => false,
            Seen::Unusable => true,
            Seen::Torn(a) | Seen::Valid(a) => a == Age::Older,
        }
    }
}

/// What assembly does with a listed member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Failed in the newest record: its slot stays empty.
    StaysFailed,
    /// Used: its data is as current as the others'.
    Use,
    /// Assembled without it and its failure recorded: the pool runs degraded.
    FailIt,
    /// Refused with what was wrong with it (the user assembles without it).
    Refuse,
    /// Refused as stale: it missed updates, and the pool cannot run without it.
    RefuseStale,
}

/// The verdict on a listed member: what was seen of it, whether the newest record has it
/// failed, whether that record says its slot was replaced, and whether the pool has room for
/// losing it (every stripe stays readable without it, counting the members left out so far).
///
/// - A replaced slot whose file is stale (or holds no valid superblock) is the disk replaced
///   away, or a replacement whose first superblock never became durable (a crash during
///   `replace`, before the descriptor named the new file; found by the fault harness). Its
///   contents are not current either way: it is failed (and replaced again later), not the
///   pool refused, while the pool can lose it.
/// - A member that vanished without being failed is failed.
/// - A superblock that fails its CRC is refused, even when its first sector still names this
///   pool and slot (a crash can tear it while it is rewritten; a flipped byte looks the
///   same): the user assembles without it.
/// - One generation behind and not failed in the newest record: the member only missed the
///   newest superblock write (a crash while the superblocks were rewritten; found by the
///   fault-injection harness). Every persist flushes the data before writing any superblock,
///   and a member failed or replaced since would be failed in the newest record or hold no
///   superblock of this pool, so its data is as current as the others'.
/// - Two or more generations behind and not failed in the newest record: it missed updates
///   (writes it silently lost, or a crash again before it caught up), so its data may be
///   stale. Like mdadm, which leaves out a member whose event count is behind: assembled
///   without it (failed, and listed with why) when the pool can lose it, never read; refused
///   otherwise, since the pool cannot run without data it cannot trust.
pub(super) fn verdict(seen: Seen, failed: bool, replaced: bool, room: bool) -> Verdict {
    use Age::*;
    use Seen::*;
    use Verdict::*;
    let replaced_away = replaced && seen.stale() && room;
    match (failed, replaced_away, seen) {
        (true, _, _) => StaysFailed,
        (false, true, _) => FailIt,
        (false, false, Missing) => FailIt,
        (false, false, Unusable | Torn(_)) => Refuse,
        (false, false, Valid(Current | OneBehind)) => Use,
        (false, false, Valid(Older)) if room => FailIt,
        (false, false, Valid(Older)) => RefuseStale,
    }
}

/// How a member left out because it was stale is described (`failed_why` begins so).
pub const STALE_WHY: &str = "stale when the pool was opened";

/// How a member whose device is no longer there is described (`failed_why` begins so): its
/// file was missing when the pool was opened, or an I/O error failed it and its path no longer
/// names what the pool had open, or its NBD server could not be reached again in time
/// ([`crate::Member::gone`]).
pub const DISAPPEARED_WHY: &str = "its device disappeared";

/// The member handles a pool keeps (`None`: failed or missing).
pub(super) type MemberHandles = Vec<Option<Arc<dyn Member>>>;

/// Runs the verdict on every member in order, members that are only stale last (a failure
/// recorded for one leaves less room for the next): the handles the pool keeps, the events
/// with the failures assembly records.
pub(super) fn judge_members(
    opened: Vec<Probe>,
    best: &Superblock,
    geo: &Geometry,
    state: &mut ArrayState,
    desc: &mut Descriptor,
) -> Result<(MemberHandles, Vec<Event>)> {
    let mut members: MemberHandles = vec![None; opened.len()];
    let mut events = best.events.clone();
    // Members that are merely stale are judged last: whether the pool can lose one depends
    // on every member that is missing or unusable.
    let mut order: Vec<(usize, Probe)> = opened.into_iter().enumerate().collect();
    order.sort_by_key(|(_, p)| matches!(Seen::of(p, best.generation), Seen::Valid(Age::Older)));
    for (i, probe) in order {
        let seen = Seen::of(&probe, best.generation);
        let failed = state.failed().contains(&(i as Disk));
        // Whether the pool has room to lose this member decides only for a stale one, and
        // costs a pass over every stripe: on a 251-member RAID+ pool, asked of every member,
        // it was a third of opening the pool.
        let room = !failed && seen.stale() && state.survives_losing(geo, &[i as Disk]);
        let v = verdict(
            seen,
            failed,
            best.events.contains(&Event::Replace(i as u32)),
            room,
        );
        match (v, probe) {
            (Verdict::StaysFailed, _) => {}
            (Verdict::Use, Probe::Good(m, _)) => members[i] = Some(m),
            (Verdict::FailIt, probe) => {
                let md = &mut desc.members[i];
                md.failed_why = Some(match probe {
                    Probe::Missing => format!(
                        "{DISAPPEARED_WHY}: file {} missing when the pool was opened",
                        md.path.display()
                    ),
                    Probe::Bad(e) | Probe::Torn(_, e) => {
                        format!("unusable when the pool was opened: {e}")
                    }
                    Probe::Good(..) if best.events.contains(&Event::Replace(i as u32)) => {
                        "replaced, and its replacement missing or stale when the pool was \
                         opened"
                            .into()
                    }
                    Probe::Good(_, sb) => format!(
                        "{STALE_WHY} (generation {} but the pool is at {}): it missed \
                         updates, so it was left out; replace it (`raidforge replace`, or \
                         a served pool's hot spare takes its place)",
                        sb.generation, best.generation
                    ),
                });
                state.fail(geo, i as Disk)?;
                events.push(Event::Fail(i as u32));
            }
            (Verdict::Refuse, Probe::Bad(e) | Probe::Torn(_, e)) => return Err(e),
            (Verdict::RefuseStale, Probe::Good(_, sb)) => {
                return Err(PoolError::Member {
                    index: i,
                    path: desc.members[i].path.clone(),
                    reason: format!(
                        "is stale (generation {} but the pool is at {}): it missed updates, \
                         and the other members cannot serve the pool without it (more \
                         members are missing, stale or not rebuilt yet than the layout \
                         tolerates); bring back the members that are missing, or restore \
                         from a backup",
                        sb.generation, best.generation
                    ),
                })
            }
            (v, _) => unreachable!("verdict {v:?} on member {i} does not fit what was seen"),
        }
    }
    Ok((members, events))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case of the table (what was seen, failed, replaced, room) against what the
    /// verdicts promise.
    #[test]
    fn every_case_of_the_member_verdict() {
        use Age::*;
        let ages = [Current, OneBehind, Older];
        let mut seen = vec![Seen::Missing, Seen::Unusable];
        seen.extend(ages.map(Seen::Torn));
        seen.extend(ages.map(Seen::Valid));
        let mut cases = 0;
        for &s in &seen {
            for failed in [false, true] {
                for replaced in [false, true] {
                    for room in [false, true] {
                        let v = verdict(s, failed, replaced, room);
                        cases += 1;
                        let case = format!("{s:?} failed {failed} replaced {replaced} room {room}");
                        // Room decides only for a stale member (assembly asks only then).
                        if !s.stale() {
                            assert_eq!(v, verdict(s, failed, replaced, !room), "{case}");
                        }
                        // The newest record's failures stand.
                        assert_eq!(v == Verdict::StaysFailed, failed, "{case}: {v:?}");
                        if failed {
                            continue;
                        }
                        // Only a valid, current (or one behind) superblock is used, and such
                        // a member is always used.
                        let current = matches!(s, Seen::Valid(Current | OneBehind));
                        assert_eq!(v == Verdict::Use, current, "{case}: {v:?}");
                        // A member that is there is failed by assembly only when its
                        // contents are stale and the pool can lose it: its slot was
                        // replaced, or its valid superblock missed updates (mdadm leaves
                        // out a member whose event count is behind).
                        if v == Verdict::FailIt && s != Seen::Missing {
                            assert!(room && s.stale(), "{case}");
                            assert!(replaced || s == Seen::Valid(Older), "{case}");
                        }
                        // A stale member is never used: left out when the pool can lose
                        // it, refused when it cannot.
                        if s == Seen::Valid(Older) {
                            let want = if room {
                                Verdict::FailIt
                            } else {
                                Verdict::RefuseStale
                            };
                            assert_eq!(v, want, "{case}");
                        }
                        // A member that vanished is failed, never refused.
                        if s == Seen::Missing {
                            assert_eq!(v, Verdict::FailIt, "{case}");
                        }
                        // What is refused says why in its own terms.
                        match v {
                            Verdict::RefuseStale => {
                                assert_eq!(s, Seen::Valid(Older), "{case}");
                                assert!(!room, "{case}");
                            }
                            Verdict::Refuse => {
                                assert!(matches!(s, Seen::Unusable | Seen::Torn(_)), "{case}");
                                assert!(!(replaced && room && s.stale()), "{case}");
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 64);
    }

    #[test]
    fn ages() {
        assert_eq!(Age::of(7, 7), Age::Current);
        assert_eq!(Age::of(8, 7), Age::Current, "a torn copy may be newer");
        assert_eq!(Age::of(6, 7), Age::OneBehind);
        assert_eq!(Age::of(5, 7), Age::Older);
        assert_eq!(Age::of(0, 7), Age::Older);
    }
}

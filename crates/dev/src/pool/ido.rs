//! The pool's side of IDO (seed 003, `crate::ido`): zone progress, the surrogate, the IDO
//! record on the members.

use super::*;

/// The exclusive pool as IDO sees it: only its record can be written (requests of a pool in
/// a policy rebuild go through a served pool).
pub(super) struct RecordOnly<'a>(pub(super) &'a Pool);

impl crate::ido::MainPool for RecordOnly<'_> {
    fn chunk_bytes(&self) -> u64 {
        self.0.geo.chunk_bytes()
    }
    fn needs_reconstruction(&self, chunks: std::ops::Range<u64>) -> Vec<bool> {
        crate::ido::chunks_needing_reconstruction(&self.0.geo, &self.0.state, chunks)
    }
    fn read(&self, _: u64, _: &mut [u8]) -> Result<()> {
        Err(self.0.ido_busy())
    }
    fn write(&self, _: u64, _: &[u8]) -> Result<()> {
        Err(self.0.ido_busy())
    }
    fn sync(&self) -> Result<()> {
        self.0.flush_members()
    }
    fn write_record(&self, seq: u64, bytes: &[u8], sync: bool) -> Result<()> {
        // A member that fails the write is found by the next flush of the exclusive pool
        // (every superblock update starts with one).
        Pool::write_ido_record(
            &self.0.members.handles,
            &self.0.members.counters,
            self.0.record_copies(),
            seq,
            bytes,
            sync,
        )
        .map(|_| ())
    }
}

/// Both IDO record slots of every present member, each with the member's index.
/// (The head says how long the record is: reading whole slots of every member of a wide
/// pool at each open would be wasteful.)
pub(super) fn ido_records(members: &[Option<Arc<dyn Member>>]) -> Vec<(usize, Vec<u8>)> {
    IDO_SLOTS.read_each(members, |head| {
        Some(crate::ido::RECORD_FRAME.peek(head)?.len)
    })
}

impl Pool {
    /// Zones whose every cycle is in the target layout.
    pub(super) fn zones_rebuilt(&self) -> u64 {
        (0..self.ido.zones())
            .filter(|&z| self.zone_clean(z))
            .count() as u64
    }

    /// Every cycle of IDO zone `zone` is in the target layout.
    pub(crate) fn zone_clean(&self, zone: u64) -> bool {
        let zc = self.ido.zone_cycles();
        (zone * zc..((zone + 1) * zc).min(self.geo.cycles())).all(|c| self.state.is_clean(c))
    }

    /// Unrebuilt cycles of every zone.
    pub(crate) fn zone_cycles_left(&self) -> Vec<u32> {
        let zc = self.ido.zone_cycles();
        (0..self.ido.zones())
            .map(|z| {
                (z * zc..((z + 1) * zc).min(self.geo.cycles()))
                    .filter(|&c| !self.state.is_clean(c))
                    .count() as u32
            })
            .collect()
    }

    /// The error for direct I/O while redirected data lives on the surrogate.
    pub(super) fn ido_busy(&self) -> PoolError {
        PoolError::Usage(format!(
            "this pool is in the middle of a policy rebuild or its reclaim (phase {:?}; data              may live on the surrogate pool): serve it with `raidforge serve`, or finish with              `raidforge rebuild POOL`",
            self.ido.phase()
        ))
    }

    /// Zone tracking and the surrogate: sets the zone size (only while nothing is on a
    /// surrogate; popularity starts over) and records the surrogate pool's descriptor.
    pub fn configure_ido(
        &mut self,
        zone_bytes: Option<u64>,
        surrogate: Option<&Path>,
    ) -> Result<()> {
        if self.md.is_some() {
            if zone_bytes.is_some() || surrogate.is_some() {
                return Err(PoolError::Usage(
                    "zone tracking and surrogates keep their state in raidforge's own \
                     metadata, which a pool in Linux MD's format does not have"
                        .into(),
                ));
            }
            return Ok(());
        }
        if let Some(zb) = zone_bytes {
            if self.ido.phase() != Phase::Normal || self.ido.needs_surrogate_now() {
                return Err(PoolError::Usage(
                    "the zone size cannot change during a policy rebuild or reclaim".into(),
                ));
            }
            let keep = self.ido.surrogate_path();
            let fresh = Ido::new(
                self.geo.capacity_bytes(),
                self.geo.data_per_cycle() * self.geo.chunk_bytes(),
                zb,
            )?;
            fresh.set_surrogate_path(keep);
            fresh.succeed(&self.ido);
            self.ido = Arc::new(fresh);
        }
        if let Some(s) = surrogate.filter(|s| nbd::client::is_uri(&s.to_string_lossy())) {
            // A pool served by another process: the address must parse; it is connected to
            // when a rebuild needs it (that server need not be up yet).
            nbd::client::Address::parse(&s.to_string_lossy()).map_err(PoolError::Usage)?;
            self.ido.set_surrogate_path(Some(s.to_path_buf()));
        } else if let Some(s) = surrogate {
            let canon = std::fs::canonicalize(s).map_err(|e| {
                PoolError::Usage(format!(
                    "surrogate pool {}: {e} (create it first, e.g. `raidforge create {}                      --scheme raid1 --disks 2 --member a.img --member b.img --member-size 1G`)",
                    s.display(),
                    s.display()
                ))
            })?;
            if canon == std::fs::canonicalize(&self.file.path).unwrap_or_default() {
                return Err(PoolError::Usage(
                    "a pool cannot be its own surrogate: name another pool".into(),
                ));
            }
            Self::read_descriptor(&canon)?;
            self.ido.set_surrogate_path(Some(canon));
        }
        let ido = Arc::clone(&self.ido);
        ido.touch();
        ido.persist_if_dirty(&RecordOnly(self), self.sb.uuid, true)
    }

    /// The IDO state (zone popularity, policy, D-Map).
    pub fn ido(&self) -> &Arc<Ido> {
        &self.ido
    }

    /// The array UUID.
    pub(crate) fn uuid(&self) -> [u8; 16] {
        self.sb.uuid
    }

    /// Writes the IDO record (`seq`'s slot of [`raidcore::region::IDO`]) to the first
    /// `copies` present members that take it ([`Pool::record_copies`]), durable when
    /// `sync`; returns the members whose write (or flush) failed on the way, for the caller
    /// to fail. An error only when no member took it.
    pub(crate) fn write_ido_record(
        members: &[Option<Arc<dyn Member>>],
        counters: &[Counters],
        copies: usize,
        seq: u64,
        bytes: &[u8],
        sync: bool,
    ) -> Result<Vec<(usize, std::io::Error)>> {
        IDO_SLOTS
            .write(members, counters, copies, seq, bytes, sync)
            .map_err(|e| PoolError::Io(e.to_string()))
    }
}

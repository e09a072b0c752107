//! RAID+ (seed 001): placement from mutually orthogonal Latin squares (being written).
use crate::{Cycle, LayoutError, Order, Scheme};

#[derive(Debug)]
pub struct RaidPlus {
    cycle: Cycle,
}

impl RaidPlus {
    pub fn new(n: usize, k: usize, level: u8, order: Order) -> Result<RaidPlus, LayoutError> {
        let _ = (n, k, level, order);
        Err(LayoutError::param("scheme", "raidplus is not built yet"))
    }
}

impl Scheme for RaidPlus {
    fn name(&self) -> &'static str {
        "raidplus"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
}

/// One volume of a RAID+ pool: stripe width and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    pub width: usize,
    pub level: u8,
}

#[derive(Debug)]
pub struct RaidPlusPool {
    cycle: Cycle,
}

impl RaidPlusPool {
    pub fn new(n: usize, volumes: &str, order: Order) -> Result<RaidPlusPool, LayoutError> {
        let _ = (n, volumes, order);
        Err(LayoutError::param("volumes", "raidplus pools are not built yet"))
    }
}

impl Scheme for RaidPlusPool {
    fn name(&self) -> &'static str {
        "raidplus"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
}

//! RaidH (being written).
use crate::{Cycle, LayoutError, Params, Scheme};

#[derive(Debug)]
pub struct RaidH {
    cycle: Cycle,
}

impl RaidH {
    pub fn new(p: &Params) -> Result<RaidH, LayoutError> {
        let _ = p;
        Err(LayoutError::param("scheme", "raidh is not built yet"))
    }
}

impl Scheme for RaidH {
    fn name(&self) -> &'static str {
        "raidh"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
}

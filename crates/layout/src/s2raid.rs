//! S2Raid (being written).
use crate::{Cycle, LayoutError, Params, Scheme};

/// One S2-RAID sub-array: its members as (disk, partition) in logical-disk order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S2Subarray {
    pub id: usize,
    pub members: Vec<(u32, usize)>,
}

#[derive(Debug)]
pub struct S2Raid {
    cycle: Cycle,
}

impl S2Raid {
    pub fn new(mirror: bool, p: &Params) -> Result<S2Raid, LayoutError> {
        let _ = (mirror, p);
        Err(LayoutError::param("scheme", "s2raid is not built yet"))
    }
}

impl Scheme for S2Raid {
    fn name(&self) -> &'static str {
        "s2raid"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
}

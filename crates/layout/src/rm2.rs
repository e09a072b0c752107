//! Rm2 (being written).
use crate::{Cycle, LayoutError, Params, Scheme};

#[derive(Debug)]
pub struct Rm2 {
    cycle: Cycle,
}

impl Rm2 {
    pub fn new(p: &Params) -> Result<Rm2, LayoutError> {
        let _ = p;
        Err(LayoutError::param("scheme", "rm2 is not built yet"))
    }
}

impl Scheme for Rm2 {
    fn name(&self) -> &'static str {
        "rm2"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
}

//! Reproduction of seed `raidh` (being written; see the issue).

use crate::{Experiment, Opts};

/// The paper.
pub const SOURCE: &str = "raidh";

/// Runs every experiment of this seed.
pub fn run(_opts: &Opts, _progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    anyhow::bail!("the raidh reproduction is not written yet")
}

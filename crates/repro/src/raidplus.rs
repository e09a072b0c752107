//! Reproduction of seed `raidplus` (being written; see the issue).

use crate::{Experiment, Opts};

/// The paper.
pub const SOURCE: &str = "raidplus";

/// Runs every experiment of this seed.
pub fn run(_opts: &Opts, _progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    anyhow::bail!("the raidplus reproduction is not written yet")
}

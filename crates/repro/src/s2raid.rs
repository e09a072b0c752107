//! Reproduction of seed `s2raid` (being written; see the issue).

use crate::{Experiment, Opts};

/// The paper.
pub const SOURCE: &str = "s2raid";

/// Runs every experiment of this seed.
pub fn run(_opts: &Opts, _progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    anyhow::bail!("the s2raid reproduction is not written yet")
}

//! Reproduction of seed `raid4s` (being written; see the issue).

use crate::{Experiment, Opts};

/// The paper.
pub const SOURCE: &str = "raid4s";

/// Runs every experiment of this seed.
pub fn run(_opts: &Opts, _progress: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Experiment>> {
    anyhow::bail!("the raid4s reproduction is not written yet")
}

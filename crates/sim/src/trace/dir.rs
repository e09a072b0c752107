//! Where the traces are: the folder a caller names (`--traces DIR`), else `$RAIDFORGE_TRACES`,
//! else the repository's `data/traces` (the real MQSim traces and the synthetic fixtures that
//! come with the source; see its README).
//!
//! The repository's folder is found first where this crate was built (a binary run from its own
//! checkout), then beside the running binary (a `target/*/` binary of a checkout that was moved
//! after the build). A binary copied elsewhere finds neither and says how to name the folder.

use std::path::{Path, PathBuf};

/// The environment variable naming a folder of traces (for example one holding the real SNIA
/// samples that the repository only has synthetic stand-ins for).
pub const TRACES_ENV: &str = "RAIDFORGE_TRACES";

/// The repository's trace folder as this crate was built: `<workspace>/data/traces`. It may
/// not exist at run time (a binary copied elsewhere).
pub fn repository_traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces")
}

/// Why no trace folder was found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceDirError {
    /// The folder the caller named does not exist (or is not a folder).
    #[error("the trace folder {0} given with --traces is not a directory")]
    Given(PathBuf),
    /// `$RAIDFORGE_TRACES` names something that is not a folder.
    #[error("RAIDFORGE_TRACES={0} is not a directory; point it at a folder of traces or unset it")]
    Env(PathBuf),
    /// Nothing named, and the repository's `data/traces` is neither where the crate was built
    /// nor beside the binary.
    #[error(
        "no trace folder: the repository's data/traces is not at {} nor above {}; pass --traces DIR \
         or set RAIDFORGE_TRACES to a folder holding the traces",
        built.display(),
        exe.display()
    )]
    NotFound {
        /// Where the crate was built from.
        built: PathBuf,
        /// The running binary.
        exe: PathBuf,
    },
}

/// The trace folder: `given` when the caller has one (a `--traces` option), else
/// `$RAIDFORGE_TRACES`, else the repository's `data/traces` (see the module documentation).
pub fn locate_traces_dir(given: Option<&Path>) -> Result<PathBuf, TraceDirError> {
    let env = std::env::var_os(TRACES_ENV).map(PathBuf::from);
    let exe = std::env::current_exe().unwrap_or_default();
    locate_in(given, env.as_deref(), &repository_traces_dir(), &exe)
}

/// [`locate_traces_dir`] with its inputs spelled out (tested without touching the process's
/// environment).
fn locate_in(
    given: Option<&Path>,
    env: Option<&Path>,
    built: &Path,
    exe: &Path,
) -> Result<PathBuf, TraceDirError> {
    if let Some(d) = given {
        return if d.is_dir() {
            Ok(d.to_path_buf())
        } else {
            Err(TraceDirError::Given(d.to_path_buf()))
        };
    }
    if let Some(d) = env.filter(|d| !d.as_os_str().is_empty()) {
        return if d.is_dir() {
            Ok(d.to_path_buf())
        } else {
            Err(TraceDirError::Env(d.to_path_buf()))
        };
    }
    if built.is_dir() {
        return Ok(built.to_path_buf());
    }
    // `<workspace>/target/<profile>/raidforge` (or `.../deps/`, `.../examples/`): the first
    // ancestor with a `data/traces` folder.
    if let Some(d) = exe
        .ancestors()
        .skip(1)
        .map(|a| a.join("data/traces"))
        .find(|d| d.is_dir())
    {
        return Ok(d);
    }
    Err(TraceDirError::NotFound {
        built: built.to_path_buf(),
        exe: exe.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn order_given_env_built_then_beside_the_binary() {
        let t = Tmp(std::env::temp_dir().join(format!("sim-tracedir-{}", std::process::id())));
        let ws = t.0.join("moved-checkout");
        let traces = ws.join("data/traces");
        let exe = ws.join("target/release/raidforge");
        std::fs::create_dir_all(&traces).unwrap();
        let other = t.0.join("mine");
        std::fs::create_dir_all(&other).unwrap();
        let gone = t.0.join("gone");

        let built = repository_traces_dir();
        assert!(built.is_dir(), "the repository's data/traces is missing");
        // Given wins, and must exist.
        assert_eq!(
            locate_in(Some(&other), Some(&traces), &built, &exe),
            Ok(other.clone())
        );
        assert_eq!(
            locate_in(Some(&gone), Some(&traces), &built, &exe),
            Err(TraceDirError::Given(gone.clone()))
        );
        // Then the variable (empty counts as unset).
        assert_eq!(
            locate_in(None, Some(&other), &built, &exe),
            Ok(other.clone())
        );
        assert_eq!(
            locate_in(None, Some(&gone), &built, &exe),
            Err(TraceDirError::Env(gone.clone()))
        );
        assert_eq!(
            locate_in(None, Some(Path::new("")), &built, &exe),
            Ok(built.clone())
        );
        // Then where the crate was built, then the binary's workspace.
        assert_eq!(locate_in(None, None, &built, &exe), Ok(built.clone()));
        assert_eq!(locate_in(None, None, &gone, &exe), Ok(traces.clone()));
        // A binary copied elsewhere: an error naming both ways to give the folder.
        let lone = t.0.join("bin/raidforge");
        let e = locate_in(None, None, &gone, &lone).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("--traces DIR") && msg.contains("RAIDFORGE_TRACES"),
            "{msg}"
        );
        assert!(msg.contains(&gone.display().to_string()), "{msg}");
    }
}

//! The test driver of `scripts/md-vm.sh`: a batch of shell commands run inside a QEMU guest
//! (TCG) that runs the distribution's kernel with Linux MD, over image files given as virtio
//! disks. The guest prints result lines prefixed `RFVM `; [`MdVm::run`] returns them without
//! the prefix.
//!
//! When the guest's packages are missing ([`vm_or_skip`]) a test prints a skip notice and
//! passes, unless the `CI` environment variable is set: then it fails (CI installs them through
//! `.ci/run`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/md-vm.sh` in this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/md-vm.sh")
}

/// True when the guest can run. Otherwise panics under `CI`, and elsewhere prints a skip notice
/// for `test` and returns false.
pub fn vm_or_skip(test: &str) -> bool {
    let out = Command::new(script())
        .arg("--check")
        .output()
        .expect("run scripts/md-vm.sh --check");
    if out.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&out.stderr).replace('\n', " ");
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the Linux MD guest cannot run: {why}(.ci/run installs the packages)"
    );
    eprintln!(
        "SKIPPED {test}: {why}(install qemu-system-x86 linux-image-cloud-amd64 busybox-static \
         mdadm cpio with --no-install-recommends; required when CI is set)"
    );
    false
}

/// One guest boot: disks and the commands to run.
#[derive(Default)]
pub struct MdVm {
    disks: Vec<(String, PathBuf)>,
    script: String,
}

impl MdVm {
    pub fn new() -> MdVm {
        MdVm::default()
    }

    /// Adds `path` as a virtio disk, seen in the guest as `/dev/rf/NAME`.
    pub fn disk(&mut self, name: &str, path: &Path) -> &mut MdVm {
        assert!(
            !self.disks.iter().any(|(n, _)| n == name),
            "disk {name} given twice"
        );
        self.disks.push((name.to_string(), path.to_path_buf()));
        self
    }

    /// Appends shell commands (busybox sh, `set -e`) to the guest's script.
    pub fn sh(&mut self, commands: &str) -> &mut MdVm {
        self.script.push_str(commands);
        if !commands.ends_with('\n') {
            self.script.push('\n');
        }
        self
    }

    /// Boots the guest, runs the script and returns its `RFVM ` lines without the prefix.
    /// Panics, with the guest's output, when the script fails or the guest does not finish
    /// within `RAIDFORGE_VM_TIMEOUT` seconds (default 2400).
    pub fn run(&self, work: &Path) -> Vec<String> {
        let script = work.join(format!("vm-script-{}.sh", std::process::id()));
        let marked = format!(
            "{}{}{}",
            mark("script-start"),
            self.script,
            mark("script-end")
        );
        std::fs::write(&script, marked).unwrap();
        let mut cmd = Command::new(self::script());
        for (n, p) in &self.disks {
            cmd.arg("--disk").arg(format!("{n}={}", p.display()));
        }
        // A guard against a hung guest, not a speed goal: on a 2-core machine shared with
        // several builds (TCG got a seventh of a core) a boot of ~190 disks took over 15
        // minutes.
        let timeout = std::env::var("RAIDFORGE_VM_TIMEOUT").unwrap_or_else(|_| "2400".into());
        cmd.arg("--timeout").arg(timeout).arg(&script);
        let started = std::time::Instant::now();
        let out = cmd.output().expect("run scripts/md-vm.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
        eprintln!(
            "md-vm: {} disks, {:.1} s{}",
            self.disks.len(),
            started.elapsed().as_secs_f64(),
            steps(&lines)
        );
        assert!(
            out.status.success(),
            "the MD guest failed ({:?}):\n--- stderr\n{}\n--- result lines\n{}\n--- script\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout),
            self.script
        );
        let _ = std::fs::remove_file(&script);
        lines
    }
}

/// A guest command that marks the time after the step LABEL: a result line `t LABEL
/// SECONDS`, the host's time since QEMU started (`scripts/md-vm.sh`'s `rfvm_mark`, which
/// writes to the console itself: an `echo` through the script's output pipe can arrive many
/// seconds late while the guest is busy, and the time would go to the wrong step).
/// [`MdVm::run`] reports the slowest steps, and the last marks a failed or hung guest printed
/// say how far it got.
pub fn mark(label: &str) -> String {
    format!("rfvm_mark {label}\n")
}

/// The time marks (`t LABEL SECONDS`) as "; to the script N s (kernel N, disks N), script
/// N s, end N s; slowest steps: LABEL N s, ..." (each step from the mark before it), or
/// nothing without marks.
fn steps(lines: &[String]) -> String {
    let marks: Vec<(&str, f64)> = values(lines, "t")
        .into_iter()
        .filter_map(|v| {
            let (label, at) = v.rsplit_once(' ')?;
            Some((label, at.parse().ok()?))
        })
        .collect();
    if marks.is_empty() {
        return String::new();
    }
    let at = |label: &str| {
        marks
            .iter()
            .find(|(l, _)| *l == label)
            .map_or(f64::NAN, |m| m.1)
    };
    let mut step: Vec<(&str, f64)> = marks
        .windows(2)
        .map(|w| (w[1].0, w[1].1 - w[0].1))
        .collect();
    step.sort_by(|a, b| b.1.total_cmp(&a.1));
    let slowest: Vec<String> = step
        .iter()
        .take(6)
        .map(|(l, d)| format!("{l} {d:.1} s"))
        .collect();
    format!(
        "; to the script {:.1} s (kernel {:.1}, disks {:.1}), script {:.1} s, end {:.1} s; \
         slowest steps: {}",
        at("script-start"),
        at("kernel"),
        at("disks") - at("modules"),
        at("script-end") - at("script-start"),
        at("qemu-exit") - at("script-end"),
        slowest.join(", ")
    )
}

/// The values of result lines `KEY VALUE...` with this key, in order.
#[allow(dead_code)]
pub fn values<'a>(lines: &'a [String], key: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .collect()
}

/// The one value of `KEY VALUE` (panics if it is missing or repeated).
#[allow(dead_code)]
pub fn value<'a>(lines: &'a [String], key: &str) -> &'a str {
    let v = values(lines, key);
    assert_eq!(v.len(), 1, "result line {key:?}: {v:?} in {lines:#?}");
    v[0]
}

/// A sparse image file of `bytes`.
#[allow(dead_code)]
pub fn image(path: &Path, bytes: u64) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(bytes).unwrap();
}

//! A served pool rebuilding (into the layout's spare space, then copying back onto a
//! replacement, with a second failure between) while clients write: afterwards each block
//! reads what was last written, directly and when it has to be reconstructed (another member
//! failed), and parity verifies. The second-failure cases take the staging generation
//! (`raidcore::Generation::staging`): a copy-back whose rebuild into the spare space would
//! overwrite the units the cycle still reads there (found by the served fault harness, seed
//! 0x138d). `REBUILD_RACE_ROUNDS` runs more rounds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use dev::faultsim::Rng;
use dev::pool::{Pool, RebuildOpts};
use dev::serve_support::{Concurrency, SharedPool};
use layout::{Params, SchemeKind};

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-rebuild-race-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SECTOR: usize = 512;

fn create(dir: &Path, n: usize) -> Pool {
    let mut o = dev::pool::test_opts(SchemeKind::Hash, dir, n, 3 << 20);
    // As the fault-injection harness's hash-6-3: stripes of 3 over 6 members.
    o.params = Params {
        disks: Some(n),
        width: Some(3),
        seed: 5,
        stripes: Some(12),
        ..Params::default()
    };
    o.chunk_bytes = 4096;
    Pool::create(&dir.join("pool.json"), o).unwrap()
}

/// `threads` writers, each owning the sectors s with s % threads == id, write random runs of
/// their sectors until stopped; `model` holds what each sector was last written.
fn writers(
    sp: &Arc<SharedPool>,
    model: &Arc<Mutex<Vec<u8>>>,
    threads: usize,
    stop: &Arc<AtomicBool>,
    seed: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|id| {
            let (sp, model, stop) = (Arc::clone(sp), Arc::clone(model), Arc::clone(stop));
            std::thread::spawn(move || {
                let sectors = model.lock().unwrap().len() / SECTOR;
                let mut rng = Rng::new(seed * 7919 + id as u64 + 1);
                while !stop.load(Ordering::SeqCst) {
                    let s = rng.below((sectors / threads) as u64) as usize * threads + id;
                    let data = rng.bytes(SECTOR);
                    sp.write((s * SECTOR) as u64, &data).unwrap();
                    model.lock().unwrap()[s * SECTOR..(s + 1) * SECTOR].copy_from_slice(&data);
                }
            })
        })
        .collect()
}

fn check_all(sp: &SharedPool, model: &[u8], when: &str) {
    let mut buf = vec![0u8; model.len()];
    sp.read(0, &mut buf).unwrap();
    if let Some(s) = (0..model.len() / SECTOR)
        .find(|&s| buf[s * SECTOR..(s + 1) * SECTOR] != model[s * SECTOR..(s + 1) * SECTOR])
    {
        panic!("{when}: sector {s} reads wrong");
    }
}

fn wait_rebuild(sp: &SharedPool) {
    loop {
        let i = sp.rebuild_info();
        if !i.running {
            assert!(i.error.is_none(), "{:?}", i.error);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// One scenario: `steps` run in order under writes (fail, replace, rebuild to the end), then
/// every block is checked, parity verified, and every block read again with `last` failed
/// too (reconstructed).
#[derive(Clone, Copy, Debug)]
enum Step {
    Fail(usize),
    Replace(usize),
    Rebuild,
}

fn scenario(tag: &str, steps: &[Step], last: usize, staging: bool, rounds: u64) {
    for round in 0..rounds {
        let dir = Dir::new(&format!("{tag}{round}"));
        let pool = create(&dir.0, 6);
        let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
        let cap = sp.capacity_bytes() as usize;
        let model = Arc::new(Mutex::new(vec![0u8; cap]));
        let stop = Arc::new(AtomicBool::new(false));
        let opts = RebuildOpts {
            parallel_cycles: 2,
            ..RebuildOpts::default()
        };
        let ws = writers(&sp, &model, 3, &stop, round);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut staged = false;
        for (k, st) in steps.iter().enumerate() {
            match *st {
                Step::Fail(m) => {
                    sp.fail(m).unwrap();
                }
                Step::Replace(m) => {
                    sp.replace(m, &dir.0.join(format!("m{m}.new{k}.img")))
                        .unwrap();
                    staged |= sp
                        .with_pool(|p| Ok(p.state().generations().iter().any(|g| g.staging)))
                        .unwrap();
                }
                Step::Rebuild => {
                    sp.start_rebuild(opts.clone()).unwrap();
                    wait_rebuild(&sp);
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        for w in ws {
            w.join().unwrap();
        }
        let model = model.lock().unwrap().clone();
        assert_eq!(
            staged, staging,
            "{tag}: a staging generation was (not) made"
        );
        check_all(
            &sp,
            &model,
            &format!("{tag} round {round}, after {steps:?}"),
        );
        let v = sp.verify().unwrap();
        assert!(v.inconsistent.is_empty(), "{tag} round {round}: {v:?}");
        sp.fail(last).unwrap();
        check_all(
            &sp,
            &model,
            &format!("{tag} round {round}, after {steps:?}, member {last} reconstructed"),
        );
        sp.abandon();
    }
}

fn rounds() -> u64 {
    std::env::var("REBUILD_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[test]
fn a_second_failure_after_a_rebuild_into_spare_space_then_a_replacement() {
    use Step::*;
    scenario(
        "second",
        &[Fail(2), Rebuild, Fail(1), Replace(2), Rebuild],
        3,
        true,
        rounds(),
    );
}

#[test]
fn a_second_failure_then_both_members_replaced_in_turn() {
    use Step::*;
    scenario(
        "during",
        &[
            Fail(2),
            Rebuild,
            Fail(1),
            Replace(2),
            Rebuild,
            Replace(1),
            Rebuild,
        ],
        2,
        true,
        rounds(),
    );
}

#[test]
fn a_served_rebuild_into_spare_space_then_a_copy_back_under_writes() {
    use Step::*;
    scenario(
        "copyback",
        &[Fail(1), Rebuild, Replace(1), Rebuild],
        1,
        false,
        rounds(),
    );
}

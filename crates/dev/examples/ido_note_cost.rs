//! Cost of counting a request in its zone (`Ido::note`, the whole normal-state work of zone
//! tracking), from 8 threads at once as the NBD server's workers would, next to the same loop
//! with tracking off, in one run. Prints nanoseconds per request for both and the difference;
//! `bench/ido_tracking.sh` puts it beside the NBD throughput it measures.
//!
//! Usage: cargo run --release -p dev --example ido_note_cost

use std::sync::Arc;
use std::time::Instant;

use dev::ido::Ido;

fn run(ido: &Arc<Ido>, threads: u64, per_thread: u64) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let ido = Arc::clone(ido);
            s.spawn(move || {
                // SplitMix-like offsets over 900 MiB (75 zones of 12 MiB).
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut routed = 0u64;
                for _ in 0..per_thread {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let off = (x % (900 << 20)) & !4095;
                    routed += ido.note(std::hint::black_box(off), 4096) as u64;
                }
                assert_eq!(routed, 0, "normal state routes nothing");
            });
        }
    });
    t0.elapsed().as_nanos() as f64 / (threads * per_thread) as f64
}

fn main() {
    let ido = Arc::new(Ido::new(900 << 20, 192 << 10, 12 << 20).expect("zone table"));
    let (threads, n) = (8, 2_000_000);
    let mut on = Vec::new();
    let mut off = Vec::new();
    for round in 0..5 {
        for t in if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        } {
            ido.set_tracking(t);
            let ns = run(&ido, threads, n);
            if t {
                on.push(ns)
            } else {
                off.push(ns)
            }
        }
    }
    on.sort_by(f64::total_cmp);
    off.sort_by(f64::total_cmp);
    let (a, b) = (on[2], off[2]);
    // Wall time per request with every core busy: CPU time per request = that x cores.
    let cores = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(threads as usize);
    let cpu = (a - b) * cores as f64;
    println!(
        "zone tracking: {a:.1} ns wall per request on, {b:.1} ns off (median of 5; {threads} \
         threads on {cores} cores): {cpu:.0} ns of CPU per request; at 100,000 requests/s that \
         is {:.2} % of one core",
        cpu * 1e5 / 1e9 * 100.0
    );
}

//! Which ISA paths the codec tests exercised on this machine.
//!
//! The property and compatibility tests (`properties.rs`, `isal_compat.rs`, `errors.rs`) run
//! every path in `Isa::available()`, that is, the paths this CPU has: on a machine without
//! AVX-512 or GFNI those kernels go untested. This test says so on every run, written straight
//! to the process's standard error so that the test harness's capture does not hide it, e.g.
//!
//! ```text
//! codec ISA paths tested on this CPU: scalar sse2 avx2; NOT tested (this CPU lacks them): avx512 gfni
//! ```
//!
//! `RAIDFORGE_REQUIRE_ISA=avx512,gfni` (names as `Isa::name` gives them, or `all`) makes the
//! absence of a listed path a failure, for a runner known to have it.

use std::io::Write as _;

use codec::Isa;

#[test]
fn report_the_isa_paths_tested_and_untested() {
    let (tested, untested): (Vec<Isa>, Vec<Isa>) =
        Isa::ALL.iter().partition(|isa| isa.is_available());
    let names = |v: &[Isa]| v.iter().map(|isa| isa.name()).collect::<Vec<_>>().join(" ");
    let line = if untested.is_empty() {
        format!(
            "codec ISA paths tested on this CPU: {} (every path)",
            names(&tested)
        )
    } else {
        format!(
            "codec ISA paths tested on this CPU: {}; NOT tested (this CPU lacks them): {}",
            names(&tested),
            names(&untested)
        )
    };
    // Not `eprintln!`: the harness captures that for passing tests.
    let _ = writeln!(std::io::stderr(), "{line}");

    assert!(
        tested.contains(&Isa::Scalar),
        "the scalar reference always runs"
    );
    let required = std::env::var("RAIDFORGE_REQUIRE_ISA").unwrap_or_default();
    for name in required.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let wanted: Vec<Isa> = if name == "all" {
            Isa::ALL.to_vec()
        } else {
            let isa = Isa::ALL
                .into_iter()
                .find(|isa| isa.name() == name)
                .unwrap_or_else(|| {
                    panic!("RAIDFORGE_REQUIRE_ISA names {name:?}, which is no ISA path")
                });
            vec![isa]
        };
        for isa in wanted {
            assert!(
                isa.is_available(),
                "RAIDFORGE_REQUIRE_ISA requires {} but {line}",
                isa.name()
            );
        }
    }
}

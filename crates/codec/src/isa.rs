//! Instruction-set selection.

use std::sync::atomic::{AtomicU8, Ordering};

/// An implementation path for the kernels. [`Isa::Scalar`] exists everywhere
/// and is the reference; the others exist on x86-64 CPUs with the named
/// features (checked at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Isa {
    /// Plain Rust, one byte at a time with table lookups: the specification.
    Scalar,
    /// 128-bit SSE2 (every x86-64 CPU). Constant multiplication is
    /// shift-and-add, so recovery and Q updates are slowish here.
    Sse2,
    /// 256-bit AVX2; constant multiplication with `VPSHUFB` nibble tables.
    Avx2,
    /// 512-bit AVX-512F + AVX-512BW; constant multiplication with `VPSHUFB`.
    Avx512,
    /// 512-bit AVX-512F + AVX-512BW + GFNI; constant multiplication (and
    /// Q generation) with `GF2P8AFFINEQB` bit matrices for polynomial 0x11d.
    Gfni,
}

impl Isa {
    /// Every path, slowest first.
    pub const ALL: [Isa; 5] = [Isa::Scalar, Isa::Sse2, Isa::Avx2, Isa::Avx512, Isa::Gfni];

    /// A short lowercase name ("scalar", "sse2", "avx2", "avx512", "gfni").
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Sse2 => "sse2",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Gfni => "gfni",
        }
    }

    /// Whether this CPU can run the path.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => std::arch::is_x86_feature_detected!("sse2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Gfni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("gfni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest available path (detected once, then cached).
    pub fn best() -> Isa {
        static BEST: AtomicU8 = AtomicU8::new(u8::MAX);
        let cached = BEST.load(Ordering::Relaxed);
        if let Some(&isa) = Isa::ALL.get(cached as usize) {
            return isa;
        }
        let (index, isa) = Isa::ALL
            .iter()
            .enumerate()
            .rev()
            .find(|(_, isa)| isa.is_available())
            .map(|(i, &isa)| (i, isa))
            .unwrap_or((0, Isa::Scalar));
        BEST.store(index as u8, Ordering::Relaxed);
        isa
    }

    /// The available paths, slowest first (always starts with `Scalar`).
    pub fn available() -> impl Iterator<Item = Isa> {
        Isa::ALL.into_iter().filter(|isa| isa.is_available())
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

//! The fast hasher raidcore's hot tables use: `layout`'s (see [`layout::fxhash`] for why not
//! `std`'s SipHash), re-exported for the crates above raidcore.

pub use layout::fxhash::{FxBuildHasher, FxHashMap, FxHashSet, FxHasher};

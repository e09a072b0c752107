//! The library half of the command line: the argument definitions and the JSON of the data
//! commands (`layout`, `sim`, `model mttdl`, `trace read`, `reproduce`, `create`), shared by the
//! `raidforge` binary and the Python bindings (`crates/pyraidforge`), so that a notebook and
//! the CLI give the same answer for the same input. Printing tables stays beside each
//! command; every decision is made by the library crates (layout, raidcore, sim, repro, dev).

pub mod advise_cmd;
pub mod layout_cmd;
pub mod model_cmd;
pub mod pool_args;
pub mod reproduce_cmd;
pub mod sim_cmd;
pub mod trace_cmd;

//! The coverage manifest: every table and figure of the five seed documents, with what
//! `raidforge reproduce` does about it.
//!
//! [`DOCUMENTS`] is data kept beside the experiments: one [`Item`] per table or figure (and per
//! result given only in the text where a reproduction checks it), each with a [`Status`]:
//! reproduced with numbers (the experiments holding its rows), reproduced qualitatively (the
//! claim checked and why there are no numbers to compare), not reproducible here (the missing
//! thing, and the stand-in we use instead, if any), or not a result at all (a diagram, the
//! testbed, an input). [`render`] turns the manifest and the reports of a run
//! ([`Summary::from_json`], read from `NAME.json`) into `COVERAGE.md`: per item its rows, how
//! many carry a published value and how many of those are within [`crate::TOLERANCE`].
//!
//! `tests/coverage.rs` checks that every experiment the code runs is named here, that every
//! name here is an experiment, and that the committed `docs/reproduce/COVERAGE.md` is what
//! [`render`] makes of the committed full-run reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Row;

/// What the reproduction does about a table or figure.
#[derive(Clone, Copy, Debug)]
pub enum Status {
    /// Regenerated, with the paper's numbers beside ours: the experiments holding the rows.
    Reproduced {
        /// Experiment ids of the item's reproduction.
        experiments: &'static [&'static str],
    },
    /// Regenerated, but the paper gives no numbers to compare (a chart only, or numbers that
    /// depend on what we cannot rebuild): the claim checked and why there are no numbers.
    Qualitative {
        /// Experiment ids of the item's reproduction.
        experiments: &'static [&'static str],
        /// The claim the experiments check.
        claim: &'static str,
        /// Why the comparison has no numbers.
        why: &'static str,
    },
    /// Cannot be regenerated here.
    NotReproducible {
        /// The specific missing thing (a file system, an application stack, a trace).
        missing: &'static str,
        /// What we use instead, if anything (empty: nothing).
        stand_in: &'static str,
        /// Experiments running the stand-in.
        experiments: &'static [&'static str],
    },
    /// Not a result: a diagram, the testbed, an input, a code listing.
    NotAResult {
        /// What it is (and where the project uses it, if it does).
        what: &'static str,
    },
}

impl Status {
    /// The experiments the item refers to.
    pub fn experiments(&self) -> &'static [&'static str] {
        match self {
            Status::Reproduced { experiments }
            | Status::Qualitative { experiments, .. }
            | Status::NotReproducible { experiments, .. } => experiments,
            Status::NotAResult { .. } => &[],
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Status::Reproduced { .. } => "reproduced",
            Status::Qualitative { .. } => "reproduced qualitatively",
            Status::NotReproducible { .. } => "not reproducible here",
            Status::NotAResult { .. } => "not a result",
        }
    }
}

/// One table or figure (or a result given in the text) of a seed document.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    /// As the document names it: `Table 5`, `Figure 3.10`, `Section 6.1 (text)`.
    pub name: &'static str,
    /// What it shows.
    pub shows: &'static str,
    /// The `raidforge reproduce` name whose experiments it refers to (empty when none).
    pub reproduction: &'static str,
    /// What we do about it.
    pub status: Status,
    /// Workloads or devices standing in for ones we do not have (empty: none), said here so
    /// that no result from a stand-in reads as the paper's.
    pub stand_in: &'static str,
}

/// A seed document and its items.
#[derive(Clone, Copy, Debug)]
pub struct Document {
    /// File prefix in the seed folder (`000` .. `004`).
    pub seed: &'static str,
    /// The document.
    pub title: &'static str,
    /// Its tables and figures in order.
    pub items: &'static [Item],
}

const fn rep(
    reproduction: &'static str,
    name: &'static str,
    shows: &'static str,
    experiments: &'static [&'static str],
) -> Item {
    Item {
        name,
        shows,
        reproduction,
        status: Status::Reproduced { experiments },
        stand_in: "",
    }
}

const fn qual(
    reproduction: &'static str,
    name: &'static str,
    shows: &'static str,
    experiments: &'static [&'static str],
    claim: &'static str,
    why: &'static str,
) -> Item {
    Item {
        name,
        shows,
        reproduction,
        status: Status::Qualitative {
            experiments,
            claim,
            why,
        },
        stand_in: "",
    }
}

const fn not_result(name: &'static str, shows: &'static str, what: &'static str) -> Item {
    Item {
        name,
        shows,
        reproduction: "",
        status: Status::NotAResult { what },
        stand_in: "",
    }
}

const fn missing(
    reproduction: &'static str,
    name: &'static str,
    shows: &'static str,
    missing: &'static str,
    stand_in: &'static str,
    experiments: &'static [&'static str],
) -> Item {
    Item {
        name,
        shows,
        reproduction,
        status: Status::NotReproducible {
            missing,
            stand_in,
            experiments,
        },
        stand_in: "",
    }
}

const fn with_stand_in(mut item: Item, stand_in: &'static str) -> Item {
    item.stand_in = stand_in;
    item
}

const SYN_FIN: &str = "Financial1/2: synthetic workloads with the SPC traces' published \
                       statistics (sim::SyntheticConfig::financial*_synthetic)";

/// Seed 000: S2-RAID.
const S2RAID: &[Item] = &[
    not_result(
        "Figure 1",
        "S2-RAID5 layout, R = 9, G = 3",
        "layout diagram; a golden test of the layout crate (table M)",
    ),
    not_result(
        "Figure 2",
        "S2-RAID10 layout on 8 disks",
        "layout diagram; a golden test of the layout crate",
    ),
    not_result(
        "Figure 3",
        "sub-array to LUN mapping",
        "diagram; the layout's address order",
    ),
    not_result(
        "Figure 4",
        "prototype software structure",
        "diagram of the iSCSI prototype",
    ),
    not_result(
        "Table 1",
        "storage server hardware",
        "testbed; its disk is sim::Drive::SeagateSt3500320as",
    ),
    not_result("Table 2", "client hardware", "testbed"),
    not_result("Table 3", "software versions", "testbed"),
    not_result(
        "Table 4",
        "SPC trace statistics",
        "input: the synthetic Financial stand-ins match it",
    ),
    with_stand_in(
        rep(
            "s2raid",
            "Table 5",
            "RAID5 online/offline rebuild time and response time",
            &["table5"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        rep(
            "s2raid",
            "Table 6",
            "RAID10 online/offline rebuild time and response time",
            &["table6"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        rep(
            "s2raid",
            "Table 7",
            "RAID5 normal and degraded response time",
            &["table7"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        rep(
            "s2raid",
            "Figure 5",
            "rebuild speed thresholds 1/10/50 MB/s",
            &["fig5"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        rep("s2raid", "Figure 6", "number of spare disks", &["fig6"]),
        SYN_FIN,
    ),
    with_stand_in(
        rep(
            "s2raid",
            "Figure 7",
            "online rebuild under TPC-C, PostMark and TPC-W",
            &["fig7"],
        ),
        "TPC-C: the repository's real TPC-C block trace (tpcc-small.mqsim); PostMark and \
         TPC-W: synthetic workloads described from the benchmarks' settings",
    ),
    qual(
        "s2raid",
        "Figure 8",
        "IOMeter sequential and random write rates vs block size",
        &["fig8"],
        "S2-RAID5 writes faster than RAID5, sequential and random",
        "the figure is a chart; the text gives no values",
    ),
];

/// Seed 001: RAID+.
const RAIDPLUS: &[Item] = &[
    not_result("Figure 1", "pool organisations", "diagram"),
    not_result(
        "Figure 2",
        "RAID+ template n = 5, k = 3",
        "layout; a golden test of the layout crate",
    ),
    not_result(
        "Figure 3",
        "read- and write-friendly stripe order",
        "layout diagram; layout::Order",
    ),
    not_result(
        "Figure 4",
        "interim layout after one failure",
        "layout; a golden test of the layout crate",
    ),
    rep(
        "raidplus",
        "Table 1",
        "model of throughput, rebuild time and MTTDL of RAID-5C, RAID-50 and RAID+",
        &["table1"],
    ),
    rep(
        "raidplus",
        "Table 2",
        "offline rebuild time, 56+3 and 28+3",
        &["table2"],
    ),
    rep(
        "raidplus",
        "Section 6.1 (text)",
        "rebuild-load CoV within a template",
        &["cov"],
    ),
    rep(
        "raidplus",
        "Section 5.3 (text)",
        "data distribution CoV as disks keep failing",
        &["multifail"],
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Figure 5",
            "TPC-C online rebuild timeline",
            &["fig5"],
        ),
        "TPC-C: the repository's real TPC-C block trace replayed closed-loop (no transactions: \
         requests stand for them)",
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Table 3",
            "online rebuild: application and rebuild speed-ups over RAID-50",
            &["table3"],
        ),
        "TPC-C trace as Figure 5; FaceBook, GridGraph and MongoDB: synthetic workloads \
         described from the paper's characterisation",
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Figure 6",
            "4-volume pool, online rebuild, per-volume latency",
            &["fig6"],
        ),
        "MSR traces: synthetic stand-ins; Fin2 synthetic; WebS_2 the real WebSearch head",
    ),
    qual(
        "raidplus",
        "Figure 7",
        "fio sequential read/write throughput vs request size",
        &["fig7"],
        "RAID+ at least RAID-50's sequential throughput, RAID-5C the lowest",
        "the figure is a chart; the text gives no values",
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Figure 8",
            "latency under the prxy_1 and usr_1 traces",
            &["fig8"],
        ),
        "prxy_1 and usr_1 (MSR Cambridge, not redistributable): synthetic workloads with their \
         published read/write mix and sizes",
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Table 4",
            "normal application performance",
            &["table4"],
        ),
        "as Table 3",
    ),
    with_stand_in(
        rep(
            "raidplus",
            "Figure 9",
            "weighted speed-up of 4-workload mixes",
            &["fig9"],
        ),
        "the 8 MSR/SPC traces: synthetic stand-ins of different intensity and locality",
    ),
    rep(
        "raidplus",
        "Figure 10(a)",
        "random throughput and rebuild time vs pool size n",
        &["fig10a", "fig10a-io"],
    ),
    qual(
        "raidplus",
        "Figure 10(b)",
        "random throughput and rebuild time vs stripe width k",
        &["fig10b", "fig10b-io"],
        "RAID+'s rebuild time grows about linearly with k; random throughput mostly independent of k",
        "the figure is a chart; the text gives no values for it",
    ),
    qual(
        "raidplus",
        "Figure 10(c)",
        "random throughput and rebuild time vs block size",
        &["fig10c"],
        "block size barely changes random throughput; larger blocks rebuild faster",
        "the figure is a chart; the text gives no values",
    ),
    rep(
        "raidplus",
        "Figure 10(d)",
        "sequential bandwidth of the stripe orderings",
        &["fig10d"],
    ),
];

/// Seed 002: lazy parity update.
const LPU: &[Item] = &[
    not_result(
        "Figure 1",
        "RM2 placement and redundancy matrix",
        "layout; golden tests of the layout crate",
    ),
    not_result(
        "Figure 2",
        "FPG and BPG, N = 8",
        "layout; raidcore::LazyGroups tests",
    ),
    not_result(
        "Figure 3",
        "lazy parity update",
        "diagram of raidcore::plan_write_lazy",
    ),
    not_result("Figure 4", "Markov chain", "model diagram; repro::mttdl"),
    qual(
        "lpu",
        "Figure 5",
        "MTTDL of RAID5 and RAID6 vs disks",
        &["fig5"],
        "RAID6's MTTDL far above RAID5's at every width (>= 50x); MTTDL falls as disks are added",
        "the figure is a chart; the text gives no values for it",
    ),
    rep(
        "lpu",
        "Figure 6",
        "MTTDL with lazy parity update",
        &["fig6"],
    ),
    rep(
        "lpu",
        "Figure 7",
        "throughput vs queue depth, RAID5 / RM2 / RM2+LPU",
        &["fig7"],
    ),
];

/// Seed 003: IDO.
const IDO: &[Item] = &[
    not_result("Figure 1", "on-line reconstruction", "diagram"),
    not_result("Figure 2", "reactive vs proactive", "diagram"),
    not_result("Figure 3", "request-based vs zone-based", "diagram"),
    qual(
        "ido",
        "Figure 4",
        "user I/O removed by reactive/proactive, request/zone variants",
        &["fig11"],
        "proactive zone-based redirection (IDO) removes more user I/O than reactive \
         request-based (WorkOut)",
        "the two hybrid variants (reactive-zone, proactive-request) are not policies of \
         raidcore::ido; the two ends are measured in fig11 under the rebuild, not on trace halves",
    ),
    not_result("Figure 5", "architecture", "diagram"),
    not_result(
        "Figure 6",
        "zone table and D-Map",
        "data structures; raidcore::ido",
    ),
    not_result(
        "Figure 7",
        "hot data identification",
        "algorithm; raidcore::ido::ZoneTable",
    ),
    not_result(
        "Figure 8",
        "reconstruction and migration",
        "algorithm; raidcore::ido",
    ),
    not_result(
        "Table 1",
        "feature comparison of PRO, WorkOut, VDF, IDO",
        "qualitative design comparison",
    ),
    not_result(
        "Table 2",
        "trace statistics",
        "input: the synthetic Financial stand-ins match the published statistics",
    ),
    with_stand_in(
        rep(
            "ido",
            "Figure 9",
            "RAID5 rebuild time and response time, 4 policies",
            &["fig9"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 10",
            "response time over the rebuild, WorkOut / VDF / IDO",
            &["fig10"],
            "IDO's response time improves earlier and its rebuild ends first",
            "timelines drawn as charts; no values in the text",
        ),
        SYN_FIN,
    ),
    with_stand_in(
        rep(
            "ido",
            "Figure 11",
            "share of requests redirected",
            &["fig11"],
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 12",
            "RAID6 rebuild time and response time",
            &["fig12"],
            "IDO beats PR, WorkOut and VDF on RAID6",
            "the text gives only averages over four traces, one of which (Proj) we do not have",
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 13",
            "minimum rebuild bandwidth 1/10/100 MB/s",
            &["fig13"],
            "rebuild time falls as the minimum bandwidth rises",
            "chart only",
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 14",
            "zone size 384 KiB .. 24 MiB",
            &["fig14"],
            "very small and very large zones are worse than 3-12 MiB",
            "chart only",
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 15",
            "4 and 7 disks",
            &["fig15"],
            "rebuild time falls with more disks; response time barely changes",
            "chart only",
        ),
        SYN_FIN,
    ),
    with_stand_in(
        qual(
            "ido",
            "Figure 16",
            "local vs remote surrogate",
            &["fig16"],
            "rebuild time insensitive to the surrogate's location, response time higher remote",
            "chart only",
        ),
        SYN_FIN,
    ),
    missing(
        "ido",
        "Figure 17",
        "re-synchronization time and response time",
        "a re-synchronization pass in the simulator (MD's resync after an unclean shutdown: \
         every stripe read and its parity rewritten, throttled like a rebuild, with IDO \
         redirecting user I/O meanwhile); the engine resynchronises at open \
         (raidcore::resync_cycle) but neither the simulator nor raidcore::ido schedules one \
         against user I/O",
        "the rebuild runs of Figures 9 and 11, which the paper says behave \"very similarly\"",
        &["fig9", "fig11"],
    ),
];

/// Seed 004: the thesis.
const THESIS: &[Item] = &[
    not_result(
        "Figures 2.1-2.6",
        "background: RAID1/4/5, declustering, sparing, parity logging",
        "diagrams",
    ),
    qual(
        "raid4s",
        "Figure 3.1",
        "RAID0 vs RAID5 small-write throughput",
        &["fig3.1"],
        "parity costs RAID5 most of RAID0's small-write throughput",
        "chart only",
    ),
    qual(
        "raid4s",
        "Figure 3.2",
        "I/Os of small (RMW) and large (RCW) writes",
        &["fig3.2"],
        "RMW costs 2(m+1) I/Os; RCW reads the rest of the stripe",
        "a diagram with formulas; we count the planner's I/Os against them",
    ),
    rep(
        "raid4s",
        "Figure 3.3",
        "RAID4S over RAID5 (introduction)",
        &["fig3.14"],
    ),
    not_result("Figure 3.4", "parity bottleneck", "diagram"),
    not_result(
        "Figure 3.5",
        "RAID4/5/4S/4N/5S/F5 layouts",
        "diagram; the arrays of the chapter-3 experiments",
    ),
    not_result(
        "Figure 3.6",
        "SSD and HDD prices",
        "input to fig3.7's cost model",
    ),
    rep(
        "raid4s",
        "Figure 3.7",
        "cost and throughput of RAID5 / RAID4S / RAIDF5",
        &["fig3.7"],
    ),
    not_result(
        "Table 3.1",
        "device power",
        "input to the power model (fig3.8-3.10)",
    ),
    not_result(
        "Table 3.2",
        "device throughput and seek time",
        "input to the power and disk-time models",
    ),
    qual(
        "raid4s",
        "Figure 3.8",
        "power of a random read workload vs share on SSD",
        &["fig3.8"],
        "power falls as more data moves to the SSD",
        "chart only; our model is the thesis's (Tables 3.1-3.2 figures)",
    ),
    qual(
        "raid4s",
        "Figure 3.9",
        "power of a sequential read workload vs share on SSD",
        &["fig3.9"],
        "power falls as more data moves to the SSD; random costs the disk more",
        "chart only",
    ),
    rep(
        "raid4s",
        "Figure 3.10",
        "power of a two-device mirror, disk+disk vs disk+SSD",
        &["fig3.10"],
    ),
    rep(
        "raid4s",
        "Figure 3.11",
        "I/Os per disk per small write (chart of Table 3.3)",
        &["table3.3"],
    ),
    rep(
        "raid4s",
        "Table 3.3",
        "I/Os per disk per small write, RAID4 vs RAID4S",
        &["table3.3"],
    ),
    qual(
        "raid4s",
        "Figure 3.12",
        "disk time breakdown, 1.5 MB/s random writes on RAID0",
        &["fig3.12"],
        "wider stripes leave each disk idle longer",
        "chart only",
    ),
    qual(
        "raid4s",
        "Figure 3.13",
        "disk time breakdown, 50 MB/s sequential writes on RAID0",
        &["fig3.13"],
        "wider stripes leave each disk idle longer",
        "chart only",
    ),
    rep(
        "raid4s",
        "Figures 3.14-3.15",
        "random-write throughput, RAID5/4/4S/5S",
        &["fig3.14"],
    ),
    qual(
        "raid4s",
        "Figure 3.16",
        "throughput of RAID0, RAID5, RAID4S and all-SSD RAIDF5",
        &["fig3.16"],
        "the SSDs gain most on small random writes",
        "chart only",
    ),
    rep(
        "raid4s",
        "Figures 3.17-3.18",
        "unaligned 1-16 KiB random writes",
        &["fig3.17"],
    ),
    qual(
        "raid4s",
        "Figure 3.19",
        "reads per device, 64 KiB writes",
        &["fig3.19"],
        "RAID4-variant parity devices read once per write",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.20",
        "reads per device, 128 KiB writes",
        &["fig3.20"],
        "half-stripe writes never read parity",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.21",
        "reads per device, 256 KiB writes",
        &["fig3.21"],
        "full-stripe writes read nothing",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.22",
        "writes per device, 64 KiB writes",
        &["fig3.22"],
        "RAID4-variant parity devices write most",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.23",
        "writes per device, 128 KiB writes",
        &["fig3.23"],
        "parity devices write more than data devices",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.24",
        "writes per device, 256 KiB writes",
        &["fig3.24"],
        "every device writes the same",
        "counts drawn as charts",
    ),
    qual(
        "raid4s",
        "Figure 3.25",
        "64 KiB random I/O vs read share",
        &["fig3.25"],
        "RAID4S leads up to 90 % reads; distributed parity wins read-only",
        "chart only",
    ),
    missing(
        "raid4s",
        "Figure 3.26",
        "random writes through ext3",
        "an ext3 file system with data journaling and the page cache above the array",
        "the raw-device sweep (fig3.14)",
        &["fig3.14"],
    ),
    missing(
        "",
        "Section 3.8 (text)",
        "TPC-C on PostgreSQL: 12.6 transactions per minute on every layout",
        "the TPCC-UVa benchmark on PostgreSQL and ext3 (transactions need the database)",
        "",
        &[],
    ),
    rep(
        "raid4s",
        "Figures 3.27-3.28",
        "degraded random-write throughput",
        &["fig3.27"],
    ),
    with_stand_in(
        rep(
            "raid4s",
            "Figures 3.29-3.30",
            "Financial1 replay without a file system",
            &["fig3.29"],
        ),
        "Financial1: the synthetic workload with its published statistics, all ASUs as one \
         stream (per-ASU behaviour unknown)",
    ),
    missing(
        "raid4s",
        "Figures 3.31-3.32",
        "Financial1 replay through ext3",
        "ext3 and the real per-ASU Financial1 trace",
        "the synthetic Financial1-like replay without a file system (fig3.29)",
        &["fig3.29"],
    ),
    qual(
        "raid4s",
        "Figure 4.1",
        "RAID4S-modthresh vs RAID4S, 40-168 KiB",
        &["fig4.1"],
        "none checked: the curves are regenerated to read against the figure",
        "the figure is a chart; the thesis gives no values for it",
    ),
    rep(
        "raid4s",
        "Figure 4.2",
        "RAID4S vs RAID5 vs all-SSD RAID5S, aligned writes",
        &["fig4.2"],
    ),
    rep(
        "raid4s",
        "Figure 4.3",
        "RAID4S at 64 and 128 KiB",
        &["fig4.3"],
    ),
    not_result("Figure 4.4", "medium writes in parallel", "diagram"),
    rep(
        "raid4s",
        "Figure 4.5",
        "rmw/rcw read counts of 64 and 128 KiB writes",
        &["fig4.5"],
    ),
    not_result(
        "Figures 4.6-4.8",
        "MD debugging output and the raid5.c threshold",
        "code and logs; raidcore::WritePolicy::Modthresh",
    ),
    not_result("Figure 4.9", "RAID5 / RAID4S / RAID5S setups", "diagram"),
    rep(
        "raid4s",
        "Figure 4.10",
        "speed-up of RAID4S-modthresh over RAID4S",
        &["fig4.10"],
    ),
    qual(
        "raid4s",
        "Figure 4.11",
        "RAID4S-modthresh vs RAID5 and RAID5S",
        &["fig4.11"],
        "modthresh beats both on medium writes; RAID5S overtakes past 128 KiB",
        "chart only",
    ),
    qual(
        "raid4s",
        "Figure 4.12",
        "RAID4S-modified (always RMW) vs modthresh",
        &["fig4.12"],
        "identical up to 128 KiB",
        "chart only",
    ),
    qual(
        "raid4s",
        "Figure 4.13",
        "modthresh vs RAID4S, aligned, without 256 KiB",
        &["fig4.13"],
        "modthresh gains at 128 KiB only",
        "chart only",
    ),
    rep(
        "raid4s",
        "Figure 4.14",
        "modthresh vs RAID5 and RAID5S, aligned, without 256 KiB",
        &["fig4.14"],
    ),
    qual(
        "raid4s",
        "Figure 4.15",
        "modthresh vs RAID4S, aligned 2-256 KiB",
        &["fig4.15"],
        "no loss at either end of the range",
        "chart only",
    ),
    qual(
        "raid4s",
        "Figure 4.16",
        "modthresh vs RAID5 and RAID5S, aligned 2-256 KiB",
        &["fig4.16"],
        "modthresh beats both on small writes",
        "chart only",
    ),
    qual(
        "raide",
        "Figure 5.1",
        "reads per device of RAID5 writes up to 1 MiB",
        &["fig5.1"],
        "reads are uneven at 320, 640 and 960 KiB",
        "iostat counts drawn as a chart",
    ),
    not_result("Figure 5.2", "stripe edges", "diagram"),
    rep(
        "raide",
        "Table 5.1",
        "rmw/rcw counts of 2-chunk writes by start position",
        &["table5.1"],
    ),
    qual(
        "raide",
        "Figure 5.3",
        "small writes a write needs, by start and size",
        &["fig5.3"],
        "the thesis's decomposition agrees with the planner's plans for every start and size",
        "an algorithm; we compare its answer with the planner's for every case",
    ),
    qual(
        "raide",
        "Figure 5.4",
        "RAIDE vs RAID5N random-write throughput",
        &["fig5.4"],
        "SSDs at the edges beat SSDs in the middle at 320 and 960 KiB",
        "chart only",
    ),
    not_result(
        "Figure 6.1",
        "weighted parity placement listing",
        "algorithm; layout::raidh (its text examples are golden tests)",
    ),
    rep(
        "raidh",
        "Table 6.1",
        "read/write share per device, weights {0,0,1,1,2}",
        &["table6.1"],
    ),
    qual(
        "raidh",
        "Figure 6.2",
        "RAIDH benefit vs stripe width, one fast device",
        &["fig6.2"],
        "the benefit grows with width until the fast device saturates",
        "chart only",
    ),
    qual(
        "raidh",
        "Figure 6.3",
        "RAIDH benefit vs heterogeneity, width 6",
        &["fig6.3"],
        "the benefit shrinks as the array grows more homogeneous",
        "chart only",
    ),
    not_result(
        "Figure 6.4",
        "RAIDH sector mapping listing",
        "code; layout::raidh",
    ),
    not_result("Figure 6.5", "RAIDH / RAID5SS / RAID5NSS setups", "diagram"),
    qual(
        "raidh",
        "Figure 6.6",
        "RAIDH vs RAID5SS vs RAID5NSS, 64 KiB chunks",
        &["fig6.6"],
        "RAIDH matches or beats both RAID5 placements",
        "chart only",
    ),
    qual(
        "raidh",
        "Figure 6.7",
        "RAIDH vs RAID5SS, 4 KiB chunks, 4-64 KiB writes",
        &["fig6.7"],
        "RAIDH slightly ahead at most sizes",
        "chart only",
    ),
    with_stand_in(
        qual(
            "raidh",
            "Figures 6.8-6.9",
            "Financial1 replay, RAIDH vs RAID5SS per ASU",
            &["fig6.8"],
            "RAIDH a little ahead of RAID5SS",
            "per-ASU results need the real Financial1 trace",
        ),
        "Financial1: synthetic, all ASUs as one stream",
    ),
    with_stand_in(
        rep(
            "raidh",
            "Figure 6.10 and 7.1",
            "Financial1 replay: RAID4S and RAIDH over RAID5",
            &["fig6.10"],
        ),
        "Financial1: synthetic, all ASUs as one stream",
    ),
    rep(
        "raidh",
        "Section 6.5 (text)",
        "performance model vs measurement",
        &["model6.5"],
    ),
];

/// The five seed documents.
pub const DOCUMENTS: &[Document] = &[
    Document {
        seed: "000",
        title: "S2-RAID (Wan, Wang, Yang, Xie)",
        items: S2RAID,
    },
    Document {
        seed: "001",
        title: "RAID+ (Zhang et al., FAST'18)",
        items: RAIDPLUS,
    },
    Document {
        seed: "002",
        title: "Lazy Parity Update for RAID6 (Nam, Kim, Choe, Park)",
        items: LPU,
    },
    Document {
        seed: "003",
        title: "IDO (Wu, Jiang, Mao, LISA'12)",
        items: IDO,
    },
    Document {
        seed: "004",
        title: "Incorporating SSDs into distributed storage systems (Wacha, thesis, 2012)",
        items: THESIS,
    },
];

/// What [`render`] needs of one experiment of a report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExperimentSummary {
    /// All rows.
    pub rows: usize,
    /// Rows with a published value.
    pub published: usize,
    /// Of those, within [`crate::TOLERANCE`].
    pub within: usize,
    /// Claims checked.
    pub claims: usize,
    /// Claims that hold.
    pub held: usize,
}

/// What [`render`] needs of one report (`NAME.json`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// The reproduction's name.
    pub name: String,
    /// A `--quick` run.
    pub quick: bool,
    /// Wall time of the run, seconds.
    pub runtime_s: f64,
    /// Per experiment id, in the report's order.
    pub experiments: Vec<(String, ExperimentSummary)>,
}

impl Summary {
    /// Reads the JSON form of a report ([`crate::Report::to_json`]).
    pub fn from_json(v: &serde_json::Value) -> anyhow::Result<Summary> {
        let name = v["name"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("not a reproduction report: no \"name\""))?
            .to_string();
        let bad = |what: &str| anyhow::anyhow!("report {name}: {what}");
        let mut experiments = Vec::new();
        for e in v["experiments"]
            .as_array()
            .ok_or_else(|| bad("no \"experiments\" array"))?
        {
            let id = e["id"]
                .as_str()
                .ok_or_else(|| bad("an experiment without id"))?;
            let mut s = ExperimentSummary::default();
            for r in e["rows"].as_array().ok_or_else(|| bad("rows"))? {
                s.rows += 1;
                let published = r["published"].as_f64();
                let ours = r["ours"]
                    .as_f64()
                    .ok_or_else(|| bad(&format!("{id}: a row without \"ours\"")))?;
                if published.is_some() {
                    s.published += 1;
                    if !Row::new("", published, ours, "").differs() {
                        s.within += 1;
                    }
                }
            }
            for c in e["claims"].as_array().ok_or_else(|| bad("claims"))? {
                s.claims += 1;
                if c["holds"].as_bool() == Some(true) {
                    s.held += 1;
                }
            }
            experiments.push((id.to_string(), s));
        }
        Ok(Summary {
            name,
            quick: v["quick"].as_bool().unwrap_or(false),
            runtime_s: v["runtime_s"].as_f64().unwrap_or(0.0),
            experiments,
        })
    }

    fn get(&self, id: &str) -> Option<&ExperimentSummary> {
        self.experiments
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, s)| s)
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.0} %", 100.0 * a as f64 / b as f64)
    }
}

/// `COVERAGE.md` from the manifest and the reports (by reproduction name). Every experiment the
/// manifest names must be in its report: an error says which is missing.
pub fn render(reports: &BTreeMap<String, Summary>) -> anyhow::Result<String> {
    let mut o = String::new();
    let _ = writeln!(o, "# Coverage of the seed documents\n");
    let _ = writeln!(
        o,
        "Generated by `raidforge reproduce coverage` from the manifest in \
         `crates/repro/src/coverage.rs` and the reports in this folder. Every table and figure \
         of the five seed documents is listed (and results the text gives where an experiment \
         checks them), with one status:\n\n\
         - **reproduced**: regenerated by the named experiments, published values beside ours; \
         *rows* counts the experiments' rows, how many have a published value, and how many of \
         those are within {:.0} % of it (rows outside carry a note in the report);\n\
         - **reproduced qualitatively**: regenerated, the paper's claim checked, but no numbers \
         to compare (the reason is given);\n\
         - **not reproducible here**: what is missing, and the stand-in we run instead, if any;\n\
         - **not a result**: diagrams, the testbed, inputs, code listings.\n\n\
         Stand-ins (synthetic workloads, a trace standing for an application) are named on every \
         item that uses them.\n",
        crate::TOLERANCE * 100.0
    );
    // Totals over the reports (each experiment once).
    let (mut exps, mut rows, mut published, mut within, mut claims, mut held) = (0, 0, 0, 0, 0, 0);
    let mut runs = Vec::new();
    for (name, s) in reports {
        runs.push(format!(
            "`{name}` {}{:.0} s",
            if s.quick { "(quick) " } else { "" },
            s.runtime_s
        ));
        for (_, e) in &s.experiments {
            exps += 1;
            rows += e.rows;
            published += e.published;
            within += e.within;
            claims += e.claims;
            held += e.held;
        }
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for d in DOCUMENTS {
        for i in d.items {
            *counts.entry(i.status.label()).or_default() += 1;
        }
    }
    let _ = writeln!(
        o,
        "Totals: {exps} experiments, {rows} rows, {published} with a published value, {within} \
         of them within {:.0} % ({}); {held} of {claims} claims hold. Items: {}. Runs: {}.\n",
        crate::TOLERANCE * 100.0,
        pct(within, published),
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        runs.join(", ")
    );
    for d in DOCUMENTS {
        let _ = writeln!(o, "## {} {}\n", d.seed, d.title);
        let _ = writeln!(
            o,
            "| item | shows | status | experiments | rows (published, within) | notes |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|");
        for i in d.items {
            let exps = i.status.experiments();
            let (mut r, mut p, mut w) = (0, 0, 0);
            for id in exps {
                let rep = reports.get(i.reproduction).ok_or_else(|| {
                    anyhow::anyhow!(
                        "no report of `{}` (needed by {} {}): run `raidforge reproduce {}` into \
                         the same folder first",
                        i.reproduction,
                        d.seed,
                        i.name,
                        i.reproduction
                    )
                })?;
                let e = rep.get(id).ok_or_else(|| {
                    anyhow::anyhow!(
                        "the report of `{}` has no experiment {id} (needed by {} {}): is it \
                         older than the code?",
                        i.reproduction,
                        d.seed,
                        i.name
                    )
                })?;
                r += e.rows;
                p += e.published;
                w += e.within;
            }
            let exp_text = if exps.is_empty() {
                "-".to_string()
            } else {
                exps.iter()
                    .map(|e| format!("`{} {e}`", i.reproduction))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let rows_text = if exps.is_empty() {
                "-".to_string()
            } else if p == 0 {
                format!("{r} (none published)")
            } else {
                format!("{r} ({p}, {w}: {})", pct(w, p))
            };
            let mut notes = match i.status {
                Status::Reproduced { .. } => String::new(),
                Status::Qualitative { claim, why, .. } => {
                    format!("Claim checked: {claim}. No numbers: {why}.")
                }
                Status::NotReproducible {
                    missing, stand_in, ..
                } => {
                    if stand_in.is_empty() {
                        format!("Missing: {missing}. No stand-in.")
                    } else {
                        format!("Missing: {missing}. Stand-in: {stand_in}.")
                    }
                }
                Status::NotAResult { what } => format!("{what}."),
            };
            if !i.stand_in.is_empty() {
                if !notes.is_empty() {
                    notes.push(' ');
                }
                let _ = write!(notes, "Stand-in: {}.", i.stand_in);
            }
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                cell(i.name),
                cell(i.shows),
                i.status.label(),
                exp_text,
                rows_text,
                cell(&notes)
            );
        }
        o.push('\n');
    }
    Ok(o)
}

/// Reads `DIR/NAME.json` of every reproduction in [`crate::SEEDS`] and renders `COVERAGE.md`.
pub fn render_dir(dir: &std::path::Path) -> anyhow::Result<String> {
    let mut reports = BTreeMap::new();
    for s in crate::SEEDS {
        let path = dir.join(format!("{}.json", s.name));
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {} ({e}): coverage reads the reports of `raidforge reproduce all \
                 --out {}`; run that first",
                path.display(),
                dir.display()
            )
        })?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not a report: {e}", path.display()))?;
        let sum = Summary::from_json(&v)?;
        reports.insert(s.name.to_string(), sum);
    }
    render(&reports)
}

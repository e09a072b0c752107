//! # RAID+: placement from mutually orthogonal Latin squares (seed 001, FAST'18)
//!
//! RAID+ spreads `k`-wide RAID stripes over a pool of `n` disks, `n` much larger than `k`, so
//! that every disk holds the same share of data and of parity, and so that the rebuild of any
//! one failed disk reads from and writes to all `n - 1` survivors equally.
//!
//! ## Latin squares and the template
//!
//! When `n = p^m` is a prime power, the finite field GF(n) ([`crate::gf`]) gives `n - 1`
//! mutually orthogonal Latin squares of order `n`: `L_t[x, y] = (t + 1) * x + y` for
//! `0 <= t <= n - 2`, field operations throughout, elements (and so `t + 1`) numbered as in
//! [`crate::gf`]. The paper writes the squares as `L_i = i * x + y` with `0 < i < n` but
//! numbers them from 0 in its Figure 2; its first stripe `<1, 2, 3>` at cell `[1, 0]` fixes
//! the reading used here: square `t` multiplies by the element `t + 1`.
//!
//! A template stacks the first `k` squares. Row `x = 0` is skipped (there every square equals
//! `y`); each of the other `n(n-1)` cells `[x, y]` is one stripe, whose unit `j` lies on disk
//! `L_j[x, y]`. Below row 0 the `k` values of a cell are distinct, so a stripe never has two
//! units on one disk (Property 1); each square holds every disk `n - 1` times outside row 0,
//! so every disk holds exactly `(n-1)k` units of the template, `n - 1` of them from each
//! square. Units are listed data first, then parity: level 5 puts P on square `k-1`, level 6
//! puts P on `k-2` and Q on `k-1`, so every disk holds the same number of data units and of
//! each parity (Property 2).
//!
//! Within a template, each disk's units take offsets `0, 1, 2, ...` in the order of the stripes
//! that use the disk (the paper's "relative ordering of blocks on each disk"). For `n = 5, k = 3`
//! this is Figure 2: stripes `a..t` are the cells `[1,0], [1,1], ..., [4,4]` in row-major order
//! and disk 0 holds the third unit of `c`, the second of `d`, the first of `e`, and so on.
//!
//! ## Stripe order (section 4.3)
//!
//! The stripes of one row `x` may be taken in three orders, each starting from `[x, 0]`:
//! - [`Order::Native`]: `y = 0, 1, ..., n-1` (Figure 2).
//! - [`Order::Read`]: the next stripe's head (unit 0) is the previous stripe's tail (unit
//!   `k-1`), so a sequential read, which skips the parity at the tail, keeps every disk busy.
//!   Head `x + y'` = tail `k*x + y` gives the step `y' = y + (k - 1) * x`.
//! - [`Order::Write`]: the next head is the previous tail plus `x`: `y' = y + k * x`.
//!
//! The order of the stripes is also the order of the units on each disk. Stepping `y` by a
//! fixed nonzero element visits all `n` cells of the row when `n` is prime. When `n = p^m`
//! with `m > 1` the walk returns to its start after `p` steps (the field has characteristic
//! `p`); it then restarts at the lowest-numbered unused cell of the row, a case the paper does
//! not specify (its examples are prime).
//!
//! ## Reserved space and the interim layout (section 5)
//!
//! Each template occupies `n * k` rows per disk: `(n-1)k` hold the stripes and the last `k` are
//! reserved for rebuild (the paper's "n x k physical blocks per disk for a data template",
//! the green area of Figure 4). When disk `f` fails, each of its `(n-1)k` units is rebuilt onto
//! the disk the first spare square `L_k` gives at its stripe's cell. A stripe holding `f` at
//! square `t` lies at `y = f - (t+1)x`, so that disk is `f + ((k+1) - (t+1)) * x`: for each `t`
//! it runs over every survivor once as `x` runs over the nonzero elements, so each survivor
//! receives exactly `k` rebuilt units, which fill its `k` reserved rows in stripe order
//! (Property 5). By the same argument each survivor shares exactly `k(k-1)` stripes with `f`,
//! so rebuild reads are uniform too (Property 3). The spare value differs from the values of
//! the stripe's own squares, so the interim layout keeps every stripe on distinct disks
//! (Property 4) and every survivor holds `nk` units.
//!
//! Later failures repeat the process on the interim layout with the next spare square: the
//! `i`-th failure uses `L_{k+i-1}`. There are `m = n - 1 - k` spare squares (the paper's `m`).
//! From the second failure on, the designated value can be an earlier failed disk or a disk of
//! the same stripe; such a unit (and any unit once the `m` spare squares are used up) goes to
//! the usable disk that has received the fewest units in this rebuild, ties broken by fewest
//! units held, then by the other spare squares' values at the cell, then by disk number. With
//! `k = n - 1` there is no spare square at all; the only disk outside a stripe at `[x, y]` is
//! `y` itself (the multiplier-0 pattern), which spreads a single failure exactly uniformly as
//! well. Reserved rows are full after the first failure, so units rebuilt by later failures go
//! to rows past the template (per disk in stripe order), as with random placement; the paper
//! does not say where it puts them. Rebuild is possible while every stripe keeps a live disk
//! outside it, that is for up to `n - k` failures in total ([`RaidPlus::max_failures`]);
//! [`Scheme::relocate`] returns [`LayoutError::NoSpareSpace`] beyond that. Level 6 therefore
//! needs `k <= n - 2`.
//!
//! [`Scheme::relocate`] treats the failure list as sequential failures, each rebuilt before
//! the next (the paper's interim mode); [`RaidPlus::interim`] returns the interim layout itself
//! as a scheme, whose own `relocate` continues with the next spare square.
//!
//! ## Pools of volumes (section 4.4)
//!
//! [`RaidPlusPool`] holds several volumes of different widths and levels on the same `n` disks:
//! its cycle is one template of each volume, stacked per disk (volume `v` occupies its own
//! `n * k_v` rows, reserved rows included), and each volume rebuilds into its own reserved rows
//! with its own spare squares.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;

use crate::gf::{self, Field};
use crate::{Code, Cycle, Disk, LayoutError, Loc, Order, Relocation, Role, Scheme, Stripe, Unit};

/// Largest pool RAID+ builds (the field tables and the template grow as `n^2`).
pub const MAX_DISKS: usize = gf::MAX_ORDER;

/// `L_t[x, y] = (t + 1) * x + y` over `field`: the disk of unit `t` of the stripe at `[x, y]`.
#[inline]
pub fn square(field: &Field, t: usize, x: u32, y: u32) -> Disk {
    field.add(field.mul(t as u32 + 1, x), y)
}

fn order_name(o: Order) -> &'static str {
    match o {
        Order::Native => "native",
        Order::Read => "read",
        Order::Write => "write",
    }
}

/// The disks of one RAID+ template: `n(n-1)` stripes of `k` disks, in stripe order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    n: usize,
    k: usize,
    order: Order,
    /// Cell `[x, y]` of each stripe, in stripe order.
    cells: Vec<(u32, u32)>,
    /// Stripe-major: the `k` disks of stripe `i` are `disks[i*k .. (i+1)*k]`.
    disks: Vec<Disk>,
}

impl Template {
    /// The template for `k`-wide stripes over `n` disks (`n` a prime power, `1 <= k < n`).
    pub fn new(n: usize, k: usize, order: Order) -> Result<Template, LayoutError> {
        let field = field_for(n)?;
        if k == 0 || k >= n {
            return Err(LayoutError::param(
                "width",
                format!("width {k} must be in 1..{n}: a template stacks k of the n - 1 squares"),
            ));
        }
        Ok(Template::with_field(&field, k, order))
    }

    /// The template over GF(n) given as `field`. Panics unless `1 <= k < n`.
    pub fn with_field(field: &Field, k: usize, order: Order) -> Template {
        let n = field.order() as usize;
        assert!(k >= 1 && k < n, "template width {k} outside 1..{n}");
        let mut cells = Vec::with_capacity(n * (n - 1));
        for x in 1..n as u32 {
            row_order(field, k, order, x, &mut cells);
        }
        let mut disks = Vec::with_capacity(cells.len() * k);
        for &(x, y) in &cells {
            for t in 0..k {
                disks.push(square(field, t, x, y));
            }
        }
        let t = Template {
            n,
            k,
            order,
            cells,
            disks,
        };
        t.assert_invariants();
        t
    }

    /// Every cell below row 0 used exactly once, distinct disks per stripe (Property 1), and
    /// `n - 1` units of every square on every disk (Property 2).
    fn assert_invariants(&self) {
        let (n, k) = (self.n, self.k);
        assert_eq!(
            self.cells.len(),
            n * (n - 1),
            "one stripe per cell below row 0"
        );
        let mut seen = vec![false; n * n];
        for &(x, y) in &self.cells {
            assert!(
                x != 0 && (x as usize) < n && (y as usize) < n,
                "cell [{x}, {y}]"
            );
            let c = x as usize * n + y as usize;
            assert!(!seen[c], "cell [{x}, {y}] used twice");
            seen[c] = true;
        }
        let mut per_square = vec![0usize; n * k];
        let mut stamp = vec![usize::MAX; n];
        for i in 0..self.cells.len() {
            for (t, &d) in self.disks(i).iter().enumerate() {
                assert!(stamp[d as usize] != i, "stripe {i} uses disk {d} twice");
                stamp[d as usize] = i;
                per_square[d as usize * k + t] += 1;
            }
        }
        assert!(
            per_square.iter().all(|&c| c == n - 1),
            "every disk holds n - 1 units of every square"
        );
    }

    /// Number of disks `n`.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Stripe width `k`.
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn order(&self) -> Order {
        self.order
    }
    /// Number of stripes, `n(n-1)`.
    pub fn len(&self) -> usize {
        self.cells.len()
    }
    /// Always false (a template has at least one row of cells).
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
    /// Cell `[x, y]` of stripe `i`.
    pub fn cell(&self, i: usize) -> (u32, u32) {
        self.cells[i]
    }
    /// The disks of stripe `i`: unit `j` on `L_j[x, y]`.
    pub fn disks(&self, i: usize) -> &[Disk] {
        &self.disks[i * self.k..(i + 1) * self.k]
    }
}

/// Appends the cells of row `x` in `order` (see the module docs).
fn row_order(field: &Field, k: usize, order: Order, x: u32, out: &mut Vec<(u32, u32)>) {
    let n = field.order() as usize;
    let step = match order {
        Order::Native => {
            out.extend((0..n as u32).map(|y| (x, y)));
            return;
        }
        // head(y') = x + y' must equal tail(y) = k*x + y.
        Order::Read => field.mul(field.sub(k as u32, 1), x),
        // head(y') = tail(y) + x.
        Order::Write => field.mul(k as u32, x),
    };
    let mut seen = vec![false; n];
    let mut y = 0u32;
    let mut lowest_unseen = 0usize;
    for _ in 0..n {
        seen[y as usize] = true;
        out.push((x, y));
        let next = field.add(y, step);
        if !seen[next as usize] {
            y = next;
        } else {
            while lowest_unseen < n && seen[lowest_unseen] {
                lowest_unseen += 1;
            }
            if lowest_unseen == n {
                break;
            }
            y = lowest_unseen as u32;
        }
    }
}

fn field_for(n: usize) -> Result<Field, LayoutError> {
    if n > MAX_DISKS {
        return Err(LayoutError::param(
            "disks",
            format!(
                "{n} disks is more than RAID+ supports ({MAX_DISKS}; the template grows as n^2)"
            ),
        ));
    }
    if gf::prime_power(n).is_none() {
        return Err(LayoutError::param(
            "disks",
            format!("{n} is not a prime power (RAID+ needs n = p^m, e.g. 5, 7, 8, 9, 11, 13, 16)"),
        ));
    }
    Ok(Field::new(n).expect("prime power within MAX_ORDER"))
}

/// One volume of a RAID+ pool: stripe width and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    pub width: usize,
    pub level: u8,
}

impl VolumeSpec {
    /// Parses `width:level` pairs separated by commas, e.g. `3:5,4:6`. Only the syntax is
    /// checked here; the pool checks each volume against its number of disks.
    pub fn parse_list(spec: &str) -> Result<Vec<VolumeSpec>, LayoutError> {
        let bad = |reason: String| LayoutError::param("volumes", reason);
        if spec.trim().is_empty() {
            return Err(bad(
                "empty volume list; give width:level pairs such as 3:5,4:6".into(),
            ));
        }
        spec.split(',')
            .map(|item| {
                let item = item.trim();
                let parts: Vec<&str> = item.split(':').map(str::trim).collect();
                if parts.len() != 2 {
                    return Err(bad(format!(
                        "'{item}' is not width:level (volumes look like 3:5,4:6)"
                    )));
                }
                let width = parts[0]
                    .parse::<usize>()
                    .map_err(|_| bad(format!("'{item}': width '{}' is not a number", parts[0])))?;
                let level = parts[1]
                    .parse::<u8>()
                    .map_err(|_| bad(format!("'{item}': level '{}' is not 5 or 6", parts[1])))?;
                Ok(VolumeSpec { width, level })
            })
            .collect()
    }

    fn parity(self) -> usize {
        if self.level == 6 {
            2
        } else {
            1
        }
    }

    fn tolerance(self) -> usize {
        self.parity()
    }

    fn code(self) -> Code {
        if self.level == 6 {
            Code::PQ
        } else {
            Code::Xor
        }
    }

    fn role(self, j: usize) -> Role {
        let k = self.width;
        match (self.level, j) {
            (6, j) if j == k - 2 => Role::P,
            (6, j) if j == k - 1 => Role::Q,
            (_, j) if j == k - 1 => Role::P,
            _ => Role::Data,
        }
    }

    /// Checks the volume against `n` disks; the error names the parameter and the constraint.
    fn validate(self, n: usize) -> Result<(), (&'static str, String)> {
        let (k, level) = (self.width, self.level);
        if level != 5 && level != 6 {
            return Err((
                "level",
                format!("level {level} is not supported by RAID+; use 5 or 6"),
            ));
        }
        let min = self.parity() + 1;
        if k < min {
            return Err((
                "width",
                format!(
                    "a level-{level} RAID+ stripe needs at least {min} units (data + {}), got width {k}",
                    if level == 6 { "P + Q" } else { "P" }
                ),
            ));
        }
        if k >= n {
            return Err((
                "width",
                format!(
                    "width {k} must be below the {n} disks: a RAID+ template stacks k of the n - 1 orthogonal Latin squares of order n"
                ),
            ));
        }
        if level == 6 && k > n - 2 {
            return Err((
                "width",
                format!(
                    "level 6 needs width <= disks - 2 = {} so both lost units of a stripe can be rebuilt onto distinct surviving disks; got {k}",
                    n - 2
                ),
            ));
        }
        Ok(())
    }
}

/// A volume placed in a pool.
#[derive(Clone, Debug)]
struct Volume {
    spec: VolumeSpec,
    template: Template,
    /// Its stripes in the pool cycle.
    stripes: Range<usize>,
    /// First row of its template on every disk; it occupies `base .. base + n*k`.
    base: u64,
}

impl Volume {
    fn reserved(&self) -> Range<u64> {
        let (n, k) = (self.template.n as u64, self.spec.width as u64);
        self.base + (n - 1) * k..self.base + n * k
    }
}

/// Where every unit is now, and where the next rebuilt unit goes.
#[derive(Clone, Debug)]
struct State {
    /// Current place of every unit, parallel to the stripes of the cycle.
    places: Vec<Vec<Loc>>,
    /// Disks failed and rebuilt so far, in failure order.
    failed: Vec<Disk>,
    /// Next free reserved row, per volume and disk.
    next_reserved: Vec<Vec<u64>>,
    /// Next free row past the template, per disk.
    next_overflow: Vec<u64>,
}

/// The shared machinery of [`RaidPlus`] and [`RaidPlusPool`].
#[derive(Clone, Debug)]
struct Core {
    n: usize,
    field: Arc<Field>,
    order: Order,
    volumes: Arc<Vec<Volume>>,
    /// Rows of the healthy cycle (all templates, reserved rows included).
    healthy_rows: u64,
    state: State,
    cycle: Cycle,
}

impl Core {
    /// `pool` decides how volume errors are reported (as `--volumes` with the volume named, or
    /// as the plain `--width` / `--level`).
    fn new(n: usize, specs: &[VolumeSpec], order: Order, pool: bool) -> Result<Core, LayoutError> {
        let field = field_for(n)?;
        if specs.is_empty() {
            return Err(LayoutError::param(
                "volumes",
                "a pool needs at least one volume",
            ));
        }
        for (i, s) in specs.iter().enumerate() {
            s.validate(n).map_err(|(param, reason)| {
                if pool {
                    LayoutError::param(
                        "volumes",
                        format!("volume {} ({}:{}): {reason}", i + 1, s.width, s.level),
                    )
                } else {
                    LayoutError::param(param, reason)
                }
            })?;
        }
        let mut volumes = Vec::with_capacity(specs.len());
        let mut stripes: Vec<Stripe> = Vec::new();
        let mut base = 0u64;
        for &spec in specs {
            let k = spec.width;
            let template = Template::with_field(&field, k, order);
            let first = stripes.len();
            let mut next = vec![base; n];
            for i in 0..template.len() {
                let units = template
                    .disks(i)
                    .iter()
                    .enumerate()
                    .map(|(j, &d)| {
                        let offset = next[d as usize];
                        next[d as usize] += 1;
                        Unit {
                            disk: d,
                            offset,
                            role: spec.role(j),
                        }
                    })
                    .collect();
                stripes.push(Stripe {
                    units,
                    code: spec.code(),
                });
            }
            let vol = Volume {
                spec,
                template,
                stripes: first..stripes.len(),
                base,
            };
            // Every disk's used rows end exactly where the reserved rows begin.
            assert!(
                next.iter().all(|&o| o == vol.reserved().start),
                "every disk holds (n-1)k units of the template"
            );
            base += (n * k) as u64;
            volumes.push(vol);
        }
        let healthy_rows = base;
        let state = State {
            places: stripes
                .iter()
                .map(|s| s.units.iter().map(Unit::loc).collect())
                .collect(),
            failed: Vec::new(),
            next_reserved: volumes
                .iter()
                .map(|v| vec![v.reserved().start; n])
                .collect(),
            next_overflow: vec![healthy_rows; n],
        };
        let cycle = Cycle::from_stripes(n, healthy_rows, stripes);
        Ok(Core {
            n,
            field: Arc::new(field),
            order,
            volumes: Arc::new(volumes),
            healthy_rows,
            state,
            cycle,
        })
    }

    fn max_width(&self) -> usize {
        self.volumes.iter().map(|v| v.spec.width).max().unwrap()
    }

    fn max_failures(&self) -> usize {
        self.n - self.max_width()
    }

    fn spare_squares(&self) -> usize {
        self.n - 1 - self.max_width()
    }

    fn tolerance(&self) -> usize {
        let level = self
            .volumes
            .iter()
            .map(|v| v.spec.tolerance())
            .min()
            .unwrap();
        level.min(self.max_failures() - self.state.failed.len())
    }

    fn volume_of(&self, stripe: usize) -> usize {
        self.volumes
            .iter()
            .position(|v| v.stripes.contains(&stripe))
            .unwrap_or_else(|| panic!("stripe {stripe} is not in the cycle"))
    }

    /// Checks a failure list: disks exist, are named once, have not failed already, and the
    /// total stays within what the interim layouts can absorb.
    fn validate(&self, failed: &[Disk]) -> Result<(), LayoutError> {
        for (i, &f) in failed.iter().enumerate() {
            if f as usize >= self.n {
                return Err(LayoutError::BadFailure(format!(
                    "disk {f} does not exist (the array has disks 0..{})",
                    self.n - 1
                )));
            }
            if failed[..i].contains(&f) {
                return Err(LayoutError::BadFailure(format!("disk {f} named twice")));
            }
            if self.state.failed.contains(&f) {
                return Err(LayoutError::BadFailure(format!(
                    "disk {f} already failed and was rebuilt into this interim layout"
                )));
            }
        }
        let total = self.state.failed.len() + failed.len();
        if total > self.max_failures() {
            return Err(LayoutError::NoSpareSpace(format!(
                "RAID+ over {} disks with {}-wide stripes rebuilds at most n - k = {} failed disks onto distinct surviving disks ({} spare Latin squares); {total} failed",
                self.n,
                self.max_width(),
                self.max_failures(),
                self.spare_squares()
            )));
        }
        Ok(())
    }

    /// Rebuilds every unit now on disk `f` into the next interim layout (module docs).
    fn step(&self, st: &mut State, f: Disk) -> Result<(), LayoutError> {
        let n = self.n;
        let field = &*self.field;
        let i = st.failed.len() + 1;
        let mut dead = vec![false; n];
        for &d in st.failed.iter().chain([&f]) {
            dead[d as usize] = true;
        }
        let usable = |st: &State, s: usize, d: Disk| {
            !dead[d as usize] && st.places[s].iter().all(|l| l.disk != d)
        };
        // (volume, stripe, unit, destination) of every unit on `f`, in stripe order.
        let mut lost: Vec<(usize, usize, usize, Option<Disk>)> = Vec::new();
        let mut received = vec![0u64; n];
        // Pass 1, the paper's rule: the i-th failure uses the i-th spare square L_{k+i-1}.
        for (v, vol) in self.volumes.iter().enumerate() {
            let designated = vol.spec.width + i - 1;
            for s in vol.stripes.clone() {
                let Some(j) = st.places[s].iter().position(|l| l.disk == f) else {
                    continue;
                };
                let (x, y) = vol.template.cell(s - vol.stripes.start);
                let pick = (designated < n - 1)
                    .then(|| square(field, designated, x, y))
                    .filter(|&d| usable(st, s, d));
                if let Some(d) = pick {
                    received[d as usize] += 1;
                }
                lost.push((v, s, j, pick));
            }
        }
        // Pass 2: a unit whose designated disk is unusable (failed, or in its stripe), or that
        // has no spare square left, goes to the usable disk that received fewest units in this
        // rebuild; ties go to the disk holding fewest units of the layout, then to the values
        // of the other spare squares at its cell (by square), then to other disks (by number).
        let mut held = vec![0u64; n];
        for l in st.places.iter().flatten() {
            held[l.disk as usize] += 1;
        }
        for (v, s, _, pick) in lost.iter_mut().filter(|l| l.3.is_none()) {
            let vol = &self.volumes[*v];
            let k = vol.spec.width;
            let (x, y) = vol.template.cell(*s - vol.stripes.start);
            // d = c*x + y: square c - 1 when c > k is a spare square.
            let rank = |d: Disk| match field.div(field.sub(d, y), x) {
                Some(c) if c as usize > k => c as usize - 1,
                _ => n + d as usize,
            };
            let d = (0..n as Disk)
                .filter(|&d| usable(st, *s, d))
                .min_by_key(|&d| (received[d as usize], held[d as usize], rank(d)))
                .ok_or_else(|| {
                    LayoutError::NoSpareSpace(format!(
                        "stripe {s} has no surviving disk outside it to rebuild onto"
                    ))
                })?;
            received[d as usize] += 1;
            *pick = Some(d);
        }
        // Pass 3: rows on the destination, in stripe order: the volume's reserved rows while
        // they last, then rows past the template.
        for (v, s, j, pick) in lost {
            let d = pick.expect("every lost unit has a destination") as usize;
            let next = &mut st.next_reserved[v][d];
            let offset = if *next < self.volumes[v].reserved().end {
                *next += 1;
                *next - 1
            } else {
                st.next_overflow[d] += 1;
                st.next_overflow[d] - 1
            };
            st.places[s][j] = Loc {
                disk: d as Disk,
                offset,
            };
        }
        st.failed.push(f);
        Ok(())
    }

    /// The rows of the interim layout after disk `f` alone fails, without building it, in
    /// the case a healthy single-volume layout is always in (orthogonal squares): every unit
    /// of `f` has its designated spare-square disk usable, and no disk receives more units
    /// than it has reserved rows, so every unit lands in reserved rows and the layout keeps
    /// its rows ([`Core::step`]'s passes 1 and 3). `None` otherwise. O(n k^2) field operations
    /// instead of a copy of every unit's place and a map of the moves.
    fn single_failure_rows(&self, f: Disk) -> Option<u64> {
        let n = self.n;
        if !self.state.failed.is_empty() || self.volumes.len() != 1 || f as usize >= n {
            return None;
        }
        let vol = &self.volumes[0];
        let k = vol.spec.width;
        // The first failure's designated square is L_k; there is none when k = n - 1.
        if k + 1 >= n || vol.stripes.start != 0 || vol.base != 0 {
            return None;
        }
        let field = &*self.field;
        let mut received = vec![0u64; n];
        // The template's stripes are the cells [x, y], x != 0, with unit t on L_t[x, y]: those
        // holding a unit on f are, for each x and t, the cell whose y puts L_t there.
        for x in 1..n as u32 {
            for t in 0..k {
                let y = field.sub(f, field.mul(t as u32 + 1, x));
                debug_assert_eq!(square(field, t, x, y), f);
                let d = square(field, k, x, y);
                if d == f || (0..k).any(|u| square(field, u, x, y) == d) {
                    return None;
                }
                received[d as usize] += 1;
            }
        }
        let reserved = vol.reserved();
        received
            .iter()
            .all(|&r| r <= reserved.end - reserved.start)
            .then_some(self.cycle.rows)
    }

    fn apply(&self, failed: &[Disk]) -> Result<State, LayoutError> {
        self.validate(failed)?;
        let mut st = self.state.clone();
        for &f in failed {
            self.step(&mut st, f)?;
        }
        Ok(st)
    }

    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        let st = self.apply(failed)?;
        let mut moves = Relocation::default();
        for (old, new) in self.state.places.iter().zip(&st.places) {
            for (a, b) in old.iter().zip(new) {
                if a != b {
                    moves.insert(*a, *b);
                }
            }
        }
        Ok(moves)
    }

    fn interim(&self, failed: &[Disk]) -> Result<Core, LayoutError> {
        let st = self.apply(failed)?;
        let stripes: Vec<Stripe> = self
            .cycle
            .stripes
            .iter()
            .zip(&st.places)
            .map(|(s, places)| Stripe {
                code: s.code,
                units: s
                    .units
                    .iter()
                    .zip(places)
                    .map(|(u, l)| Unit {
                        disk: l.disk,
                        offset: l.offset,
                        role: u.role,
                    })
                    .collect(),
            })
            .collect();
        let rows = st
            .places
            .iter()
            .flatten()
            .map(|l| l.offset + 1)
            .fold(self.healthy_rows, u64::max);
        let cycle = Cycle::from_stripes(self.n, rows, stripes);
        Ok(Core {
            state: st,
            cycle,
            ..self.clone()
        })
    }

    fn extra_json(&self) -> String {
        let mut s = format!(
            "\"raidplus\": {{\"order\": \"{}\", \"spare_squares\": {}, \"max_failures\": {}, \"failed\": {:?}, \"volumes\": [",
            order_name(self.order),
            self.spare_squares(),
            self.max_failures(),
            self.state.failed
        );
        for (i, v) in self.volumes.iter().enumerate() {
            let r = v.reserved();
            let _ = write!(
                s,
                "{}{{\"width\": {}, \"level\": {}, \"stripes\": [{}, {}], \"rows\": [{}, {}], \"reserved_rows\": [{}, {}]}}",
                if i > 0 { ", " } else { "" },
                v.spec.width,
                v.spec.level,
                v.stripes.start,
                v.stripes.end,
                v.base,
                r.end,
                r.start,
                r.end
            );
        }
        s.push_str("]}");
        s
    }

    fn describe_failed(&self) -> String {
        if self.state.failed.is_empty() {
            String::new()
        } else {
            format!(
                ", interim layout after failing disks {:?}",
                self.state.failed
            )
        }
    }
}

/// A RAID+ volume: `k`-wide level-5 or level-6 stripes over `n` disks (`n` a prime power)
/// placed by `k` mutually orthogonal Latin squares over GF(n).
///
/// The cycle is one template: the stripe at cell `[x, y]` (`x != 0`) has unit `t` on disk
/// `(t+1) * x + y`, giving `n(n-1)` stripes in which every disk holds the same number of data
/// and parity units. Each disk holds `(n-1)k` units followed by `k` rows reserved for rebuild,
/// `n * k` rows in all. After a failure, the lost units move to the disks named by the next
/// unused ("spare") square, into the reserved rows, so rebuild reads and writes are spread
/// exactly evenly over the survivors; [`RaidPlus::interim`] gives the resulting layout. The
/// comments at the top of `raidplus.rs` give the construction and the arguments in full.
#[derive(Clone, Debug)]
pub struct RaidPlus {
    core: Core,
}

impl RaidPlus {
    /// `n` disks (a prime power), stripes of width `k` (`2 <= k < n` for level 5,
    /// `3 <= k <= n - 2` for level 6), level 5 or 6, stripe order within each template row.
    pub fn new(n: usize, k: usize, level: u8, order: Order) -> Result<RaidPlus, LayoutError> {
        let spec = VolumeSpec { width: k, level };
        Ok(RaidPlus {
            core: Core::new(n, &[spec], order, false)?,
        })
    }

    /// Only the stripe-to-disk map of the template for `k`-wide stripes over `n` disks
    /// (`1 <= k < n`), without building a cycle: cheap enough to sweep every `(n, k)`.
    pub fn template_for(n: usize, k: usize, order: Order) -> Result<Template, LayoutError> {
        Template::new(n, k, order)
    }

    /// Number of disks `n`.
    pub fn n(&self) -> usize {
        self.core.n
    }
    /// Stripe width `k`.
    pub fn width(&self) -> usize {
        self.core.volumes[0].spec.width
    }
    /// RAID level, 5 or 6.
    pub fn level(&self) -> u8 {
        self.core.volumes[0].spec.level
    }
    pub fn order(&self) -> Order {
        self.core.order
    }
    /// The field GF(n) the squares are built over.
    pub fn field(&self) -> &Field {
        &self.core.field
    }
    /// The Latin-square template (the healthy stripe-to-disk map, in stripe order).
    pub fn template(&self) -> &Template {
        &self.core.volumes[0].template
    }
    /// Cell `[x, y]` of stripe `i` of the cycle.
    pub fn cell(&self, i: usize) -> (u32, u32) {
        self.template().cell(i)
    }
    /// Rows per disk of the template that hold stripes, `(n-1)k`, followed by
    /// [`RaidPlus::reserved_rows`].
    pub fn used_rows(&self) -> Range<u64> {
        0..self.core.volumes[0].reserved().start
    }
    /// Rows per disk reserved for the first rebuild: the last `k` of the `n*k`.
    pub fn reserved_rows(&self) -> Range<u64> {
        self.core.volumes[0].reserved()
    }
    /// The paper's `m`: spare squares `L_k .. L_{n-2}` left for interim layouts, `n - 1 - k`.
    pub fn spare_squares(&self) -> usize {
        self.core.spare_squares()
    }
    /// Most failures (in total, sequentially rebuilt) an interim layout can absorb while every
    /// stripe stays on distinct disks: `n - k`.
    pub fn max_failures(&self) -> usize {
        self.core.max_failures()
    }
    /// Disks already failed and rebuilt into this (interim) layout, in failure order.
    pub fn failed(&self) -> &[Disk] {
        &self.core.state.failed
    }
    /// The interim layout after the disks in `failed` fail one after another, each rebuilt
    /// before the next. Its cycle is `self.cycle()` with [`Scheme::relocate`]'s moves applied.
    pub fn interim(&self, failed: &[Disk]) -> Result<RaidPlus, LayoutError> {
        Ok(RaidPlus {
            core: self.core.interim(failed)?,
        })
    }
}

impl Scheme for RaidPlus {
    fn name(&self) -> &'static str {
        "raidplus"
    }
    fn cycle(&self) -> &Cycle {
        &self.core.cycle
    }
    /// 1 for level 5, 2 for level 6 (less in an interim layout that cannot absorb that many
    /// more failures, see [`RaidPlus::max_failures`]).
    fn tolerance(&self) -> usize {
        self.core.tolerance()
    }
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        self.core.relocate(failed)
    }
    fn recovery_rows_hint(&self, failed: &[Disk]) -> Option<u64> {
        match failed {
            [f] => self.core.single_failure_rows(*f),
            _ => None,
        }
    }
    fn extra_json(&self) -> Option<String> {
        Some(self.core.extra_json())
    }
    fn describe(&self) -> String {
        let (n, k) = (self.n(), self.width());
        format!(
            "raidplus: {k}-wide RAID-{} stripes over {n} disks ({} order), template of {} stripes x {} rows ({} used + {k} reserved){}",
            self.level(),
            order_name(self.order()),
            n * (n - 1),
            n * k,
            (n - 1) * k,
            self.core.describe_failed()
        )
    }
}

/// Several RAID+ volumes of different widths and levels sharing `n` disks (section 4.4): one
/// template of each, stacked per disk.
#[derive(Clone, Debug)]
pub struct RaidPlusPool {
    core: Core,
}

impl RaidPlusPool {
    /// `n` disks and `volumes` as `width:level` pairs, e.g. `"3:5,4:6"`.
    pub fn new(n: usize, volumes: &str, order: Order) -> Result<RaidPlusPool, LayoutError> {
        let specs = VolumeSpec::parse_list(volumes)?;
        RaidPlusPool::with_volumes(n, &specs, order)
    }

    /// As [`RaidPlusPool::new`] with the volumes already parsed.
    pub fn with_volumes(
        n: usize,
        volumes: &[VolumeSpec],
        order: Order,
    ) -> Result<RaidPlusPool, LayoutError> {
        Ok(RaidPlusPool {
            core: Core::new(n, volumes, order, true)?,
        })
    }

    /// Number of disks `n`.
    pub fn n(&self) -> usize {
        self.core.n
    }
    /// The volumes, in cycle order.
    pub fn volumes(&self) -> Vec<VolumeSpec> {
        self.core.volumes.iter().map(|v| v.spec).collect()
    }
    /// The volume (index into [`RaidPlusPool::volumes`]) that stripe `stripe` of the cycle
    /// belongs to. Panics if the stripe is not in the cycle.
    pub fn volume_of(&self, stripe: usize) -> usize {
        self.core.volume_of(stripe)
    }
    /// The stripes of volume `v` in the cycle.
    pub fn volume_stripes(&self, v: usize) -> Range<usize> {
        self.core.volumes[v].stripes.clone()
    }
    /// The rows of volume `v`'s template on every disk, reserved rows included.
    pub fn volume_rows(&self, v: usize) -> Range<u64> {
        let vol = &self.core.volumes[v];
        vol.base..vol.reserved().end
    }
    /// The reserved rows of volume `v` on every disk.
    pub fn reserved_rows(&self, v: usize) -> Range<u64> {
        self.core.volumes[v].reserved()
    }
    /// The template of volume `v`.
    pub fn template(&self, v: usize) -> &Template {
        &self.core.volumes[v].template
    }
    /// Spare squares of the widest volume, `n - 1 - max k`.
    pub fn spare_squares(&self) -> usize {
        self.core.spare_squares()
    }
    /// `n - max k` (see [`RaidPlus::max_failures`]).
    pub fn max_failures(&self) -> usize {
        self.core.max_failures()
    }
    /// Disks already failed and rebuilt into this (interim) layout.
    pub fn failed(&self) -> &[Disk] {
        &self.core.state.failed
    }
    /// The interim layout after `failed` (see [`RaidPlus::interim`]).
    pub fn interim(&self, failed: &[Disk]) -> Result<RaidPlusPool, LayoutError> {
        Ok(RaidPlusPool {
            core: self.core.interim(failed)?,
        })
    }
}

impl Scheme for RaidPlusPool {
    fn name(&self) -> &'static str {
        "raidplus"
    }
    fn cycle(&self) -> &Cycle {
        &self.core.cycle
    }
    /// The smallest tolerance over the volumes.
    fn tolerance(&self) -> usize {
        self.core.tolerance()
    }
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        self.core.relocate(failed)
    }
    fn extra_json(&self) -> Option<String> {
        Some(self.core.extra_json())
    }
    fn describe(&self) -> String {
        let vols: Vec<String> = self
            .core
            .volumes
            .iter()
            .map(|v| format!("{}-wide RAID-{}", v.spec.width, v.spec.level))
            .collect();
        format!(
            "raidplus pool over {} disks: {} ({} order), {} stripes x {} rows per cycle{}",
            self.core.n,
            vols.join(", "),
            order_name(self.core.order),
            self.core.cycle.stripes.len(),
            self.core.healthy_rows,
            self.core.describe_failed()
        )
    }
}

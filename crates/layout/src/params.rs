//! Command-line style parameters and the one place that turns them into a scheme.

use std::sync::Arc;

use crate::{
    Classic, ClassicKind, Grouped, GroupedKind, HashPlacement, LayoutError, RaidH, RaidPlus,
    RaidPlusPool, RandomPlacement, Rm2, S2Raid, Scheme,
};

/// Every scheme raidforge knows, by its command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemeKind {
    Raid0,
    Raid1,
    Raid10,
    Raid4,
    Raid5,
    Raid6,
    Raid50,
    Raid5c,
    Raid60,
    Random,
    Hash,
    S2Raid5,
    S2Raid10,
    RaidPlus,
    Rm2,
    RaidH,
}

impl SchemeKind {
    pub const ALL: [(&'static str, SchemeKind); 16] = [
        ("raid0", SchemeKind::Raid0),
        ("raid1", SchemeKind::Raid1),
        ("raid10", SchemeKind::Raid10),
        ("raid4", SchemeKind::Raid4),
        ("raid5", SchemeKind::Raid5),
        ("raid6", SchemeKind::Raid6),
        ("raid50", SchemeKind::Raid50),
        ("raid5c", SchemeKind::Raid5c),
        ("raid60", SchemeKind::Raid60),
        ("random", SchemeKind::Random),
        ("hash", SchemeKind::Hash),
        ("s2raid5", SchemeKind::S2Raid5),
        ("s2raid10", SchemeKind::S2Raid10),
        ("raidplus", SchemeKind::RaidPlus),
        ("rm2", SchemeKind::Rm2),
        ("raidh", SchemeKind::RaidH),
    ];

    pub fn parse(s: &str) -> Result<SchemeKind, LayoutError> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                LayoutError::param(
                    "scheme",
                    format!("unknown scheme '{s}'; choose one of {}", names.join(" ")),
                )
            })
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, k)| *k == self).unwrap().0
    }
}

/// Stripe ordering inside a RAID+ template (seed 001 section 4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Order {
    /// Stripes in the order the Latin squares produce them.
    #[default]
    Native,
    /// Read-friendly: each stripe starts on the disk where the previous one ends (head = previous
    /// tail), so a sequential read touches every disk evenly.
    Read,
    /// Write-friendly: each stripe starts one disk past the previous one's tail, so consecutive
    /// full-stripe writes do not share a disk.
    Write,
}

impl Order {
    pub fn parse(s: &str) -> Result<Order, LayoutError> {
        match s {
            "native" => Ok(Order::Native),
            "read" => Ok(Order::Read),
            "write" => Ok(Order::Write),
            _ => Err(LayoutError::param(
                "order",
                format!("unknown order '{s}'; choose native, read or write"),
            )),
        }
    }
}

/// Parameters of a layout, as given on the command line. Unused ones are ignored by schemes that
/// do not need them; a needed one that is missing is an error naming it.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// Number of member disks, spares included.
    pub disks: Option<usize>,
    /// Stripe width including parity (group width for raid50/raid5c/raid60).
    pub width: Option<usize>,
    /// Dedicated spare disks (the last `spares` disks).
    pub spares: usize,
    /// 5 or 6 (RAID+, random, hash).
    pub level: Option<u8>,
    /// S2-RAID group size G (prime).
    pub group: Option<usize>,
    /// S2-RAID partitions per disk K.
    pub partitions: Option<usize>,
    /// RAIDH per-device weights.
    pub weights: Option<Vec<u32>>,
    /// RAID+ stripe order.
    pub order: Order,
    /// Seed for random placement.
    pub seed: u64,
    /// Stripes per cycle for random and hash placement (default n(n-1), one RAID+ template).
    pub stripes: Option<usize>,
    /// RAID+ pool volumes, e.g. `3:5,4:6` (width:level each).
    pub volumes: Option<String>,
    /// Linux MD layout of raid5/raid6 (`left-symmetric`, `la`, ..., `parity-first-6`) or raid10
    /// (`n2`, `f2`, `o3`, `n2f2`); the default is MD's (left-symmetric, n2).
    pub md_layout: Option<String>,
}

impl Params {
    pub(crate) fn need_disks(&self) -> Result<usize, LayoutError> {
        self.disks
            .ok_or_else(|| LayoutError::param("disks", "the number of disks is required"))
    }
    pub(crate) fn need_width(&self) -> Result<usize, LayoutError> {
        self.width
            .ok_or_else(|| LayoutError::param("width", "the stripe width is required"))
    }
    pub(crate) fn level_or(&self, default: u8) -> Result<u8, LayoutError> {
        match self.level.unwrap_or(default) {
            l @ (5 | 6) => Ok(l),
            l => Err(LayoutError::param(
                "level",
                format!("level {l} is not supported here; use 5 or 6"),
            )),
        }
    }
}

/// Builds the scheme `kind` from `p`, checking every constraint of its construction.
pub fn build(kind: SchemeKind, p: &Params) -> Result<Arc<dyn Scheme>, LayoutError> {
    Ok(match kind {
        SchemeKind::Raid0 => Arc::new(Classic::new(ClassicKind::Raid0, p)?),
        SchemeKind::Raid1 => Arc::new(Classic::new(ClassicKind::Raid1, p)?),
        SchemeKind::Raid10 => Arc::new(Classic::new(ClassicKind::Raid10, p)?),
        SchemeKind::Raid4 => Arc::new(Classic::new(ClassicKind::Raid4, p)?),
        SchemeKind::Raid5 => Arc::new(Classic::new(ClassicKind::Raid5, p)?),
        SchemeKind::Raid6 => Arc::new(Classic::new(ClassicKind::Raid6, p)?),
        SchemeKind::Raid50 => Arc::new(Grouped::new(GroupedKind::Raid50, p)?),
        SchemeKind::Raid5c => Arc::new(Grouped::new(GroupedKind::Raid5c, p)?),
        SchemeKind::Raid60 => Arc::new(Grouped::new(GroupedKind::Raid60, p)?),
        SchemeKind::Random => Arc::new(RandomPlacement::new(p)?),
        SchemeKind::Hash => Arc::new(HashPlacement::new(p)?),
        SchemeKind::S2Raid5 => Arc::new(S2Raid::new(false, p)?),
        SchemeKind::S2Raid10 => Arc::new(S2Raid::new(true, p)?),
        SchemeKind::RaidPlus => match &p.volumes {
            Some(v) => Arc::new(RaidPlusPool::new(p.need_disks()?, v, p.order)?),
            None => Arc::new(RaidPlus::new(
                p.need_disks()?,
                p.need_width()?,
                p.level_or(5)?,
                p.order,
            )?),
        },
        SchemeKind::Rm2 => Arc::new(Rm2::new(p)?),
        SchemeKind::RaidH => Arc::new(RaidH::new(p)?),
    })
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Native => "native",
            Order::Read => "read",
            Order::Write => "write",
        }
    }
}

/// The text form of a layout (scheme and parameters) stored in member superblocks:
/// `scheme=raid5;disks=5;spares=0;...`, keys in a fixed order, unset options left out.
pub fn to_text(kind: SchemeKind, p: &Params) -> String {
    let mut parts = vec![format!("scheme={}", kind.name())];
    let mut opt = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k}={v}"));
        }
    };
    opt("disks", p.disks.map(|v| v.to_string()));
    opt("width", p.width.map(|v| v.to_string()));
    opt("spares", Some(p.spares.to_string()));
    opt("level", p.level.map(|v| v.to_string()));
    opt("group", p.group.map(|v| v.to_string()));
    opt("partitions", p.partitions.map(|v| v.to_string()));
    opt(
        "weights",
        p.weights.as_ref().map(|w| {
            w.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
    );
    opt("order", Some(p.order.name().to_string()));
    opt("seed", Some(p.seed.to_string()));
    opt("stripes", p.stripes.map(|v| v.to_string()));
    opt("volumes", p.volumes.clone());
    opt("mdlayout", p.md_layout.clone());
    parts.join(";")
}

/// Parses [`to_text`]'s form back. Unknown keys and malformed values are errors naming them.
pub fn from_text(text: &str) -> Result<(SchemeKind, Params), LayoutError> {
    let mut kind = None;
    let mut p = Params::default();
    for part in text.split(';').filter(|s| !s.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| LayoutError::param("layout", format!("'{part}' is not key=value")))?;
        let num = |name: &'static str| -> Result<usize, LayoutError> {
            v.parse()
                .map_err(|_| LayoutError::param(name, format!("'{v}' is not a number")))
        };
        match k {
            "scheme" => kind = Some(SchemeKind::parse(v)?),
            "disks" => p.disks = Some(num("disks")?),
            "width" => p.width = Some(num("width")?),
            "spares" => p.spares = num("spares")?,
            "level" => p.level = Some(num("level")? as u8),
            "group" => p.group = Some(num("group")?),
            "partitions" => p.partitions = Some(num("partitions")?),
            "weights" => {
                p.weights = Some(
                    v.split(',')
                        .map(|w| {
                            w.parse().map_err(|_| {
                                LayoutError::param("weights", format!("'{w}' is not a number"))
                            })
                        })
                        .collect::<Result<_, _>>()?,
                )
            }
            "order" => p.order = Order::parse(v)?,
            "seed" => {
                p.seed = v
                    .parse()
                    .map_err(|_| LayoutError::param("seed", format!("'{v}' is not a number")))?
            }
            "stripes" => p.stripes = Some(num("stripes")?),
            "volumes" => p.volumes = Some(v.to_string()),
            "mdlayout" => p.md_layout = Some(v.to_string()),
            _ => return Err(LayoutError::param("layout", format!("unknown key '{k}'"))),
        }
    }
    let kind = kind.ok_or_else(|| LayoutError::param("layout", "no scheme= in the layout text"))?;
    Ok((kind, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let p = Params {
            disks: Some(5),
            width: Some(3),
            spares: 1,
            level: Some(6),
            group: Some(3),
            partitions: Some(2),
            weights: Some(vec![0, 0, 1, 1, 2]),
            order: Order::Write,
            seed: 42,
            stripes: Some(20),
            volumes: Some("3:5,4:6".into()),
            md_layout: Some("f2".into()),
        };
        let t = to_text(SchemeKind::RaidPlus, &p);
        let (k, q) = from_text(&t).unwrap();
        assert_eq!(k, SchemeKind::RaidPlus);
        assert_eq!(to_text(k, &q), t);
        assert_eq!(q.weights, p.weights);
        assert!(from_text("disks=5")
            .unwrap_err()
            .to_string()
            .contains("no scheme"));
        assert!(from_text("scheme=raid5;colour=red")
            .unwrap_err()
            .to_string()
            .contains("colour"));
        assert!(from_text("scheme=raid5;disks=x")
            .unwrap_err()
            .to_string()
            .contains("'x'"));
    }
}

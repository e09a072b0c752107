//! Sizes and speeds as users write them, one rule for every command (issue 22): `K`, `M`, `G`,
//! `T` and `KiB`, `MiB`, `GiB`, `TiB` are powers of 1024; `KB`, `MB`, `GB`, `TB` powers of
//! 1000; `B` or nothing is bytes. A speed is a size per second, with or without `/s`
//! (`50M`, `50MiB/s`: 52,428,800 bytes/s; `50MB/s`: 50,000,000). Case does not matter. A
//! number with a unit may have a fraction (`1.5G`); a plain byte count may not.
//!
//! Output that names a speed in MB/s means 10^6 bytes per second; [`describe_speed`] echoes a
//! parsed value back in both units so that `50M` is never read as 50 MB/s.

/// The units, lower case, and their multipliers.
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gib", 1 << 30),
    ("t", 1 << 40),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// The one-line rule, for error messages and `--help`.
pub const SIZE_RULE: &str =
    "K, M, G, T (or KiB, MiB, ...) are powers of 1024; KB, MB, GB, TB powers of 1000";

/// Parses a byte count: `4096`, `64K`, `64KiB`, `16M`, `1.5G` (powers of 1024), `100MB`
/// (powers of 1000).
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_with(s, s.trim(), "size", "4096, 64K, 16MiB, 100MB, 1G")
}

/// Parses a speed in bytes per second: a size with or without `/s` (`50M`, `50MiB/s`,
/// `50MB/s`, `1.5GB/s`).
pub fn parse_speed(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("/S"))
        .unwrap_or(t);
    parse_with(s, t, "speed", "50M, 50MiB/s, 50MB/s, 1G")
}

fn parse_with(given: &str, t: &str, what: &str, examples: &str) -> Result<u64, String> {
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let not_a = || format!("'{given}' is not a {what} (examples: {examples}; {SIZE_RULE})");
    if num.is_empty() {
        return Err(not_a());
    }
    let unit_lc = unit.trim().to_ascii_lowercase();
    let Some(&(_, mult)) = UNITS.iter().find(|(u, _)| *u == unit_lc) else {
        return Err(format!(
            "'{given}': unknown unit '{}' ({SIZE_RULE})",
            unit.trim()
        ));
    };
    match num.split_once('.') {
        None => num
            .parse::<u64>()
            .map_err(|_| not_a())?
            .checked_mul(mult)
            .ok_or_else(|| format!("'{given}' is too large")),
        Some((whole, frac)) => {
            if mult == 1 || frac.contains('.') || (whole.is_empty() && frac.is_empty()) {
                return Err(not_a());
            }
            let v: f64 = num.parse().map_err(|_| not_a())?;
            let bytes = (v * mult as f64).round();
            if bytes >= u64::MAX as f64 {
                return Err(format!("'{given}' is too large"));
            }
            Ok(bytes as u64)
        }
    }
}

/// A byte count in the largest binary unit that divides it (`64K`, `200M`, `1536K`), else in
/// bytes: the form `parse_size` reads back to the same number.
pub fn format_size(bytes: u64) -> String {
    for (unit, mult) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes >= mult && bytes % mult == 0 {
            return format!("{}{unit}", bytes / mult);
        }
    }
    bytes.to_string()
}

/// A speed as given and as parsed, in both units: `50M` -> `50M (52428800 bytes/s = 50.0
/// MiB/s = 52.4 MB/s)`.
pub fn describe_speed(given: &str, bytes_per_sec: u64) -> String {
    format!(
        "{given} ({bytes_per_sec} bytes/s = {:.1} MiB/s = {:.1} MB/s)",
        bytes_per_sec as f64 / (1u64 << 20) as f64,
        bytes_per_sec as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64kib"), Ok(65536));
        assert_eq!(parse_size("50M"), Ok(50 << 20));
        assert_eq!(parse_size("50MiB"), Ok(50 << 20));
        assert_eq!(parse_size("50MB"), Ok(50_000_000));
        assert_eq!(parse_size("50mb"), Ok(50_000_000));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("10B"), Ok(10));
        assert!(parse_size("1.5").is_err(), "a fraction of a byte");
        assert!(parse_size("-1").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("5X").unwrap_err().contains("unknown unit 'X'"));
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn speeds_take_an_optional_per_second() {
        for (s, v) in [
            ("50M", 50u64 << 20),
            ("50M/s", 50 << 20),
            ("50MiB/s", 50 << 20),
            ("50MB/s", 50_000_000),
            ("150MB/s", 150_000_000),
            ("200000K", 204_800_000),
            ("0.5GB/s", 500_000_000),
        ] {
            assert_eq!(parse_speed(s), Ok(v), "{s}");
        }
        assert!(parse_speed("fast").is_err());
    }

    #[test]
    fn sizes_format_back_to_what_parses_them() {
        for b in [
            0u64,
            1,
            4096,
            65536,
            512 << 10,
            200_000 << 10,
            50 << 20,
            3 << 30,
            1000,
        ] {
            assert_eq!(parse_size(&format_size(b)), Ok(b), "{}", format_size(b));
        }
        assert_eq!(format_size(512 << 10), "512K");
        assert_eq!(
            describe_speed("50M", 50 << 20),
            "50M (52428800 bytes/s = 50.0 MiB/s = 52.4 MB/s)"
        );
    }
}

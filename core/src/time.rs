//! Wall-clock instants and spans as plain integers. Samples and ledger entries cross
//! process boundaries, so they carry wall-clock time (unix milliseconds), never `Instant`.

use std::fmt;

/// Milliseconds since the unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub i64);

/// A span of time in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(pub i64);

impl Millis {
    pub const fn from_secs(secs: i64) -> Self {
        Millis(secs * 1000)
    }
    pub const fn from_mins(mins: i64) -> Self {
        Millis(mins * 60_000)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.max(0) as u64)
    }
}

impl UnixMillis {
    pub fn now() -> Self {
        let since =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        UnixMillis(since.as_millis() as i64)
    }
    /// Time elapsed from `earlier` to `self` (negative when `earlier` is in the future).
    pub fn since(self, earlier: UnixMillis) -> Millis {
        Millis(self.0 - earlier.0)
    }
    pub fn plus(self, span: Millis) -> UnixMillis {
        UnixMillis(self.0.saturating_add(span.0))
    }
    pub fn minus(self, span: Millis) -> UnixMillis {
        UnixMillis(self.0.saturating_sub(span.0))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms % 3_600_000 == 0 && ms != 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms % 60_000 == 0 && ms != 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

/// A duration that does not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

/// Parses durations such as `500ms`, `30s`, `5m`, `1h30m`, `1d`: the one duration syntax
/// of the policy file, the static node file, the simulator's scenarios and every binary's
/// flags.
///
/// Not humantime's `parse_duration` (no dependency of ours): it reads the same answer for
/// every input this grammar accepts (compared on 21 inputs, humantime 2.4), but accepts
/// more — `1M` is a month there, and `1w`, `2min`, `1 h 30 m` pass — so a typo for `1m` in
/// a policy would load as 30 days; and its errors (`expected number at 0` for `m`) do not
/// show what a duration looks like.
pub fn parse_duration(text: &str) -> Result<Millis, DurationError> {
    parse(text).map_err(DurationError)
}

/// `parse_duration` as a `std::time::Duration`, for command-line flags.
pub fn parse_std_duration(text: &str) -> Result<std::time::Duration, DurationError> {
    parse_duration(text).map(Millis::as_std)
}

fn parse(text: &str) -> Result<Millis, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut total: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("'{text}' is not a duration (expected e.g. 30s, 5m, 1h30m)"));
        }
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("'{text}' is not a duration (bad number)"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit_ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            "" => return Err(format!("'{text}' needs a unit (ms, s, m, h or d)")),
            other => {
                return Err(format!("'{text}' has an unknown unit '{other}' (ms, s, m, h, d)"));
            }
        };
        rest = &rest[unit_len..];
        total = total.saturating_add((number * unit_ms).round() as i64);
    }
    Ok(Millis(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_simple_and_compound_durations() {
        assert_eq!(parse_duration("30s"), Ok(Millis(30_000)));
        assert_eq!(parse_duration("5m"), Ok(Millis(300_000)));
        assert_eq!(parse_duration("1h30m"), Ok(Millis(5_400_000)));
        assert_eq!(parse_duration("250ms"), Ok(Millis(250)));
        assert_eq!(parse_duration("1d"), Ok(Millis(86_400_000)));
        assert_eq!(parse_duration("1.5s"), Ok(Millis(1500)));
    }

    #[test]
    fn rejects_bad_durations_with_a_reason() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("30").unwrap_err().to_string().contains("unit"));
        assert!(parse_duration("5x").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration("m").is_err());
        // A month elsewhere, a typo here: said so, not read as 30 days.
        assert!(parse_duration("1M").unwrap_err().to_string().contains("unknown unit 'M'"));
        assert!(parse_duration("1 h").is_err());
    }

    #[test]
    fn displays_in_the_largest_whole_unit() {
        assert_eq!(Millis::from_mins(7).to_string(), "7m");
        assert_eq!(Millis(90_000).to_string(), "90s");
        assert_eq!(Millis(1500).to_string(), "1500ms");
    }
}

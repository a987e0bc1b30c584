//! Numbers as a person reads them: percentages, ages, cpu and memory quantities.

use std::time::{Duration, SystemTime};

/// `42.3`, or `-` when unknown.
pub fn percent(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.1}"),
        _ => "-".to_owned(),
    }
}

/// `45s`, `3m20s`, `2h05m`, `3d04h`: two units at most, rounded down.
pub fn duration(span: Duration) -> String {
    let secs = span.as_secs();
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else if secs > 0 {
        format!("{s}s")
    } else {
        format!("{}ms", span.as_millis())
    }
}

/// Seconds from a protobuf Duration (negative ones, which no waterline service sends, as 0).
pub fn proto_duration_secs(d: &prost_types::Duration) -> f64 {
    (d.seconds as f64 + f64::from(d.nanos) / 1e9).max(0.0)
}

/// How long before `now` a protobuf Timestamp was, in seconds; negative when it is in the
/// future (a clock ahead of this machine's).
pub fn age_secs(at: &prost_types::Timestamp, now: SystemTime) -> f64 {
    let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64(),
        Err(_) => 0.0,
    };
    now - (at.seconds as f64 + f64::from(at.nanos) / 1e9)
}

/// An age or a remaining time in seconds as [`duration`]; `in 3s` for a negative age.
pub fn secs(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_owned();
    }
    let text = duration(Duration::from_secs_f64(value.abs()));
    if value < 0.0 { format!("in {text}") } else { text }
}

/// Milli-cores as kubectl writes them: `250m`, `1500m`, `2`.
pub fn cpu(millis: i64) -> String {
    if millis % 1000 == 0 { format!("{}", millis / 1000) } else { format!("{millis}m") }
}

/// Bytes in binary units: `512Mi`, `4Gi`, `1.5Gi`.
pub fn bytes(value: i64) -> String {
    const UNITS: [(&str, i64); 4] =
        [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    for (unit, size) in UNITS {
        if value.abs() >= size {
            let scaled = value as f64 / size as f64;
            return if value % size == 0 {
                format!("{}{unit}", value / size)
            } else {
                format!("{scaled:.1}{unit}")
            };
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_two_units() {
        assert_eq!(duration(Duration::from_millis(350)), "350ms");
        assert_eq!(duration(Duration::from_secs(45)), "45s");
        assert_eq!(duration(Duration::from_secs(200)), "3m20s");
        assert_eq!(duration(Duration::from_secs(2 * 3600 + 5 * 60 + 59)), "2h05m");
        assert_eq!(duration(Duration::from_secs(3 * 86_400 + 4 * 3600)), "3d04h");
    }

    #[test]
    fn future_times_read_as_in() {
        assert_eq!(secs(-3.2), "in 3s");
        assert_eq!(secs(61.0), "1m01s");
        assert_eq!(secs(f64::NAN), "-");
    }

    #[test]
    fn ages_count_from_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let at = prost_types::Timestamp { seconds: 990, nanos: 500_000_000 };
        assert!((age_secs(&at, now) - 9.5).abs() < 1e-9);
    }

    #[test]
    fn quantities_read_like_kubectl() {
        assert_eq!(cpu(250), "250m");
        assert_eq!(cpu(2000), "2");
        assert_eq!(cpu(1500), "1500m");
        assert_eq!(bytes(512 << 20), "512Mi");
        assert_eq!(bytes(4 << 30), "4Gi");
        assert_eq!(bytes(3 << 29), "1.5Gi");
        assert_eq!(bytes(100), "100");
    }

    #[test]
    fn unknown_percentages_are_a_dash() {
        assert_eq!(percent(Some(42.26)), "42.3");
        assert_eq!(percent(None), "-");
        assert_eq!(percent(Some(f64::INFINITY)), "-");
    }
}

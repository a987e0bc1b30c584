//! Timestamps and durations: the domain's milliseconds and protobuf's seconds + nanos.

use waterline_core::{Millis, UnixMillis};

pub fn timestamp(at: UnixMillis) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.0.div_euclid(1000),
        nanos: (at.0.rem_euclid(1000) * 1_000_000) as i32,
    }
}

pub fn unix_millis(ts: &prost_types::Timestamp) -> UnixMillis {
    UnixMillis(ts.seconds.saturating_mul(1000).saturating_add(i64::from(ts.nanos) / 1_000_000))
}

pub fn duration(span: Millis) -> prost_types::Duration {
    prost_types::Duration {
        seconds: span.0.div_euclid(1000),
        nanos: (span.0.rem_euclid(1000) * 1_000_000) as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_including_negative_millis() {
        for ms in [0, 1, 999, 1_800_000_000_123, -1] {
            assert_eq!(unix_millis(&timestamp(UnixMillis(ms))), UnixMillis(ms));
        }
    }

    #[test]
    fn durations_split_into_seconds_and_nanos() {
        let d = duration(Millis(90_250));
        assert_eq!((d.seconds, d.nanos), (90, 250_000_000));
    }
}

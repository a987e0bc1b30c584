//! Field values that validate themselves while they are deserialized, so serde_yaml reports a
//! bad one with its path and line.

use serde::{Deserialize, Deserializer, de::Error as _};

use crate::time::{Millis, parse_duration};

/// A percentage 0..=100.
#[derive(Clone, Copy, Debug)]
pub(super) struct Percent(pub f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !(0.0..=100.0).contains(&v) {
            return Err(D::Error::custom(format!("{v} is not a percentage between 0 and 100")));
        }
        Ok(Percent(v))
    }
}

/// A finite, non-negative number.
#[derive(Clone, Copy, Debug)]
pub(super) struct NonNegative(pub f64);

impl<'de> Deserialize<'de> for NonNegative {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || v < 0.0 {
            return Err(D::Error::custom(format!("{v} must be a finite number >= 0")));
        }
        Ok(NonNegative(v))
    }
}

/// A finite number > 0.
#[derive(Clone, Copy, Debug)]
pub(super) struct Positive(pub f64);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || v <= 0.0 {
            return Err(D::Error::custom(format!("{v} must be a finite number > 0")));
        }
        Ok(Positive(v))
    }
}

/// A share 0..=1.
#[derive(Clone, Copy, Debug)]
pub(super) struct Share(pub f64);

impl<'de> Deserialize<'de> for Share {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !(0.0..=1.0).contains(&v) {
            return Err(D::Error::custom(format!("{v} is not a share between 0 and 1")));
        }
        Ok(Share(v))
    }
}

/// A positive duration such as `30s`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Duration(pub Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match parse_duration(&text).map_err(D::Error::custom)? {
            Millis(0) => Err(D::Error::custom(format!("'{text}' must be longer than zero"))),
            span => Ok(Duration(span)),
        }
    }
}

/// A duration that may be zero (`0s`), such as a lag.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span(pub Millis);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map(Span).map_err(D::Error::custom)
    }
}

/// `auto` or a duration.
#[derive(Clone, Copy, Debug)]
pub(super) enum MaxAge {
    Auto,
    Fixed(Millis),
}

impl<'de> Deserialize<'de> for MaxAge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "auto" {
            return Ok(MaxAge::Auto);
        }
        match parse_duration(&text) {
            Ok(span) if span.0 > 0 => Ok(MaxAge::Fixed(span)),
            Ok(_) => Err(D::Error::custom("maxAge must be longer than zero")),
            Err(e) => Err(D::Error::custom(format!("{e}; or 'auto' (3 × period + 1m)"))),
        }
    }
}

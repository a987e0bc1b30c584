//! Kubernetes resource quantities ("250m", "8", "32Gi", "1e3") as integers.

/// A quantity that does not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantityError(String);

/// Parses a quantity into its value times `scale` (1000 for milli-cores, 1 for bytes),
/// rounded up like Kubernetes' `MilliValue`/`Value`.
fn parse_scaled(text: &str, scale: f64) -> Result<i64, QuantityError> {
    scaled(text, scale).map_err(QuantityError)
}

fn scaled(text: &str, scale: f64) -> Result<i64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (number, suffix) = match suffix.strip_prefix(['e', 'E']) {
        // An exponent ("1e3") is part of the number, not a suffix.
        Some(exp)
            if !exp.is_empty()
                && exp.trim_start_matches(['+', '-']).chars().all(|c| c.is_ascii_digit()) =>
        {
            (text, "")
        }
        _ => (number, suffix),
    };
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a quantity"))?;
    let multiplier = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        other => return Err(format!("'{text}' has an unknown suffix '{other}'")),
    };
    let scaled = value * multiplier * scale;
    if !scaled.is_finite() || scaled < 0.0 {
        return Err(format!("'{text}' must be a finite, non-negative quantity"));
    }
    if scaled > i64::MAX as f64 {
        return Err(format!("'{text}' is too large"));
    }
    Ok(scaled.ceil() as i64)
}

/// CPU quantity in milli-cores: "250m" → 250, "2" → 2000.
pub fn parse_cpu_millis(text: &str) -> Result<i64, QuantityError> {
    parse_scaled(text, 1000.0)
}

/// Memory (or any byte) quantity: "200Mi" → 209715200.
pub fn parse_bytes(text: &str) -> Result<i64, QuantityError> {
    parse_scaled(text, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_cpu_millis("250m"), Ok(250));
        assert_eq!(parse_cpu_millis("2"), Ok(2000));
        assert_eq!(parse_cpu_millis("0.5"), Ok(500));
        assert_eq!(parse_cpu_millis("1e3"), Ok(1_000_000));
        assert_eq!(parse_cpu_millis("100u"), Ok(1)); // rounded up, like MilliValue
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(parse_bytes("200Mi"), Ok(200 * 1024 * 1024));
        assert_eq!(parse_bytes("32Gi"), Ok(32 * 1024 * 1024 * 1024));
        assert_eq!(parse_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("128974848"), Ok(128_974_848));
        assert_eq!(parse_bytes("129e6"), Ok(129_000_000));
    }

    #[test]
    fn bad_quantities_are_errors() {
        assert!(parse_bytes("abc").is_err());
        assert!(parse_bytes("12Qi").unwrap_err().to_string().contains("suffix"));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("").is_err());
    }
}

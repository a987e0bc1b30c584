//! Kubernetes resource quantities ("250m", "8", "32Gi", "1e3") as integers.

/// A quantity that does not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantityError(String);

/// Parses a quantity into its value times `scale` (1000 for milli-cores, 1 for bytes),
/// rounded up like Kubernetes' `MilliValue`/`Value`.
fn parse_scaled(text: &str, scale: u32) -> Result<i64, QuantityError> {
    scaled(text, scale).map_err(QuantityError)
}

/// Most significant digits a quantity may carry (an `i64` has 19): with at most 2^60 from a
/// binary suffix, the product stays within a `u128`.
const MAX_DIGITS: usize = 20;

/// Exact decimal arithmetic, as Kubernetes' `resource.Quantity` does: the number is read as
/// integer digits and a power of ten, never as an `f64` (whose `9m` is 9.000000000000002
/// milli-cores, rounded up to 10).
fn scaled(text: &str, scale: u32) -> Result<i64, String> {
    let text = text.trim();
    let not_a_quantity = || format!("'{text}' is not a quantity");
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len =
        unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(not_a_quantity());
    }
    // Power of ten and power of two the suffix multiplies by.
    let (mut exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => match other.strip_prefix(['e', 'E']) {
            // A decimal exponent ("1e3", "5E-2") is part of the number, not a suffix.
            Some(exp) => (exp.parse::<i64>().map_err(|_| not_a_quantity())?, 0),
            None => return Err(format!("'{text}' has an unknown suffix '{other}'")),
        },
    };
    exp10 += i64::from(scale.ilog10()) - fraction.len() as i64;
    let digits = format!("{whole}{fraction}");
    let significant = digits.trim_start_matches('0');
    let trimmed = significant.trim_end_matches('0');
    exp10 += (significant.len() - trimmed.len()) as i64;
    if trimmed.is_empty() {
        return Ok(0);
    }
    if negative {
        return Err(format!("'{text}' must not be negative"));
    }
    if trimmed.len() > MAX_DIGITS {
        return Err(format!("'{text}' has more than {MAX_DIGITS} significant digits"));
    }
    let too_large = || format!("'{text}' is too large");
    let mantissa: u128 = trimmed.parse().map_err(|_| not_a_quantity())?;
    let numerator = mantissa << exp2;
    let value = if exp10 >= 0 {
        u32::try_from(exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .and_then(|p| numerator.checked_mul(p))
            .ok_or_else(too_large)?
    } else {
        match u32::try_from(-exp10).ok().and_then(|e| 10u128.checked_pow(e)) {
            // Rounded up, like MilliValue and Value.
            Some(divisor) => numerator.div_ceil(divisor),
            // Below 10^-38 of the unit and not zero: one unit.
            None => 1,
        }
    };
    i64::try_from(value).map_err(|_| too_large())
}

/// CPU quantity in milli-cores: "250m" → 250, "2" → 2000.
pub fn parse_cpu_millis(text: &str) -> Result<i64, QuantityError> {
    parse_scaled(text, 1000)
}

/// Memory (or any byte) quantity: "200Mi" → 209715200.
pub fn parse_bytes(text: &str) -> Result<i64, QuantityError> {
    parse_scaled(text, 1)
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
        assert!(parse_bytes(".").is_err());
        assert!(parse_bytes("1.2.3").is_err());
        assert!(parse_bytes("1e").is_err());
        assert!(parse_bytes("1e3.5").is_err());
        assert!(parse_bytes("8Ei").unwrap_err().to_string().contains("too large"));
        assert!(parse_bytes("1e400").unwrap_err().to_string().contains("too large"));
        assert!(parse_bytes("123456789012345678901.5").unwrap_err().to_string().contains("digits"));
    }

    /// Found by tests/tests/fuzz_pods.rs through the Go plugin's corpus: the f64 parser read
    /// `9m` as 9.000000000000002 milli-cores and rounded it up to 10 (one value in eight of
    /// `1m`..`100000m`), `60623m` as 60624 and `8.409G` as 8409000001 bytes. Kubernetes reads
    /// quantities as exact decimals.
    #[test]
    fn quantities_are_exact_decimals() {
        for n in 1..=100_000 {
            assert_eq!(parse_cpu_millis(&format!("{n}m")), Ok(n), "{n}m");
        }
        assert_eq!(parse_cpu_millis("60623m"), Ok(60623));
        assert_eq!(parse_bytes("8.409G"), Ok(8_409_000_000));
        assert_eq!(parse_bytes("16.472M"), Ok(16_472_000));
        // 1.5 × 2^30 exactly; 48.602 × 1024 = 49768.448 → 49769 (rounded up).
        assert_eq!(parse_bytes("1.5Gi"), Ok(1_610_612_736));
        assert_eq!(parse_bytes("48.602Ki"), Ok(49_769));
        // 2E2 = 200 cores; +5 = 5 cores; 5e-1 = 0.5 core; 1e-3 = 1 milli-core.
        assert_eq!(parse_cpu_millis("2E2"), Ok(200_000));
        assert_eq!(parse_cpu_millis("+5"), Ok(5000));
        assert_eq!(parse_cpu_millis("5e-1"), Ok(500));
        assert_eq!(parse_cpu_millis("1e-3"), Ok(1));
        // Anything above zero is at least one unit, however small: 1e-400 → 1; zero is zero.
        assert_eq!(parse_bytes("1e-400"), Ok(1));
        assert_eq!(parse_bytes("0.000"), Ok(0));
        assert_eq!(parse_bytes("-0"), Ok(0));
        // 1E is the exa suffix, not an exponent: 10^18 bytes.
        assert_eq!(parse_bytes("1E"), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_bytes("7Ei"), Ok(7 << 60));
        assert_eq!(parse_bytes("9223372036854775807"), Ok(i64::MAX));
        assert!(parse_bytes("9223372036854775808").is_err());
        // Leading and trailing zeros are not significant digits.
        assert_eq!(parse_bytes("000000000000000000000001.50000000000000000000000Ki"), Ok(1536));
    }
}

//! What the property and fuzz tests of every crate share: how many cases to run
//! (`WATERLINE_FUZZ_CASES`, else the test's own default, so that `make test` stays quick and
//! RELIABILITY.md's long mode runs the same test with many more), the seed of the tests
//! that drive real binaries (`WATERLINE_FUZZ_SEED`), and proptest's configuration.
//!
//! Depends on no waterline crate, so the pure crates' tests (core's) can use it as well as
//! the harness's.
#![forbid(unsafe_code)]

use std::str::FromStr;

use proptest::test_runner::{Config, FileFailurePersistence};

/// The variable's value when it is set to a number of type `T`.
fn number<T: FromStr>(name: &str) -> Option<T> {
    parse(std::env::var(name).ok().as_deref())
}

fn parse<T: FromStr>(value: Option<&str>) -> Option<T> {
    value.and_then(|v| v.parse().ok())
}

/// `WATERLINE_FUZZ_CASES` when it is set to a number, else `default`.
pub fn cases(default: u32) -> u32 {
    number("WATERLINE_FUZZ_CASES").unwrap_or(default)
}

/// proptest's configuration for a test that runs `default_cases` cases in `make test`:
/// failing inputs are kept in a `.regressions` file beside the test's source, which later
/// runs replay first.
pub fn proptest_config(default_cases: u32) -> Config {
    with_cases(cases(default_cases))
}

fn with_cases(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

/// For a fuzz test over the real binaries: the run's seed (`WATERLINE_FUZZ_SEED` replays
/// one, else the clock picks it) as itself and as proptest's 32-byte ChaCha seed, and the
/// number of cases (`WATERLINE_FUZZ_CASES`, else `default_cases`); printed, so a failure
/// can be replayed.
pub fn seed_and_cases(test: &str, default_cases: u64) -> (u64, [u8; 32], u64) {
    let seed = number("WATERLINE_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let cases = number("WATERLINE_FUZZ_CASES").unwrap_or(default_cases);
    println!("{test}: seed {seed}, {cases} cases (replay: WATERLINE_FUZZ_SEED={seed})");
    (seed, chacha_seed(seed), cases)
}

fn chacha_seed(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_overrides_the_default_and_anything_else_is_ignored() {
        assert_eq!(parse::<u32>(Some("7")), Some(7));
        assert_eq!(parse::<u32>(Some("many")), None);
        assert_eq!(parse::<u32>(Some("")), None);
        assert_eq!(parse::<u32>(None), None);
        assert_eq!(parse::<u64>(Some("100000")), Some(100_000));
    }

    #[test]
    fn the_config_keeps_failures_beside_the_test_and_runs_the_cases_asked_for() {
        let config = with_cases(7);
        assert_eq!(config.cases, 7);
        let persistence = format!("{:?}", config.failure_persistence);
        assert!(persistence.contains("WithSource(\"regressions\")"), "{persistence}");
    }

    #[test]
    fn the_seed_fills_the_first_eight_bytes_little_endian() {
        let bytes = chacha_seed(0x0102_0304_0506_0708);
        assert_eq!(bytes[..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert!(bytes[8..].iter().all(|b| *b == 0));
    }
}

//! What every fuzz test over the real binaries shares: the seed (`WATERLINE_FUZZ_SEED`
//! replays one, else the clock picks it) and the case count (`WATERLINE_FUZZ_CASES`, else
//! the test's default), printed so a failure can be replayed.

/// The run's seed as proptest's 32-byte ChaCha seed, and the number of cases.
pub fn seed_and_cases(test: &str, default_cases: u64) -> (u64, [u8; 32], u64) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("WATERLINE_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let cases = env("WATERLINE_FUZZ_CASES").unwrap_or(default_cases);
    println!("{test}: seed {seed}, {cases} cases (replay: WATERLINE_FUZZ_SEED={seed})");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    (seed, bytes, cases)
}

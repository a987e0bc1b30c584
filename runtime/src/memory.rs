//! Process-wide allocator settings, applied before the async runtime starts its threads.

/// Caps glibc's malloc arenas at two unless the operator chose with `MALLOC_ARENA_MAX`.
///
/// glibc gives each thread that meets contention its own arena (up to 8 × cores) and keeps
/// what is freed there for reuse. The collector's refreshes briefly allocate ~12 MB on
/// whichever tokio worker runs them, so every worker's arena ends up holding a refresh's
/// worth: 65.6 MiB RSS at 5,000 nodes and 50,000 ledger entries with the default, 59–61 MiB
/// with two arenas, 53 MiB with one (BENCHMARKS.md §4). Two keeps the two request-serving
/// workers from contending on one lock.
#[allow(unsafe_code)]
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only adjusts allocator parameters; it is called before any
        // other thread of this process exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

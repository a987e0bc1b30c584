//! Process-wide allocator settings, applied before the async runtime starts its threads.

/// Caps glibc's malloc arenas at one unless the operator chose with `MALLOC_ARENA_MAX`.
///
/// glibc gives each thread that meets contention its own arena (up to 8 × cores) and keeps
/// what is freed there for reuse. The collector's refreshes briefly allocate ~12 MB on
/// whichever tokio worker runs them, so every worker's arena ends up holding a refresh's
/// worth: 65.6 MiB RSS at 5,000 nodes and 50,000 ledger entries with the default, 59–61 MiB
/// with two arenas, 53 MiB with one (docs/benchmarks-history.md §4). The scorer's two published
/// generations are changed by whichever worker serves a Reserve, so each copy's rows are
/// spread over every arena: with two, its RSS rose 40 → 64 MiB in the 2-minute soak on an
/// idle machine while heaptrack saw the heap steady at 24 MB; with one it stayed at 45 MiB
/// (docs/benchmarks-history.md, "Soak"). Small allocations are served from glibc's per-thread
/// caches without the arena's lock, so one arena costs the request path no contention measured.
#[allow(unsafe_code)]
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only adjusts allocator parameters; it is called before any
        // other thread of this process exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

//! Generations published so that readers never wait for a writer.
//!
//! Two copies of the value, as in the left-right pattern: readers load the current one from
//! an `ArcSwap` (no lock; a reader keeps the generation it loaded until it drops it, however
//! many writes are published meanwhile), and the single writer changes the other copy, then
//! swaps it in. Each write is a function applied to both copies: to the spare one at once,
//! and to the one it replaced at the start of the next write, once the readers of that
//! generation are gone. A writer that finds them still there after [`SPARE_WAIT`] copies
//! the current generation instead of waiting longer, so a reader that holds a generation
//! too long (or a writer that holds one itself) costs a copy, never a deadlock.
//!
//! What it costs: two copies in memory, and each change applied twice.
//!
//! Why written here, measured (`cargo bench -p waterline-scorer --bench generations`,
//! release, 5,000 nodes with ten placements each, 2 vCPU at load 7-10, 2026-12-02): a
//! Reserve written this way takes 5.0 µs (4.7-5.3); a copy of the generation, which a
//! copy-on-write writer (`ArcSwap::rcu`) would make for every Reserve before applying it,
//! takes 31.8 ms (30.0-33.7) — 6,000 times as long, paid for each pod of a burst. The second
//! copy costs the scorer +11 MiB at 5,000 nodes (BENCHMARKS.md §2, session 7), and in the
//! Session runs there the writer never had to copy (`readers held the previous generation`
//! logged 0 times). The `left-right` crate is the same pattern, but its `WriteHandle::publish`
//! waits for every reader of the old copy without a bound (jonhoo/left-right src/write.rs)
//! and a `ReadHandle` is one per thread (its `Cell`; more through `ReadHandleFactory`,
//! src/read.rs), where here any task reads through `&Store` and a reader that holds on
//! costs a copy, never a stall.
//! The collector has no counterpart: its state is one mutex, held for microseconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, Guard};

/// How long a writer waits for the last readers of the previous generation before it
/// copies the current one instead (a request holds a generation for about a millisecond).
pub const SPARE_WAIT: Duration = Duration::from_millis(10);

/// One change, applied to each copy in turn (so it must be deterministic).
pub type Change<T> = Arc<dyn Fn(&mut T) + Send + Sync>;

pub struct Published<T> {
    current: ArcSwap<T>,
    writer: Mutex<Writer<T>>,
}

struct Writer<T> {
    /// The generation the last write replaced, and the changes it has not had yet.
    spare: Option<Arc<T>>,
    behind: Vec<Change<T>>,
    /// Writes that copied the current generation because readers kept the spare.
    copies: u64,
}

impl<T: Clone> Published<T> {
    pub fn new(value: T) -> Self {
        Published {
            current: ArcSwap::from_pointee(value),
            writer: Mutex::new(Writer { spare: None, behind: Vec::new(), copies: 0 }),
        }
    }

    /// The current generation: no lock, never waits.
    pub fn load(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    /// Publishes one change. `make` runs with the writer's lock held, so what it reads
    /// (and the order of the changes it makes) is consistent with every other write.
    // The wait is bounded by the wall clock on purpose: under tokio's paused test clock a
    // spinning writer would never see its deadline pass.
    #[allow(clippy::disallowed_methods)]
    pub fn write(&self, make: impl FnOnce() -> Change<T>) {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let change = make();
        let mut spare = match writer.spare.take() {
            Some(spare) => spare,
            None => Arc::new(T::clone(&self.current.load())),
        };
        let deadline = Instant::now() + SPARE_WAIT;
        while Arc::get_mut(&mut spare).is_none() {
            if Instant::now() >= deadline {
                // The current generation has every change but this one.
                spare = Arc::new(T::clone(&self.current.load()));
                writer.behind.clear();
                writer.copies += 1;
                tracing::debug!("readers held the previous generation: copied the current one");
                break;
            }
            std::thread::yield_now();
        }
        let value = Arc::get_mut(&mut spare).expect("no reader holds the spare generation");
        for behind in writer.behind.drain(..) {
            behind(value);
        }
        change(value);
        writer.spare = Some(self.current.swap(spare));
        writer.behind.push(change);
    }

    /// Writes that had to copy the current generation (readers kept the previous one).
    pub fn copies(&self) -> u64 {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).copies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(value: u32) -> Change<Vec<u32>> {
        Arc::new(move |v: &mut Vec<u32>| v.push(value))
    }

    #[test]
    fn each_write_reaches_both_copies_in_order() {
        let published = Published::new(Vec::new());
        for i in 0..5 {
            published.write(|| push(i));
            assert_eq!(**published.load(), (0..=i).collect::<Vec<_>>());
        }
        assert_eq!(published.copies(), 0, "no reader held a generation");
    }

    #[test]
    fn a_reader_keeps_its_generation_and_never_blocks_a_write() {
        let published = Published::new(Vec::new());
        published.write(|| push(1));
        let held = published.load();
        // The second write waits for `held` (the spare) at most SPARE_WAIT, then copies.
        published.write(|| push(2));
        published.write(|| push(3));
        assert_eq!(**held, vec![1], "a reader's generation does not change under it");
        assert_eq!(**published.load(), vec![1, 2, 3]);
        assert!(published.copies() >= 1);
        drop(held);
        published.write(|| push(4));
        published.write(|| push(5));
        assert_eq!(**published.load(), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn readers_on_other_threads_see_whole_generations_only() {
        // Each write appends to both ends: a reader must never see one without the other.
        let published = Arc::new(Published::new((Vec::<u32>::new(), Vec::<u32>::new())));
        let reader = {
            let published = published.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let generation = published.load();
                    assert_eq!(generation.0, generation.1);
                }
            })
        };
        for i in 0..2_000 {
            published.write(|| {
                Arc::new(move |(a, b): &mut (Vec<u32>, Vec<u32>)| {
                    a.push(i);
                    b.push(i);
                })
            });
        }
        reader.join().unwrap();
        assert_eq!(published.load().0.len(), 2_000);
    }
}

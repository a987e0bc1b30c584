//! Filter's scores, kept for the same pod's prioritize so a pod costs one scorer call
//! (`Evaluate`) instead of two. Keyed by pod uid; an entry lives at most `ttl` (a scheduling
//! cycle takes milliseconds, so anything older is from an earlier attempt whose snapshot has
//! moved on) and is taken, not read, by prioritize (kube-scheduler prioritizes once per
//! filter). At most `capacity` entries: filter's of pods prioritize never saw (a single
//! feasible node skips prioritize) are evicted on insert — expired ones first, then the
//! oldest — so no background task is needed.
//!
//! A `DashMap`: many handlers insert and take concurrently, each touching one key; no
//! reference into it outlives a call (style.md practice 5).

use std::collections::HashMap;
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

/// The feasible nodes' scores (0..100) from one Evaluate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cached {
    at: Instant,
    scores: HashMap<String, i64>,
}

/// Why prioritize found no usable entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// No filter for this pod (or it was evicted).
    Absent,
    /// Older than the TTL.
    Expired,
    /// A candidate filter did not score (prioritize's are normally a subset of filter's
    /// feasible nodes; another extender or a retry may break that).
    Incomplete,
}

impl Miss {
    pub fn label(self) -> &'static str {
        match self {
            Miss::Absent => "absent",
            Miss::Expired => "expired",
            Miss::Incomplete => "incomplete",
        }
    }
}

pub struct ScoreCache {
    entries: DashMap<String, Cached>,
    ttl: Duration,
    capacity: usize,
}

impl ScoreCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        ScoreCache { entries: DashMap::new(), ttl, capacity }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keeps `scores` for pod `uid` (replacing an earlier filter's). A zero capacity or an
    /// empty uid keeps nothing.
    pub fn insert(&self, uid: &str, scores: HashMap<String, i64>, now: Instant) {
        if uid.is_empty() || self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(uid) {
            self.evict(now);
        }
        self.entries.insert(uid.to_owned(), Cached { at: now, scores });
    }

    /// Drops the expired entries; if that frees nothing, the oldest one. O(entries), but only
    /// when the cache is full.
    fn evict(&self, now: Instant) {
        self.entries.retain(|_, c| now.saturating_duration_since(c.at) < self.ttl);
        if self.entries.len() < self.capacity {
            return;
        }
        let oldest = self.entries.iter().min_by_key(|e| e.value().at).map(|e| e.key().clone());
        if let Some(uid) = oldest {
            self.entries.remove(&uid);
        }
    }

    /// Takes pod `uid`'s scores for `names`, in their order, when the entry is fresh and
    /// scored every one of them. The entry is gone afterwards either way.
    pub fn take(&self, uid: &str, names: &[String], now: Instant) -> Result<Vec<i64>, Miss> {
        let (_, cached) = self.entries.remove(uid).ok_or(Miss::Absent)?;
        if now.saturating_duration_since(cached.at) >= self.ttl {
            return Err(Miss::Expired);
        }
        names.iter().map(|n| cached.scores.get(n).copied().ok_or(Miss::Incomplete)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
        pairs.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_fresh_entry_answers_once_in_candidate_order() {
        let cache = ScoreCache::new(Duration::from_secs(30), 10);
        let t0 = Instant::now();
        cache.insert("u", scores(&[("a", 10), ("b", 90), ("c", 50)]), t0);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(cache.take("u", &names(&["c", "a"]), later), Ok(vec![50, 10]));
        assert_eq!(cache.take("u", &names(&["c"]), later), Err(Miss::Absent));
    }

    #[test]
    fn expired_and_incomplete_entries_miss() {
        let cache = ScoreCache::new(Duration::from_secs(30), 10);
        let t0 = Instant::now();
        cache.insert("old", scores(&[("a", 1)]), t0);
        assert_eq!(
            cache.take("old", &names(&["a"]), t0 + Duration::from_secs(30)),
            Err(Miss::Expired)
        );
        cache.insert("u", scores(&[("a", 1)]), t0);
        assert_eq!(cache.take("u", &names(&["a", "rejected"]), t0), Err(Miss::Incomplete));
        cache.insert("", scores(&[("a", 1)]), t0);
        assert!(cache.is_empty(), "a pod without uid is not cached");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_oldest() {
        let cache = ScoreCache::new(Duration::from_secs(30), 3);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert("p1", scores(&[("a", 1)]), at(0));
        cache.insert("p2", scores(&[("a", 2)]), at(10));
        cache.insert("p3", scores(&[("a", 3)]), at(20));
        // p1 expired at 30: only it goes.
        cache.insert("p4", scores(&[("a", 4)]), at(35));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.take("p1", &names(&["a"]), at(35)), Err(Miss::Absent));
        // Nothing expired at 37: the oldest (p2, from 10) goes.
        cache.insert("p5", scores(&[("a", 5)]), at(37));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.take("p2", &names(&["a"]), at(37)), Err(Miss::Absent));
        assert_eq!(cache.take("p5", &names(&["a"]), at(37)), Ok(vec![5]));
        // Replacing an entry of the same pod evicts nothing.
        cache.insert("p6", scores(&[("a", 6)]), at(38));
        cache.insert("p6", scores(&[("a", 7)]), at(38));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.take("p3", &names(&["a"]), at(38)), Ok(vec![3]));
    }
}

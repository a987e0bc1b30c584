use super::*;

const T0: UnixMillis = UnixMillis(1_800_000_000_000);
const WINDOW: Millis = Millis::from_mins(7);

fn entry(uid: &str, node: &str, placed_at: UnixMillis, source: LedgerSource) -> LedgerEntry {
    LedgerEntry {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        node: node.into(),
        placed_at,
        usage: Usage { cpu_millis: 850, memory_bytes: 1 << 20 },
        source,
        labels: BTreeMap::new(),
    }
}

#[test]
fn apply_then_delete() {
    let mut ledger = Ledger::default();
    assert!(ledger.apply(entry("a", "n1", T0, LedgerSource::Watch)).is_some());
    assert!(ledger.apply(entry("b", "n1", T0, LedgerSource::Watch)).is_some());
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger.on_node("n1").len(), 2);
    assert_eq!(ledger.delete("a").map(|e| e.uid), Some("a".into()));
    assert_eq!(ledger.delete("a"), None);
    assert_eq!(ledger.len(), 1);
}

#[test]
fn reserve_is_idempotent_and_keeps_the_first_time() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, LedgerSource::Reserve));
    let later = T0.plus(Millis::from_secs(30));
    assert!(ledger.apply(entry("a", "n1", later, LedgerSource::Reserve)).is_none());
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger.get("a").unwrap().placed_at, T0);
}

#[test]
fn watch_confirms_a_reserve_without_restarting_its_clock() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, LedgerSource::Reserve));
    let bound = T0.plus(Millis(200));
    let stored = ledger.apply(entry("a", "n1", bound, LedgerSource::Watch)).unwrap();
    assert_eq!(stored.source, LedgerSource::Watch);
    assert_eq!(stored.placed_at, T0);
}

#[test]
fn node_change_moves_the_entry() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, LedgerSource::Watch));
    ledger.apply(entry("a", "n2", T0, LedgerSource::Watch));
    assert!(ledger.on_node("n1").is_empty());
    assert_eq!(ledger.on_node("n2").len(), 1);
    assert_eq!(ledger.len(), 1);
}

#[test]
fn relist_drops_pods_deleted_while_disconnected() {
    let mut ledger = Ledger::default();
    for uid in ["a", "b", "c"] {
        ledger.apply(entry(uid, "n1", T0, LedgerSource::Watch));
    }
    let removed = ledger.reset(
        [entry("a", "n1", T0, LedgerSource::Watch), entry("c", "n1", T0, LedgerSource::Watch)],
        T0.plus(Millis::from_secs(60)),
        WINDOW,
    );
    assert_eq!(removed, vec!["b".to_string()]);
    assert_eq!(ledger.len(), 2);
}

#[test]
fn relist_keeps_young_reserves_and_drops_old_ones() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("old", "n1", T0, LedgerSource::Reserve));
    let now = T0.plus(Millis::from_mins(10));
    ledger.apply(entry("young", "n1", now.minus(Millis::from_secs(5)), LedgerSource::Reserve));
    let removed = ledger.reset(Vec::new(), now, WINDOW);
    assert_eq!(removed, vec!["old".to_string()]);
    assert!(ledger.get("young").is_some());
}

#[test]
fn restart_relist_does_not_double_count() {
    // Before the restart the ledger holds a pod; after it the same pod is listed again with
    // the same PodScheduled time. It must count once, with the original time.
    let mut before = Ledger::default();
    before.apply(entry("a", "n1", T0, LedgerSource::Watch));
    let now = T0.plus(Millis::from_mins(3));
    let load_before = before.unabsorbed("n1", now, WINDOW);

    let mut after = Ledger::default();
    after.reset([entry("a", "n1", T0, LedgerSource::Watch)], now, WINDOW);
    after.reset([entry("a", "n1", T0, LedgerSource::Watch)], now, WINDOW);
    assert_eq!(after.unabsorbed("n1", now, WINDOW), load_before);
    assert_eq!(after.get("a").unwrap().placed_at, T0);
}

#[test]
fn load_expires_after_the_absorb_window() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, LedgerSource::Watch));
    ledger.apply(entry("b", "n1", T0.plus(Millis::from_mins(5)), LedgerSource::Watch));
    let at = |mins| T0.plus(Millis::from_mins(mins));
    assert_eq!(ledger.unabsorbed("n1", at(1), WINDOW).cpu_millis, 1700);
    assert_eq!(ledger.unabsorbed("n1", at(7), WINDOW).cpu_millis, 850);
    assert_eq!(ledger.unabsorbed("n1", at(12), WINDOW).cpu_millis, 0);
    // the entries themselves stay (anti-colocation still sees them)
    assert_eq!(ledger.on_node("n1").len(), 2);
    assert_eq!(ledger.get("a").unwrap().absorb_remaining(at(2), WINDOW), Millis::from_mins(5));
    assert_eq!(ledger.get("a").unwrap().absorb_remaining(at(9), WINDOW), Millis(0));
}

#[test]
fn unconfirmed_reserves_are_pruned_after_their_ttl() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("r", "n1", T0, LedgerSource::Reserve));
    ledger.apply(entry("w", "n1", T0, LedgerSource::Watch));
    assert!(
        ledger.prune_unconfirmed(T0.plus(Millis::from_mins(14)), Millis::from_mins(15)).is_empty()
    );
    assert_eq!(
        ledger.prune_unconfirmed(T0.plus(Millis::from_mins(15)), Millis::from_mins(15)),
        vec!["r".to_string()]
    );
    assert!(ledger.get("w").is_some());
}

#[test]
fn placements_within_counts_by_window() {
    let mut ledger = Ledger::default();
    let now = T0.plus(Millis::from_mins(10));
    for (i, mins_ago) in [1, 2, 3, 4, 0, 0, 0].iter().enumerate() {
        let at = now.minus(Millis::from_mins(*mins_ago)).minus(Millis::from_secs(1));
        ledger.apply(entry(&i.to_string(), "n1", at, LedgerSource::Reserve));
    }
    assert_eq!(ledger.placements_within("n1", now, Millis::from_mins(5)), 7);
    assert_eq!(ledger.placements_within("n1", now, Millis::from_mins(1)), 3);
}

fn provisional(ttl: Millis) -> LedgerSource {
    LedgerSource::Provisional { expires_at: T0.plus(ttl) }
}

#[test]
fn a_provisional_entry_expires_after_its_ttl_unless_a_watch_confirms_it() {
    let reserve_ttl = Millis::from_mins(15);
    let ttl = Millis::from_secs(10);
    let mut ledger = Ledger::default();
    ledger.apply(entry("guess", "n1", T0, provisional(ttl)));
    ledger.apply(entry("confirmed", "n1", T0, provisional(ttl)));
    ledger.apply(entry("reserved", "n2", T0, LedgerSource::Reserve));
    // Its own TTL, not reserve_ttl: still there just before, gone at it.
    assert!(ledger.prune_unconfirmed(T0.plus(Millis(9_999)), reserve_ttl).is_empty());
    let bound = T0.plus(Millis::from_secs(2));
    let stored = ledger.apply(entry("confirmed", "n1", bound, LedgerSource::Watch)).unwrap();
    assert_eq!((stored.source, stored.placed_at), (LedgerSource::Watch, T0));
    assert_eq!(ledger.prune_unconfirmed(T0.plus(ttl), reserve_ttl), ["guess"]);
    assert_eq!(ledger.get("confirmed").unwrap().node, "n1");
    // The Reserve keeps its own, longer TTL.
    assert_eq!(ledger.get("reserved").unwrap().source, LedgerSource::Reserve);
    assert_eq!(ledger.prune_unconfirmed(T0.plus(reserve_ttl), reserve_ttl), ["reserved"]);
}

#[test]
fn a_watch_entry_on_another_node_replaces_a_provisional_one() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, provisional(Millis::from_secs(10))));
    let bound = T0.plus(Millis(300));
    let stored = ledger.apply(entry("a", "n2", bound, LedgerSource::Watch)).unwrap();
    assert_eq!((stored.node.as_str(), stored.source), ("n2", LedgerSource::Watch));
    assert!(ledger.on_node("n1").is_empty(), "the guess leaves the node it named");
    assert_eq!(ledger.len(), 1);
    // A Reserve on another node (the bind verb's) replaces it the same way.
    ledger.apply(entry("b", "n1", T0, provisional(Millis::from_secs(10))));
    ledger.apply(entry("b", "n3", bound, LedgerSource::Reserve));
    assert_eq!(ledger.get("b").unwrap().node, "n3");
    assert!(ledger.on_node("n1").is_empty());
}

#[test]
fn a_reserve_confirms_a_provisional_entry_on_the_same_node_keeping_its_time() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, provisional(Millis::from_secs(10))));
    let bound = T0.plus(Millis(300));
    let stored = ledger.apply(entry("a", "n1", bound, LedgerSource::Reserve)).unwrap();
    assert_eq!((stored.source, stored.placed_at), (LedgerSource::Reserve, T0));
    // Now a Reserve: its TTL is reserve_ttl, not the guess's.
    assert!(ledger.prune_unconfirmed(T0.plus(Millis::from_secs(60)), WINDOW).is_empty());
}

#[test]
fn a_provisional_entry_never_replaces_a_decision() {
    let guess = |node: &str| entry("a", node, T0.plus(Millis(5)), provisional(Millis(10_000)));
    for decided in [LedgerSource::Reserve, LedgerSource::Watch] {
        let mut ledger = Ledger::default();
        ledger.apply(entry("a", "n1", T0, decided));
        assert_eq!(ledger.apply(guess("n2")), None, "{decided:?}: another node");
        assert_eq!(ledger.apply(guess("n1")), None, "{decided:?}: the same node");
        let kept = ledger.get("a").unwrap();
        assert_eq!((kept.node.as_str(), kept.source), ("n1", decided));
    }
    // A newer guess replaces an older one (the pod was prioritized again).
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, provisional(Millis(10_000))));
    let again = T0.plus(Millis(20_000));
    let renewed = LedgerSource::Provisional { expires_at: again.plus(Millis(10_000)) };
    assert_eq!(ledger.apply(entry("a", "n2", again, renewed)).unwrap().node, "n2");
}

#[test]
fn a_relist_keeps_provisional_entries_until_they_expire() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("guess", "n1", T0, provisional(Millis::from_secs(10))));
    let grace = Millis::from_secs(1);
    assert!(ledger.reset([], T0.plus(Millis::from_secs(5)), grace).is_empty());
    assert_eq!(ledger.reset([], T0.plus(Millis::from_secs(10)), grace), ["guess"]);
}

#[test]
fn a_guess_is_confirmed_moved_or_expired_once() {
    let ttl = Millis::from_secs(10);
    let mut ledger = Ledger::default();
    for (uid, node) in [("same", "n1"), ("other", "n1"), ("late", "n1")] {
        ledger.apply(entry(uid, node, T0, provisional(ttl)));
    }
    let bound = T0.plus(Millis(300));
    // A renewed guess decides nothing, nor does a pod that was never guessed.
    assert_eq!(ledger.guess_outcome(&entry("same", "n2", bound, provisional(ttl))), None);
    assert_eq!(ledger.guess_outcome(&entry("unknown", "n1", bound, LedgerSource::Watch)), None);
    let watched = entry("same", "n1", bound, LedgerSource::Watch);
    assert_eq!(ledger.guess_outcome(&watched), Some(GuessOutcome::Confirmed));
    ledger.apply(watched.clone());
    // Once decided, the pod holds no guess any more: the watch after the Reserve counts nothing.
    assert_eq!(ledger.guess_outcome(&watched), None);
    let reserved = entry("other", "n2", bound, LedgerSource::Reserve);
    assert_eq!(ledger.guess_outcome(&reserved), Some(GuessOutcome::Moved));
    ledger.apply(reserved);
    // "late" is the one guess left: expired at T0 + 10 s, not a millisecond before.
    assert_eq!(ledger.expired_guesses(T0.plus(Millis(9_999))), 0);
    assert_eq!(ledger.expired_guesses(T0.plus(ttl)), 1);
    assert_eq!(ledger.prune_unconfirmed(T0.plus(ttl), Millis::from_mins(15)), ["late"]);
}

/// docs/design.md#departures: a watched pod that leaves becomes its departure, keyed by its
/// uid, with its node, estimate and arrival; nothing but a departure changes it after.
#[test]
fn a_watched_pod_departs_and_stays_departed() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("a", "n1", T0, LedgerSource::Watch));
    let left = T0.plus(Millis::from_mins(20));
    let departure = ledger.depart("a", left).unwrap();
    assert_eq!(
        departure.source,
        LedgerSource::Departure { departed_at: left, arrival_known: true }
    );
    assert_eq!((departure.placed_at, departure.node.as_str()), (T0, "n1"));
    assert_eq!(ledger.len(), 1);
    // A late watch event or Reserve of the pod never brings it back, on any node.
    assert!(ledger.apply(entry("a", "n1", T0, LedgerSource::Watch)).is_none());
    assert!(ledger.apply(entry("a", "n2", T0, LedgerSource::Reserve)).is_none());
    assert_eq!(ledger.get("a").unwrap(), &departure);
    // Departing again changes nothing; a departure told twice keeps the earliest time.
    assert!(ledger.depart("a", left.plus(Millis(5))).is_none());
    let earlier = left.minus(Millis(1_000));
    let told_earlier = entry("a", "n1", T0, LedgerSource::Watch).departure(earlier);
    let stored = ledger.apply(told_earlier).unwrap();
    // The arrival it knew is kept though the second one did not know it.
    assert_eq!(
        stored.source,
        LedgerSource::Departure { departed_at: earlier, arrival_known: true }
    );
    assert_eq!(stored.placed_at, T0);
    // Not an arrival: no hot-value binding, and no placement of its own.
    assert_eq!(ledger.placements_within("n1", left, Millis::from_mins(60)), 0);
}

#[test]
fn a_pod_only_reserved_or_guessed_has_nothing_to_depart() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("r", "n1", T0, LedgerSource::Reserve));
    let guess = LedgerSource::Provisional { expires_at: T0.plus(Millis(15_000)) };
    ledger.apply(entry("g", "n1", T0, guess));
    assert_eq!(ledger.depart("r", T0), None);
    assert_eq!(ledger.depart("g", T0), None);
    assert_eq!(ledger.depart("unknown", T0), None);
    assert_eq!(ledger.len(), 2);
}

/// The credit's arithmetic per window, 850 m estimate, 7 m absorb window.
#[test]
fn a_departure_cancels_or_credits_by_the_window() {
    let hold = LedgerWindow { absorb: WINDOW, departures: DepartureCredit::Hold, credit: WINDOW };
    let mut ledger = Ledger::default();
    // "old" arrived 20 m before leaving (absorbed): credited; "new" 2 m before: cancelled.
    let left = T0.plus(Millis::from_mins(20));
    ledger.apply(entry("old", "n1", T0, LedgerSource::Watch));
    ledger.apply(entry("new", "n1", left.minus(Millis::from_mins(2)), LedgerSource::Watch));
    assert_eq!(ledger.unabsorbed("n1", left, WINDOW).cpu_millis, 850);
    ledger.depart("old", left);
    ledger.depart("new", left);
    let at = |mins| left.plus(Millis::from_mins(mins));
    assert_eq!(ledger.unabsorbed("n1", left, WINDOW).cpu_millis, -850);
    assert_eq!(ledger.unabsorbed("n1", at(6), WINDOW).cpu_millis, -850);
    assert_eq!(ledger.unabsorbed("n1", at(7), WINDOW).cpu_millis, 0);
    assert_eq!(ledger.unabsorbed("n1", left, hold).cpu_millis, 0);
    // ListNodes' time left: the credit's for "old", none for the cancelled "new".
    let remaining =
        |uid: &str, w: LedgerWindow| ledger.get(uid).unwrap().absorb_remaining(at(2), w);
    assert_eq!(remaining("old", WINDOW.into()), Millis::from_mins(5));
    assert_eq!(remaining("new", WINDOW.into()), Millis(0));
    assert_eq!(remaining("old", hold), Millis(0));
}

/// A relist shows no departed pod, and must not drop the credit; departures leave once the
/// longest absorb window has passed, and count in the ledger's size meanwhile.
#[test]
fn a_relist_keeps_departures_until_they_are_pruned() {
    let mut ledger = Ledger::default();
    ledger.apply(entry("gone", "n1", T0, LedgerSource::Watch));
    ledger.apply(entry("live", "n1", T0, LedgerSource::Watch));
    let left = T0.plus(Millis::from_mins(30));
    ledger.depart("gone", left);
    let removed = ledger.reset([entry("live", "n1", T0, LedgerSource::Watch)], left, WINDOW);
    assert!(removed.is_empty(), "{removed:?}");
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger.unabsorbed("n1", left, WINDOW).cpu_millis, -850);
    // Neither prune_unconfirmed (for Reserves and guesses) nor a horizon not yet passed.
    assert!(ledger.prune_unconfirmed(left.plus(Millis::from_mins(60)), WINDOW).is_empty());
    assert!(ledger.prune_departed(left.plus(WINDOW).minus(Millis(1)), WINDOW).is_empty());
    let pruned = ledger.prune_departed(left.plus(WINDOW), WINDOW);
    assert_eq!(pruned.iter().map(|e| e.uid.as_str()).collect::<Vec<_>>(), ["gone"]);
    assert_eq!(ledger.len(), 1);
}

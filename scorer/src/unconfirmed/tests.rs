use super::*;

const BOUND: Millis = Millis(60_000);

fn tracker(collectors: usize) -> Unconfirmed {
    Unconfirmed::new(collectors, OutcomeMetrics::default())
}

/// Every outcome of `op` as (label, count), only the non-zero ones.
fn counts(t: &Unconfirmed, op: Op) -> Vec<(&'static str, u64)> {
    OUTCOMES.iter().map(|o| (*o, t.metrics().count(op, o))).filter(|(_, n)| *n > 0).collect()
}

#[test]
fn a_reserve_is_forwarded_then_confirmed_by_the_stream_and_never_given_up() {
    let mut t = tracker(1);
    t.taken("p1", 7, Op::Reserve, false, false, UnixMillis(1_000));
    assert_eq!(t.len(), 1);
    assert_eq!(t.metrics().unconfirmed(), 1);
    t.answered("p1", 7, Answer::Taken);
    assert_eq!(counts(&t, Op::Reserve), vec![("forwarded", 1)], "taken is not confirmed yet");
    t.stream_placed("p1", false);
    assert_eq!(counts(&t, Op::Reserve), vec![("forwarded", 1), ("confirmed", 1)]);
    assert!(t.is_empty());
    assert_eq!(t.metrics().unconfirmed(), 0);
    // Long past the bound (1 s + 60 s = 61 s): nothing left to give up.
    assert!(!t.any_due(UnixMillis(1_000_000), BOUND));
    assert_eq!(t.give_up(UnixMillis(1_000_000), BOUND), vec![]);
}

#[test]
fn the_stream_may_confirm_before_the_collector_answers() {
    let mut t = tracker(1);
    t.taken("p1", 1, Op::Reserve, false, false, UnixMillis(0));
    t.stream_placed("p1", false);
    t.answered("p1", 1, Answer::Taken);
    assert_eq!(counts(&t, Op::Reserve), vec![("forwarded", 1), ("confirmed", 1)]);
}

#[test]
fn an_unconfirmed_reserve_ends_at_the_bound_and_not_a_millisecond_before() {
    let mut t = tracker(1);
    // Taken at 1,000 ms; bound 60,000 ms: due at 61,000 ms.
    t.taken("p1", 3, Op::Reserve, false, false, UnixMillis(1_000));
    t.answered("p1", 3, Answer::Expired);
    assert!(!t.any_due(UnixMillis(60_999), BOUND));
    assert_eq!(t.give_up(UnixMillis(60_999), BOUND), vec![]);
    assert!(t.any_due(UnixMillis(61_000), BOUND));
    let given_up = t.give_up(UnixMillis(61_000), BOUND);
    assert_eq!(given_up, vec![GivenUp { uid: "p1".into(), seq: 3, op: Op::Reserve }]);
    assert_eq!(counts(&t, Op::Reserve), vec![("expired", 1)]);
    assert!(t.is_empty());
    // A stream placement after the end changes nothing: the record is gone.
    t.stream_placed("p1", false);
    assert_eq!(counts(&t, Op::Reserve), vec![("expired", 1)]);
}

#[test]
fn why_a_record_was_given_up_follows_what_the_collectors_did() {
    // Two collectors. p-taken: one took it (then the stream never showed it): expired.
    // p-rejected: one refused it, the other dropped it: rejected. p-dropped: both queues
    // full: dropped. p-retrying: no answer yet at the bound: expired.
    let mut t = tracker(2);
    for (seq, uid) in ["p-taken", "p-rejected", "p-dropped", "p-retrying"].iter().enumerate() {
        t.taken(uid, seq as u64, Op::Reserve, false, false, UnixMillis(0));
    }
    t.answered("p-taken", 0, Answer::Taken);
    t.answered("p-taken", 0, Answer::Expired);
    t.answered("p-rejected", 1, Answer::Rejected);
    t.answered("p-rejected", 1, Answer::Dropped);
    t.answered("p-dropped", 2, Answer::Dropped);
    t.answered("p-dropped", 2, Answer::Dropped);
    let mut given_up: Vec<String> =
        t.give_up(UnixMillis(60_000), BOUND).into_iter().map(|g| g.uid).collect();
    given_up.sort();
    assert_eq!(given_up, ["p-dropped", "p-rejected", "p-retrying", "p-taken"]);
    assert_eq!(
        counts(&t, Op::Reserve),
        vec![("forwarded", 1), ("expired", 2), ("dropped", 1), ("rejected", 1)]
    );
}

#[test]
fn forwarded_counts_once_per_op_however_many_collectors_take_it() {
    let mut t = tracker(3);
    t.taken("p1", 1, Op::Reserve, false, false, UnixMillis(0));
    for _ in 0..3 {
        t.answered("p1", 1, Answer::Taken);
    }
    assert_eq!(t.metrics().count(Op::Reserve, "forwarded"), 1);
    // Its answers are all in: a fourth (none is sent) finds nothing to count.
    t.answered("p1", 1, Answer::Taken);
    assert_eq!(t.metrics().count(Op::Reserve, "forwarded"), 1);
}

#[test]
fn an_unreserve_is_confirmed_once_a_collector_took_it() {
    let mut t = tracker(2);
    t.taken("p1", 1, Op::Unreserve, false, false, UnixMillis(0));
    t.answered("p1", 1, Answer::Expired);
    assert_eq!(t.len(), 1, "the dead collector's answer confirms nothing");
    t.answered("p1", 1, Answer::Taken);
    assert_eq!(counts(&t, Op::Unreserve), vec![("forwarded", 1), ("confirmed", 1)]);
    assert!(t.is_empty());

    // Or the stream released the pod first.
    t.taken("p2", 2, Op::Unreserve, false, false, UnixMillis(0));
    t.stream_released("p2");
    assert_eq!(t.metrics().count(Op::Unreserve, "confirmed"), 2);
    // A stream placement does not confirm an Unreserve (the store lays it over again).
    t.taken("p3", 3, Op::Unreserve, false, false, UnixMillis(0));
    t.stream_placed("p3", false);
    assert_eq!(t.len(), 1);
    let given_up = t.give_up(UnixMillis(60_000), BOUND);
    assert_eq!(given_up, vec![GivenUp { uid: "p3".into(), seq: 3, op: Op::Unreserve }]);
    assert_eq!(t.metrics().count(Op::Unreserve, "expired"), 1);
}

#[test]
fn a_streamed_release_settles_a_reserve_too() {
    // The collector dropped a guess that reached it after its expiry and streamed the
    // release: the scorer's entry went with it, nothing is left to give up.
    let mut t = tracker(1);
    t.taken("late-guess", 1, Op::Reserve, true, false, UnixMillis(0));
    t.answered("late-guess", 1, Answer::Taken);
    t.stream_released("late-guess");
    assert!(t.is_empty());
    assert_eq!(counts(&t, Op::Reserve), vec![("forwarded", 1), ("confirmed", 1)]);
    assert_eq!(t.give_up(UnixMillis(60_000), BOUND), vec![]);
}

#[test]
fn a_later_op_of_the_pod_replaces_its_record_and_restarts_the_clock() {
    let mut t = tracker(1);
    t.taken("p1", 1, Op::Reserve, false, false, UnixMillis(0));
    t.taken("p1", 2, Op::Unreserve, false, false, UnixMillis(30_000));
    assert_eq!(t.len(), 1, "one record per pod");
    // The Reserve's answer still counts its forward, but says nothing of the record.
    t.answered("p1", 1, Answer::Taken);
    assert_eq!(t.metrics().count(Op::Reserve, "forwarded"), 1);
    assert_eq!(t.len(), 1);
    // Due at 30 s + 60 s = 90 s, not at 60 s.
    assert_eq!(t.give_up(UnixMillis(60_000), BOUND), vec![]);
    let given_up = t.give_up(UnixMillis(90_000), BOUND);
    assert_eq!(given_up, vec![GivenUp { uid: "p1".into(), seq: 2, op: Op::Unreserve }]);
    assert_eq!(counts(&t, Op::Reserve), vec![("forwarded", 1)]);
    assert_eq!(counts(&t, Op::Unreserve), vec![("expired", 1)]);
}

#[test]
fn a_reserve_where_the_stream_already_has_the_pod_is_confirmed_when_taken() {
    let mut t = tracker(1);
    t.taken("p1", 1, Op::Reserve, false, true, UnixMillis(0));
    assert!(t.is_empty());
    assert_eq!(counts(&t, Op::Reserve), vec![("confirmed", 1)]);
    // But not while an earlier local op of the pod is unconfirmed: the entry is ours.
    t.taken("p2", 2, Op::Reserve, false, false, UnixMillis(0));
    t.taken("p2", 3, Op::Reserve, false, true, UnixMillis(0));
    assert_eq!(t.len(), 1);
}

#[test]
fn a_streamed_guess_confirms_only_a_local_guess() {
    let mut t = tracker(1);
    t.taken("decided", 1, Op::Reserve, false, false, UnixMillis(0));
    t.taken("guessed", 2, Op::Reserve, true, false, UnixMillis(0));
    // A provisional entry never replaces a Reserve in the ledger, so it confirms none.
    t.stream_placed("decided", true);
    t.stream_placed("guessed", true);
    assert_eq!(t.len(), 1);
    t.stream_placed("decided", false);
    assert!(t.is_empty());
    assert_eq!(t.metrics().count(Op::Reserve, "confirmed"), 2);
}

#[test]
fn every_series_exists_from_the_start() {
    let t = tracker(1);
    let mut registry = Registry::default();
    t.metrics().register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for op in ["reserve", "unreserve"] {
        for outcome in OUTCOMES {
            let series =
                format!("waterline_forward_outcomes_total{{op=\"{op}\",outcome=\"{outcome}\"}} 0");
            assert!(text.contains(&series), "{series} in\n{text}");
        }
    }
    assert!(text.contains("waterline_forward_unconfirmed 0"));
}

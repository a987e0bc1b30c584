//! The one retry delay of the services' own retry loops (the scorer's stream from the
//! collectors, its forwarding of Reserves): doubled after each failure up to a cap, with
//! ±20 % jitter so replicas that failed together do not retry in step.
//!
//! Not a crate's: `backon` (in the tree through kube) adds a jitter of up to a whole delay,
//! so a 5 s cap would reach 10 s. The Kubernetes watches keep kube-rs's own
//! `default_backoff()`.

use std::time::Duration;

use rand::Rng;

#[derive(Clone, Debug)]
pub struct Backoff {
    start: Duration,
    max: Duration,
    delay: Duration,
}

impl Backoff {
    /// Starts at `start`, never above `max`.
    pub const fn new(start: Duration, max: Duration) -> Self {
        Backoff { start, max, delay: start }
    }

    /// What to wait now.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// After a failure: the next delay doubles, with jitter, up to the cap.
    pub fn grow(&mut self) {
        self.delay = next(self.delay, self.max);
    }

    /// After a success: back to the first delay.
    pub fn reset(&mut self) {
        self.delay = self.start;
    }

    /// Waits the current delay (tokio's clock, so tests can pause it), then grows it.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.delay).await;
        self.grow();
    }
}

/// Doubles `current` up to `max`, with ±20 % jitter (and never above `max`).
fn next(current: Duration, max: Duration) -> Duration {
    let doubled = (current * 2).min(max);
    let jitter = rand::rng().random_range(0.8..1.2);
    doubled.mul_f64(jitter).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(5);

    #[test]
    fn grows_with_jitter_and_is_capped() {
        let mut backoff = Backoff::new(START, MAX);
        assert_eq!(backoff.delay(), START);
        for _ in 0..20 {
            let before = backoff.delay();
            backoff.grow();
            assert!(backoff.delay() <= MAX);
            // 100 ms doubled is 200 ms, ±20 %: 160..240 ms; and so on up to the cap.
            assert!(backoff.delay() >= (before * 2).min(MAX).mul_f64(0.8));
        }
        assert!(backoff.delay() >= MAX.mul_f64(0.8));
        backoff.reset();
        assert_eq!(backoff.delay(), START);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_sleeps_the_delay_then_grows_it() {
        let mut backoff = Backoff::new(START, MAX);
        let before = tokio::time::Instant::now();
        backoff.wait().await;
        assert_eq!(before.elapsed(), START);
        assert!(backoff.delay() >= Duration::from_millis(160));
    }
}

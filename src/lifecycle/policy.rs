//! What an authority does on its own, between requests: restart a server that
//! exited (with exponential backoff, jitter, and a crash-loop stop), ping it, and
//! stop it when idle. Pure decisions here, on the instants and the jitter they are
//! given; the authority owns the timers, so a timer can never wait on a lock that its
//! own caller holds.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub(crate) use crate::config::{HealthCheck, RestartMode, RestartPolicy};
use crate::platform::ExitKind;

/// Everything an authority does without being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Supervision {
    pub restart: RestartPolicy,
    pub health: Option<HealthCheck>,
    /// Stop a server that served no call for this long.
    pub idle_timeout: Option<Duration>,
}

/// Whether an exit like `exit` calls for a restart under `mode` (an unknown exit
/// status counts as a failure).
pub(crate) fn restarts_after(mode: RestartMode, exit: Option<ExitKind>) -> bool {
    match mode {
        RestartMode::Never => false,
        RestartMode::Always => true,
        RestartMode::OnFailure => exit != Some(ExitKind::Code(0)),
    }
}

/// The delay before restart number `attempt` (0 for the first): `initial * 2^attempt`,
/// capped at `max`, then spread by ±20% with `jitter` in [0, 1) so that servers that
/// fell together do not come back together.
pub(crate) fn backoff(policy: &RestartPolicy, attempt: u32, jitter: f64) -> Duration {
    let base = policy
        .backoff_initial
        .saturating_mul(2u32.saturating_pow(attempt.min(31)))
        .min(policy.backoff_max);
    base.mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
}

/// The restarts of one server, to tell a crash loop from bad luck.
#[derive(Debug, Default, Clone)]
pub(crate) struct RestartHistory {
    restarts: VecDeque<Instant>,
}

impl RestartHistory {
    /// Records a restart at `now`; true when that makes more than `max_restarts`
    /// within `window`: a crash loop, and no restart should happen.
    pub(crate) fn record(&mut self, policy: &RestartPolicy, now: Instant) -> bool {
        while let Some(first) = self.restarts.front() {
            if now.duration_since(*first) > policy.window {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        if self.restarts.len() >= policy.max_restarts as usize {
            // This one would be one too many: it does not happen, so it is not counted.
            return true;
        }
        self.restarts.push_back(now);
        false
    }

    /// How many restarts are in the current window: the attempt number for backoff.
    pub(crate) fn count(&self) -> u32 {
        self.restarts.len() as u32
    }

    /// A server that stayed up for a whole window starts over with a clean slate.
    pub(crate) fn forget_if_stable(&mut self, policy: &RestartPolicy, up_for: Duration) {
        if up_for >= policy.window {
            self.restarts.clear();
        }
    }

    pub(crate) fn clear(&mut self) {
        self.restarts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tokio's clock, which the test pauses and advances, as a std instant.
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// The restart schedule of a server that crashes at once after every start,
    /// run on tokio's paused clock (given to the history as the authority gives
    /// it, converted at the boundary): the exact delays, the crash loop at the
    /// right moment, and a fresh count after a stable window.
    #[tokio::test(start_paused = true)]
    async fn the_schedule_runs_on_the_clock_deterministically() {
        let p = policy();
        let mut history = RestartHistory::default();
        let start = now();
        let mut restarted_at = Vec::new();
        loop {
            // The server exits; the authority asks the policy what comes next.
            if history.record(&p, now()) {
                break;
            }
            let delay = backoff(&p, history.count() - 1, 0.5);
            tokio::time::sleep(delay).await;
            restarted_at.push(now().duration_since(start).as_millis());
        }
        // 100, then +200, then +400: three restarts, the fourth exit is a crash loop.
        assert_eq!(restarted_at, vec![100, 300, 700]);
        assert_eq!(history.count(), 3);

        // A generation that stays up for a whole window clears the count...
        tokio::time::advance(p.window).await;
        history.forget_if_stable(&p, p.window);
        assert_eq!(history.count(), 0);
        assert!(!history.record(&p, now()));
        // ...and restarts older than the window stop counting by themselves.
        let mut h = RestartHistory::default();
        for _ in 0..3 {
            assert!(!h.record(&p, now()));
        }
        tokio::time::advance(p.window + Duration::from_millis(1)).await;
        assert!(!h.record(&p, now()), "the old three expired");
        assert_eq!(h.count(), 1);
    }

    fn policy() -> RestartPolicy {
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            max_restarts: 3,
            window: Duration::from_secs(10),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_stays_within_a_fifth() {
        let p = policy();
        let mid: Vec<u128> = (0..6).map(|a| backoff(&p, a, 0.5).as_millis()).collect();
        assert_eq!(mid, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(&p, 0, 0.0), Duration::from_millis(80));
        assert_eq!(backoff(&p, 0, 0.999_999).as_millis(), 119);
        assert_eq!(backoff(&p, 40, 0.5), Duration::from_secs(1), "no overflow");
    }

    #[test]
    fn which_exits_restart() {
        use RestartMode::*;
        assert!(!restarts_after(Never, Some(ExitKind::Code(1))));
        assert!(restarts_after(Always, Some(ExitKind::Code(0))));
        assert!(restarts_after(OnFailure, Some(ExitKind::Code(1))));
        assert!(restarts_after(OnFailure, Some(ExitKind::Signal(9))));
        assert!(!restarts_after(OnFailure, Some(ExitKind::Code(0))));
        assert!(restarts_after(OnFailure, None));
    }

    #[test]
    fn more_restarts_than_allowed_within_the_window_is_a_crash_loop() {
        let p = policy();
        let t0 = Instant::now();
        let mut h = RestartHistory::default();
        assert!(!h.record(&p, t0));
        assert!(!h.record(&p, t0 + Duration::from_secs(1)));
        assert!(!h.record(&p, t0 + Duration::from_secs(2)));
        assert!(
            h.record(&p, t0 + Duration::from_secs(3)),
            "the 4th of max 3"
        );
        // Outside the window, old restarts no longer count.
        let mut h = RestartHistory::default();
        for i in 0..3 {
            assert!(!h.record(&p, t0 + Duration::from_secs(i * 6)));
        }
        assert_eq!(h.count(), 2);
        h.forget_if_stable(&p, Duration::from_secs(9));
        assert_eq!(h.count(), 2);
        h.forget_if_stable(&p, Duration::from_secs(10));
        assert_eq!(h.count(), 0);
    }
}

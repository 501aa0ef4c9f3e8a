//! The loop that runs the pure core (`lifecycle::core`): it feeds the core an input
//! with the time, carries out the effects the core returns, in order, and feeds
//! each answer back with the time again, until no effect is left.
//!
//! The time is tokio's clock, converted to a std `Instant` at this boundary: the
//! core reads no clock of its own, so tests that pause and advance tokio's clock
//! control the core's timers too. The core's instants go back to tokio's clock the
//! same way ([`tokio_instant`]) for the authority's sleeps.

use std::collections::VecDeque;
use std::time::Instant;

use crate::lifecycle::core::{Core, Effect, Input};

/// Carries effects out. The authority's executor does the I/O.
pub(super) trait Executor {
    /// Carries out `effect`; `core` is the state after the step that produced it.
    fn execute(
        &mut self,
        effect: Effect,
        core: &Core,
    ) -> impl Future<Output = Option<Input>> + Send;
}

/// The time to give the core: tokio's clock (paused in tests that pause it).
pub(super) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// One of the core's instants on tokio's clock, to sleep until it.
pub(super) fn tokio_instant(at: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(at)
}

/// Feeds `input` to the core and carries out what it decides, feeding the answers
/// back until no effect is left. The effects an answer leads to are carried out
/// after those already decided.
pub(super) async fn drive<E: Executor>(core: &mut Core, executor: &mut E, input: Input) {
    let mut effects: VecDeque<Effect> = core.step(input, now()).into();
    while let Some(effect) = effects.pop_front() {
        if let Some(next) = executor.execute(effect, core).await {
            effects.extend(core.step(next, now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lifecycle::policy::Supervision;
    use crate::lifecycle::state::{Intent, State};

    /// Answers a start at once and logs every effect.
    #[derive(Default)]
    struct Quick {
        log: Vec<Effect>,
    }

    impl Executor for Quick {
        async fn execute(&mut self, effect: Effect, _core: &Core) -> Option<Input> {
            self.log.push(effect.clone());
            match effect {
                Effect::Reserve(generation) => Some(Input::Reserved(Ok(generation))),
                Effect::Launch(generation) => {
                    Some(Input::Started(crate::lifecycle::core::Started {
                        generation,
                        result: Ok(Some(1)),
                        cleanup: None,
                        took: Duration::ZERO,
                    }))
                }
                _ => None,
            }
        }
    }

    /// The loop gives the core tokio's clock: on a paused clock, the core's idle
    /// timer follows the advances exactly, and its instants convert back to the
    /// tokio instants the authority sleeps until.
    #[tokio::test(start_paused = true)]
    async fn the_core_runs_on_tokios_clock_and_answers_are_fed_back_in_order() {
        let idle = Duration::from_secs(5);
        let supervision = Supervision {
            idle_timeout: Some(idle),
            ..Supervision::default()
        };
        let mut core = Core::new(State::Stopped, 0, supervision, now(), 1);
        let mut quick = Quick::default();
        let request = Input::Request {
            intent: Intent::Start,
            force: false,
            stale: false,
            waited: Duration::ZERO,
        };
        drive(&mut core, &mut quick, request).await;
        let kinds: Vec<&str> = quick
            .log
            .iter()
            .map(|e| match e {
                Effect::Reserve(_) => "reserve",
                Effect::Launch(_) => "launch",
                Effect::Record(_) => "record",
                Effect::Answer(_) => "answer",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["reserve", "record", "launch", "record", "answer"]);
        let started = tokio::time::Instant::now();
        assert_eq!(core.idle_at().map(tokio_instant), Some(started + idle));

        tokio::time::advance(Duration::from_millis(1500)).await;
        drive(&mut core, &mut quick, Input::Used).await;
        assert_eq!(
            core.idle_at().map(tokio_instant),
            Some(started + Duration::from_millis(1500) + idle)
        );
    }
}

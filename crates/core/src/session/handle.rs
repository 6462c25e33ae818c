//! Steering a running session from elsewhere: interrupts with a truthful receipt, and the live
//! settings of its [`SessionContext`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_protocol::{CancelReason, ToolUseBlock};
use keel_tools::CancelToken;
use tokio::sync::watch;

use crate::context::SessionContext;
use crate::tasks::{KilledBy, TaskError, TaskStatus};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallState {
    Queued,
    Running,
    Done,
}

#[derive(Default)]
struct Inner {
    turn: Option<CancelToken>,
    calls: Vec<(String, CallState)>,
    killed: usize,
    /// Why the session cannot go on (its output was closed, say): the running turn ends with
    /// this as its internal error, and every later turn ends at once the same way.
    failure: Option<String>,
}

/// What a running turn shares with its handles: its token and the state of its calls.
pub(crate) struct TurnState {
    inner: Mutex<Inner>,
    /// Counts finished turns; `interrupt()` waits on it.
    turns_done: watch::Sender<u64>,
    /// Counts started turns; `wait_until_running()` waits on it.
    turns_started: watch::Sender<u64>,
}

impl TurnState {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            turns_done: watch::channel(0).0,
            turns_started: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn start(&self, token: CancelToken) {
        {
            let mut g = self.lock();
            g.turn = Some(token);
            g.calls.clear();
            g.killed = 0;
        }
        self.turns_started.send_modify(|n| *n += 1);
    }

    pub(crate) fn end(&self) {
        self.lock().turn = None;
        self.turns_done.send_modify(|n| *n += 1);
    }

    /// The failure that ends every turn, if the session has one.
    pub(crate) fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    pub(crate) fn cancel_running(&self, reason: CancelReason) {
        if let Some(t) = self.lock().turn.clone() {
            t.cancel(reason);
        }
    }

    pub(crate) fn set_queued(&self, calls: &[ToolUseBlock]) {
        self.lock().calls = calls
            .iter()
            .map(|c| (c.id.clone(), CallState::Queued))
            .collect();
    }

    fn set_state(&self, id: &str, state: CallState) {
        if let Some(c) = self.lock().calls.iter_mut().find(|c| c.0 == id) {
            c.1 = state;
        }
    }

    pub(crate) fn set_running(&self, id: &str) {
        self.set_state(id, CallState::Running);
    }

    pub(crate) fn set_done(&self, id: &str) {
        self.set_state(id, CallState::Done);
    }

    /// Whether the call's result was already given (emitted and recorded).
    pub(crate) fn is_done(&self, id: &str) -> bool {
        self.lock()
            .calls
            .iter()
            .any(|c| c.0 == id && c.1 == CallState::Done)
    }

    pub(crate) fn add_killed(&self, n: usize) {
        self.lock().killed += n;
    }
}

impl crate::dispatch::CallStates for TurnState {
    fn set_queued(&self, calls: &[ToolUseBlock]) {
        TurnState::set_queued(self, calls);
    }

    fn set_running(&self, id: &str) {
        TurnState::set_running(self, id);
    }

    fn set_done(&self, id: &str) {
        TurnState::set_done(self, id);
    }

    fn add_killed(&self, n: usize) {
        TurnState::add_killed(self, n);
    }
}

/// What an interrupt did, truthfully.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InterruptReceipt {
    /// Whether a turn was running.
    pub was_running: bool,
    /// Tool calls that were running and were stopped (ids).
    pub stopped: Vec<String>,
    /// Tool calls that were queued and never started (ids).
    pub never_started: Vec<String>,
    /// Processes that were signalled while stopping the calls.
    pub processes_killed: usize,
    /// Whether the turn had wound down (result emitted) when the receipt was made.
    pub turn_ended: bool,
    /// Background tasks still running: an interrupt does not stop them (`stop_task` does).
    pub background_running: Vec<String>,
}

/// Fails a session from its front end's output path (see [`SessionHandle::failer`]).
#[derive(Clone)]
pub struct Failer(Arc<TurnState>);

impl Failer {
    /// See [`SessionHandle::fail`].
    pub fn fail(&self, why: impl Into<String>) {
        let mut g = self.0.lock();
        if g.failure.is_none() {
            g.failure = Some(why.into());
        }
        if let Some(t) = g.turn.clone() {
            t.cancel(CancelReason::Shutdown);
        }
    }
}

/// A cheap handle on a session: interrupt it, stop its tasks, change its live settings.
#[derive(Clone)]
pub struct SessionHandle {
    turn: Arc<TurnState>,
    ctx: Arc<SessionContext>,
}

impl SessionHandle {
    pub(crate) fn new(turn: Arc<TurnState>, ctx: Arc<SessionContext>) -> Self {
        Self { turn, ctx }
    }

    /// The session's live state (model, mode, rules, hooks, approver, agents, cost).
    pub fn context(&self) -> &Arc<SessionContext> {
        &self.ctx
    }

    /// Stop the running turn (if any) with `reason`, wait (bounded) for it to wind down, and
    /// report what was stopped.
    pub async fn interrupt_with(&self, reason: CancelReason) -> InterruptReceipt {
        let mut done = self.turn.turns_done.subscribe();
        let before = *done.borrow_and_update();
        let mut receipt = InterruptReceipt::default();
        {
            let g = self.turn.lock();
            let Some(token) = g.turn.clone() else {
                drop(g);
                receipt.background_running = self.background_running();
                return receipt;
            };
            receipt.was_running = true;
            for (id, state) in &g.calls {
                match state {
                    CallState::Running => receipt.stopped.push(id.clone()),
                    CallState::Queued => receipt.never_started.push(id.clone()),
                    CallState::Done => {}
                }
            }
            token.cancel(reason);
        }
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while *done.borrow_and_update() == before {
                if done.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        receipt.turn_ended = waited.is_ok();
        receipt.background_running = self.background_running();
        receipt.processes_killed = self.turn.lock().killed;
        receipt
    }

    /// The session cannot go on (its front end's output was closed, say): stop the running turn
    /// — its tools too — and end it, and every later turn, with the internal-error result
    /// naming `why`. The first reason given is kept.
    pub fn fail(&self, why: impl Into<String>) {
        self.failer().fail(why);
    }

    /// A handle that can only [`fail`](Self::fail) the session. It holds none of the session's
    /// context, so a front end's output path may keep it without keeping the session (and its
    /// event channel) alive.
    pub fn failer(&self) -> Failer {
        Failer(self.turn.clone())
    }

    /// Stop the running turn on the user's behalf.
    pub async fn interrupt(&self) -> InterruptReceipt {
        self.interrupt_with(CancelReason::UserInterrupted).await
    }

    /// Ids of the background tasks still running.
    pub fn background_running(&self) -> Vec<String> {
        self.ctx
            .tasks()
            .statuses()
            .into_iter()
            .filter(|(_, s)| *s == TaskStatus::Running)
            .map(|(id, _)| id)
            .collect()
    }

    /// Stop one background task on the user's behalf; its final status.
    pub async fn stop_task(&self, id: &str) -> Result<TaskStatus, TaskError> {
        self.ctx.tasks().kill(id, KilledBy::User).await
    }

    /// Move every running foreground command that can be moved (Bash, in a session whose
    /// front end enabled it with [`crate::tasks::TaskManager::enable_backgrounding`]) to the
    /// background: each keeps running as a background task, its call answers the model with
    /// the task id, and the turn goes on. Returns the ids of the calls asked to move.
    pub fn background_running_calls(&self) -> Vec<String> {
        self.ctx.tasks().move_to_background()
    }

    /// Ids of the tool calls running right now.
    pub fn running_calls(&self) -> Vec<String> {
        self.turn
            .lock()
            .calls
            .iter()
            .filter(|c| c.1 == CallState::Running)
            .map(|c| c.0.clone())
            .collect()
    }

    /// Whether a turn is running.
    pub fn is_running(&self) -> bool {
        self.turn.lock().turn.is_some()
    }

    /// Wait (at most `timeout`) until a turn is running; whether one is.
    pub async fn wait_until_running(&self, timeout: Duration) -> bool {
        let mut started = self.turn.turns_started.subscribe();
        let _ = tokio::time::timeout(timeout, async {
            while !self.is_running() {
                if started.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        self.is_running()
    }
}

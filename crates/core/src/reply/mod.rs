//! One model call: stream the reply, assemble it, and retry transient failures per the policy.
//!
//! The loop is: attempt → (permanent: fail) → (overloaded long enough: switch to the fallback
//! model) → wait and retry, or give up → (streams kept breaking: one plain request). Every
//! wait is announced as an `api_retry` event and raced against the turn's cancel token.

mod assemble;
pub(crate) use assemble::Assembly;

use std::time::{Duration, Instant};

use keel_model::{ApiError, ApiErrorKind, Model, ModelRequest};
use keel_protocol::content::AssistantMessage;
use keel_tools::CancelToken;

use crate::emit::{EmitError, Emitter};
use crate::event::{Event, RetryNotice};
use crate::retry::RetryPolicy;

/// A complete reply.
#[derive(Debug)]
pub(crate) struct Reply {
    pub message: AssistantMessage,
    pub request_id: Option<String>,
}

/// How a model call ended when it did not produce a reply.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per model call, moved once: boxing buys nothing
pub(crate) enum CallFailure {
    /// The API failed for good.
    Api {
        error: ApiError,
        attempts: u32,
        elapsed: Duration,
        gave_up: String,
    },
    /// The turn was cancelled; `partial` holds the blocks that had completed.
    Cancelled {
        partial: Option<AssistantMessage>,
        request_id: Option<String>,
    },
    /// Emitting an event failed.
    Emit(EmitError),
}

impl From<EmitError> for CallFailure {
    fn from(e: EmitError) -> Self {
        CallFailure::Emit(e)
    }
}

/// What the retry loop needs besides the request.
pub(crate) struct CallCx<'a> {
    pub client: &'a dyn Model,
    pub emitter: &'a Emitter,
    pub policy: &'a RetryPolicy,
    pub include_partial: bool,
    pub cancel: &'a CancelToken,
    pub fallback_model: Option<&'a str>,
    /// Time spent waiting on the API, accumulated.
    pub api_time: &'a mut Duration,
}

#[allow(clippy::large_enum_variant)] // one per attempt, moved once: boxing buys nothing
enum AttemptError {
    Api(ApiError),
    Cancelled(Option<AssistantMessage>, Option<String>),
    Emit(EmitError),
}

/// The counters of one call's retries.
struct Retries {
    started: Instant,
    attempts: u32,
    retries: u32,
    overload_streak: u32,
}

/// What to do after a transient error.
enum Next {
    Retry(Duration),
    GiveUp(String),
}

impl Retries {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            attempts: 0,
            retries: 0,
            overload_streak: 0,
        }
    }

    fn failed(&self, error: ApiError, gave_up: String) -> CallFailure {
        CallFailure::Api {
            error,
            attempts: self.attempts,
            elapsed: self.started.elapsed(),
            gave_up,
        }
    }

    /// Wait and retry, or give up: at the attempt cap, or when the wait (the backoff, or the
    /// API's `retry-after`, whichever is longer) would pass the retry budget.
    fn next(&self, policy: &RetryPolicy, error: &ApiError) -> Next {
        if self.retries >= policy.max_retries {
            return Next::GiveUp(format!("retry limit of {} reached", policy.max_retries));
        }
        let delay = policy.delay(self.retries + 1, error.retry_after);
        if self.started.elapsed() + delay <= policy.budget {
            return Next::Retry(delay);
        }
        // The server's own ask passes the budget (the wait adds a spread to it for fleets).
        let asked = error
            .retry_after
            .filter(|ra| self.started.elapsed() + *ra > policy.budget);
        Next::GiveUp(match asked {
            Some(ra) => format!(
                "the API asked to wait {:.0} s (retry-after), past the retry budget of {:.1} s",
                ra.as_secs_f64(),
                policy.budget.as_secs_f64()
            ),
            None => format!(
                "the next wait of {:.1} s would pass the retry budget of {:.1} s",
                delay.as_secs_f64(),
                policy.budget.as_secs_f64()
            ),
        })
    }
}

/// Call the model, retrying transient failures. May switch `req.model` to the fallback model.
pub(crate) async fn call_with_retry(
    cx: &mut CallCx<'_>,
    req: &mut ModelRequest,
) -> Result<Reply, CallFailure> {
    let mut r = Retries::new();
    loop {
        r.attempts += 1;
        let t0 = Instant::now();
        let result = assemble::stream_once(cx, req).await;
        *cx.api_time += t0.elapsed();
        let error = match result {
            Ok(reply) => return Ok(reply),
            Err(AttemptError::Cancelled(partial, request_id)) => {
                return Err(CallFailure::Cancelled {
                    partial,
                    request_id,
                })
            }
            Err(AttemptError::Emit(e)) => return Err(CallFailure::Emit(e)),
            Err(AttemptError::Api(e)) => e,
        };
        if !error.retryable() {
            return Err(r.failed(error, String::new()));
        }
        if switch_to_fallback(cx, req, &mut r, &error).await? {
            continue;
        }
        match r.next(cx.policy, &error) {
            Next::Retry(delay) => {
                r.retries += 1;
                announce(cx, &r, delay, &error).await?;
                tokio::select! {
                    _ = cx.cancel.cancelled() => return Err(CallFailure::Cancelled { partial: None, request_id: None }),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            Next::GiveUp(why) if is_stream_failure(&error) => {
                return last_resort(cx, req, &mut r, error, why).await
            }
            Next::GiveUp(why) => return Err(r.failed(error, why)),
        }
    }
}

/// After `fallback_after` overloaded answers in a row, switch to the fallback model (once per
/// model) and start counting afresh. Whether it switched.
async fn switch_to_fallback(
    cx: &mut CallCx<'_>,
    req: &mut ModelRequest,
    r: &mut Retries,
    error: &ApiError,
) -> Result<bool, CallFailure> {
    r.overload_streak = if error.is_overloaded() {
        r.overload_streak + 1
    } else {
        0
    };
    let Some(fallback) = cx.fallback_model.filter(|f| *f != req.model) else {
        return Ok(false);
    };
    if r.overload_streak < cx.policy.fallback_after {
        return Ok(false);
    }
    let original = std::mem::replace(&mut req.model, fallback.to_owned());
    cx.emitter
        .emit(Event::ModelFallback {
            text: format!(
                "{original} stayed overloaded after {} attempts; switched to {fallback}.",
                r.overload_streak
            ),
            from: original,
            to: fallback.to_owned(),
            trigger: "overloaded".into(),
        })
        .await?;
    r.overload_streak = 0;
    r.retries = 0;
    Ok(true)
}

async fn announce(
    cx: &CallCx<'_>,
    r: &Retries,
    delay: Duration,
    error: &ApiError,
) -> Result<(), CallFailure> {
    cx.emitter
        .emit(Event::ApiRetry(RetryNotice {
            attempt: r.retries,
            max_retries: cx.policy.max_retries,
            delay,
            status: error.status,
            label: error.retry_label(),
        }))
        .await?;
    tracing::info!(
        "model request failed ({error}); retry {}/{} in {} ms",
        r.retries,
        cx.policy.max_retries,
        delay.as_millis()
    );
    Ok(())
}

fn is_stream_failure(e: &ApiError) -> bool {
    matches!(
        e.kind,
        ApiErrorKind::StreamDropped
            | ApiErrorKind::StreamIdle
            | ApiErrorKind::ConnectionLost
            | ApiErrorKind::Protocol
    )
}

/// Streaming kept breaking: one plain (non-streaming) request before giving up.
async fn last_resort(
    cx: &mut CallCx<'_>,
    req: &ModelRequest,
    r: &mut Retries,
    error: ApiError,
    gave_up: String,
) -> Result<Reply, CallFailure> {
    r.attempts += 1;
    let t0 = Instant::now();
    let remaining = cx
        .policy
        .budget
        .saturating_sub(r.started.elapsed())
        .max(Duration::from_secs(5));
    let answer = tokio::select! {
        _ = cx.cancel.cancelled() => return Err(CallFailure::Cancelled { partial: None, request_id: None }),
        a = tokio::time::timeout(remaining, cx.client.complete(req)) => a,
    };
    *cx.api_time += t0.elapsed();
    match answer {
        Ok(Ok((message, request_id))) => Ok(Reply {
            message,
            request_id,
        }),
        // Both failures are named: the stream's is usually the one worth knowing.
        Ok(Err(e)) => Err(r.failed(
            e,
            format!("{gave_up}; the stream kept failing ({error}), and a final non-streaming attempt failed too"),
        )),
        Err(_) => Err(r.failed(
            error,
            format!("{gave_up}; a final non-streaming attempt got no reply in time"),
        )),
    }
}

//! One model call: stream the reply, assemble it, and retry transient failures per the policy.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_model::{ApiError, ApiErrorKind, Model, ModelRequest};
use keel_protocol::content::AssistantMessage;
use keel_protocol::frames::{ApiRetryFrame, ModelFallbackFrame, StreamEventFrame};
use keel_protocol::sse::{
    ContentBlockDelta, ContentBlockStart, Delta, IndexOnly, MessageDelta, MessageStart,
};
use keel_protocol::{ContentBlock, Extra, Frame, StreamEvent, SystemFrame, ToolUseBlock, Usage};
use keel_tools::CancelToken;
use serde_json::Value;

use crate::emit::{new_uuid, EmitError, Emitter};
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
    /// Emitting a frame failed.
    Emit(EmitError),
}

impl From<EmitError> for CallFailure {
    fn from(e: EmitError) -> Self {
        CallFailure::Emit(e)
    }
}

/// What the retry loop needs besides the request.
pub(crate) struct CallCx<'a> {
    pub model: &'a dyn Model,
    pub emitter: &'a Emitter,
    pub policy: &'a RetryPolicy,
    pub include_partial: bool,
    pub cancel: &'a CancelToken,
    pub fallback_model: Option<&'a str>,
    /// Time spent waiting on the API, accumulated.
    pub api_time: &'a mut Duration,
}

/// Call the model, retrying transient failures. May switch `req.model` to the fallback model.
pub(crate) async fn call_with_retry(
    cx: &mut CallCx<'_>,
    req: &mut ModelRequest,
) -> Result<Reply, CallFailure> {
    let started = Instant::now();
    let mut attempts = 0u32;
    let mut retries = 0u32;
    let mut overload_streak = 0u32;
    loop {
        attempts += 1;
        let t0 = Instant::now();
        let result = stream_once(cx, req).await;
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
            return Err(CallFailure::Api {
                error,
                attempts,
                elapsed: started.elapsed(),
                gave_up: String::new(),
            });
        }
        if error.is_overloaded() {
            overload_streak += 1;
        } else {
            overload_streak = 0;
        }
        if let Some(fallback) = cx.fallback_model.filter(|f| *f != req.model) {
            if overload_streak >= cx.policy.fallback_after {
                let original = std::mem::replace(&mut req.model, fallback.to_owned());
                cx.emitter
                    .emit(Frame::System(SystemFrame::ModelFallback(ModelFallbackFrame {
                        trigger: "overloaded".into(),
                        content: format!("{original} stayed overloaded after {overload_streak} attempts; switched to {fallback}."),
                        original_model: original,
                        fallback_model: fallback.to_owned(),
                        session_id: cx.emitter.session_id().to_owned(),
                        uuid: new_uuid(),
                        extra: parent_extra(cx.emitter),
                    })))
                    .await?;
                overload_streak = 0;
                retries = 0;
                continue;
            }
        }
        let stream_failure = matches!(
            error.kind,
            ApiErrorKind::StreamDropped | ApiErrorKind::StreamIdle | ApiErrorKind::ConnectionLost
        );
        let gave_up = if retries >= cx.policy.max_retries {
            Some(format!("retry limit of {} reached", cx.policy.max_retries))
        } else {
            None
        };
        let delay = cx.policy.delay(retries + 1, error.retry_after);
        let gave_up = gave_up.or_else(|| {
            (started.elapsed() + delay > cx.policy.budget).then(|| {
                format!(
                    "the next wait of {:.1} s would pass the retry budget of {:.1} s",
                    delay.as_secs_f64(),
                    cx.policy.budget.as_secs_f64()
                )
            })
        });
        if let Some(gave_up) = gave_up {
            if stream_failure {
                // Streaming kept breaking: one plain request before giving up.
                attempts += 1;
                let t0 = Instant::now();
                let remaining = cx
                    .policy
                    .budget
                    .saturating_sub(started.elapsed())
                    .max(Duration::from_secs(5));
                let r = tokio::select! {
                    _ = cx.cancel.cancelled() => return Err(CallFailure::Cancelled { partial: None, request_id: None }),
                    r = tokio::time::timeout(remaining, cx.model.complete(req)) => r,
                };
                *cx.api_time += t0.elapsed();
                match r {
                    Ok(Ok((message, request_id))) => {
                        return Ok(Reply {
                            message,
                            request_id,
                        })
                    }
                    Ok(Err(e)) => {
                        return Err(CallFailure::Api {
                            error: e,
                            attempts,
                            elapsed: started.elapsed(),
                            gave_up: format!("{gave_up}; a final non-streaming attempt failed too"),
                        })
                    }
                    Err(_) => {
                        return Err(CallFailure::Api {
                            error,
                            attempts,
                            elapsed: started.elapsed(),
                            gave_up: format!(
                                "{gave_up}; a final non-streaming attempt got no reply in time"
                            ),
                        })
                    }
                }
            }
            return Err(CallFailure::Api {
                error,
                attempts,
                elapsed: started.elapsed(),
                gave_up,
            });
        }
        retries += 1;
        cx.emitter
            .emit(Frame::System(SystemFrame::ApiRetry(ApiRetryFrame {
                attempt: retries,
                max_retries: cx.policy.max_retries,
                retry_delay_ms: delay.as_millis() as u64,
                error_status: error.status,
                error: error.retry_label().to_owned(),
                parent_tool_use_id: cx.emitter.parent_tool_use_id().map(str::to_owned),
                session_id: cx.emitter.session_id().to_owned(),
                uuid: new_uuid(),
                extra: Extra::new(),
            })))
            .await?;
        tracing::info!(
            "model request failed ({error}); retry {retries}/{} in {} ms",
            cx.policy.max_retries,
            delay.as_millis()
        );
        tokio::select! {
            _ = cx.cancel.cancelled() => return Err(CallFailure::Cancelled { partial: None, request_id: None }),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

fn parent_extra(emitter: &Emitter) -> Extra {
    let mut e = Extra::new();
    if let Some(p) = emitter.parent_tool_use_id() {
        e.insert("parent_tool_use_id".into(), Value::String(p.to_owned()));
    }
    e
}

#[allow(clippy::large_enum_variant)] // one per attempt, moved once: boxing buys nothing
enum AttemptError {
    Api(ApiError),
    Cancelled(Option<AssistantMessage>, Option<String>),
    Emit(EmitError),
}

/// A content block being streamed.
enum Building {
    Text(String, Extra),
    ToolUse {
        id: String,
        name: String,
        json: String,
        extra: Extra,
    },
    Thinking {
        thinking: String,
        signature: String,
        extra: Extra,
    },
    Verbatim(ContentBlock),
}

impl Building {
    fn start(block: ContentBlock) -> Self {
        match block {
            ContentBlock::Text(t) => Building::Text(t.text, t.extra),
            ContentBlock::ToolUse(t) => Building::ToolUse {
                id: t.id,
                name: t.name,
                json: String::new(),
                extra: t.extra,
            },
            ContentBlock::Thinking(t) => Building::Thinking {
                thinking: t.thinking,
                signature: t.signature,
                extra: t.extra,
            },
            other => Building::Verbatim(other),
        }
    }

    fn apply(&mut self, delta: Delta) {
        match (self, delta) {
            (Building::Text(s, _), Delta::TextDelta(d)) => s.push_str(&d.text),
            (Building::ToolUse { json, .. }, Delta::InputJsonDelta(d)) => {
                json.push_str(&d.partial_json)
            }
            (Building::Thinking { thinking, .. }, Delta::ThinkingDelta(d)) => {
                thinking.push_str(&d.thinking)
            }
            (Building::Thinking { signature, .. }, Delta::SignatureDelta(d)) => {
                signature.push_str(&d.signature)
            }
            _ => {}
        }
    }

    fn finish(self) -> ContentBlock {
        match self {
            Building::Text(text, extra) => {
                ContentBlock::Text(keel_protocol::TextBlock { text, extra })
            }
            Building::ToolUse {
                id,
                name,
                json,
                extra,
            } => {
                let input = if json.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    // Invalid JSON reaches the tool as an input it will refuse with a clear message.
                    serde_json::from_str(&json).unwrap_or_else(|e| serde_json::json!({ "__invalid_json__": json, "__error__": e.to_string() }))
                };
                ContentBlock::ToolUse(ToolUseBlock {
                    id,
                    name,
                    input,
                    extra,
                })
            }
            Building::Thinking {
                thinking,
                signature,
                extra,
            } => ContentBlock::Thinking(keel_protocol::ThinkingBlock {
                thinking,
                signature,
                extra,
            }),
            Building::Verbatim(b) => b,
        }
    }
}

async fn stream_once(cx: &mut CallCx<'_>, req: &ModelRequest) -> Result<Reply, AttemptError> {
    let mut stream = tokio::select! {
        _ = cx.cancel.cancelled() => return Err(AttemptError::Cancelled(None, None)),
        s = cx.model.stream(req) => s.map_err(AttemptError::Api)?,
    };
    let mut message: Option<AssistantMessage> = None;
    let mut building: Vec<Option<Building>> = Vec::new();
    let mut done: Vec<(usize, ContentBlock)> = Vec::new();
    let mut request_id = None;
    loop {
        let next = tokio::select! {
            _ = cx.cancel.cancelled() => {
                // Keep what completed; the block being streamed is dropped.
                return Err(AttemptError::Cancelled(message.map(|mut m| { m.content = ordered(done); m }), request_id));
            }
            n = stream.next() => n,
        };
        let ev = match next {
            None => {
                return Err(AttemptError::Api(ApiError::new(
                    ApiErrorKind::StreamDropped,
                    "the stream ended before message_stop",
                )))
            }
            Some(Err(e)) => return Err(AttemptError::Api(e)),
            Some(Ok(ev)) => ev,
        };
        if cx.include_partial && !matches!(ev.event, StreamEvent::Ping(_)) {
            let mut extra = Extra::new();
            if let Some(m) = &message {
                extra.insert("api_message_id".into(), Value::String(m.id.clone()));
            }
            cx.emitter
                .emit(Frame::StreamEvent(StreamEventFrame {
                    event: ev.raw.clone(),
                    session_id: cx.emitter.session_id().to_owned(),
                    parent_tool_use_id: cx.emitter.parent_tool_use_id().map(str::to_owned),
                    uuid: new_uuid(),
                    extra,
                }))
                .await
                .map_err(AttemptError::Emit)?;
        }
        match ev.event {
            StreamEvent::MessageStart(MessageStart { message: m }) => {
                request_id = m
                    .extra
                    .get("request_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or(request_id);
                message = Some(m);
            }
            StreamEvent::ContentBlockStart(ContentBlockStart {
                index,
                content_block,
            }) => {
                if building.len() <= index {
                    building.resize_with(index + 1, || None);
                }
                building[index] = Some(Building::start(content_block));
            }
            StreamEvent::ContentBlockDelta(ContentBlockDelta { index, delta }) => {
                if let Some(Some(b)) = building.get_mut(index) {
                    b.apply(delta);
                }
            }
            StreamEvent::ContentBlockStop(IndexOnly { index }) => {
                if let Some(b) = building.get_mut(index).and_then(Option::take) {
                    done.push((index, b.finish()));
                }
            }
            StreamEvent::MessageDelta(MessageDelta { delta, usage }) => {
                if let Some(m) = message.as_mut() {
                    m.stop_reason = delta.stop_reason;
                    m.stop_sequence = delta.stop_sequence;
                    merge_usage(&mut m.usage, &usage);
                }
            }
            StreamEvent::MessageStop(_) => {
                let Some(mut m) = message else {
                    return Err(AttemptError::Api(ApiError::new(
                        ApiErrorKind::Decode,
                        "the stream ended without message_start",
                    )));
                };
                m.content = ordered(done);
                return Ok(Reply {
                    message: m,
                    request_id,
                });
            }
            StreamEvent::Ping(_) | StreamEvent::Error(_) | StreamEvent::Other(_) => {}
        }
    }
}

fn ordered(mut done: Vec<(usize, ContentBlock)>) -> Vec<ContentBlock> {
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, b)| b).collect()
}

/// `message_delta.usage` carries final counts; any field it has replaces the start's value.
fn merge_usage(u: &mut Usage, delta: &Value) {
    let get = |k: &str| delta.get(k).and_then(Value::as_u64);
    if let Some(v) = get("output_tokens") {
        u.output_tokens = v;
    }
    if let Some(v) = get("input_tokens") {
        u.input_tokens = v;
    }
    if let Some(v) = get("cache_read_input_tokens") {
        u.cache_read_input_tokens = v;
    }
    if let Some(v) = get("cache_creation_input_tokens") {
        u.cache_creation_input_tokens = v;
    }
}

//! Requests from the CLI (`can_use_tool`, `hook_callback`): each answered by its callback in a
//! task of its own, so that a slow callback never stalls the reader.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::future::abortable;
use futures_util::FutureExt;
use serde_json::Value;

use keel_protocol::control::{Request, RequestError};
use keel_protocol::{
    ControlError, ControlRequest, ControlRequestFrame, ControlResponse, ControlResponseFrame,
    ControlSuccess, Extra, Frame,
};

use super::{lock, Shared};
use crate::callbacks::{CallbackResult, HookInput, ToolPermissionRequest};

impl Shared {
    /// Answers a request from the CLI in its own task; a `control_cancel_request` aborts it
    /// (and then nothing is sent, as the CLI expects).
    pub(super) fn spawn_incoming(self: &Arc<Self>, frame: ControlRequestFrame) {
        let ControlRequestFrame {
            request_id,
            request,
        } = frame;
        let (answer, handle) = abortable(self.clone().answer(request));
        let shared = self.clone();
        let id = request_id.clone();
        let mut inflight = lock(&self.inflight);
        tokio::spawn(async move {
            let outcome = AssertUnwindSafe(answer).catch_unwind().await;
            lock(&shared.inflight).remove(&id);
            let response = match outcome {
                Ok(Ok(Ok(v))) => ControlResponse::Success(ControlSuccess {
                    request_id: id,
                    response: Some(v),
                    extra: Extra::new(),
                }),
                Ok(Ok(Err(message))) => ControlResponse::Error(ControlError {
                    request_id: id,
                    error: message,
                    error_code: None,
                    extra: Extra::new(),
                }),
                Ok(Err(_aborted)) => return,
                Err(_panic) => ControlResponse::Error(ControlError {
                    request_id: id,
                    error: "the SDK callback panicked".into(),
                    error_code: None,
                    extra: Extra::new(),
                }),
            };
            let frame = Frame::ControlResponse(ControlResponseFrame { response });
            let _ = shared.write_frame(&frame).await;
        });
        inflight.insert(request_id, handle);
    }

    /// The CLI withdrew request `id`: its callback stops and nothing is answered.
    pub(super) fn cancel_incoming(&self, id: &str) {
        if let Some(h) = lock(&self.inflight).remove(id) {
            h.abort();
        }
    }

    /// Stops every running callback (the CLI has ended: nobody waits for their answers).
    pub(super) fn abort_incoming(&self) {
        for (_, h) in lock(&self.inflight).drain() {
            h.abort();
        }
    }

    async fn answer(self: Arc<Self>, request: ControlRequest) -> CallbackResult<Value> {
        let typed = Request::from_wire(&request).map_err(|e| invalid(&e))?;
        match typed {
            Request::CanUseTool(req) => {
                let cb = self
                    .can_use_tool
                    .clone()
                    .ok_or_else(|| "this SDK session has no can_use_tool callback".to_owned())?;
                let req = ToolPermissionRequest::from_request(req, request.fields);
                let input = req.input.clone();
                Ok(cb(req).await?.to_wire(&input))
            }
            Request::HookCallback(req) => {
                let cb = self.hooks.get(&req.callback_id).cloned().ok_or_else(|| {
                    format!("no hook callback is registered as {:?}", req.callback_id)
                })?;
                cb(HookInput::from_request(req)).await
            }
            // The requests a host sends (initialize, interrupt, ...) are not the SDK's to answer.
            other => Err(format!(
                "Unsupported control request subtype: {}",
                other.subtype()
            )),
        }
    }
}

/// The error text for a known request whose fields do not fit (the protocol's error names
/// the field at fault).
fn invalid(e: &RequestError) -> String {
    format!("Invalid {} request: {}", e.subtype, e.message)
}

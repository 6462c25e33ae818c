//! [`Client`]: a multi-turn stream-json session with control requests and callbacks.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use keel_protocol::{Extra, MessageContent};

use crate::error::{Error, Result};
use crate::message::Message;
use crate::options::{Options, PromptMode};
use crate::process::{wait_exit, Closed, Escalation};
use crate::session::{self, Session, Shared};

/// A long-lived session with the CLI: send prompts, read messages, interrupt, change the model
/// or permission mode; the CLI's permission questions and hooks go to the callbacks in
/// [`Options`].
///
/// Messages are read with [`next_message`](Client::next_message),
/// [`receive_response`](Client::receive_response) or as a `Stream`; the CLI waits while they are
/// not taken (control requests still get their answers, within a bounded read-ahead). Control methods take
/// `&self`, and [`handle`](Client::handle) gives a cloneable handle for other tasks.
/// Dropping the client kills the CLI's process group; [`close`](Client::close) ends it politely.
///
/// ```no_run
/// # async fn demo() -> keel_sdk::Result<()> {
/// use futures_util::StreamExt;
/// let mut client = keel_sdk::Client::connect(keel_sdk::Options::default()).await?;
/// client.query("List the files here").await?;
/// let mut turn = client.receive_response();
/// while let Some(msg) = turn.next().await {
///     println!("{}", msg?.kind());
/// }
/// drop(turn);
/// client.close().await;
/// # Ok(()) }
/// ```
pub struct Client {
    session: Session,
    handle: ClientHandle,
    server_info: Value,
}

impl Client {
    /// Starts the CLI in stream-json mode and sends `initialize` (with the hook registrations);
    /// returns once the CLI has answered it.
    pub async fn connect(options: Options) -> Result<Client> {
        if options.prompt_mode == Some(PromptMode::Argv) {
            return Err(Error::InvalidOptions {
                message: "Client needs PromptMode::StreamJson (control requests travel on stdin)"
                    .into(),
            });
        }
        let session = session::start(&options, PromptMode::StreamJson, None)?;
        let server_info = session.shared.initialize().await?;
        let handle = ClientHandle {
            shared: session.shared.clone(),
        };
        Ok(Client {
            session,
            handle,
            server_info,
        })
    }

    /// Sends a prompt as a `user` message (a new turn).
    pub async fn query(&self, prompt: impl Into<String>) -> Result<()> {
        self.handle.query(prompt).await
    }

    /// Sends a `user` message with any content (text or blocks).
    pub async fn send_message(&self, content: MessageContent) -> Result<()> {
        self.handle.send_message(content).await
    }

    /// The next message; `None` once the CLI has exited and everything was delivered (a
    /// non-zero exit is the last item, as in [`query`](crate::query())).
    pub async fn next_message(&mut self) -> Option<Result<Message>> {
        self.session.rx.recv().await
    }

    /// The messages of the current turn, up to and including its `result`.
    pub fn receive_response(&mut self) -> ResponseStream<'_> {
        ResponseStream {
            client: self,
            done: false,
        }
    }

    /// Interrupts the current turn; returns the CLI's receipt (`{"still_queued": [...]}`).
    pub async fn interrupt(&self) -> Result<Value> {
        self.handle.interrupt().await
    }

    /// Switches the model (`None`: the CLI's default); returns the CLI's answer.
    pub async fn set_model(&self, model: Option<&str>) -> Result<Value> {
        self.handle.set_model(model).await
    }

    /// Switches the permission mode (`default`, `acceptEdits`, `plan`, ...).
    pub async fn set_permission_mode(&self, mode: &str) -> Result<Value> {
        self.handle.set_permission_mode(mode).await
    }

    /// Sets the thinking budget of later requests (`Some(0)`: no thinking; `None`: the
    /// budget the session started with); returns the CLI's answer.
    pub async fn set_max_thinking_tokens(&self, tokens: Option<u64>) -> Result<Value> {
        self.handle.set_max_thinking_tokens(tokens).await
    }

    /// Sends any control request and returns its `response` object.
    pub async fn control_request(&self, subtype: &str, fields: Extra) -> Result<Value> {
        self.handle.control_request(subtype, fields).await
    }

    /// A cloneable handle for sending prompts and control requests from other tasks.
    pub fn handle(&self) -> ClientHandle {
        self.handle.clone()
    }

    /// The CLI's answer to `initialize` (commands, models, account, pid, ...).
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// The CLI's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.session.pid
    }

    /// The full command line.
    pub fn command(&self) -> &str {
        &self.session.command
    }

    /// The tail of the CLI's stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.session.shared.stderr_tail()
    }

    /// The exit code, once the CLI has exited.
    pub fn exit_code(&self) -> Option<i32> {
        self.session.shared.exit_code()
    }

    /// Ends the CLI's input (EOF on stdin); the CLI finishes what it is doing and exits. Keep
    /// reading messages to see the end.
    pub fn end_input(&self) {
        self.session.shared.close_stdin();
    }

    /// Closes the session: ends stdin and waits for the exit, then SIGTERM, then SIGKILL to the
    /// CLI's process group, each step bounded by `Options::close_grace`.
    pub async fn close(self) -> Closed {
        let Client { mut session, .. } = self;
        let grace = session.close_grace;
        session.shared.close_stdin();
        if let Some(code) = wait_exit(&mut session.exit, grace).await {
            return Closed {
                exit_code: Some(code),
                escalation: Escalation::None,
            };
        }
        session.killer.signal(Signal::SIGTERM);
        if let Some(code) = wait_exit(&mut session.exit, grace).await {
            return Closed {
                exit_code: Some(code),
                escalation: Escalation::Terminated,
            };
        }
        session.killer.signal(Signal::SIGKILL);
        Closed {
            exit_code: wait_exit(&mut session.exit, grace).await,
            escalation: Escalation::Killed,
        }
    }
}

impl Stream for Client {
    type Item = Result<Message>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().session.rx.poll_recv(cx)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.session.pid)
            .field("command", &self.session.command)
            .finish()
    }
}

/// The messages of one turn: ends after the `result` (inclusive), or when the CLI exits.
#[must_use = "streams do nothing unless polled"]
pub struct ResponseStream<'a> {
    client: &'a mut Client,
    done: bool,
}

impl Stream for ResponseStream<'_> {
    type Item = Result<Message>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let item = std::task::ready!(this.client.session.rx.poll_recv(cx));
        match &item {
            Some(Ok(m)) if m.is_result() => this.done = true,
            Some(Err(e)) if e.is_terminal() => this.done = true,
            None => this.done = true,
            _ => {}
        }
        Poll::Ready(item)
    }
}

/// A cloneable handle to a [`Client`]'s session, for other tasks. It does not keep the CLI
/// alive: once the client is dropped, calls fail.
#[derive(Clone)]
pub struct ClientHandle {
    shared: Arc<Shared>,
}

impl ClientHandle {
    /// Sends a prompt as a `user` message (a new turn).
    pub async fn query(&self, prompt: impl Into<String>) -> Result<()> {
        self.send_message(MessageContent::Text(prompt.into())).await
    }

    /// Sends a `user` message with any content.
    pub async fn send_message(&self, content: MessageContent) -> Result<()> {
        self.shared.send_user(content).await
    }

    /// Interrupts the current turn; returns the CLI's receipt.
    pub async fn interrupt(&self) -> Result<Value> {
        self.control_request("interrupt", Extra::new()).await
    }

    /// Switches the model (`None`: the CLI's default).
    pub async fn set_model(&self, model: Option<&str>) -> Result<Value> {
        let mut f = Extra::new();
        f.insert("model".into(), json!(model));
        self.control_request("set_model", f).await
    }

    /// Switches the permission mode.
    pub async fn set_permission_mode(&self, mode: &str) -> Result<Value> {
        let mut f = Extra::new();
        f.insert("mode".into(), json!(mode));
        self.control_request("set_permission_mode", f).await
    }

    /// Sets the thinking budget of later requests (`None`: the launch budget).
    pub async fn set_max_thinking_tokens(&self, tokens: Option<u64>) -> Result<Value> {
        let mut f = Extra::new();
        f.insert("max_thinking_tokens".into(), json!(tokens));
        self.control_request("set_max_thinking_tokens", f).await
    }

    /// Sends any control request and returns its `response` object.
    pub async fn control_request(&self, subtype: &str, fields: Extra) -> Result<Value> {
        self.shared.request(subtype, fields).await
    }
}

impl std::fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHandle").finish_non_exhaustive()
    }
}

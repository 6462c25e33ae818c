//! [`query`]: run one prompt and stream its messages.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use futures_util::Stream;
use keel_protocol::MessageContent;

use crate::error::Result;
use crate::message::Message;
use crate::options::{Options, PromptMode};
use crate::session::{self, Session};

/// Runs `prompt` once and streams the CLI's messages.
///
/// The CLI starts when the stream is first polled (inside a tokio runtime). Items are
/// `Ok(Message)` in the order the CLI wrote them; the stream ends when the CLI has exited. If it
/// exited non-zero the last item is an error: [`Error::Result`](crate::Error::Result) right
/// after an error `result` (which was yielded first), else [`Error::Process`](crate::Error::Process)
/// with the real stderr. Start failures ([`Error::CliNotFound`](crate::Error::CliNotFound),
/// [`Error::Spawn`](crate::Error::Spawn), ...) are the first and only item.
///
/// With [`PromptMode::StreamJson`] (the default) the SDK sends `initialize`, then the prompt as
/// a `user` message; without callbacks it closes stdin right away, with callbacks once the
/// `result` arrives. With [`PromptMode::Argv`] the prompt goes in argv (`-p PROMPT`).
///
/// Dropping the stream kills the CLI's process group.
///
/// ```no_run
/// use futures_util::StreamExt;
/// # async fn demo() -> keel_sdk::Result<()> {
/// let mut stream = keel_sdk::query("Say hi", keel_sdk::Options::default());
/// while let Some(msg) = stream.next().await {
///     let msg = msg?;
///     if let Some(text) = msg.assistant_text() {
///         println!("{text}");
///     }
/// }
/// # Ok(()) }
/// ```
pub fn query(prompt: impl Into<String>, options: Options) -> MessageStream {
    let prompt = prompt.into();
    MessageStream {
        state: State::Starting(Box::pin(start(prompt, options))),
    }
}

async fn start(prompt: String, options: Options) -> Result<Session> {
    let mode = options.prompt_mode.unwrap_or(PromptMode::StreamJson);
    match mode {
        PromptMode::Argv => session::start(&options, mode, Some(&prompt)),
        PromptMode::StreamJson => {
            let session = session::start(&options, mode, None)?;
            let callbacks = options.has_callbacks();
            session.shared.set_close_after_result(callbacks);
            session.shared.initialize().await?;
            session
                .shared
                .send_user(MessageContent::Text(prompt))
                .await?;
            if !callbacks {
                // Nothing can call back: end the input now; the CLI finishes the turn and exits.
                session.shared.close_stdin();
            }
            Ok(session)
        }
    }
}

/// The messages of one [`query`]: a `Stream` of `Result<Message, Error>`.
#[must_use = "streams do nothing unless polled"]
pub struct MessageStream {
    state: State,
}

enum State {
    Starting(BoxFuture<'static, Result<Session>>),
    Running(Session),
    Done,
}

impl MessageStream {
    /// The CLI's process id, once started.
    pub fn pid(&self) -> Option<u32> {
        match &self.state {
            State::Running(s) => Some(s.pid),
            _ => None,
        }
    }

    /// The full command line, once started.
    pub fn command(&self) -> Option<&str> {
        match &self.state {
            State::Running(s) => Some(&s.command),
            _ => None,
        }
    }

    /// The tail of the CLI's stderr so far.
    pub fn stderr_tail(&self) -> Option<String> {
        match &self.state {
            State::Running(s) => Some(s.shared.stderr_tail()),
            _ => None,
        }
    }

    /// The CLI's exit code, once it has exited.
    pub fn exit_code(&self) -> Option<i32> {
        match &self.state {
            State::Running(s) => s.shared.exit_code(),
            _ => None,
        }
    }
}

impl Stream for MessageStream {
    type Item = Result<Message>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Starting(fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(session)) => this.state = State::Running(session),
                    Poll::Ready(Err(e)) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                State::Running(s) => return s.rx.poll_recv(cx),
                State::Done => return Poll::Ready(None),
            }
        }
    }
}

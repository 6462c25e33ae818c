//! The conversation, with the pairing invariant enforced: every `tool_use` gets exactly one
//! `tool_result` in the very next message, on every path.
//!
//! Appending an assistant message that calls tools hands out a [`PendingResults`] obligation;
//! until it is closed with [`History::close`] nothing else can be appended. Closing fills any
//! call that got no result with a synthetic one that says why, so an early exit (an interrupt,
//! a budget stop) cannot leave a dangling call behind.

use keel_model::{EncodedMessage, RequestMessage};
use keel_protocol::{ApiMessage, ContentBlock, MessageContent, Role, ToolUseBlock};

/// A history operation that would break the invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// Something was appended while tool calls still wait for results.
    #[error("tool calls {0:?} are still waiting for results")]
    OpenToolUse(Vec<String>),
    /// A result was given for a call that is not pending.
    #[error("no pending tool call has id {0}")]
    UnknownToolUse(String),
}

/// The results owed for one assistant message's tool calls.
#[derive(Debug, Clone)]
#[must_use = "pending tool results must be closed with History::close"]
pub struct PendingResults {
    calls: Vec<ToolUseBlock>,
    results: Vec<Option<ContentBlock>>,
}

impl PendingResults {
    /// The calls, in the order the model made them.
    pub fn calls(&self) -> &[ToolUseBlock] {
        &self.calls
    }

    /// Record the result of one call. A second result for the same call replaces the first.
    pub fn resolve(&mut self, result: ContentBlock) -> Result<(), HistoryError> {
        let id = match &result {
            ContentBlock::ToolResult(r) => r.tool_use_id.clone(),
            other => {
                return Err(HistoryError::UnknownToolUse(format!(
                    "(not a tool_result: {})",
                    other.kind()
                )))
            }
        };
        let i = self
            .calls
            .iter()
            .position(|c| c.id == id)
            .ok_or(HistoryError::UnknownToolUse(id))?;
        self.results[i] = Some(result);
        Ok(())
    }

    /// Whether the call with `id` already has a result.
    pub fn is_resolved(&self, id: &str) -> bool {
        self.calls
            .iter()
            .position(|c| c.id == id)
            .is_some_and(|i| self.results[i].is_some())
    }

    /// Ids of the calls that have no result yet.
    pub fn unresolved(&self) -> Vec<String> {
        self.calls
            .iter()
            .zip(&self.results)
            .filter(|(_, r)| r.is_none())
            .map(|(c, _)| c.id.clone())
            .collect()
    }
}

/// The conversation sent to the model.
///
/// Only the last message can still change (a prompt merges into a user message that ends the
/// history, a continued reply into an assistant one); every message before it is *sealed*:
/// encoded once, when the next message arrives, and kept only as those bytes, which every
/// later request shares. A long history is held once, as the JSON requests carry.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Every message but the last, encoded.
    sealed: Vec<EncodedMessage>,
    /// Bytes of `sealed`.
    sealed_bytes: usize,
    /// The last message, typed.
    last: Option<ApiMessage>,
    open: Vec<String>,
}

impl History {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages, typed. Decodes every sealed message: for what needs them all (a
    /// compaction, tests), not for every request.
    pub fn messages(&self) -> Vec<ApiMessage> {
        let mut out: Vec<ApiMessage> = self.sealed.iter().filter_map(decode).collect();
        out.extend(self.last.clone());
        out
    }

    /// The typed messages from `from` on (decoding only those).
    pub fn messages_from(&self, from: usize) -> Vec<ApiMessage> {
        let mut out: Vec<ApiMessage> = self.sealed.iter().skip(from).filter_map(decode).collect();
        if from <= self.sealed.len() {
            out.extend(self.last.clone());
        }
        out
    }

    /// The last message whose role is `role`, typed.
    pub fn last_of(&self, role: Role) -> Option<ApiMessage> {
        if let Some(m) = self.last.as_ref().filter(|m| m.role == role) {
            return Some(m.clone());
        }
        let prefix = match role {
            Role::User => "{\"role\":\"user\"",
            Role::Assistant => "{\"role\":\"assistant\"",
        };
        self.sealed
            .iter()
            .rev()
            .find(|e| e.as_str().starts_with(prefix))
            .and_then(decode)
    }

    /// The messages for a request: the sealed ones as their bytes (shared, not copied), the
    /// last one typed (it carries the request's cache breakpoint, which is marked on the typed
    /// message: encoding it here would only mean decoding it again).
    pub fn request_messages(&self) -> Vec<RequestMessage> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.sealed.iter().cloned().map(RequestMessage::Encoded));
        out.extend(self.last.clone().map(RequestMessage::Owned));
        out
    }

    /// The size of the conversation in bytes of JSON (what a request carries for it).
    pub fn json_bytes(&self) -> usize {
        self.sealed_bytes
            + self
                .last
                .as_ref()
                .map_or(0, |m| serde_json::to_vec(m).map_or(0, |v| v.len()))
    }

    /// Append a new last message; the one it follows is sealed.
    fn push(&mut self, m: ApiMessage) {
        if let Some(prev) = self.last.replace(m) {
            let e = EncodedMessage::new(&prev);
            self.sealed_bytes += e.len();
            self.sealed.push(e);
        }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.sealed.len() + usize::from(self.last.is_some())
    }

    /// Whether the next request continues a tool loop (the last message carries tool
    /// results) whose assistant message does not start with a thinking block. The API refuses
    /// thinking there: it cannot be switched on inside an assistant turn. A budget set in the
    /// middle of such a loop applies from the next prompt.
    pub(crate) fn continues_a_loop_without_thinking(&self) -> bool {
        let Some(last) = self.last.as_ref().filter(|m| m.role == Role::User) else {
            return false;
        };
        let continues = match &last.content {
            MessageContent::Blocks(b) => b.iter().any(|b| matches!(b, ContentBlock::ToolResult(_))),
            MessageContent::Text(_) => false,
        };
        continues
            && self.last_of(Role::Assistant).is_some_and(|a| {
                let first = match &a.content {
                    MessageContent::Blocks(b) => b.first(),
                    MessageContent::Text(_) => None,
                };
                !matches!(
                    first,
                    Some(ContentBlock::Thinking(_) | ContentBlock::RedactedThinking(_))
                )
            })
    }

    /// Every message but the last, as encoded.
    pub(crate) fn sealed(&self) -> &[EncodedMessage] {
        &self.sealed
    }

    /// The last message.
    pub(crate) fn last(&self) -> Option<&ApiMessage> {
        self.last.as_ref()
    }

    /// A history of `sealed` messages then `last`, with no call open.
    pub(crate) fn from_parts(sealed: Vec<EncodedMessage>, last: Option<ApiMessage>) -> Self {
        Self {
            sealed_bytes: sealed.iter().map(EncodedMessage::len).sum(),
            sealed,
            last,
            open: Vec::new(),
        }
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// Append user content (a prompt). Merged into the previous message when that is a user
    /// message too (after tool results), so roles keep alternating.
    pub fn push_user(&mut self, blocks: Vec<ContentBlock>) -> Result<(), HistoryError> {
        if !self.open.is_empty() {
            return Err(HistoryError::OpenToolUse(self.open.clone()));
        }
        if blocks.is_empty() {
            return Ok(());
        }
        if let Some(last) = self.last.as_mut() {
            if last.role == Role::User {
                let mut merged =
                    std::mem::replace(&mut last.content, MessageContent::Blocks(Vec::new()))
                        .into_blocks();
                merged.extend(blocks);
                last.content = MessageContent::Blocks(merged);
                return Ok(());
            }
        }
        self.push(ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(blocks),
        });
        Ok(())
    }

    /// Append an assistant reply. Returns the obligation for its tool calls, if it made any.
    /// Empty text blocks are dropped (the API refuses them); an empty reply appends nothing.
    pub fn push_assistant(
        &mut self,
        blocks: Vec<ContentBlock>,
    ) -> Result<Option<PendingResults>, HistoryError> {
        if !self.open.is_empty() {
            return Err(HistoryError::OpenToolUse(self.open.clone()));
        }
        let blocks: Vec<ContentBlock> = blocks
            .into_iter()
            .filter(|b| !matches!(b, ContentBlock::Text(t) if t.text.is_empty()))
            .collect();
        if blocks.is_empty() {
            return Ok(None);
        }
        let calls: Vec<ToolUseBlock> = blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse(t) => Some(t.clone()),
                _ => None,
            })
            .collect();
        match self.last.as_mut() {
            // The continuation of a paused reply (`pause_turn`) is the same assistant turn.
            Some(last) if last.role == Role::Assistant => {
                let mut merged =
                    std::mem::replace(&mut last.content, MessageContent::Blocks(Vec::new()))
                        .into_blocks();
                merged.extend(blocks);
                last.content = MessageContent::Blocks(merged);
            }
            _ => self.push(ApiMessage {
                role: Role::Assistant,
                content: MessageContent::Blocks(blocks),
            }),
        }
        if calls.is_empty() {
            return Ok(None);
        }
        self.open = calls.iter().map(|c| c.id.clone()).collect();
        let n = calls.len();
        Ok(Some(PendingResults {
            calls,
            results: vec![None; n],
        }))
    }

    /// Close an obligation: append one user message with a result for every call, in call
    /// order. Calls without a result get a synthetic error result made by `missing`.
    pub fn close(
        &mut self,
        pending: PendingResults,
        missing: impl Fn(&ToolUseBlock) -> String,
    ) -> Vec<ContentBlock> {
        let blocks = Self::results_of(pending, missing);
        self.open.clear();
        self.push(ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(blocks.clone()),
        });
        blocks
    }

    /// [`close`](Self::close) without handing the results back (no copy of them is made).
    fn close_quietly(
        &mut self,
        pending: PendingResults,
        missing: impl Fn(&ToolUseBlock) -> String,
    ) {
        let blocks = Self::results_of(pending, missing);
        self.open.clear();
        self.push(ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(blocks),
        });
    }

    fn results_of(
        pending: PendingResults,
        missing: impl Fn(&ToolUseBlock) -> String,
    ) -> Vec<ContentBlock> {
        pending
            .calls
            .iter()
            .zip(pending.results)
            .map(|(call, r)| {
                r.unwrap_or_else(|| ContentBlock::tool_result(&call.id, missing(call), true))
            })
            .collect()
    }

    /// Ids of tool calls still waiting for results.
    pub fn open_calls(&self) -> &[String] {
        &self.open
    }

    /// Close calls whose obligation was lost (the turn that held it panicked): each gets a
    /// synthetic error result made by `missing`, so the next request is well-formed. Returns
    /// the results appended (empty when nothing was open).
    pub fn close_orphaned(
        &mut self,
        missing: impl Fn(&ToolUseBlock) -> String,
    ) -> Vec<ContentBlock> {
        if self.open.is_empty() {
            return Vec::new();
        }
        let calls: Vec<ToolUseBlock> = self
            .last
            .as_ref()
            .map(|m| {
                m.content
                    .blocks()
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolUse(t) if self.open.contains(&t.id) => Some(t.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let n = calls.len();
        self.close(
            PendingResults {
                calls,
                results: vec![None; n],
            },
            missing,
        )
    }

    /// Rebuild from stored messages, repairing anything that breaks the invariant: a `tool_use`
    /// without a result gets a synthetic one made by `missing`. Returns the ids repaired.
    pub fn rebuild(
        messages: Vec<ApiMessage>,
        missing: impl Fn(&ToolUseBlock) -> String,
    ) -> (Self, Vec<String>) {
        let mut b = HistoryBuilder::new(missing);
        for m in messages {
            b.push(m);
        }
        b.finish()
    }
}

/// [`History::rebuild`] a message at a time, so that stored messages can be streamed in
/// without first being collected.
pub struct HistoryBuilder<F: Fn(&ToolUseBlock) -> String> {
    history: History,
    repaired: Vec<String>,
    pending: Option<PendingResults>,
    missing: F,
}

impl<F: Fn(&ToolUseBlock) -> String> HistoryBuilder<F> {
    /// An empty history; calls left without a result get one made by `missing`.
    pub fn new(missing: F) -> Self {
        Self {
            history: History::new(),
            repaired: Vec::new(),
            pending: None,
            missing,
        }
    }

    /// Go on from `history` (which has no call open).
    pub(crate) fn resume(history: History, missing: F) -> Self {
        Self {
            history,
            repaired: Vec::new(),
            pending: None,
            missing,
        }
    }

    /// The history so far, when no call is waiting for its result (else `None`).
    pub(crate) fn idle_history(&self) -> Option<&History> {
        (self.pending.is_none() && self.history.open.is_empty()).then_some(&self.history)
    }

    /// The history as it would be with `m` added, if no call is then left waiting (this
    /// builder is left as it is).
    pub(crate) fn idle_with(&self, m: ApiMessage) -> Option<History>
    where
        F: Clone,
    {
        let mut b = HistoryBuilder {
            history: self.history.clone(),
            repaired: Vec::new(),
            pending: self.pending.clone(),
            missing: self.missing.clone(),
        };
        b.push(m);
        b.idle_history().cloned()
    }

    /// Add the next stored message.
    pub fn push(&mut self, m: ApiMessage) {
        let h = &mut self.history;
        match m.role {
            Role::Assistant => {
                if let Some(p) = self.pending.take() {
                    self.repaired.extend(p.unresolved());
                    h.close_quietly(p, &self.missing);
                }
                // push_assistant cannot fail here: nothing is open.
                self.pending = h.push_assistant(m.content.into_blocks()).unwrap_or(None);
            }
            Role::User => {
                let blocks = m.content.into_blocks();
                let (results, rest): (Vec<_>, Vec<_>) = blocks
                    .into_iter()
                    .partition(|b| matches!(b, ContentBlock::ToolResult(_)));
                if let Some(mut p) = self.pending.take() {
                    for r in results {
                        // A result for an unknown call is dropped: the API would refuse it.
                        let _ = p.resolve(r);
                    }
                    self.repaired.extend(p.unresolved());
                    h.close_quietly(p, &self.missing);
                }
                let _ = h.push_user(rest);
            }
        }
    }

    /// The history, with every call closed, and the ids of the calls that were repaired.
    pub fn finish(mut self) -> (History, Vec<String>) {
        if let Some(p) = self.pending.take() {
            self.repaired.extend(p.unresolved());
            self.history.close_quietly(p, &self.missing);
        }
        (self.history, self.repaired)
    }
}

fn decode(e: &EncodedMessage) -> Option<ApiMessage> {
    let m = e.decode();
    if m.is_none() {
        tracing::error!("a sealed history message could not be decoded; it is left out");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(role: Role, blocks: Vec<ContentBlock>) -> ApiMessage {
        ApiMessage {
            role,
            content: MessageContent::Blocks(blocks),
        }
    }

    fn text_message(text: &str) -> ApiMessage {
        ApiMessage {
            role: Role::User,
            content: MessageContent::Text(text.into()),
        }
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolUseBlock {
            id: id.into(),
            name: "Bash".into(),
            input: json!({}),
            extra: Default::default(),
        })
    }

    #[test]
    fn obligation_blocks_appends_until_closed() {
        let mut h = History::new();
        h.push_user(vec![ContentBlock::text("go")]).unwrap();
        let mut p = h
            .push_assistant(vec![ContentBlock::text("ok"), call("a"), call("b")])
            .unwrap()
            .unwrap();
        assert_eq!(
            h.push_user(vec![ContentBlock::text("x")]),
            Err(HistoryError::OpenToolUse(vec!["a".into(), "b".into()]))
        );
        p.resolve(ContentBlock::tool_result("b", "done", false))
            .unwrap();
        assert!(p
            .resolve(ContentBlock::tool_result("zzz", "?", false))
            .is_err());
        let blocks = h.close(p, |c| format!("{} never ran", c.id));
        assert_eq!(
            blocks[0],
            ContentBlock::tool_result("a", "a never ran", true)
        );
        assert_eq!(blocks[1], ContentBlock::tool_result("b", "done", false));
        // The next prompt merges into the tool-result message, keeping roles alternating.
        h.push_user(vec![ContentBlock::text("next")]).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h.messages()[2].content.blocks().len(), 3);
    }

    #[test]
    fn rebuild_repairs_dangling_calls() {
        let msgs = vec![
            text_message("go"),
            message(Role::Assistant, vec![call("a"), call("b")]),
            message(
                Role::User,
                vec![ContentBlock::tool_result("a", "ok", false)],
            ),
            message(Role::Assistant, vec![call("c")]),
        ];
        let (h, repaired) = History::rebuild(msgs, |_| "lost in a crash".into());
        assert_eq!(repaired, vec!["b".to_string(), "c".to_string()]);
        assert_eq!(h.len(), 5);
        assert!(h.open_calls().is_empty());
    }

    #[test]
    fn a_tool_loop_begun_without_thinking_is_seen_as_one() {
        let thinking: ContentBlock = serde_json::from_value(
            json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}),
        )
        .unwrap();
        let history = |assistant: Vec<ContentBlock>, last_user: Vec<ContentBlock>| {
            let msgs = vec![
                text_message("go"),
                message(Role::Assistant, assistant),
                message(Role::User, last_user),
            ];
            History::rebuild(msgs, |_| "lost".into()).0
        };
        let result = || ContentBlock::tool_result("a", "ok", false);
        // Tool results (with or without a prompt merged in) after a call made without
        // thinking: the loop goes on without it.
        assert!(history(vec![call("a")], vec![result()]).continues_a_loop_without_thinking());
        assert!(history(
            vec![call("a")],
            vec![result(), ContentBlock::text("and now?")]
        )
        .continues_a_loop_without_thinking());
        // A call made with thinking, or a new prompt after a text answer: thinking may go on
        // or start.
        assert!(
            !history(vec![thinking, call("a")], vec![result()]).continues_a_loop_without_thinking()
        );
        assert!(!history(
            vec![ContentBlock::text("done")],
            vec![ContentBlock::text("next")]
        )
        .continues_a_loop_without_thinking());
        assert!(!History::new().continues_a_loop_without_thinking());
    }
}

/// Requests built from the encoded history are byte for byte what serializing the whole
/// history again would give, whatever the history went through.
#[cfg(test)]
mod encoded_tests {
    use super::*;
    use keel_model::ModelRequest;

    /// A small deterministic generator (no test dependency needed).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
        fn text(&mut self) -> String {
            let words = [
                "ünïcode",
                "quote\"d",
                "tab\there",
                "line\nbreak",
                "x",
                "日本",
                "\\",
            ];
            (0..1 + self.next(6))
                .map(|_| words[self.next(words.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    fn request(messages: Vec<RequestMessage>) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            max_tokens: 100,
            system: vec![serde_json::json!({"type": "text", "text": "s".repeat(5000)})],
            messages,
            tools: Default::default(),
            stream: true,
            metadata: None,
            thinking: None,
        }
    }

    #[test]
    fn encoded_requests_equal_fresh_ones_over_random_histories() {
        for seed in 0..40u64 {
            let mut g = Lcg(seed);
            let mut h = History::new();
            let mut ids = 0;
            h.push_user(vec![ContentBlock::text(g.text())]).unwrap();
            for _ in 0..60 {
                match g.next(4) {
                    // A reply with calls, then their results.
                    0 => {
                        let calls: Vec<ContentBlock> = (0..1 + g.next(3))
                            .map(|_| {
                                ids += 1;
                                ContentBlock::ToolUse(ToolUseBlock {
                                    id: format!("t{ids}"),
                                    name: "Bash".into(),
                                    input: serde_json::json!({"command": g.text()}),
                                    extra: Default::default(),
                                })
                            })
                            .collect();
                        let p = h.push_assistant(calls).unwrap().unwrap();
                        let out = g.text();
                        h.close(p, |_| out.clone());
                    }
                    // A text reply (a second one merges, like a paused turn going on).
                    1 => {
                        h.push_assistant(vec![ContentBlock::text(g.text())])
                            .unwrap();
                    }
                    // A prompt (merged into a user message that came just before).
                    _ => h.push_user(vec![ContentBlock::text(g.text())]).unwrap(),
                }
                if g.next(3) == 0 {
                    let typed = h.messages().to_vec();
                    let mut fresh = request(typed.iter().cloned().map(Into::into).collect());
                    let mut built = request(h.request_messages());
                    fresh.mark_cache_breakpoints();
                    built.mark_cache_breakpoints();
                    assert_eq!(
                        serde_json::to_string(&built).unwrap(),
                        serde_json::to_string(&fresh).unwrap(),
                        "seed {seed}"
                    );
                    assert_eq!(
                        h.json_bytes(),
                        typed
                            .iter()
                            .map(|m| serde_json::to_string(m).unwrap().len())
                            .sum::<usize>()
                    );
                }
            }
        }
    }
}

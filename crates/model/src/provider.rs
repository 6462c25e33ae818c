//! Which provider answers a request: [`Provider`], and the [`Router`] that sends each request
//! to the client of its model's provider (so a fallback model may be another provider's).

use std::sync::Arc;

use keel_protocol::content::AssistantMessage;
use keel_protocol::{ContentBlock, MessageContent};

use crate::error::{ApiError, ApiErrorKind};
use crate::openai::responses::REASONING_SIGNATURE_PREFIX;
use crate::request::{ModelRequest, RequestMessage};
use crate::{BoxFuture, EventStream, Model};

/// A model API keel can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// The Anthropic Messages API (and servers compatible with it: Ollama, llama.cpp, vLLM).
    Anthropic,
    /// OpenAI's Responses API.
    OpenAi,
    /// OpenAI's Chat Completions API (and the many servers compatible with it).
    OpenAiChat,
    /// Claude on Amazon Bedrock (SigV4 or a Bedrock API key, AWS event-stream framing).
    Bedrock,
    /// Claude on Google Vertex AI (an OAuth token from application-default credentials).
    Vertex,
    /// Claude on Microsoft Foundry (the Messages API at an Azure resource, `x-api-key`).
    Foundry,
}

impl Provider {
    /// Every provider, in the order they are listed to users.
    pub const ALL: [Provider; 6] = [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::OpenAiChat,
        Provider::Bedrock,
        Provider::Vertex,
        Provider::Foundry,
    ];

    /// The name used in flags, settings, model prefixes and frames.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::OpenAiChat => "openai-chat",
            Provider::Bedrock => "bedrock",
            Provider::Vertex => "vertex",
            Provider::Foundry => "foundry",
        }
    }

    /// Whether the provider serves Claude through the Messages API's body and events (so
    /// `ANTHROPIC_MODEL` may name its model and the history needs no translation).
    pub fn speaks_messages(self) -> bool {
        match self {
            Provider::Anthropic | Provider::Bedrock | Provider::Vertex | Provider::Foundry => true,
            Provider::OpenAi | Provider::OpenAiChat => false,
        }
    }

    /// The provider called `name`.
    pub fn parse(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name.trim())
    }

    /// `openai/gpt-5` → (OpenAi, `gpt-5`); a model without a provider's name before a `/` is
    /// `None`.
    pub fn split(model: &str) -> Option<(Provider, &str)> {
        let (p, m) = model.split_once('/')?;
        Some((Provider::parse(p)?, m)).filter(|(_, m)| !m.is_empty())
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The rule that picks a model's provider.
///
/// With a provider chosen explicitly (`--provider`, the `provider` setting, `KEEL_PROVIDER`),
/// every model string goes to it as written (so an OpenAI-compatible gateway's `vendor/model`
/// ids work). Without one, a model string `provider/model` picks the provider and sends
/// `model`; any other goes to the default provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderChoice {
    /// Where models without a provider prefix go.
    pub default: Provider,
    /// Whether the provider was chosen explicitly (then no prefix is read).
    pub explicit: bool,
}

impl Default for ProviderChoice {
    fn default() -> Self {
        Self {
            default: Provider::Anthropic,
            explicit: false,
        }
    }
}

impl ProviderChoice {
    /// The provider of `model` and the model id to send it.
    pub fn resolve(self, model: &str) -> (Provider, &str) {
        if self.explicit {
            return (self.default, model);
        }
        Provider::split(model).unwrap_or((self.default, model))
    }
}

/// The clients of a session, one per provider it uses, each request sent to its model's.
pub struct Router {
    choice: ProviderChoice,
    clients: Vec<(Provider, Arc<dyn Model>)>,
}

impl Router {
    /// A router that picks by `choice`.
    pub fn new(choice: ProviderChoice) -> Self {
        Self {
            choice,
            clients: Vec::new(),
        }
    }

    /// Add the client of `provider`.
    pub fn with(mut self, provider: Provider, client: Arc<dyn Model>) -> Self {
        self.clients.retain(|(p, _)| *p != provider);
        self.clients.push((provider, client));
        self
    }

    fn pick(&self, req: &ModelRequest) -> Result<(&dyn Model, Option<ModelRequest>), ApiError> {
        let (p, wire) = self.choice.resolve(&req.model);
        let client = self
            .clients
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, c)| c.as_ref())
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorKind::Config,
                    format!("the model {:?} is served by the {p} provider, which this session has not configured", req.model),
                )
            })?;
        // Only a session that also uses the Responses API can hold its reasoning items; the
        // others never pay for the look.
        let foreign = p.speaks_messages()
            && self.clients.iter().any(|(q, _)| *q == Provider::OpenAi)
            && carries_reasoning_items(req);
        if wire == req.model && !foreign {
            return Ok((client, None));
        }
        let mut owned = req.clone();
        owned.model = wire.to_owned();
        if foreign {
            drop_reasoning_items(&mut owned);
        }
        Ok((client, Some(owned)))
    }
}

/// Whether the history holds OpenAI reasoning items (kept as thinking blocks), which the
/// Messages API would refuse.
fn carries_reasoning_items(req: &ModelRequest) -> bool {
    req.messages.iter().any(|m| match m {
        RequestMessage::Encoded(e) => e.as_str().contains(REASONING_SIGNATURE_PREFIX),
        RequestMessage::Owned(m) => has_reasoning(&m.content),
    })
}

fn has_reasoning(c: &MessageContent) -> bool {
    matches!(c, MessageContent::Blocks(bs) if bs.iter().any(is_reasoning))
}

fn is_reasoning(b: &ContentBlock) -> bool {
    matches!(b, ContentBlock::Thinking(t) if t.signature.starts_with(REASONING_SIGNATURE_PREFIX))
}

fn drop_reasoning_items(req: &mut ModelRequest) {
    for m in &mut req.messages {
        let typed = match m {
            RequestMessage::Encoded(e) if e.as_str().contains(REASONING_SIGNATURE_PREFIX) => {
                e.decode()
            }
            RequestMessage::Owned(o) if has_reasoning(&o.content) => Some(o.clone()),
            _ => None,
        };
        if let Some(mut t) = typed {
            if let MessageContent::Blocks(bs) = &mut t.content {
                bs.retain(|b| !is_reasoning(b));
            }
            *m = RequestMessage::Owned(t);
        }
    }
}

impl Model for Router {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>> {
        Box::pin(async move {
            let (client, owned) = self.pick(req)?;
            match owned {
                Some(r) => client.stream(&r).await,
                None => client.stream(req).await,
            }
        })
    }

    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>> {
        Box::pin(async move {
            let (client, owned) = self.pick(req)?;
            match owned {
                Some(r) => client.complete(&r).await,
                None => client.complete(req).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_strings_pick_the_provider_unless_one_was_chosen() {
        let r = ProviderChoice::default();
        assert_eq!(r.resolve("openai/gpt-5"), (Provider::OpenAi, "gpt-5"));
        assert_eq!(
            r.resolve("openai-chat/deepseek-chat"),
            (Provider::OpenAiChat, "deepseek-chat")
        );
        assert_eq!(
            r.resolve("claude-sonnet-4-5"),
            (Provider::Anthropic, "claude-sonnet-4-5")
        );
        assert_eq!(
            r.resolve("meta-llama/llama-3"),
            (Provider::Anthropic, "meta-llama/llama-3")
        );
        let r = ProviderChoice {
            default: Provider::OpenAiChat,
            explicit: true,
        };
        assert_eq!(
            r.resolve("openai/gpt-4o"),
            (Provider::OpenAiChat, "openai/gpt-4o")
        );
        assert_eq!(Provider::split("openai/"), None);
    }
}

//! The model clients a session talks to: which provider and model the options, the settings
//! and the environment choose, and a client for each provider those models need.

use std::sync::Arc;

use keel_model::{
    AnthropicClient, ApiErrorKind, ClientConfig, Model, OpenAiApi, OpenAiClient, OpenAiOptions,
    Provider, ProviderChoice, Router, DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL,
};

use super::cloud::{self, timeouts};
use super::knobs::{Env, Knobs};
use super::{BuildError, SessionOptions, DEFAULT_MODEL};

/// The session's model: `--model`, else `KEEL_MODEL`, else `ANTHROPIC_MODEL` (an Anthropic
/// model, so not for another provider), else the chosen cloud's own default, else
/// [`DEFAULT_MODEL`].
pub(super) fn model_for(
    o: &SessionOptions,
    env: &Env,
    providers: &ProviderChoice,
) -> Result<String, BuildError> {
    let model = o
        .model
        .clone()
        .or_else(|| env("KEEL_MODEL"))
        .or_else(|| env("ANTHROPIC_MODEL"))
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let named = o
        .model
        .clone()
        .or_else(|| env("KEEL_MODEL"))
        .is_some_and(|m| !m.trim().is_empty());
    Ok(match (named, env("ANTHROPIC_MODEL"), providers.explicit) {
        // A cloud serving Claude has a model of its own when none is named.
        (false, None, true) if cloud::default_model(providers.default).is_some() => {
            cloud::default_model(providers.default).unwrap_or(DEFAULT_MODEL).to_owned()
        }
        // The Anthropic model variable names no model of another provider.
        (false, Some(_), true) if !providers.default.speaks_messages() => {
            return Err(BuildError::Usage(format!(
                "Error: the {} provider needs a model: pass --model or set KEEL_MODEL (ANTHROPIC_MODEL names an Anthropic model)",
                providers.default
            )))
        }
        (false, None, true) if !providers.default.speaks_messages() => {
            return Err(BuildError::Usage(format!(
                "Error: the {} provider needs a model: pass --model or set KEEL_MODEL",
                providers.default
            )))
        }
        _ => model,
    })
}

/// Which variable the session's key comes from, for `system/init` (`none` without one).
pub(super) fn api_key_source(providers: &ProviderChoice, model: &str, env: &Env) -> String {
    match providers.resolve(model).0 {
        Provider::Anthropic if env("ANTHROPIC_API_KEY").is_some() => "ANTHROPIC_API_KEY",
        Provider::OpenAi | Provider::OpenAiChat if env("OPENAI_API_KEY").is_some() => {
            "OPENAI_API_KEY"
        }
        Provider::Bedrock if env("AWS_BEARER_TOKEN_BEDROCK").is_some() => {
            "AWS_BEARER_TOKEN_BEDROCK"
        }
        Provider::Foundry if env("ANTHROPIC_FOUNDRY_API_KEY").is_some() => {
            "ANTHROPIC_FOUNDRY_API_KEY"
        }
        _ => "none",
    }
    .to_owned()
}

/// The provider `--provider`, the settings or `KEEL_PROVIDER` chose, if any.
pub(super) fn provider_choice(
    o: &SessionOptions,
    setting: Option<(String, String)>,
    env: &Env,
) -> Result<ProviderChoice, BuildError> {
    if let Some(default) = o.provider {
        return Ok(ProviderChoice {
            default,
            explicit: true,
        });
    }
    let named = match (setting, env("KEEL_PROVIDER")) {
        (Some((p, at)), _) => Some((p, format!("the provider setting in {at}"))),
        (None, Some(p)) => Some((p, "KEEL_PROVIDER".to_owned())),
        (None, None) => None,
    };
    let Some((name, from)) = named.filter(|(n, _)| !n.trim().is_empty()) else {
        return Ok(match cloud::switched(env)? {
            Some(default) => ProviderChoice {
                default,
                explicit: true,
            },
            None => ProviderChoice::default(),
        });
    };
    let default = Provider::parse(&name).ok_or_else(|| {
        let all: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
        BuildError::Usage(format!(
            "Error: {from} names the provider {name:?}, which keel does not speak; it speaks {}",
            all.join(", ")
        ))
    })?;
    Ok(ProviderChoice {
        default,
        explicit: true,
    })
}

/// A client for every provider the session's models need (the model and the fallback model),
/// behind one router.
pub(super) fn clients(
    env: &Env,
    k: &Knobs<'_>,
    choice: ProviderChoice,
    model: &str,
    fallback: Option<&str>,
) -> Result<Arc<dyn Model>, BuildError> {
    let mut needed = vec![choice.resolve(model).0];
    if let Some(f) = fallback {
        let p = choice.resolve(f).0;
        if !needed.contains(&p) {
            needed.push(p);
        }
    }
    let mut router = Router::new(choice);
    for p in needed {
        let client: Arc<dyn Model> = match p {
            Provider::Anthropic => Arc::new(client_from_env(env, k)?),
            Provider::OpenAi => Arc::new(openai_from_env(env, k, OpenAiApi::Responses)?),
            Provider::OpenAiChat => Arc::new(openai_from_env(env, k, OpenAiApi::Chat)?),
            Provider::Foundry => cloud::foundry(env, k)?,
            Provider::Vertex => Arc::new(cloud::vertex(env, k)?),
            Provider::Bedrock => Arc::new(cloud::bedrock(env, k)?),
        };
        router = router.with(p, client);
    }
    Ok(Arc::new(router))
}

/// An OpenAI client (Responses or Chat Completions) the environment describes.
pub(super) fn openai_from_env(
    env: &Env,
    k: &Knobs<'_>,
    api: OpenAiApi,
) -> Result<OpenAiClient, BuildError> {
    let from_env = env("OPENAI_BASE_URL").filter(|s| !s.trim().is_empty());
    let base_url = from_env
        .clone()
        .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_owned());
    let api_key = env("OPENAI_API_KEY").filter(|s| !s.trim().is_empty());
    if api_key.is_none() && base_url == OPENAI_DEFAULT_BASE_URL {
        return Err(BuildError::Usage(
            "Error: keel needs an API key to talk to OpenAI. Set OPENAI_API_KEY, or point OPENAI_BASE_URL at a compatible server (see docs/providers.md).".into(),
        ));
    }
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        ..ClientConfig::default()
    };
    timeouts(&mut cfg, k)?;
    let mut options = OpenAiOptions::default();
    if let Some(f) = env("KEEL_OPENAI_MAX_TOKENS_FIELD").filter(|s| !s.trim().is_empty()) {
        options.chat_max_tokens_field = f.trim().to_owned();
    }
    OpenAiClient::new(api, cfg, options).map_err(|e| match (e.kind, from_env) {
        (ApiErrorKind::Config, Some(url)) if e.message.contains("URL") => {
            BuildError::Usage(format!(
                "Error: OPENAI_BASE_URL={url:?} cannot be used: {}",
                e.message
            ))
        }
        (ApiErrorKind::Config, _) if e.message.contains("output cap") => BuildError::Usage(
            format!("Error: KEEL_OPENAI_MAX_TOKENS_FIELD: {}", e.message),
        ),
        _ => BuildError::Usage(format!("Error: {e}")),
    })
}

/// The Anthropic client the environment describes.
pub(super) fn client_from_env(env: &Env, k: &Knobs<'_>) -> Result<AnthropicClient, BuildError> {
    let from_env = env("ANTHROPIC_BASE_URL").filter(|s| !s.trim().is_empty());
    let base_url = from_env
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let api_key = env("ANTHROPIC_API_KEY").filter(|s| !s.trim().is_empty());
    let auth_token = env("ANTHROPIC_AUTH_TOKEN").filter(|s| !s.trim().is_empty());
    if api_key.is_none() && auth_token.is_none() && base_url == DEFAULT_BASE_URL {
        return Err(BuildError::Usage(
            "Error: keel needs an API key to talk to the model. Set ANTHROPIC_API_KEY (create a key in the Anthropic Console), or point ANTHROPIC_BASE_URL at a compatible server. To see keel work without a key, run `keel demo`.".into(),
        ));
    }
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        auth_token,
        ..ClientConfig::default()
    };
    timeouts(&mut cfg, k)?;
    AnthropicClient::new(cfg).map_err(|e| match (e.kind, from_env) {
        (ApiErrorKind::Config, Some(url)) => BuildError::Usage(format!(
            "Error: ANTHROPIC_BASE_URL={url:?} cannot be used: {}",
            e.message
        )),
        _ => BuildError::Usage(format!("Error: {e}")),
    })
}

//! The cloud providers' configuration from the variables Claude Code's users already have:
//! `CLAUDE_CODE_USE_BEDROCK` / `_VERTEX` / `_FOUNDRY` and each cloud's own. Every missing or
//! malformed value is an exit-2 error naming the variable, found before any request.

use std::path::PathBuf;
use std::sync::Arc;

use keel_model::cloud::aws::{resolve, CredentialsProvider};
use keel_model::cloud::azure::cli::find_az;
use keel_model::cloud::azure::{self, EntraCredential, EntraSource};
use keel_model::cloud::azure_foundry::FoundryEntraClient;
use keel_model::cloud::gcp::{gcloud_adc_path, TokenSource};
use keel_model::{
    AnthropicClient, BedrockAuth, BedrockClient, BedrockConfig, ClientConfig, Model, Provider,
    VertexClient, VertexConfig,
};

use super::knobs::{Env, Knobs};
use super::BuildError;

/// The switches, in the order they win when several are on.
const SWITCHES: [(&str, Provider); 3] = [
    ("CLAUDE_CODE_USE_BEDROCK", Provider::Bedrock),
    ("CLAUDE_CODE_USE_VERTEX", Provider::Vertex),
    ("CLAUDE_CODE_USE_FOUNDRY", Provider::Foundry),
];

/// Whether a boolean variable is on: `1`/`true`/`yes`/`on` (any case) on, `0`/`false`/`no`/
/// `off`/empty off, anything else an error naming it.
pub(super) fn flag(env: &Env, var: &str) -> Result<bool, BuildError> {
    let Some(v) = env(var) else {
        return Ok(false);
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(BuildError::Usage(format!(
            "Error: {var}={v:?} is not valid: expected 1 or 0"
        ))),
    }
}

/// The cloud a `CLAUDE_CODE_USE_*` switch picks, if one is on (two on at once is an error:
/// which company receives the code must not be a guess).
pub(super) fn switched(env: &Env) -> Result<Option<Provider>, BuildError> {
    let mut on = Vec::new();
    for (var, p) in SWITCHES {
        if flag(env, var)? {
            on.push((var, p));
        }
    }
    match on.as_slice() {
        [] => Ok(None),
        [(_, p)] => Ok(Some(*p)),
        [(a, _), (b, _), ..] => Err(BuildError::Usage(format!(
            "Error: both {a} and {b} are set; turn one off to say which cloud keel should use"
        ))),
    }
}

/// The model a cloud gets when none is named.
pub(super) fn default_model(p: Provider) -> Option<&'static str> {
    match p {
        Provider::Bedrock => Some("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        Provider::Vertex => Some("claude-sonnet-4-5@20250929"),
        Provider::Foundry => Some("claude-sonnet-4-5"),
        Provider::Anthropic | Provider::OpenAi | Provider::OpenAiChat => None,
    }
}

fn set(env: &Env, var: &str) -> Option<String> {
    env(var)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A configuration error of a client, told with the variable that holds the value.
fn usage(var: &str, e: impl std::fmt::Display) -> BuildError {
    BuildError::Usage(format!("Error: {var}: {e}"))
}

/// Microsoft Foundry: the Messages API at `ANTHROPIC_FOUNDRY_BASE_URL`, or at the Azure
/// resource `ANTHROPIC_FOUNDRY_RESOURCE`, with `ANTHROPIC_FOUNDRY_API_KEY` or else a Microsoft
/// Entra ID token.
pub(super) fn foundry(env: &Env, k: &Knobs<'_>) -> Result<Arc<dyn Model>, BuildError> {
    let (base_url, var) = match (
        set(env, "ANTHROPIC_FOUNDRY_BASE_URL"),
        set(env, "ANTHROPIC_FOUNDRY_RESOURCE"),
    ) {
        (Some(url), _) => (url, "ANTHROPIC_FOUNDRY_BASE_URL"),
        (None, Some(r)) => {
            let ok = r.len() <= 64 && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !ok {
                return Err(usage(
                    "ANTHROPIC_FOUNDRY_RESOURCE",
                    format!("{r:?} is not an Azure resource name (letters, digits and -)"),
                ));
            }
            (
                format!("https://{r}.services.ai.azure.com/anthropic"),
                "ANTHROPIC_FOUNDRY_RESOURCE",
            )
        }
        (None, None) => {
            return Err(BuildError::Usage(
                "Error: Microsoft Foundry needs its resource: set ANTHROPIC_FOUNDRY_RESOURCE to the Azure resource name (or ANTHROPIC_FOUNDRY_BASE_URL to the full endpoint)".into(),
            ))
        }
    };
    let api_key = set(env, "ANTHROPIC_FOUNDRY_API_KEY");
    // Without a key, Microsoft Entra ID (unless a gateway authenticates).
    let entra = match api_key {
        None if !flag(env, "CLAUDE_CODE_SKIP_FOUNDRY_AUTH")? => Some(entra_chain(env)?),
        _ => None,
    };
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        ..ClientConfig::default()
    };
    timeouts(&mut cfg, k)?;
    Ok(match entra {
        Some(auth) => {
            Arc::new(FoundryEntraClient::new(cfg, Arc::new(auth)).map_err(|e| usage(var, e))?)
        }
        None => Arc::new(AnthropicClient::new(cfg).map_err(|e| usage(var, e))?),
    })
}

/// The Microsoft Entra ID sources the environment configures, as Azure's default chain reads
/// them: a client secret, else a federated token file (each alone: what the user set is what
/// is used), else the managed identity and the Azure CLI (tried in turn at the first request).
fn entra_chain(env: &Env) -> Result<EntraCredential, BuildError> {
    let tenant = set(env, "AZURE_TENANT_ID");
    let client_id = set(env, "AZURE_CLIENT_ID");
    let authority =
        set(env, "AZURE_AUTHORITY_HOST").unwrap_or_else(|| azure::PUBLIC_AUTHORITY.into());
    let principal = |with: &str| -> Result<(String, String), BuildError> {
        let (Some(t), Some(c)) = (&tenant, &client_id) else {
            return Err(BuildError::Usage(format!(
                "Error: {with} is set, so keel authenticates to Microsoft Foundry as that application: set {} too",
                [("AZURE_TENANT_ID", &tenant), ("AZURE_CLIENT_ID", &client_id)]
                    .iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(" and ")
            )));
        };
        let url = azure::token_url(&authority, t)
            .map_err(|e| BuildError::Usage(format!("Error: {}", e.message)))?;
        Ok((url, c.clone()))
    };
    let mut sources = Vec::new();
    if let Some(secret) = set(env, "AZURE_CLIENT_SECRET") {
        let (token_url, client_id) = principal("AZURE_CLIENT_SECRET")?;
        sources.push(EntraSource::ClientSecret {
            token_url,
            client_id,
            secret,
        });
    } else if set(env, "AZURE_CLIENT_CERTIFICATE_PATH").is_some() {
        // Silently using another identity than the one configured would be worse than stopping.
        return Err(BuildError::Usage(
            "Error: AZURE_CLIENT_CERTIFICATE_PATH is set, but keel does not read certificate credentials yet: use AZURE_CLIENT_SECRET, a federated token file, a managed identity or `az login` (or ANTHROPIC_FOUNDRY_API_KEY)".into(),
        ));
    } else if let Some(file) = set(env, "AZURE_FEDERATED_TOKEN_FILE") {
        let (token_url, client_id) = principal("AZURE_FEDERATED_TOKEN_FILE")?;
        sources.push(EntraSource::WorkloadIdentity {
            token_url,
            client_id,
            token_file: PathBuf::from(file),
        });
    } else {
        if let (Some(endpoint), Some(header)) =
            (set(env, "IDENTITY_ENDPOINT"), set(env, "IDENTITY_HEADER"))
        {
            azure::check_url(&endpoint, "IDENTITY_ENDPOINT")
                .map_err(|e| BuildError::Usage(format!("Error: {}", e.message)))?;
            sources.push(EntraSource::AppService {
                endpoint,
                header,
                client_id: client_id.clone(),
            });
        } else if let Some(host) = set(env, "AZURE_POD_IDENTITY_AUTHORITY_HOST") {
            let url = format!(
                "{}/metadata/identity/oauth2/token",
                host.trim_end_matches('/')
            );
            keel_model::cloud::azure::check_metadata_url(&url)
                .map_err(|e| usage("AZURE_POD_IDENTITY_AUTHORITY_HOST", e))?;
            sources.push(EntraSource::Imds {
                url,
                client_id: client_id.clone(),
            });
        } else if azure::on_azure() {
            // Only on an Azure machine: anywhere else the address answers nothing (or
            // something else), and keel does not probe the network for it.
            sources.push(EntraSource::Imds {
                url: azure::IMDS_TOKEN_URL.into(),
                client_id: client_id.clone(),
            });
        }
        if let Some(t) = &tenant {
            azure::check_tenant(t)
                .map_err(|e| BuildError::Usage(format!("Error: {}", e.message)))?;
        }
        if let Some(program) = set(env, "PATH").and_then(|p| find_az(&p)) {
            sources.push(EntraSource::AzureCli {
                program,
                tenant: tenant.clone(),
                timeout: azure::CLI_TIMEOUT,
            });
        }
    }
    if sources.is_empty() {
        return Err(BuildError::Usage(
            "Error: Microsoft Foundry needs credentials: set ANTHROPIC_FOUNDRY_API_KEY, or Microsoft Entra ID ones (AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET; AZURE_FEDERATED_TOKEN_FILE for workload identity; a managed identity on Azure; or the Azure CLI after `az login`). CLAUDE_CODE_SKIP_FOUNDRY_AUTH=1 sends none, for gateways".into(),
        ));
    }
    EntraCredential::new(sources).map_err(|e| BuildError::Usage(format!("Error: {}", e.message)))
}

/// Google Vertex AI: `ANTHROPIC_VERTEX_PROJECT_ID`, `CLOUD_ML_REGION`, an optional
/// `ANTHROPIC_VERTEX_BASE_URL`, and application-default credentials unless
/// `CLAUDE_CODE_SKIP_VERTEX_AUTH` is on.
pub(super) fn vertex(env: &Env, k: &Knobs<'_>) -> Result<VertexClient, BuildError> {
    let project = set(env, "ANTHROPIC_VERTEX_PROJECT_ID").ok_or_else(|| {
        BuildError::Usage(
            "Error: Google Vertex AI needs a project: set ANTHROPIC_VERTEX_PROJECT_ID to the Google Cloud project that has Claude enabled".into(),
        )
    })?;
    let region = set(env, "CLOUD_ML_REGION").unwrap_or_else(|| "us-east5".to_owned());
    let auth = if flag(env, "CLAUDE_CODE_SKIP_VERTEX_AUTH")? {
        None
    } else {
        Some(Arc::new(google_credentials(env)?))
    };
    let mut client = ClientConfig {
        base_url: set(env, "ANTHROPIC_VERTEX_BASE_URL").unwrap_or_default(),
        ..ClientConfig::default()
    };
    timeouts(&mut client, k)?;
    let var = if client.base_url.is_empty() {
        "ANTHROPIC_VERTEX_PROJECT_ID / CLOUD_ML_REGION"
    } else {
        "ANTHROPIC_VERTEX_BASE_URL"
    };
    VertexClient::new(VertexConfig {
        client,
        project,
        region,
        auth,
    })
    .map_err(|e| usage(var, e))
}

/// Application-default credentials: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's file,
/// else (on Google Cloud, or with `GCE_METADATA_HOST`) the metadata server.
fn google_credentials(env: &Env) -> Result<TokenSource, BuildError> {
    let token_url = set(env, "KEEL_GOOGLE_TOKEN_URL");
    if let Some(path) = set(env, "GOOGLE_APPLICATION_CREDENTIALS") {
        return TokenSource::from_file(&PathBuf::from(path), token_url)
            .map_err(|e| usage("GOOGLE_APPLICATION_CREDENTIALS", e));
    }
    let gcloud = match (set(env, "CLOUDSDK_CONFIG"), set(env, "HOME")) {
        (Some(dir), _) => Some(PathBuf::from(dir).join("application_default_credentials.json")),
        (None, Some(home)) => Some(gcloud_adc_path(&PathBuf::from(home))),
        (None, None) => None,
    };
    if let Some(p) = gcloud.filter(|p| p.exists()) {
        return TokenSource::from_file(&p, token_url)
            .map_err(|e| BuildError::Usage(format!("Error: {e}")));
    }
    // On Google Cloud the machine's own service account, from its metadata server: asked
    // only where GCE_METADATA_HOST names it or the machine says it is Google's (no probe of
    // the network from anywhere else).
    let host = set(env, "GCE_METADATA_HOST").or_else(|| {
        keel_model::cloud::gcp::on_google_cloud()
            .then(|| keel_model::cloud::gcp::METADATA_HOST.to_owned())
    });
    match host {
        Some(h) => TokenSource::metadata_server(&h).map_err(|e| usage("GCE_METADATA_HOST", e)),
        None => Err(BuildError::Usage(
            "Error: keel found no Google application-default credentials for Vertex AI: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run `gcloud auth application-default login`, run on Google Cloud (its metadata server is used there), or set CLAUDE_CODE_SKIP_VERTEX_AUTH=1 behind a gateway that authenticates for you".into(),
        )),
    }
}

/// Amazon Bedrock: `AWS_REGION` (else `AWS_DEFAULT_REGION`, else `us-east-1`), an optional
/// `ANTHROPIC_BEDROCK_BASE_URL`, and in order `AWS_BEARER_TOKEN_BEDROCK`, SigV4 credentials
/// from the AWS credential chain (see `keel_model::cloud::aws`), or nothing with `CLAUDE_CODE_SKIP_BEDROCK_AUTH`.
pub(super) fn bedrock(env: &Env, k: &Knobs<'_>) -> Result<BedrockClient, BuildError> {
    let region = set(env, "AWS_REGION")
        .or_else(|| set(env, "AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".to_owned());
    let auth = if let Some(t) = set(env, "AWS_BEARER_TOKEN_BEDROCK") {
        BedrockAuth::Bearer(t)
    } else if flag(env, "CLAUDE_CODE_SKIP_BEDROCK_AUTH")? {
        BedrockAuth::None
    } else {
        // The link of the credential chain only: its first fetch waits for the first request.
        match resolve(env, &region) {
            Ok(Some(source)) => BedrockAuth::SigV4(Arc::new(CredentialsProvider::new(source))),
            Ok(None) => return Err(BuildError::Usage(
                "Error: the AWS credentials could not be loaded for Amazon Bedrock: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), choose a profile of ~/.aws/config or ~/.aws/credentials with AWS_PROFILE (static keys, SSO after `aws sso login`, or credential_process), use web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), or set AWS_BEARER_TOKEN_BEDROCK to a Bedrock API key".into(),
            )),
            Err(e) => return Err(BuildError::Usage(format!(
                "Error: the AWS credentials could not be loaded for Amazon Bedrock: {}",
                e.message
            ))),
        }
    };
    let mut client = ClientConfig {
        base_url: set(env, "ANTHROPIC_BEDROCK_BASE_URL").unwrap_or_default(),
        ..ClientConfig::default()
    };
    timeouts(&mut client, k)?;
    let var = if client.base_url.is_empty() {
        "AWS_REGION"
    } else {
        "ANTHROPIC_BEDROCK_BASE_URL"
    };
    BedrockClient::new(BedrockConfig {
        client,
        region,
        auth,
    })
    .map_err(|e| usage(var, e))
}

/// Timeouts from the environment, the same for every provider.
pub(super) fn timeouts(cfg: &mut ClientConfig, k: &Knobs<'_>) -> Result<(), BuildError> {
    if let Some(d) = k.ms(
        "KEEL_STREAM_IDLE_TIMEOUT_MS",
        50,
        std::time::Duration::from_secs(3600),
    )? {
        cfg.idle_timeout = d;
    }
    if let Some(d) = k.ms(
        "KEEL_CONNECT_TIMEOUT_MS",
        1,
        std::time::Duration::from_secs(600),
    )? {
        cfg.connect_timeout = d;
    }
    Ok(())
}

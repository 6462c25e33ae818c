//! Which link of the AWS credential chain applies, in the order the AWS tools use:
//! the environment's keys, web identity, the shared profile (a role with web identity, SSO,
//! static keys, `credential_process`), the container endpoint, the EC2 metadata service.
//! Chosen from variables and files only: nothing here touches the network, so start-up costs
//! the same whichever link applies; the first fetch happens at the first request.

use std::path::PathBuf;

use super::super::sigv4::Credentials;
use super::metadata::{full_uri_allowed, on_ec2, Container, Imds, ECS_ENDPOINT, IMDS_ENDPOINT};
use super::process::{Process, MAX_COMMAND, PROCESS_TIMEOUT};
use super::profile::{config_error, static_keys, Pairs, ProfileSource};
use super::provider::Source;
use super::sso::{account_id_ok, role_name_ok, Sso};
use super::web_identity::{default_session_name, role_arn_ok, session_name_ok, WebIdentity};
use crate::error::ApiError;

/// The environment, as a lookup (tests pass their own).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn set(env: Env<'_>, k: &str) -> Option<String> {
    env(k)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The shared files and profile the environment names (`AWS_SHARED_CREDENTIALS_FILE`,
/// `AWS_CONFIG_FILE`, `AWS_PROFILE`, else under `$HOME/.aws`).
pub fn profile_source(env: Env<'_>) -> ProfileSource {
    let home = set(env, "HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        set(env, var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    ProfileSource {
        credentials_file: file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        config_file: file("AWS_CONFIG_FILE", "config"),
        profile: set(env, "AWS_PROFILE").unwrap_or_else(|| "default".to_owned()),
    }
}

/// An endpoint from `var`, else `AWS_ENDPOINT_URL`, else `default`; an override must be an
/// http(s) URL.
pub fn service_endpoint(env: Env<'_>, var: &str, default: String) -> Result<String, ApiError> {
    let (name, url) = match (set(env, var), set(env, "AWS_ENDPOINT_URL")) {
        (Some(u), _) => (var, u),
        (None, Some(u)) => ("AWS_ENDPOINT_URL", u),
        (None, None) => return Ok(default),
    };
    match reqwest::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(url),
        _ => Err(config_error(format!(
            "{name}={url:?} is not an http(s) URL"
        ))),
    }
}

/// The credential source the environment and the shared files give; `Ok(None)` when
/// there is none anywhere. `region` is where STS is asked.
pub fn resolve(env: Env<'_>, region: &str) -> Result<Option<Source>, ApiError> {
    if let Some(c) = env_keys(env)? {
        return Ok(Some(Source::Static(c)));
    }
    if let Some(w) = web_identity_env(env, region)? {
        return Ok(Some(Source::WebIdentity(w)));
    }
    if let Some(s) = profile(env, region)? {
        return Ok(Some(s));
    }
    if let Some(c) = container(env)? {
        return Ok(Some(Source::Container(c)));
    }
    imds(env)
}

/// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; a half-set pair is an error naming the
/// missing half.
fn env_keys(env: Env<'_>) -> Result<Option<Credentials>, ApiError> {
    match (
        set(env, "AWS_ACCESS_KEY_ID"),
        set(env, "AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => Ok(Some(Credentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: set(env, "AWS_SESSION_TOKEN"),
        })),
        (Some(_), None) => Err(config_error(
            "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
        )),
        (None, Some(_)) => Err(config_error(
            "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".into(),
        )),
        (None, None) => Ok(None),
    }
}

fn web_identity(
    env: Env<'_>,
    region: &str,
    token_file: String,
    role_arn: String,
    session: Option<String>,
    origin: &str,
) -> Result<WebIdentity, ApiError> {
    if !role_arn_ok(&role_arn) {
        return Err(config_error(format!(
            "{origin}: the role {role_arn:?} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)"
        )));
    }
    let session_name = session.unwrap_or_else(default_session_name);
    if !session_name_ok(&session_name) {
        return Err(config_error(format!(
            "{origin}: the role session name {session_name:?} is not 2 to 64 letters, digits or _+=,.@-"
        )));
    }
    Ok(WebIdentity {
        token_file: PathBuf::from(token_file),
        role_arn,
        session_name,
        endpoint: service_endpoint(
            env,
            "AWS_ENDPOINT_URL_STS",
            format!("https://sts.{region}.amazonaws.com"),
        )?,
    })
}

fn web_identity_env(env: Env<'_>, region: &str) -> Result<Option<WebIdentity>, ApiError> {
    match (
        set(env, "AWS_WEB_IDENTITY_TOKEN_FILE"),
        set(env, "AWS_ROLE_ARN"),
    ) {
        (Some(file), Some(arn)) => web_identity(
            env,
            region,
            file,
            arn,
            set(env, "AWS_ROLE_SESSION_NAME"),
            "AWS_ROLE_ARN",
        )
        .map(Some),
        (Some(_), None) => Err(config_error(
            "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not".into(),
        )),
        // AWS_ROLE_ARN alone is left to the profile (the AWS tools ignore it too).
        _ => Ok(None),
    }
}

/// The source a shared profile describes, if the profile exists and has one.
fn profile(env: Env<'_>, region: &str) -> Result<Option<Source>, ApiError> {
    let src = profile_source(env);
    let Some(p) = src.pairs()? else {
        if set(env, "AWS_PROFILE").is_some() {
            return Err(config_error(format!(
                "the AWS profile {:?} (AWS_PROFILE) is in neither {} nor {}",
                src.profile,
                shown(&src.credentials_file),
                shown(&src.config_file)
            )));
        }
        return Ok(None);
    };
    let name = src.profile.clone();
    let origin = format!("the AWS profile {name:?}");
    if let Some(arn) = p.get("role_arn") {
        return match p.get("web_identity_token_file") {
            Some(file) => web_identity(
                env,
                region,
                file.to_owned(),
                arn.to_owned(),
                p.get("role_session_name").map(str::to_owned),
                &origin,
            )
            .map(|w| Some(Source::WebIdentity(w))),
            None => Err(config_error(format!(
                "{origin} assumes the role {arn} from another profile (source_profile / credential_source), which keel does not do yet: export the role's credentials first (`aws configure export-credentials --profile {name} --format env`) or use AWS_BEARER_TOKEN_BEDROCK"
            ))),
        };
    }
    if p.get("sso_session").is_some() || p.get("sso_start_url").is_some() {
        return sso(env, &src, &p, &origin).map(|s| Some(Source::Sso(s)));
    }
    if static_keys(&p).is_some() {
        return Ok(Some(Source::Profile(src)));
    }
    if let Some(cmd) = p.get("credential_process") {
        if cmd.len() > MAX_COMMAND {
            return Err(config_error(format!(
                "{origin}: credential_process is longer than {MAX_COMMAND} bytes"
            )));
        }
        return Ok(Some(Source::Process(Process {
            profile: name,
            command: cmd.to_owned(),
            timeout: PROCESS_TIMEOUT,
        })));
    }
    Ok(None)
}

fn shown(p: &Option<PathBuf>) -> String {
    p.as_ref()
        .map_or_else(|| "(no file)".to_owned(), |p| p.display().to_string())
}

/// An SSO profile: `sso_session` (its `[sso-session]` section holds the start URL and
/// region) or the legacy keys on the profile itself.
fn sso(env: Env<'_>, src: &ProfileSource, p: &Pairs, origin: &str) -> Result<Sso, ApiError> {
    let session = p.get("sso_session").map(str::to_owned);
    let section = match &session {
        Some(s) => src
            .config_section(&format!("sso-session {s}"))?
            .ok_or_else(|| {
                config_error(format!(
                    "{origin} names sso_session {s:?}, but {} has no [sso-session {s}] section",
                    shown(&src.config_file)
                ))
            })?,
        None => Pairs::default(),
    };
    let get = |k: &str| section.get(k).or_else(|| p.get(k)).map(str::to_owned);
    let need =
        |k: &str| get(k).ok_or_else(|| config_error(format!("{origin} uses SSO but has no {k}")));
    let (start_url, sso_region) = (need("sso_start_url")?, need("sso_region")?);
    let (account_id, role_name) = (need("sso_account_id")?, need("sso_role_name")?);
    if !account_id_ok(&account_id) {
        return Err(config_error(format!(
            "{origin}: sso_account_id {account_id:?} is not a 12-digit AWS account id"
        )));
    }
    if !role_name_ok(&role_name) {
        return Err(config_error(format!(
            "{origin}: sso_role_name {role_name:?} is not an IAM role name"
        )));
    }
    if !super::super::bedrock::region_ok(&sso_region) {
        return Err(config_error(format!(
            "{origin}: sso_region {sso_region:?} is not an AWS region"
        )));
    }
    let home = set(env, "HOME").map(PathBuf::from).unwrap_or_default();
    Ok(Sso {
        profile: src.profile.clone(),
        session,
        start_url,
        account_id,
        role_name,
        cache_dir: home.join(".aws").join("sso").join("cache"),
        endpoint: service_endpoint(
            env,
            "AWS_ENDPOINT_URL_SSO",
            format!("https://portal.sso.{sso_region}.amazonaws.com"),
        )?,
    })
}

/// The container endpoint, from `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (on ECS's
/// link-local address) or `AWS_CONTAINER_CREDENTIALS_FULL_URI` (allowed hosts only).
fn container(env: Env<'_>) -> Result<Option<Container>, ApiError> {
    let url = if let Some(rel) = set(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        if !rel.starts_with('/') || rel.len() > 1024 || !rel.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(config_error(format!(
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI={rel:?} is not a path starting with /"
            )));
        }
        format!("{ECS_ENDPOINT}{rel}")
    } else if let Some(full) = set(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        match reqwest::Url::parse(&full) {
            Ok(u) if full_uri_allowed(&u) => full,
            _ => {
                return Err(config_error(format!(
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI={full:?} is not allowed: it must be https, or http to a loopback address or the ECS/EKS endpoints (169.254.170.2, 169.254.170.23, fd00:ec2::23)"
                )))
            }
        }
    } else {
        return Ok(None);
    };
    Ok(Some(Container {
        url,
        token: set(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        token_file: set(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").map(PathBuf::from),
    }))
}

/// The metadata service: only where `AWS_EC2_METADATA_SERVICE_ENDPOINT` names it or the
/// machine says it is an EC2 instance, never with `AWS_EC2_METADATA_DISABLED=true`.
fn imds(env: Env<'_>) -> Result<Option<Source>, ApiError> {
    if set(env, "AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let endpoint = match set(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT") {
        Some(e) => match reqwest::Url::parse(&e) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => e,
            _ => {
                return Err(config_error(format!(
                    "AWS_EC2_METADATA_SERVICE_ENDPOINT={e:?} is not an http(s) URL"
                )))
            }
        },
        None if on_ec2() => IMDS_ENDPOINT.to_owned(),
        None => return Ok(None),
    };
    Ok(Some(Source::Imds(Imds { endpoint })))
}

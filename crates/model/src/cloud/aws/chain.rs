//! Which link of the AWS credential chain applies, in the order the AWS tools use:
//! the environment's keys, web identity, the shared profile (a role assumed with another
//! profile's or the machine's credentials or with web identity, SSO,
//! static keys, `credential_process`), the container endpoint, the EC2 metadata service.
//! Chosen from variables and files only: nothing here touches the network, so start-up costs
//! the same whichever link applies; the first fetch happens at the first request.

use std::path::PathBuf;

use super::super::sigv4::Credentials;
use super::metadata::{full_uri_allowed, on_ec2, Container, Imds, ECS_ENDPOINT, IMDS_ENDPOINT};
use super::process::{Process, MAX_COMMAND, PROCESS_TIMEOUT};
use super::profile::{config_error, static_keys, Pairs, ProfileSource};
use super::provider::assume_role::{external_id_ok, AssumeRole};
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

/// How deep roles may chain (`source_profile` naming a profile that assumes a role itself).
const MAX_ROLE_CHAIN: usize = 5;

/// The source a shared profile describes, if the profile exists and has one.
fn profile(env: Env<'_>, region: &str) -> Result<Option<Source>, ApiError> {
    let src = profile_source(env);
    if src.pairs()?.is_none() {
        if set(env, "AWS_PROFILE").is_some() {
            return Err(config_error(format!(
                "the AWS profile {:?} (AWS_PROFILE) is in neither {} nor {}",
                src.profile,
                shown(&src.credentials_file),
                shown(&src.config_file)
            )));
        }
        return Ok(None);
    }
    profile_named(env, region, &src, 0)
}

/// The source of the profile `src` names (which exists); `depth` roles deep.
fn profile_named(
    env: Env<'_>,
    region: &str,
    src: &ProfileSource,
    depth: usize,
) -> Result<Option<Source>, ApiError> {
    let p = src.pairs()?.unwrap_or_default();
    let name = src.profile.clone();
    let origin = format!("the AWS profile {name:?}");
    if let Some(arn) = p.get("role_arn") {
        if let Some(file) = p.get("web_identity_token_file") {
            return web_identity(
                env,
                region,
                file.to_owned(),
                arn.to_owned(),
                p.get("role_session_name").map(str::to_owned),
                &origin,
            )
            .map(|w| Some(Source::WebIdentity(w)));
        }
        return assume_role(env, region, src, &p, arn, depth).map(|a| Some(Source::AssumeRole(a)));
    }
    if p.get("sso_session").is_some() || p.get("sso_start_url").is_some() {
        return sso(env, src, &p, &origin).map(|s| Some(Source::Sso(s)));
    }
    if static_keys(&p).is_some() {
        return Ok(Some(Source::Profile(src.clone())));
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

/// A profile's `role_arn` assumed with its `source_profile`'s or `credential_source`'s
/// credentials.
fn assume_role(
    env: Env<'_>,
    region: &str,
    src: &ProfileSource,
    p: &Pairs,
    arn: &str,
    depth: usize,
) -> Result<AssumeRole, ApiError> {
    let origin = format!("the AWS profile {:?}", src.profile);
    if !role_arn_ok(arn) {
        return Err(config_error(format!(
            "{origin}: role_arn {arn:?} is not an IAM role ARN"
        )));
    }
    if p.get("mfa_serial").is_some() {
        return Err(config_error(format!(
            "{origin} needs an MFA code (mfa_serial), which keel cannot ask for: export the role's credentials first (`aws configure export-credentials --profile {} --format env`)",
            src.profile
        )));
    }
    if depth >= MAX_ROLE_CHAIN {
        return Err(config_error(format!(
            "{origin}: source_profile chains more than {MAX_ROLE_CHAIN} roles deep (a loop?)"
        )));
    }
    let source = role_source(env, region, src, p, &origin, depth)?;
    let session_name = p
        .get("role_session_name")
        .map(str::to_owned)
        .unwrap_or_else(default_session_name);
    if !session_name_ok(&session_name) {
        return Err(config_error(format!(
            "{origin}: role_session_name {session_name:?} is not 2 to 64 letters, digits or _+=,.@-"
        )));
    }
    let external_id = p.get("external_id").map(str::to_owned);
    if external_id.as_deref().is_some_and(|x| !external_id_ok(x)) {
        return Err(config_error(format!(
            "{origin}: external_id is not 2 to 1224 of letters, digits or _+=,.@:/-"
        )));
    }
    let duration = match p.get("duration_seconds") {
        None => None,
        Some(d) => Some(
            d.parse::<u32>()
                .ok()
                .filter(|d| (900..=43_200).contains(d))
                .ok_or_else(|| {
                    config_error(format!(
                        "{origin}: duration_seconds {d:?} is not a number from 900 to 43200"
                    ))
                })?,
        ),
    };
    Ok(AssumeRole {
        profile: src.profile.clone(),
        role_arn: arn.to_owned(),
        session_name,
        external_id,
        duration,
        source: Box::new(source),
        endpoint: service_endpoint(
            env,
            "AWS_ENDPOINT_URL_STS",
            format!("https://sts.{region}.amazonaws.com"),
        )?,
        region: region.to_owned(),
    })
}

/// The credentials a role is assumed with: its `source_profile`'s (its own static keys when it
/// names itself) or its `credential_source`'s; exactly one of the two.
fn role_source(
    env: Env<'_>,
    region: &str,
    src: &ProfileSource,
    p: &Pairs,
    origin: &str,
    depth: usize,
) -> Result<Source, ApiError> {
    Ok(match (p.get("source_profile"), p.get("credential_source")) {
        (Some(_), Some(_)) => {
            return Err(config_error(format!(
                "{origin} sets both source_profile and credential_source; keep one"
            )))
        }
        // A profile naming itself signs with its own static keys.
        (Some(s), None) if s == src.profile => match static_keys(p) {
            Some(_) => Source::Profile(src.clone()),
            None => {
                return Err(config_error(format!(
                    "{origin} is its own source_profile but has no static keys"
                )))
            }
        },
        (Some(s), None) => {
            let next = ProfileSource {
                profile: s.to_owned(),
                ..src.clone()
            };
            if next.pairs()?.is_none() {
                return Err(config_error(format!(
                    "{origin} names source_profile {s:?}, which neither shared file has"
                )));
            }
            profile_named(env, region, &next, depth + 1)?.ok_or_else(|| {
                config_error(format!(
                    "{origin} names source_profile {s:?}, which has no credentials"
                ))
            })?
        }
        (None, Some(cs)) => credential_source(env, cs, origin)?,
        (None, None) => {
            return Err(config_error(format!(
                "{origin} sets role_arn without source_profile, credential_source or web_identity_token_file"
            )))
        }
    })
}

/// `credential_source`: the environment's keys, the container endpoint or the EC2 metadata
/// service, named explicitly (so the metadata service is asked even off EC2's DMI check).
fn credential_source(env: Env<'_>, name: &str, origin: &str) -> Result<Source, ApiError> {
    let missing = |what: &str| {
        config_error(format!(
            "{origin} takes its credential_source from {name}, but {what}"
        ))
    };
    match name {
        "Environment" => env_keys(env)?
            .map(Source::Static)
            .ok_or_else(|| missing("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set")),
        "EcsContainer" => container(env)?
            .map(Source::Container)
            .ok_or_else(|| missing("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI are not set")),
        "Ec2InstanceMetadata" => {
            if set(env, "AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
                return Err(missing("AWS_EC2_METADATA_DISABLED is true"));
            }
            Ok(Source::Imds(Imds {
                endpoint: imds_endpoint(env)?.unwrap_or_else(|| IMDS_ENDPOINT.to_owned()),
            }))
        }
        other => Err(config_error(format!(
            "{origin}: credential_source {other:?} is not Environment, EcsContainer or Ec2InstanceMetadata"
        ))),
    }
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
    if !super::region_ok(&sso_region) {
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
        oidc_endpoint: service_endpoint(
            env,
            "AWS_ENDPOINT_URL_SSO_OIDC",
            format!("https://oidc.{sso_region}.amazonaws.com"),
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
    let endpoint = match imds_endpoint(env)? {
        Some(e) => e,
        None if on_ec2() => IMDS_ENDPOINT.to_owned(),
        None => return Ok(None),
    };
    Ok(Some(Source::Imds(Imds { endpoint })))
}

/// `AWS_EC2_METADATA_SERVICE_ENDPOINT`, checked to be an http(s) URL.
fn imds_endpoint(env: Env<'_>) -> Result<Option<String>, ApiError> {
    match set(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT") {
        None => Ok(None),
        Some(e) => match reqwest::Url::parse(&e) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(Some(e)),
            _ => Err(config_error(format!(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT={e:?} is not an http(s) URL"
            ))),
        },
    }
}

//! AWS credentials the way the AWS tools find them, as far as keel reads them: the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), then the
//! shared credentials and config files for `AWS_PROFILE` (default `default`). Profiles that
//! need SSO, a role, web identity or a credential process are named as not read yet.

use std::path::{Path, PathBuf};

use super::sigv4::Credentials;
use crate::error::{ApiError, ApiErrorKind};

/// A shared file larger than this is not one.
const MAX_FILE: u64 = 1024 * 1024;

/// The profile files to read (again, when credentials expire).
#[derive(Clone, Debug)]
pub struct ProfileSource {
    /// `AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`.
    pub credentials_file: Option<PathBuf>,
    /// `AWS_CONFIG_FILE` or `~/.aws/config`.
    pub config_file: Option<PathBuf>,
    /// `AWS_PROFILE` or `default`.
    pub profile: String,
}

fn config_error(msg: String) -> ApiError {
    ApiError::new(ApiErrorKind::Config, msg)
}

/// The `key = value` pairs of `[section]` in an INI file, if the section exists.
fn section(path: &Path, name: &str) -> Result<Option<Vec<(String, String)>>, ApiError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(config_error(format!("{}: {e}", path.display()))),
    };
    if !meta.is_file() || meta.len() > MAX_FILE {
        return Err(config_error(format!(
            "{}: not a regular file of at most {MAX_FILE} bytes",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(format!("{}: {e}", path.display())))?;
    let mut inside = false;
    let mut found = None::<Vec<(String, String)>>;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = h.trim() == name;
            if inside && found.is_none() {
                found = Some(Vec::new());
            }
            continue;
        }
        if let (true, Some((k, v)), Some(f)) = (inside, line.split_once('='), found.as_mut()) {
            f.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    Ok(found)
}

impl ProfileSource {
    /// The profile's static credentials; `Ok(None)` when neither file has the profile.
    pub fn load(&self) -> Result<Option<Credentials>, ApiError> {
        let mut pairs = Vec::new();
        if let Some(p) = &self.credentials_file {
            pairs.extend(section(p, &self.profile)?.unwrap_or_default());
        }
        if let Some(p) = &self.config_file {
            let name = if self.profile == "default" {
                "default".to_owned()
            } else {
                format!("profile {}", self.profile)
            };
            pairs.extend(section(p, &name)?.unwrap_or_default());
        }
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(n, v)| n == k && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        match (get("aws_access_key_id"), get("aws_secret_access_key")) {
            (Some(id), Some(secret)) => Ok(Some(Credentials {
                access_key_id: id,
                secret_access_key: secret,
                session_token: get("aws_session_token"),
            })),
            _ => {
                let unread = [
                    "sso_session",
                    "sso_start_url",
                    "role_arn",
                    "web_identity_token_file",
                    "credential_process",
                ]
                .into_iter()
                .find(|k| get(k).is_some());
                match unread {
                    Some(k) => Err(config_error(format!(
                        "the AWS profile {:?} gets its credentials through {k}, which keel does not read yet; export them first (`aws configure export-credentials --profile {} --format env`) or use AWS_BEARER_TOKEN_BEDROCK",
                        self.profile, self.profile
                    ))),
                    None => Ok(None),
                }
            }
        }
    }
}

/// Credentials from the environment `env`, else from `profiles`; `Ok(None)` when there are
/// none anywhere. A half-set pair in the environment is an error naming the missing half.
pub fn from_env_or_profile(
    env: &dyn Fn(&str) -> Option<String>,
    profiles: &ProfileSource,
) -> Result<Option<Credentials>, ApiError> {
    let get = |k: &str| {
        env(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
        (Some(id), Some(secret)) => Ok(Some(Credentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: get("AWS_SESSION_TOKEN"),
        })),
        (Some(_), None) => Err(config_error(
            "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
        )),
        (None, Some(_)) => Err(config_error(
            "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".into(),
        )),
        (None, None) => profiles.load(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_come_from_both_files_and_unread_kinds_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n[work]\naws_access_key_id=AKIDWORK\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[profile work]\naws_secret_access_key = s2\naws_session_token = tok\n[profile sso]\nsso_session = corp\n",
        )
        .unwrap();
        let src = |p: &str| ProfileSource {
            credentials_file: Some(creds.clone()),
            config_file: Some(config.clone()),
            profile: p.into(),
        };
        let d = src("default").load().unwrap().unwrap();
        assert_eq!(
            (d.access_key_id.as_str(), d.session_token),
            ("AKIDDEFAULT", None)
        );
        let w = src("work").load().unwrap().unwrap();
        assert_eq!(
            (
                w.access_key_id.as_str(),
                w.secret_access_key.as_str(),
                w.session_token.as_deref()
            ),
            ("AKIDWORK", "s2", Some("tok"))
        );
        assert!(src("sso")
            .load()
            .unwrap_err()
            .message
            .contains("sso_session"));
        assert_eq!(src("nobody").load().unwrap(), None);
        let env = |k: &str| (k == "AWS_ACCESS_KEY_ID").then(|| "AKID".to_owned());
        let e = from_env_or_profile(&env, &src("default")).unwrap_err();
        assert!(e.message.contains("AWS_SECRET_ACCESS_KEY"), "{e}");
    }
}

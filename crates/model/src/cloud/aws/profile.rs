//! The shared credentials and config files (`~/.aws/credentials`, `~/.aws/config`): the
//! `key = value` pairs of a profile, read with a size bound and a regular-file check.

use std::path::{Path, PathBuf};

use super::super::sigv4::Credentials;
use crate::error::{ApiError, ApiErrorKind};

/// A shared file larger than this is not one.
const MAX_FILE: u64 = 1024 * 1024;

/// The profile files to read (again, when credentials are refused).
#[derive(Clone, Debug)]
pub struct ProfileSource {
    /// `AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`.
    pub credentials_file: Option<PathBuf>,
    /// `AWS_CONFIG_FILE` or `~/.aws/config`.
    pub config_file: Option<PathBuf>,
    /// `AWS_PROFILE` or `default`.
    pub profile: String,
}

/// The pairs of one profile, keys lower-cased, the credentials file's first.
#[derive(Clone, Debug, Default)]
pub struct Pairs(pub Vec<(String, String)>);

impl Pairs {
    /// The first non-empty value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, v)| n == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn config_error(msg: String) -> ApiError {
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
            // `[profile  work]` and `[profile work]` are the same section.
            let h = h.split_whitespace().collect::<Vec<_>>().join(" ");
            inside = h == name;
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
    /// The profile's pairs from both files; `Ok(None)` when neither has the profile.
    pub fn pairs(&self) -> Result<Option<Pairs>, ApiError> {
        let mut pairs = None::<Vec<(String, String)>>;
        if let Some(p) = &self.credentials_file {
            if let Some(s) = section(p, &self.profile)? {
                pairs.get_or_insert_with(Vec::new).extend(s);
            }
        }
        let name = if self.profile == "default" {
            "default".to_owned()
        } else {
            format!("profile {}", self.profile)
        };
        if let Some(s) = self.config_section(&name)? {
            pairs.get_or_insert_with(Vec::new).extend(s.0);
        }
        Ok(pairs.map(Pairs))
    }

    /// A section of the config file by its full name (`sso-session corp`).
    pub fn config_section(&self, name: &str) -> Result<Option<Pairs>, ApiError> {
        match &self.config_file {
            Some(p) => Ok(section(p, name)?.map(Pairs)),
            None => Ok(None),
        }
    }

    /// The profile's static keys; `Ok(None)` when it has none.
    pub fn load(&self) -> Result<Option<Credentials>, ApiError> {
        Ok(self.pairs()?.and_then(|p| static_keys(&p)))
    }
}

/// `aws_access_key_id` / `aws_secret_access_key` (/ `aws_session_token`) of a profile.
pub fn static_keys(p: &Pairs) -> Option<Credentials> {
    match (p.get("aws_access_key_id"), p.get("aws_secret_access_key")) {
        (Some(id), Some(secret)) => Some(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: p.get("aws_session_token").map(str::to_owned),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_come_from_both_files_credentials_first() {
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
            "[profile work]\naws_access_key_id = AKIDIGNORED\naws_secret_access_key = s2\naws_session_token = tok\n[profile  sso]\nsso_session = corp\n[sso-session corp]\nsso_region = eu-west-1\n",
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
        let sso = src("sso").pairs().unwrap().unwrap();
        assert_eq!(sso.get("sso_session"), Some("corp"));
        assert_eq!(src("sso").load().unwrap(), None);
        let session = src("x")
            .config_section("sso-session corp")
            .unwrap()
            .unwrap();
        assert_eq!(session.get("sso_region"), Some("eu-west-1"));
        assert!(src("nobody").pairs().unwrap().is_none());
    }

    #[test]
    fn a_shared_file_that_is_not_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let src = ProfileSource {
            credentials_file: Some(dir.path().to_owned()),
            config_file: None,
            profile: "default".into(),
        };
        assert!(src.pairs().unwrap_err().message.contains("regular file"));
    }
}

//! The token file: `<keel home>/mcp-oauth.json`, `{"servers": {"<name>": {...}}}`, mode 0600,
//! changed only through keel-tools' locked atomic writer (several sessions may refresh at
//! once). A server's entry is used only for the URL it was obtained for: a configuration that
//! now points the name elsewhere never receives the old token.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{OAuthError, MAX_TOKEN_BYTES};

/// The file's name under keel's home.
const FILE_NAME: &str = "mcp-oauth.json";

/// What keel keeps for one server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The MCP server's URL the token is for.
    pub server_url: String,
    /// The protected resource (`resource` in every authorization request).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its token endpoint (for refreshing).
    pub token_endpoint: String,
    /// keel's client id there.
    pub client_id: String,
    /// keel's client secret there, when registration gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The access token.
    pub access_token: String,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the epoch); none: not said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens or the secret.
        f.debug_struct("Stored")
            .field("server_url", &self.server_url)
            .field("issuer", &self.issuer)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl Stored {
    /// Whether the access token is expired at `at` (seconds since the epoch).
    pub fn expired(&self, at: u64) -> bool {
        self.expires_at.is_some_and(|e| e <= at)
    }

    /// Whether every field is within keel's bounds (a file edited by hand is checked too).
    fn sane(&self) -> bool {
        let token_ok = |t: &str| !t.is_empty() && t.len() <= MAX_TOKEN_BYTES;
        token_ok(&self.access_token)
            && self.refresh_token.as_deref().is_none_or(token_ok)
            && !self.client_id.is_empty()
            && self.client_id.len() <= 1024
            && self.token_endpoint.len() <= 2048
    }
}

/// Where `path`'s tokens are kept.
#[derive(Clone, Debug)]
pub struct TokenStore {
    path: PathBuf,
}

/// The token file under `home` (keel's home).
pub fn store_path(home: &Path) -> PathBuf {
    home.join(FILE_NAME)
}

impl TokenStore {
    /// The store in `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, why: impl std::fmt::Display) -> OAuthError {
        OAuthError::Store {
            path: self.path.display().to_string(),
            why: why.to_string(),
        }
    }

    /// The entry of `server`, when it was obtained for `url` and is well formed.
    pub fn load(&self, server: &str, url: &str) -> Result<Option<Stored>, OAuthError> {
        let root = keel_tools::json_file::read(&self.path).map_err(|e| self.err(e))?;
        let Some(entry) = root.get("servers").and_then(|s| s.get(server)) else {
            return Ok(None);
        };
        let stored: Stored = serde_json::from_value(entry.clone())
            .map_err(|e| self.err(format!("the entry of server {server:?} is not valid: {e}")))?;
        if stored.server_url != url || !stored.sane() {
            return Ok(None);
        }
        Ok(Some(stored))
    }

    /// Keep `stored` as `server`'s entry.
    pub fn save(&self, server: &str, stored: &Stored) -> Result<(), OAuthError> {
        let value = serde_json::to_value(stored).map_err(|e| self.err(e))?;
        self.change(|servers| {
            servers.insert(server.to_owned(), value);
        })
    }

    /// Forget `server`'s entry; whether there was one.
    pub fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        if !self.path.exists() {
            return Ok(false);
        }
        let mut had = false;
        self.change(|servers| had = servers.remove(server).is_some())?;
        Ok(had)
    }

    /// Change the `servers` object under the file's lock; the file is made (0600) first and
    /// kept private.
    fn change(&self, f: impl FnOnce(&mut Map<String, Value>)) -> Result<(), OAuthError> {
        self.private_file()?;
        keel_tools::json_file::update(&self.path, |root| {
            let servers = root
                .entry("servers")
                .or_insert_with(|| Value::Object(Map::new()));
            if !servers.is_object() {
                *servers = Value::Object(Map::new());
            }
            if let Some(s) = servers.as_object_mut() {
                f(s);
            }
            Ok(())
        })
        .map_err(|e| self.err(e))
    }

    /// Make the file, readable and writable by the user alone, if it is missing; take away
    /// any other access an existing one has. The writer keeps the mode it finds.
    fn private_file(&self) -> Result<(), OAuthError> {
        if let Some(dir) = self.path.parent() {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| self.err(format!("its directory cannot be made: {e}")))?;
            }
        }
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if !m.file_type().is_file() => Err(self.err(
                "it is not a regular file (a link, a directory or a device); it was left as it is",
            )),
            Ok(m) => {
                if m.permissions().mode() & 0o077 != 0 {
                    std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600))
                        .map_err(|e| self.err(format!("its mode cannot be set to 0600: {e}")))?;
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let made = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(nix::libc::O_NOFOLLOW)
                    .open(&self.path);
                match made {
                    Ok(mut f) => f
                        .write_all(b"{}\n")
                        .map_err(|e| self.err(format!("it cannot be written: {e}"))),
                    // Another session made it meanwhile.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                    Err(e) => Err(self.err(format!("it cannot be made: {e}"))),
                }
            }
            Err(e) => Err(self.err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(url: &str) -> Stored {
        Stored {
            server_url: url.into(),
            resource: url.into(),
            issuer: "https://as.example".into(),
            token_endpoint: "https://as.example/token".into(),
            client_id: "c1".into(),
            client_secret: None,
            access_token: "at-secret".into(),
            refresh_token: Some("rt-secret".into()),
            expires_at: Some(100),
            scope: None,
        }
    }

    #[test]
    fn tokens_are_kept_private_per_server_and_url() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(store_path(&dir.path().join("home")));
        store.save("a", &stored("https://a.example/mcp")).unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            store.load("a", "https://a.example/mcp").unwrap(),
            Some(stored("https://a.example/mcp"))
        );
        // The name now points elsewhere: the token is not offered there.
        assert_eq!(store.load("a", "https://evil.example/mcp").unwrap(), None);
        assert_eq!(store.load("b", "https://a.example/mcp").unwrap(), None);
        assert!(!format!("{:?}", stored("x")).contains("secret"));
        // A file another user could read is made private again on the next write.
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        store.save("b", &stored("https://b.example/mcp")).unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(store.remove("a").unwrap());
        assert!(!store.remove("a").unwrap());
        assert_eq!(store.load("a", "https://a.example/mcp").unwrap(), None);
        assert!(store.load("b", "https://b.example/mcp").unwrap().is_some());
    }
}

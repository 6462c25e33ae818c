//! Which settings scopes a session reads (`--setting-sources`): a leaf, so that everything
//! that reads settings files (the builder, skills and commands, output styles) can name it.

use std::str::FromStr;

/// A settings scope (`--setting-sources`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingSource {
    /// The user's own settings (`~/.claude/settings.json`, the user scope of the state file).
    User,
    /// The project's shared settings (`.claude/settings.json`).
    Project,
    /// The project's local settings (`.claude/settings.local.json`).
    Local,
}

impl SettingSource {
    /// Every scope, least specific first.
    pub const ALL: [SettingSource; 3] = [
        SettingSource::User,
        SettingSource::Project,
        SettingSource::Local,
    ];

    /// The name `--setting-sources` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            SettingSource::User => "user",
            SettingSource::Project => "project",
            SettingSource::Local => "local",
        }
    }
}

/// Which settings scopes a session reads (`--setting-sources`): all three by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingSources {
    user: bool,
    project: bool,
    local: bool,
}

impl Default for SettingSources {
    fn default() -> Self {
        Self::ALL
    }
}

impl SettingSources {
    /// Every scope (no `--setting-sources`).
    pub const ALL: SettingSources = SettingSources {
        user: true,
        project: true,
        local: true,
    };
    /// No scope (`--setting-sources ""`).
    pub const NONE: SettingSources = SettingSources {
        user: false,
        project: false,
        local: false,
    };

    /// Whether `source` is read.
    pub fn contains(self, source: SettingSource) -> bool {
        match source {
            SettingSource::User => self.user,
            SettingSource::Project => self.project,
            SettingSource::Local => self.local,
        }
    }

    /// These scopes and `source`.
    pub fn with(mut self, source: SettingSource) -> Self {
        self.set(source, true);
        self
    }

    /// These scopes without `source`.
    pub fn without(mut self, source: SettingSource) -> Self {
        self.set(source, false);
        self
    }

    /// The scopes read, least specific first.
    pub fn iter(self) -> impl Iterator<Item = SettingSource> {
        SettingSource::ALL
            .into_iter()
            .filter(move |s| self.contains(*s))
    }

    fn set(&mut self, source: SettingSource, on: bool) {
        match source {
            SettingSource::User => self.user = on,
            SettingSource::Project => self.project = on,
            SettingSource::Local => self.local = on,
        }
    }
}

/// A `--setting-sources` entry that is not a settings scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--setting-sources names {value:?}; the sources are user, project and local")]
pub struct UnknownSettingSource {
    /// The name given.
    pub value: String,
}

impl FromStr for SettingSources {
    type Err = UnknownSettingSource;

    /// A comma-separated list of `user`, `project` and `local` (empty: none of them).
    fn from_str(list: &str) -> Result<Self, UnknownSettingSource> {
        let mut out = SettingSources::NONE;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let source = SettingSource::ALL
                .into_iter()
                .find(|s| s.as_str() == name)
                .ok_or_else(|| UnknownSettingSource {
                    value: name.to_owned(),
                })?;
            out = out.with(source);
        }
        Ok(out)
    }
}

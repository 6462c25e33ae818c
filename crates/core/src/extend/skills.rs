//! Skills: `.claude/skills/<name>/SKILL.md` of the project and the user. Only the name and
//! the description are kept when a session starts (the model sees them listed); the body is
//! read again when the model loads the skill, so nothing but the list costs prompt or memory.

use std::path::PathBuf;

use super::frontmatter;
use super::{entries, LoadError, Place, Scope, Shadowed};

/// The longest skill name.
pub const MAX_NAME: usize = 64;
/// The longest skill description.
pub const MAX_DESCRIPTION: usize = 1024;

/// One skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The name the model loads it by.
    pub name: String,
    /// When to use it, for the model.
    pub description: String,
    /// Its directory (files the body refers to are relative to it).
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub path: PathBuf,
    /// The project's or the user's.
    pub scope: Scope,
}

/// Whether `name` can name a skill: letters, digits, `-` and `_`, at most [`MAX_NAME`].
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The skills of `places`, in order; a name is taken by its first definition, and each later
/// file of that name is recorded in `shadowed`.
pub(crate) fn load(places: &[Place], shadowed: &mut Vec<Shadowed>) -> (Vec<Skill>, Vec<LoadError>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut errors = Vec::new();
    for place in places {
        for dir in entries(&place.dir.join("skills"), &mut errors) {
            let path = dir.join("SKILL.md");
            if !dir.is_dir() || path.symlink_metadata().is_err() {
                continue;
            }
            match read_skill(place, dir, path) {
                Ok(s) => match skills.iter().find(|k| k.name == s.name) {
                    Some(kept) => shadowed.push(Shadowed {
                        kind: "skill",
                        kept: kept.path.clone(),
                        name: s.name,
                        hidden: s.path,
                    }),
                    None => skills.push(s),
                },
                Err(e) => errors.push(e),
            }
        }
    }
    (skills, errors)
}

fn read_skill(place: &Place, dir: PathBuf, path: PathBuf) -> Result<Skill, LoadError> {
    let text = place.read(&path)?;
    let fm = frontmatter::parse(&text)
        .map_err(|e| LoadError::field(&path, "front matter", e.to_string()))?;
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match fm.get("name") {
        Some(n) => n.trim().to_owned(),
        None => dir_name,
    };
    if !valid_name(&name) {
        return Err(LoadError::field(
            &path,
            "name",
            format!(
                "{name:?} is not a skill name (letters, digits, '-' and '_', at most {MAX_NAME})"
            ),
        ));
    }
    let description = fm.get("description").map(str::trim).unwrap_or_default();
    if description.is_empty() {
        return Err(LoadError::field(
            &path,
            "description",
            "missing: the model chooses a skill by its description",
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(LoadError::field(
            &path,
            "description",
            format!("longer than {MAX_DESCRIPTION} characters"),
        ));
    }
    Ok(Skill {
        name,
        description: description.to_owned(),
        dir,
        path,
        scope: place.scope,
    })
}

impl Skill {
    /// The text the model reads when it loads the skill: where the skill lives, then its
    /// body with `$ARGUMENTS` replaced by `args`. Read again now (bounded, confined), so an
    /// edited skill is used as it is.
    pub(crate) fn load_text(&self, places: &[Place], args: &str) -> Result<String, LoadError> {
        let place = places
            .iter()
            .find(|p| p.scope == self.scope)
            .ok_or_else(|| LoadError::field(&self.path, "path", "its directory is gone"))?;
        let text = place.read(&self.path)?;
        let fm = frontmatter::parse(&text)
            .map_err(|e| LoadError::field(&self.path, "front matter", e.to_string()))?;
        Ok(format!(
            "Base directory for this skill: {}\n\n{}",
            self.dir.display(),
            frontmatter::substitute(fm.body.trim(), args)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn loads_project_then_user_and_names_bad_fields() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        write(
            cwd.path(),
            ".claude/skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: Fill PDF forms\n---\nUse $ARGUMENTS.\n",
        );
        write(
            cwd.path(),
            ".claude/skills/bad/SKILL.md",
            "---\nname: bad\n---\nno description\n",
        );
        write(
            home.path(),
            ".claude/skills/pdf/SKILL.md",
            "---\ndescription: the user's pdf\n---\nx\n",
        );
        write(
            home.path(),
            ".claude/skills/mine/SKILL.md",
            "---\ndescription: Mine\n---\nbody\n",
        );
        let places = Place::all(cwd.path(), Some(home.path()), None);
        let (skills, errors) = load(&places, &mut Vec::new());
        let names: Vec<(&str, Scope)> = skills.iter().map(|s| (s.name.as_str(), s.scope)).collect();
        assert_eq!(names, vec![("pdf", Scope::Project), ("mine", Scope::User)]);
        assert_eq!(errors.len(), 1);
        let e = errors[0].to_string();
        assert!(
            e.contains("bad/SKILL.md") && e.contains("`description`"),
            "{e}"
        );
        let text = skills[0].load_text(&places, "form.pdf").unwrap();
        assert!(text.ends_with("Use form.pdf."), "{text}");
        assert!(
            text.starts_with("Base directory for this skill: "),
            "{text}"
        );
    }

    #[test]
    fn the_users_skills_come_from_their_config_directory_when_it_is_elsewhere() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let config = tempfile::tempdir().unwrap();
        write(
            home.path(),
            ".claude/skills/old/SKILL.md",
            "---\ndescription: Old\n---\nx\n",
        );
        write(
            config.path(),
            "skills/moved/SKILL.md",
            "---\ndescription: Moved\n---\nbody\n",
        );
        let places = Place::all(cwd.path(), Some(home.path()), Some(config.path()));
        let (skills, errors) = load(&places, &mut Vec::new());
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["moved"],
            "CLAUDE_CONFIG_DIR replaces ~/.claude entirely"
        );
        assert!(skills[0].load_text(&places, "").unwrap().ends_with("body"));
    }

    #[test]
    fn a_link_out_of_the_project_is_refused() {
        let cwd = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(
            outside.path(),
            "SKILL.md",
            "---\ndescription: stolen\n---\nsecret\n",
        );
        std::fs::create_dir_all(cwd.path().join(".claude/skills/x")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("SKILL.md"),
            cwd.path().join(".claude/skills/x/SKILL.md"),
        )
        .unwrap();
        let (skills, errors) = load(&Place::all(cwd.path(), None, None), &mut Vec::new());
        assert!(skills.is_empty());
        assert!(errors[0].to_string().contains("outside"), "{}", errors[0]);
    }
}

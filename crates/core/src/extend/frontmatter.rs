//! The small header users put at the top of skill and command files:
//!
//! ```text
//! ---
//! name: review
//! description: Review the staged change
//! allowed-tools: Bash(git diff:*), Read
//! ---
//! body...
//! ```
//!
//! Only `key: value` lines (a value may be quoted, and continue on indented lines or as a
//! `- item` list) — the subset these files use. Anything else is an error naming the line, so
//! a file keel cannot read is never half-understood.

/// The most header lines keel reads (the whole file is bounded too).
const MAX_LINES: usize = 200;

/// A file split into its header fields and its body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrontMatter {
    /// `key: value` pairs in file order (keys as written).
    pub fields: Vec<(String, String)>,
    /// Everything after the header.
    pub body: String,
}

impl FrontMatter {
    /// The value of `key`, if the header has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a header cannot be read: the line (1-based) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("front matter line {line}: {problem}")]
pub struct FrontMatterError {
    /// The line of the file.
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

/// Split `text` into header and body. A file without a header is all body.
pub fn parse(text: &str) -> Result<FrontMatter, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return Ok(FrontMatter::default());
    };
    if first.trim_end() != "---" {
        return Ok(FrontMatter {
            fields: Vec::new(),
            body: text.to_owned(),
        });
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut consumed = first.len();
    for (i, raw) in lines.enumerate() {
        let n = i + 2;
        consumed += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            return Ok(FrontMatter {
                fields,
                body: text[consumed..].to_owned(),
            });
        }
        if n > MAX_LINES {
            break;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // A continuation of the previous value: a list item or a folded line.
            let Some((_, value)) = fields.last_mut() else {
                return Err(err(n, "an indented line before any `key: value`"));
            };
            let part = line.trim();
            match part.strip_prefix("- ") {
                Some(item) if value.is_empty() => value.push_str(unquote(item.trim())),
                Some(item) => {
                    value.push_str(", ");
                    value.push_str(unquote(item.trim()));
                }
                None => {
                    if !value.is_empty() {
                        value.push(' ');
                    }
                    value.push_str(part);
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(err(n, "expected `key: value`"));
        };
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(err(n, &format!("{key:?} is not a field name")));
        }
        if fields.iter().any(|(k, _)| k == key) {
            return Err(err(n, &format!("the field `{key}` is given twice")));
        }
        let value = value.trim();
        // `>` and `|` start a block whose lines follow, indented.
        let value = if value == ">" || value == "|" {
            ""
        } else {
            value
        };
        fields.push((key.to_owned(), unquote(value).to_owned()));
    }
    Err(err(
        1,
        "the header opened with `---` is never closed with a `---` line",
    ))
}

fn err(line: usize, problem: &str) -> FrontMatterError {
    FrontMatterError {
        line,
        problem: problem.to_owned(),
    }
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// The most bytes a skill's or command's text may grow to once its arguments are put in.
pub const MAX_EXPANDED: usize = 1 << 20;

/// Replace `$ARGUMENTS` with `args` and `$1`, `$2`, ... with its words (shell-quoted words
/// stay together; a missing one becomes empty). When the text uses no placeholder and there
/// are arguments, they are added at the end so the model still sees them.
///
/// The result is at most [`MAX_EXPANDED`] bytes: a file with thousands of `$1` and a long
/// argument would otherwise grow past memory; past the bound the text is cut, saying so.
pub fn substitute(body: &str, args: &str) -> String {
    let words =
        shlex::split(args).unwrap_or_else(|| args.split_whitespace().map(str::to_owned).collect());
    let mut out = String::with_capacity(body.len() + args.len());
    let mut used = false;
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        if out.len() > MAX_EXPANDED {
            return cut_expanded(out);
        }
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
            continue;
        }
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) if n >= 1 => {
                out.push_str(words.get(n - 1).map_or("", String::as_str));
                used = true;
                rest = &after[digits..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if !used && !args.trim().is_empty() {
        out.push_str("\n\nARGUMENTS: ");
        out.push_str(args.trim());
    }
    if out.len() > MAX_EXPANDED {
        return cut_expanded(out);
    }
    out
}

fn cut_expanded(mut out: String) -> String {
    let mut at = MAX_EXPANDED;
    while !out.is_char_boundary(at) {
        at -= 1;
    }
    out.truncate(at);
    out.push_str("\n\n[keel: the text grew past 1 MiB with its arguments and was cut here]");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn reads_fields_lists_and_body() {
        let fm = parse("---\nname: a\ndescription: \"Two words\"\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\nBody $1\n").unwrap();
        assert_eq!(fm.get("name"), Some("a"));
        assert_eq!(fm.get("description"), Some("Two words"));
        assert_eq!(fm.get("allowed-tools"), Some("Read, Bash(git:*)"));
        assert_eq!(fm.body, "Body $1\n");
        assert_eq!(parse("no header").unwrap().body, "no header");
    }

    #[test]
    fn names_the_bad_line() {
        let e = parse("---\nname: a\nthis is not a field\n---\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse("---\nname: a\n").is_err(), "unclosed");
        assert!(parse("---\nname: a\nname: b\n---\n").is_err(), "duplicate");
    }

    #[test]
    fn substitutes_arguments() {
        assert_eq!(substitute("Hi $ARGUMENTS!", "Bob"), "Hi Bob!");
        assert_eq!(
            substitute("$2 then $1 ($3) $", "'a b' c"),
            "c then a b () $"
        );
        assert_eq!(substitute("No slot.", "x y"), "No slot.\n\nARGUMENTS: x y");
        assert_eq!(substitute("No slot.", ""), "No slot.");
        assert_eq!(substitute("cost $5.00", ""), "cost .00");
        // Thousands of slots and a long argument stay bounded, and say they were cut.
        let big = substitute(&"$1 ".repeat(100_000), &"x".repeat(100_000));
        assert!(big.len() < MAX_EXPANDED + 200, "{}", big.len());
        assert!(big.ends_with("was cut here]"));
    }
}

//! Where a Glob call searches: the directory an absolute pattern names, else its `path`.

use serde_json::Value;

/// The directory a Glob call searches, as written (`None`: the working directory): what the
/// permission check judges, and what the tool then opens.
pub fn search_dir(input: &Value) -> Option<String> {
    let path = input.get("path").and_then(Value::as_str);
    let pattern = input.get("pattern").and_then(Value::as_str).unwrap_or("");
    split_pattern(path, pattern).0
}

/// An absolute pattern (`/src/**/*.rs`) searches from its literal leading directories, whatever
/// `path` says. Otherwise the pattern is used as given, minus a leading `./`, under `path`.
pub fn split_pattern(path: Option<&str>, pattern: &str) -> (Option<String>, String) {
    let is_meta = |s: &str| s.contains(['*', '?', '[', '{']);
    if !pattern.starts_with('/') {
        let p = pattern.trim_start_matches("./");
        return (
            path.filter(|p| !p.is_empty()).map(str::to_owned),
            p.to_string(),
        );
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    let literal = parts.iter().take_while(|p| !is_meta(p)).count();
    // Keep at least the last part as the pattern.
    let literal = literal.min(parts.len() - 1);
    let dir = parts[..literal].join("/");
    let dir = if dir.is_empty() { "/".to_string() } else { dir };
    (Some(dir), parts[literal..].join("/"))
}

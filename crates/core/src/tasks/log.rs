//! Task output: the log a background shell writes while it runs, read back bounded (head and
//! tail around a marker that names the file), and the one-line summaries of how tasks ended.

use super::TaskStatus;

/// Output kept from a task log: all of it when short, else its head and tail around a marker
/// that names the log.
pub(super) const LOG_KEEP: u64 = 15_000;

pub(crate) fn read_log(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    if len <= 2 * LOG_KEEP {
        let mut s = Vec::new();
        f.read_to_end(&mut s)?;
        return Ok(String::from_utf8_lossy(&s).into_owned());
    }
    let mut head = vec![0; LOG_KEEP as usize];
    f.read_exact(&mut head)?;
    f.seek(SeekFrom::Start(len - LOG_KEEP))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    Ok(format!(
        "{}\n[... {} bytes omitted; the whole output is in {} ...]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * LOG_KEEP,
        path.display(),
        String::from_utf8_lossy(&tail)
    ))
}

/// `s` quoted for a POSIX shell.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub(super) fn last_line(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

pub(super) fn summary(description: &str, status: &TaskStatus, output: &str) -> String {
    let tail = last_line(output);
    let base = format!("{description}: {}", status.describe());
    if tail.is_empty() {
        format!("{base}.")
    } else {
        format!("{base}; last output line: {tail}")
    }
}

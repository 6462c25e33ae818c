//! The prompt editor: multi-line text, a cursor, pasted blocks shown as placeholders, and the
//! history of earlier prompts (persisted per project).

use std::path::PathBuf;

/// Pastes longer than this many lines (or characters) are shown as one placeholder.
const PASTE_LINES: usize = 4;
const PASTE_CHARS: usize = 800;
/// Prompts kept in the history file.
const HISTORY_KEPT: usize = 500;

/// The editor's text and cursor.
#[derive(Debug, Default)]
pub struct Editor {
    lines: Vec<String>,
    row: usize,
    /// The cursor's column, in chars.
    col: usize,
    /// Pasted blocks behind their placeholders, in paste order.
    pastes: Vec<(String, String)>,
    /// Pastes so far into this prompt (numbers the placeholders).
    pasted: usize,
    history: History,
}

/// Earlier prompts, oldest first, and where browsing them is.
#[derive(Debug, Default)]
pub struct History {
    entries: Vec<String>,
    /// Browsing: the index shown, and the draft that was being typed.
    at: Option<(usize, String)>,
    file: Option<PathBuf>,
}

impl History {
    /// Load the history kept in `file` (a missing or unreadable file is an empty history: the
    /// history is a convenience, never a reason not to start).
    pub fn load(file: Option<PathBuf>) -> Self {
        let entries = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|s| {
                s.lines()
                    .filter_map(|l| serde_json::from_str::<String>(l).ok())
                    .collect()
            })
            .unwrap_or_default();
        Self {
            entries,
            at: None,
            file,
        }
    }

    /// Remember a prompt (and append it to the file).
    pub fn push(&mut self, prompt: &str) {
        self.at = None;
        if prompt.trim().is_empty() || self.entries.last().is_some_and(|l| l == prompt) {
            return;
        }
        self.entries.push(prompt.to_owned());
        let Some(file) = &self.file else { return };
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if self.entries.len() > HISTORY_KEPT * 2 {
            // Rewrite the file with the newest entries only, so it stays small.
            let keep = self.entries.split_off(self.entries.len() - HISTORY_KEPT);
            self.entries = keep;
            let body: String = self
                .entries
                .iter()
                .map(|e| format!("{}\n", serde_json::Value::String(e.clone())))
                .collect();
            let tmp = file.with_extension("tmp");
            if std::fs::write(&tmp, body).is_ok() {
                let _ = std::fs::rename(&tmp, file);
            }
            return;
        }
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
        {
            let _ = writeln!(f, "{}", serde_json::Value::String(prompt.to_owned()));
        }
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }
}

impl Editor {
    /// An empty editor over `history`.
    pub fn new(history: History) -> Self {
        Self {
            lines: vec![String::new()],
            history,
            ..Self::default()
        }
    }

    /// The lines as shown (placeholders, not pasted text).
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The cursor: row and column in chars.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// The history.
    pub fn history(&self) -> &History {
        &self.history
    }

    fn cur(&mut self) -> &mut String {
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        &mut self.lines[self.row]
    }

    fn byte_at(s: &str, col: usize) -> usize {
        s.char_indices().nth(col).map(|(b, _)| b).unwrap_or(s.len())
    }

    /// Type a character.
    pub fn insert(&mut self, c: char) {
        let col = self.col;
        let line = self.cur();
        let at = Self::byte_at(line, col);
        line.insert(at, c);
        self.col += 1;
    }

    /// Type a string (no newlines in it are special: they split lines).
    pub fn insert_str(&mut self, s: &str) {
        let mut first = true;
        for part in s.split('\n') {
            if !first {
                self.newline();
            }
            first = false;
            let part = part.strip_suffix('\r').unwrap_or(part);
            let col = self.col;
            let line = self.cur();
            let at = Self::byte_at(line, col);
            line.insert_str(at, part);
            self.col += part.chars().count();
        }
    }

    /// Paste: short text is typed, a long block becomes one placeholder. Instant whatever its
    /// size: the text is stored once and never re-rendered.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines = text.lines().count();
        if lines <= PASTE_LINES && text.len() <= PASTE_CHARS {
            self.insert_str(&text);
            return;
        }
        // Pastes whose placeholder was edited away are not kept.
        let shown = self.lines.join("\n");
        self.pastes
            .retain(|(label, _)| shown.contains(label.as_str()));
        let n = self.pasted + 1;
        self.pasted = n;
        let label = if lines > 1 {
            format!("[Pasted text #{n} +{lines} lines]")
        } else {
            format!("[Pasted text #{n} {} chars]", text.chars().count())
        };
        self.insert_str(&label);
        self.pastes.push((label, text));
    }

    /// Break the line at the cursor.
    pub fn newline(&mut self) {
        let col = self.col;
        let line = self.cur();
        let at = Self::byte_at(line, col);
        let rest = line.split_off(at);
        self.lines.insert(self.row + 1, rest);
        self.row += 1;
        self.col = 0;
    }

    /// Delete before the cursor.
    pub fn backspace(&mut self) {
        if self.col > 0 {
            let col = self.col;
            let line = self.cur();
            let at = Self::byte_at(line, col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    /// Delete under the cursor.
    pub fn delete(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col < len {
            let col = self.col;
            let line = self.cur();
            let at = Self::byte_at(line, col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    /// Delete the word before the cursor.
    pub fn delete_word(&mut self) {
        while self.col > 0 && self.char_before().is_some_and(char::is_whitespace) {
            self.backspace();
        }
        while self.col > 0 && self.char_before().is_some_and(|c| !c.is_whitespace()) {
            self.backspace();
        }
    }

    /// Delete from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let col = self.col;
        let line = self.cur();
        let at = Self::byte_at(line, col);
        line.replace_range(..at, "");
        self.col = 0;
    }

    fn char_before(&self) -> Option<char> {
        self.lines[self.row].chars().nth(self.col.checked_sub(1)?)
    }

    /// Cursor left.
    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    /// Cursor right.
    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// Cursor to the start of the line.
    pub fn home(&mut self) {
        self.col = 0;
    }

    /// Cursor to the end of the line.
    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }

    /// Up: the line above, or from the first line the previous prompt of the history.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let n = self.history.entries.len();
        let idx = match &self.history.at {
            None if n > 0 => {
                let draft = self.text_shown();
                self.history.at = Some((n - 1, draft));
                n - 1
            }
            Some((i, _)) if *i > 0 => {
                let i = *i - 1;
                if let Some(at) = self.history.at.as_mut() {
                    at.0 = i;
                }
                i
            }
            _ => return,
        };
        let entry = self.history.entries[idx].clone();
        self.set_text(&entry);
        self.row = 0;
    }

    /// Down: the line below, or from the last line the next prompt of the history (and past
    /// the newest, the draft that was being typed).
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let Some((i, draft)) = self.history.at.clone() else {
            return;
        };
        if i + 1 < self.history.entries.len() {
            self.history.at = Some((i + 1, draft));
            let entry = self.history.entries[i + 1].clone();
            self.set_text(&entry);
        } else {
            self.history.at = None;
            self.set_text(&draft);
        }
    }

    fn text_shown(&self) -> String {
        self.lines.join("\n")
    }

    /// Replace the text (cursor at its end).
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
    }

    /// Take the prompt: the text with every placeholder replaced by what was pasted. The
    /// editor is left empty and the prompt goes into the history.
    pub fn take(&mut self) -> String {
        let shown = self.text_shown();
        let mut text = shown.clone();
        for (label, pasted) in std::mem::take(&mut self.pastes) {
            text = text.replacen(&label, &pasted, 1);
        }
        self.history.push(&shown);
        self.pasted = 0;
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        text
    }

    /// Empty the editor without sending.
    pub fn clear(&mut self) {
        self.pastes.clear();
        self.pasted = 0;
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.history.at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_paste_is_one_placeholder_and_comes_back_whole() {
        let mut e = Editor::new(History::default());
        let big: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        e.insert_str("see: ");
        e.paste(&big);
        assert_eq!(
            e.lines(),
            &["see: [Pasted text #1 +10000 lines]".to_owned()]
        );
        let sent = e.take();
        assert_eq!(sent, format!("see: {big}"));
        assert!(e.is_empty());
        // A placeholder edited away lets its text go; numbering goes on within the prompt.
        e.paste(&big);
        e.kill_to_start();
        e.paste("a\nb\nc\nd\ne\n");
        assert_eq!(e.lines(), &["[Pasted text #2 +5 lines]".to_owned()]);
        assert_eq!(e.take(), "a\nb\nc\nd\ne\n");
    }

    #[test]
    fn editing_and_history() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.jsonl");
        let mut e = Editor::new(History::load(Some(file.clone())));
        e.insert_str("first");
        e.newline();
        e.insert_str("second");
        e.backspace();
        assert_eq!(e.take(), "first\nsecon");
        e.insert_str("draft");
        e.up();
        assert_eq!(e.lines(), &["first".to_owned(), "secon".to_owned()]);
        // Down walks the recalled prompt's lines first, then back to the draft.
        e.down();
        assert_eq!(e.cursor().0, 1);
        e.down();
        assert_eq!(e.lines(), &["draft".to_owned()]);
        // Persisted: a new editor over the same file remembers.
        let again = History::load(Some(file));
        assert_eq!(again.entries(), &["first\nsecon".to_owned()]);
        e.clear();
        e.insert_str("a b  c");
        e.delete_word();
        assert_eq!(e.lines(), &["a b  ".to_owned()]);
    }
}

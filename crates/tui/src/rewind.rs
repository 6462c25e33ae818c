//! `/rewind`: list the prompts of the session, or put the files keel's tools wrote back as
//! they were when one of them came.

use std::sync::Arc;

use keel_protocol::ContentBlock;
use keel_tools::Checkpoints;
use ratatui::style::{Color, Style};
use ratatui::text::Line;

/// The first line of a prompt, as `/rewind` lists it.
pub fn label(content: &[ContentBlock]) -> String {
    content
        .iter()
        .find_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.lines().next().unwrap_or("").to_owned()),
            _ => None,
        })
        .unwrap_or_else(|| "(no text)".to_owned())
}

/// `None`: the numbered prompts. `Some(n)`: rewind to prompt `n` (from 1) and say what happened.
pub async fn run(store: Option<Arc<Checkpoints>>, n: Option<usize>) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    let Some(store) = store else {
        return vec![Line::styled(
            "File checkpoints are not kept in this session (neither KEEL_HOME nor HOME is set).",
            Style::new().fg(Color::Yellow),
        )];
    };
    let prompts = store.prompts();
    let Some(n) = n else {
        return listing(&prompts, dim);
    };
    let Some((uuid, text)) = prompts.get(n.wrapping_sub(1)).cloned() else {
        return vec![Line::styled(
            format!("There is no prompt {n}; /rewind lists them."),
            Style::new().fg(Color::Yellow),
        )];
    };
    let outcome = tokio::task::spawn_blocking(move || store.rewind(&uuid, false)).await;
    match outcome {
        Ok(Ok(r)) if r.files_changed.is_empty() => vec![Line::raw(format!(
            "Nothing to put back: keel's tools wrote no file since prompt {n} ({text})."
        ))],
        Ok(Ok(r)) => {
            let mut out = vec![Line::raw(format!(
                "✻ Files put back as they were at prompt {n} ({text}): {} restored, {} deleted (+{} −{} lines).",
                r.files_changed.len() - r.deleted.len(),
                r.deleted.len(),
                r.insertions,
                r.deletions
            ))];
            for p in r.files_changed.iter().take(20) {
                let how = if r.deleted.contains(p) {
                    "deleted"
                } else {
                    "restored"
                };
                out.push(Line::styled(format!("  {how} {}", p.display()), dim));
            }
            out.push(Line::styled(
                "  The conversation is unchanged; what commands wrote is not put back.",
                dim,
            ));
            out
        }
        Ok(Err(e)) => vec![Line::styled(
            format!("Cannot rewind: {e}"),
            Style::new().fg(Color::Red),
        )],
        Err(e) => vec![Line::styled(
            format!("Cannot rewind: {e}"),
            Style::new().fg(Color::Red),
        )],
    }
}

fn listing(prompts: &[(String, String)], dim: Style) -> Vec<Line<'static>> {
    if prompts.is_empty() {
        return vec![Line::styled("No prompts yet to rewind to.", dim)];
    }
    let mut out = vec![Line::raw(
        "Prompts (/rewind N puts the files keel's tools wrote back as they were when prompt N came):",
    )];
    let skip = prompts.len().saturating_sub(30);
    for (i, (_, text)) in prompts.iter().enumerate().skip(skip) {
        let text: String = text.chars().take(100).collect();
        out.push(Line::raw(format!("  {:>3}  {text}", i + 1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'static>]) -> String {
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tokio::test]
    async fn rewind_lists_prompts_and_puts_files_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Checkpoints::new(dir.path().join("store")));
        let f = dir.path().join("a.txt");
        store.mark("u1", "make a");
        store.before_write(&f);
        std::fs::write(&f, "new").unwrap();
        store.after_write(&f, b"new");
        let listed = text(&run(Some(store.clone()), None).await);
        assert!(listed.contains("1  make a"), "{listed}");
        let done = text(&run(Some(store.clone()), Some(1)).await);
        assert!(done.contains("0 restored, 1 deleted"), "{done}");
        assert!(!f.exists());
        let none = text(&run(Some(store), Some(5)).await);
        assert!(none.contains("no prompt 5"), "{none}");
    }
}

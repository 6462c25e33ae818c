//! `/rewind`: list the prompts of the session, or put the files keel's tools wrote back as
//! they were when one of them came.

use std::path::PathBuf;
use std::sync::Arc;

use keel_protocol::ContentBlock;
use keel_tools::checkpoint::{FileProblem, RewindError};
use keel_tools::Checkpoints;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

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

/// The prompts `/rewind` offers, oldest first (their first lines), or why it offers none.
pub fn prompts(store: Option<&Checkpoints>) -> Result<Vec<String>, Vec<Line<'static>>> {
    match store {
        None => Err(vec![unavailable()]),
        Some(s) => Ok(s.prompts().into_iter().map(|(_, label)| label).collect()),
    }
}

fn unavailable() -> Line<'static> {
    Line::styled(
        "File checkpoints are not kept in this session (neither KEEL_HOME nor HOME is set).",
        Style::new().fg(Color::Yellow),
    )
}

/// Put the files back as they were when prompt `n` (from 1, oldest first) came, and say what
/// happened — or, when any file cannot be put back, which and why (then none was touched).
pub async fn run(store: Option<Arc<Checkpoints>>, n: usize) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    let Some(store) = store else {
        return vec![unavailable()];
    };
    let prompts = store.prompts();
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
            if r.files_changed.len() > 20 {
                out.push(Line::styled(
                    format!("  … {} more files", r.files_changed.len() - 20),
                    dim,
                ));
            }
            out.push(Line::styled(
                "  The conversation is unchanged; what commands wrote is not put back.",
                dim,
            ));
            out
        }
        Ok(Err(RewindError::Refused { problems })) => refused(n, &text, &problems),
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

/// The honest refusal: nothing was touched, and each file that stops the rewind with its
/// reason, one a line.
fn refused(n: usize, text: &str, problems: &[(PathBuf, FileProblem)]) -> Vec<Line<'static>> {
    let red = Style::new().fg(Color::Red);
    let mut out = vec![Line::styled(
        format!(
            "Cannot rewind to prompt {n} ({text}): no file was changed, because {} cannot be put back:",
            if problems.len() == 1 { "this file" } else { "these files" }
        ),
        red,
    )];
    for (path, why) in problems.iter().take(20) {
        out.push(Line::from(vec![
            Span::styled("  ✗ ", red),
            Span::raw(path.display().to_string()),
            Span::styled(format!(" {why}"), Style::new().fg(Color::Yellow)),
        ]));
    }
    if problems.len() > 20 {
        out.push(Line::styled(
            format!("  … {} more files", problems.len() - 20),
            Style::new().fg(Color::DarkGray),
        ));
    }
    out.push(Line::styled(
        "  Put those files back as keel left them (or accept the change) and rewind again.",
        Style::new().fg(Color::DarkGray),
    ));
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
        let listed = prompts(Some(&store)).unwrap();
        assert_eq!(listed, ["make a"]);
        let done = text(&run(Some(store.clone()), 1).await);
        assert!(done.contains("0 restored, 1 deleted"), "{done}");
        assert!(!f.exists());
        let none = text(&run(Some(store), 5).await);
        assert!(none.contains("no prompt 5"), "{none}");
    }

    #[tokio::test]
    async fn a_file_changed_outside_keel_is_named_and_nothing_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Checkpoints::new(dir.path().join("store")));
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        store.mark("u1", "make a and b");
        for f in [&a, &b] {
            store.before_write(f);
            std::fs::write(f, "keel").unwrap();
            store.after_write(f, b"keel");
        }
        std::fs::write(&b, "the user's own edit").unwrap();
        let said = text(&run(Some(store), 1).await);
        assert!(said.contains("Cannot rewind to prompt 1"), "{said}");
        assert!(
            said.contains(&format!("✗ {} changed outside keel", b.display())),
            "{said}"
        );
        assert!(!said.contains(&format!("✗ {}", a.display())), "{said}");
        assert_eq!(
            std::fs::read_to_string(&a).unwrap(),
            "keel",
            "a was not touched"
        );
    }
}

//! Loading a transcript with the history the `parentUuid` walk picks (see [`super::chain`]):
//! one streaming pass for a chain that is one line, more only for a branched or broken one,
//! and the notices for what the walk went around or left out.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::Path;

use super::chain::{Collector, Plan};
use super::link::ChainIssueKind;
use super::reader::{parse_reader_at, parse_reader_links, Item};
use super::rebuild::Rebuilder;
use super::{Loaded, Rebuilt};

/// Read the whole of `path` (open as `file`) and rebuild the history the walk picks. The
/// rebuild follows the file as it is read; when the chain turns out not to be one line, the
/// file is read again to walk it, and a third time, with the walk's records alone, only when
/// the walk picked something else than the file order.
pub(crate) fn read_whole(
    path: &Path,
    file: &File,
    file_len: u64,
    session_id: &str,
    keep_frames: bool,
) -> std::io::Result<(Loaded, Rebuilder)> {
    let mut rebuilder = Rebuilder::new(session_id, keep_frames);
    let mut collector = Collector::linear(None);
    let mut loaded = collect(path, file, (0, 0), file_len, &mut collector, |r| {
        rebuilder.push(r)
    })?;
    if loaded.legacy {
        // keel's old records chain each to the one before: the file order is the history.
        return Ok((loaded, rebuilder));
    }
    if let Some(leaf) = collector.linear_leaf() {
        loaded.last_chain_uuid = leaf.map(str::to_owned).or(loaded.last_chain_uuid);
        return Ok((loaded, rebuilder));
    }
    let mut collector = Collector::full();
    let again = collect(path, file, (0, 0), file_len, &mut collector, |_| {})?;
    if again.good_len != loaded.good_len {
        return Err(changed(path));
    }
    let plan = collector.plan(&damaged_lines(&loaded));
    let reread = plan.wanted.is_some();
    if let Some(wanted) = &plan.wanted {
        rebuilder = Rebuilder::new(session_id, keep_frames);
        feed(path, file, &loaded, wanted, &mut rebuilder)?;
    }
    apply(&mut loaded, plan);
    loaded.chain.reread = reread;
    Ok((loaded, rebuilder))
}

/// Parse `file` from `at` (bytes, lines) through `collector`, records to `sink`.
fn collect(
    path: &Path,
    file: &File,
    at: (u64, usize),
    file_len: u64,
    collector: &mut Collector,
    mut sink: impl FnMut(super::Record),
) -> std::io::Result<Loaded> {
    let mut f = file;
    f.seek(SeekFrom::Start(at.0))?;
    let reader = BufReader::with_capacity(1 << 20, f);
    parse_reader_links(path, reader, file_len, at, |item| {
        collector.see(&item);
        match item {
            Item::Record(r) => sink(r),
            Item::Link(l) => collector.keep(l),
        }
    })
}

fn changed(path: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "the transcript {} changed while it was being read",
        path.display()
    ))
}

/// Go on from a checkpoint (`rebuilder`, standing at `at`): read what follows it. `None` when
/// what follows is not one line continuing the checkpoint's history (a rewind to before it,
/// a break in the chain, ...): the whole file must be read and walked.
pub(crate) fn read_tail(
    path: &Path,
    file: &File,
    file_len: u64,
    mut rebuilder: Rebuilder,
    at: &super::position::Position,
) -> std::io::Result<Option<(Loaded, Rebuilder)>> {
    let mut collector = Collector::linear(at.chain_uuid.as_deref());
    let mut loaded = collect(
        path,
        file,
        (at.len, at.lines),
        file_len,
        &mut collector,
        |r| rebuilder.push(r),
    )?;
    if loaded.legacy {
        return Ok(Some((loaded, rebuilder)));
    }
    let Some(leaf) = collector.linear_leaf() else {
        return Ok(None);
    };
    loaded.last_chain_uuid = leaf.map(str::to_owned).or(loaded.last_chain_uuid);
    Ok(Some((loaded, rebuilder)))
}

/// [`read_whole`], the rebuild finished.
pub fn load_file(
    path: &Path,
    session_id: &str,
    keep_frames: bool,
) -> std::io::Result<(Loaded, Rebuilt)> {
    let file = File::open(path)?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (loaded, rebuilder) = read_whole(path, &file, len, session_id, keep_frames)?;
    Ok((loaded, rebuilder.finish()))
}

/// The lines that could not be read, in order.
fn damaged_lines(loaded: &Loaded) -> Vec<usize> {
    let mut out: Vec<usize> = loaded.issues.iter().map(|i| i.line).collect();
    out.sort_unstable();
    out
}

fn apply(loaded: &mut Loaded, plan: Plan) {
    if let Some(leaf) = plan.leaf {
        loaded.last_chain_uuid = Some(leaf);
    }
    loaded.chain = plan.report;
}

/// Read the file again, handing `rebuilder` the records of `wanted` in that order.
fn feed(
    path: &Path,
    file: &File,
    first: &Loaded,
    wanted: &[usize],
    rebuilder: &mut Rebuilder,
) -> std::io::Result<()> {
    let mut f = file;
    f.seek(SeekFrom::Start(0))?;
    let reader = BufReader::with_capacity(1 << 20, f);
    let ascending = wanted.windows(2).all(|w| w[0] < w[1]);
    let again = if ascending {
        let mut next = wanted.iter().peekable();
        parse_reader_at(path, reader, first.file_len, (0, 0), |r| {
            if next.peek() == Some(&&r.line) {
                next.next();
                rebuilder.push(r);
            }
        })?
    } else {
        // Out of file order (a hand-made file): the walk's records are held, then fed.
        let slot: HashMap<usize, usize> = wanted.iter().enumerate().map(|(i, l)| (*l, i)).collect();
        let mut held: Vec<Option<super::Record>> = Vec::new();
        held.resize_with(wanted.len(), || None);
        let again = parse_reader_at(path, reader, first.file_len, (0, 0), |r| {
            if let Some(&i) = slot.get(&r.line) {
                held[i] = Some(r);
            }
        })?;
        held.into_iter().flatten().for_each(|r| rebuilder.push(r));
        again
    };
    if again.good_len != first.good_len {
        return Err(changed(path));
    }
    Ok(())
}

/// The notices for what the walk went around or left out.
pub(super) fn notices(loaded: &Loaded) -> Vec<super::Notice> {
    use super::{Notice, NoticeKind};
    let shown = loaded.path.display();
    let mut out = Vec::new();
    for i in &loaded.chain.issues {
        let (kind, why) = match i.kind {
            ChainIssueKind::Cycle => (
                NoticeKind::ChainCycle,
                format!(
                    "names as its parent {}, which is already on the way back from the newest message (the chain loops)",
                    i.parent
                ),
            ),
            ChainIssueKind::DanglingParent => (
                NoticeKind::DanglingParent,
                format!("names as its parent {}, which is not in the file", i.parent),
            ),
        };
        out.push(Notice {
            kind,
            message: format!(
                "entry {} on line {} of the transcript {shown} {why}; keel resumed the conversation from that entry on and sent nothing before it",
                i.uuid, i.line
            ),
            path: loaded.path.clone(),
            line: Some(i.line),
            tool_use_ids: Vec::new(),
            entry_type: None,
            entry_uuid: Some(i.uuid.clone()),
        });
    }
    let n = loaded.chain.abandoned;
    if n > 0 {
        let (s, were) = if n == 1 { ("", "was") } else { ("s", "were") };
        out.push(Notice {
            kind: NoticeKind::OtherBranches,
            message: format!(
                "{n} message{s} of the transcript {shown} (the first on line {}) {were} on other branches than the newest message's (a rewind, an edited or retried prompt) and {were} not sent to the model, as Claude Code does; they stay in the file",
                loaded.chain.abandoned_line.unwrap_or(0)
            ),
            path: loaded.path.clone(),
            line: loaded.chain.abandoned_line,
            tool_use_ids: Vec::new(),
            entry_type: None,
            entry_uuid: None,
        });
    }
    out
}

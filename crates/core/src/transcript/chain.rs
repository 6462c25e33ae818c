//! Which entries of a transcript are the conversation, picked as Claude Code picks them.
//!
//! A Claude Code transcript is a tree, not a list: every entry names its parent
//! (`parentUuid`), and a rewind, an edited or retried prompt, or a fork leaves older branches
//! in the file. The conversation is the branch of the newest message: among the entries no
//! other entry names as parent (the ends of branches), each is followed back to its nearest
//! message; of those, the last one in the file that belongs to the main conversation (not a
//! subagent's sidechain, not `isMeta`, not a teammate's) is the leaf, and the history is the
//! walk from it back to the root. A `compact_boundary` has no parent: the history starts there.
//!
//! A response that ran tools in parallel fans out (one entry per content block, each result
//! chained to its own call), so the walk sees only one of its branches: the calls and results
//! it left off are put back right after the response, as the SDKs' readers do.
//!
//! keel's own files are one linear chain (its `keel-frame` entries have no parent), so the file
//! order already is the history: the records are rebuilt as they are read while the reader
//! checks that every entry names the one before it, which costs nothing else. Only a file
//! whose chain is not one line is read again to walk it (keeping a few ids per entry, never
//! its content), and once more, feeding the rebuild the walk's entries alone, when the walk
//! picked something else than the file order.

use std::collections::{HashMap, HashSet};

use keel_protocol::Frame;

use super::link::{is_compaction, ChainIssue, ChainIssueKind, ChainReport, Facts, Link, LinkKind};
use super::reader::Item;

/// Collects what the walk needs while a file is read. By default it keeps no link: it only
/// checks that every entry names the one before it, in which case the file order is the walk
/// (keel's own files, and Claude Code's without a branch). [`Collector::full`] keeps them all.
#[derive(Default)]
pub(crate) struct Collector {
    /// Keep the links (else only check that the chain is linear).
    keep_links: bool,
    links: Vec<Link>,
    /// Lines of the records a file-order rebuild took as the conversation since its last
    /// compaction (that compaction's line first).
    file_seq: Vec<usize>,
    /// Lines of every main-conversation message record, in file order.
    messages: Vec<usize>,
    /// Lines of keel's own compaction records (outside the chain: placed by position).
    keel_compactions: Vec<usize>,
    last_link_line: usize,
    linear: Linear,
}

/// Whether every entry so far names the one before it as parent.
#[derive(Default)]
struct Linear {
    broken: bool,
    /// The uuid of the entry before (the one a checkpoint ended with, at first).
    prev: Option<Box<str>>,
    /// The last message: its uuid, and whether it may be the newest main message.
    last_message: Option<(Box<str>, bool)>,
}

impl Linear {
    fn see(&mut self, l: &Link) {
        let follows = l.parent.as_deref() == self.prev.as_deref()
            // A compaction has no parent; the file order starts again at it too.
            || (matches!(l.kind, LinkKind::Boundary) && l.parent.is_none());
        if !follows || matches!(l.kind, LinkKind::Message { record: false, .. }) {
            self.broken = true;
        }
        if let LinkKind::Message { main, .. } = l.kind {
            self.last_message = Some((l.uuid.clone(), main));
        }
        self.prev = Some(l.uuid.clone());
    }

    /// The newest message, when the chain is one line whose last message may be it.
    fn leaf(&self) -> Option<Option<&str>> {
        match &self.last_message {
            _ if self.broken => None,
            None => Some(None),
            Some((uuid, true)) => Some(Some(uuid)),
            Some((_, false)) => None,
        }
    }
}

impl Collector {
    /// A collector that checks the chain is one line, starting after `join` (the entry a
    /// checkpoint ended with) or at a root.
    pub fn linear(join: Option<&str>) -> Self {
        Self {
            linear: Linear {
                prev: join.map(Into::into),
                ..Linear::default()
            },
            ..Self::default()
        }
    }

    /// A collector that keeps every link, for the walk.
    pub fn full() -> Self {
        Self {
            keep_links: true,
            ..Self::default()
        }
    }

    /// Note one item of the reader, before the record (if it is one) goes on.
    pub fn see(&mut self, item: &Item) {
        match item {
            Item::Link(l) => self.last_link_line = l.line,
            Item::Record(r) => {
                match &r.frame {
                    Frame::User(u) if u.parent_tool_use_id.is_none() => self.message(r.line),
                    Frame::Assistant(a) if a.parent_tool_use_id.is_none() => self.message(r.line),
                    f if is_compaction(f) => {
                        self.file_seq.clear();
                        self.file_seq.push(r.line);
                        if self.last_link_line != r.line {
                            self.keel_compactions.push(r.line);
                        }
                    }
                    _ => {}
                }
                // The record's link came just before it: what the put-back needs.
                if let Some(LinkKind::Message {
                    facts,
                    record: true,
                    ..
                }) = self
                    .links
                    .last_mut()
                    .filter(|l| l.line == r.line)
                    .map(|l| &mut l.kind)
                {
                    *facts = Facts::of(&r.frame);
                }
            }
        }
    }

    /// Take a link.
    pub fn keep(&mut self, l: Link) {
        if self.keep_links {
            self.links.push(l);
        } else {
            self.linear.see(&l);
        }
    }

    /// The file order is the walk: the chain is one line (the newest message, if any).
    pub fn linear_leaf(&self) -> Option<Option<&str>> {
        (!self.keep_links).then(|| self.linear.leaf()).flatten()
    }

    fn message(&mut self, line: usize) {
        self.file_seq.push(line);
        self.messages.push(line);
    }
}

/// The walk's outcome.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The records to rebuild, in order; `None` when that is the file order.
    pub wanted: Option<Vec<usize>>,
    /// The newest message: the parent of the next entry.
    pub leaf: Option<String>,
    /// For the notices.
    pub report: ChainReport,
}

const NONE: u32 = u32::MAX;

/// The resolved tree: parents as indices.
struct Tree<'a> {
    links: &'a [Link],
    by_uuid: HashMap<&'a str, u32>,
}

/// A parent, resolved.
enum Parent<'a> {
    None,
    In(u32),
    Missing(&'a str),
}

impl<'a> Tree<'a> {
    fn new(links: &'a [Link]) -> Self {
        let mut by_uuid = HashMap::with_capacity(links.len());
        // A uuid written twice names its last entry, as the SDKs' readers take it.
        for (i, l) in links.iter().enumerate() {
            by_uuid.insert(&*l.uuid, i as u32);
        }
        Self { links, by_uuid }
    }

    fn parent(&self, i: u32) -> Parent<'a> {
        match self.links[i as usize].parent.as_deref() {
            None => Parent::None,
            Some(p) => match self.by_uuid.get(p) {
                Some(&j) => Parent::In(j),
                None => Parent::Missing(p),
            },
        }
    }

    /// The leaf: the last main message in the file that ends a branch (the nearest message
    /// up from an entry nobody names as parent). `None` when no branch ends in one (every
    /// entry is someone's parent: a cycle).
    fn leaf(&self) -> Option<u32> {
        let n = self.links.len();
        let mut has_child = vec![false; n];
        for i in 0..n as u32 {
            if let Parent::In(p) = self.parent(i) {
                has_child[p as usize] = true;
            }
        }
        // nearest[i]: the nearest message at or above i; resolved once per entry, so many
        // branches through one long run of non-message entries stay linear.
        const TODO: u32 = u32::MAX - 1;
        let mut nearest = vec![TODO; n];
        let mut best: Option<u32> = None;
        let mut path = Vec::new();
        for t in (0..n as u32).filter(|&t| !has_child[t as usize]) {
            let mut cur = t;
            let found = loop {
                if nearest[cur as usize] != TODO {
                    break nearest[cur as usize];
                }
                if self.links[cur as usize].kind.is_message() {
                    break cur;
                }
                // Marked before going up: meeting it again is a cycle, which ends nowhere.
                nearest[cur as usize] = NONE;
                path.push(cur);
                match self.parent(cur) {
                    Parent::In(p) => cur = p,
                    _ => break NONE,
                }
            };
            for p in path.drain(..) {
                nearest[p as usize] = found;
            }
            if found != NONE && self.links[found as usize].kind.is_main() {
                let line = |i: u32| self.links[i as usize].line;
                if best.is_none_or(|b| line(found) > line(b)) {
                    best = Some(found);
                }
            }
        }
        best
    }
}

impl Collector {
    /// Walk the chain. `damaged`: the lines that could not be read, in order (a parent lost
    /// with one of them is bridged, not a break).
    pub fn plan(self, damaged: &[usize]) -> Plan {
        let tree = Tree::new(&self.links);
        let last_main = self.messages.last().and_then(|line| {
            self.links
                .iter()
                .rposition(|l| l.line == *line)
                .map(|i| i as u32)
        });
        let Some(leaf) = tree.leaf().or(last_main) else {
            // No message in the chain: nothing the file order took is a message either.
            return Plan {
                wanted: None,
                leaf: None,
                report: ChainReport::default(),
            };
        };
        let (chain, issues) = walk(&tree, leaf, damaged);
        let mut on_chain = vec![false; self.links.len()];
        chain.iter().for_each(|&i| on_chain[i as usize] = true);
        let mut seq: Vec<u32> = chain
            .iter()
            .copied()
            .filter(|&i| self.links[i as usize].kind.is_record())
            .collect();
        if chain.len() < self.links.len() {
            seq = put_back_parallel(&tree, seq, &mut on_chain);
        }
        let mut wanted: Vec<usize> = seq.iter().map(|&i| self.links[i as usize].line).collect();
        let root_line = chain.first().and_then(|&i| {
            let l = &self.links[i as usize];
            matches!(l.kind, LinkKind::Boundary).then_some(l.line)
        });
        let reset = self.place_keel_compaction(&mut wanted, root_line);
        let report = self.report(&on_chain, reset.or(root_line), issues);
        Plan {
            wanted: (wanted != self.file_seq).then_some(wanted),
            leaf: Some(self.links[leaf as usize].uuid.to_string()),
            report,
        }
    }

    /// keel's compaction records have no parent: one counts for the walk's history when the
    /// message written just before it is on the history (or none is, in this read). The last
    /// such one after the history's root replaces what came before it.
    fn place_keel_compaction(
        &self,
        wanted: &mut Vec<usize>,
        root_line: Option<usize>,
    ) -> Option<usize> {
        if self.keel_compactions.is_empty() {
            return None;
        }
        let on: HashSet<usize> = wanted.iter().copied().collect();
        let lc = self.keel_compactions.iter().rev().copied().find(|&lc| {
            if root_line.is_some_and(|r| lc < r) {
                return false;
            }
            let before = self.messages.partition_point(|&m| m < lc);
            before == 0 || on.contains(&self.messages[before - 1])
        })?;
        wanted.retain(|&l| l > lc);
        wanted.insert(0, lc);
        Some(lc)
    }

    fn report(
        &self,
        on_chain: &[bool],
        reset: Option<usize>,
        issues: Vec<ChainIssue>,
    ) -> ChainReport {
        let mut report = ChainReport {
            issues,
            ..ChainReport::default()
        };
        for (l, _) in self.links.iter().zip(on_chain).filter(|(l, on)| {
            !**on
                && matches!(
                    l.kind,
                    LinkKind::Message {
                        record: true,
                        main: true,
                        ..
                    }
                )
                && reset.is_none_or(|r| l.line > r)
        }) {
            report.abandoned += 1;
            report.abandoned_line.get_or_insert(l.line);
        }
        report
    }
}

/// From the leaf up: the chain, root first, and the breaks it went around. A missing parent whose entry
/// may be a damaged line (one lies between the entry and the entry before it) is bridged to
/// that entry before: the damage is reported on its own, and the rest is still read.
fn walk(tree: &Tree<'_>, leaf: u32, damaged: &[usize]) -> (Vec<u32>, Vec<ChainIssue>) {
    let links = tree.links;
    let mut seen = vec![false; links.len()];
    let mut chain = Vec::new();
    let mut issues = Vec::new();
    let mut cur = leaf;
    let issue = |kind, i: u32, parent: &str| {
        let l = &links[i as usize];
        ChainIssue {
            kind,
            uuid: l.uuid.to_string(),
            line: l.line,
            parent: parent.to_owned(),
        }
    };
    loop {
        seen[cur as usize] = true;
        chain.push(cur);
        match tree.parent(cur) {
            Parent::None => break,
            Parent::Missing(p) => {
                let line = links[cur as usize].line;
                let before = cur.checked_sub(1).filter(|&b| {
                    let from = links[b as usize].line;
                    !seen[b as usize] && damaged.iter().any(|&d| from < d && d < line)
                });
                match before {
                    Some(b) => cur = b,
                    None => {
                        issues.push(issue(ChainIssueKind::DanglingParent, cur, p));
                        break;
                    }
                }
            }
            Parent::In(p) if seen[p as usize] => {
                let parent = links[p as usize].uuid.to_string();
                issues.push(issue(ChainIssueKind::Cycle, cur, &parent));
                break;
            }
            Parent::In(p) => cur = p,
        }
    }
    chain.reverse();
    (chain, issues)
}

/// The calls and results of a parallel response that the walk left off, put back right after
/// the response's last entry on the chain: its other content blocks first, then the results
/// that answer a call of it not answered yet, each in file order.
fn put_back_parallel(tree: &Tree<'_>, seq: Vec<u32>, on_chain: &mut [bool]) -> Vec<u32> {
    let links = tree.links;
    let facts = |i: u32| links[i as usize].kind.facts();
    let msg_id = |i: u32| facts(i).and_then(|f| f.msg_id.as_deref());
    let mut groups: HashMap<&str, Vec<u32>> = HashMap::new();
    // A call id made by two responses is ambiguous: it places nothing.
    let mut owner: HashMap<&str, Option<&str>> = HashMap::new();
    for i in 0..links.len() as u32 {
        let Some(id) = msg_id(i) else { continue };
        groups.entry(id).or_default().push(i);
        for c in facts(i).map_or(&[][..], |f| &f.calls[..]) {
            let o = owner.entry(c).or_insert(Some(id));
            if *o != Some(id) {
                *o = None;
            }
        }
    }
    // Results off the chain, under each response they may belong to: the one whose entry is
    // their parent, and the one that made a call they answer.
    let mut candidates: HashMap<&str, Vec<u32>> = HashMap::new();
    for r in (0..links.len() as u32).filter(|&r| !on_chain[r as usize]) {
        let Some(f) = facts(r).filter(|f| f.msg_id.is_none()) else {
            continue;
        };
        let mut of: Vec<&str> = f
            .results
            .iter()
            .filter_map(|c| owner.get(&**c).copied().flatten())
            .collect();
        if let Parent::In(p) = tree.parent(r) {
            of.extend(msg_id(p));
        }
        of.sort_unstable();
        of.dedup();
        for id in of {
            candidates.entry(id).or_default().push(r);
        }
    }
    let off_chain = |id: &str| groups[id].iter().any(|&m| !on_chain[m as usize]);
    if candidates.is_empty() && !groups.keys().any(|id| off_chain(id)) {
        return seq;
    }
    let mut answered: HashSet<&str> = seq
        .iter()
        .filter_map(|&i| facts(i))
        .flat_map(|f| f.results.iter().map(|r| &**r))
        .collect();
    // The last entry of each response on the chain, which its put-back follows.
    let mut anchor: HashMap<&str, u32> = HashMap::new();
    for &i in &seq {
        if let Some(id) = msg_id(i) {
            anchor.insert(id, i);
        }
    }
    let mut order: Vec<&str> = Vec::new();
    for &i in &seq {
        if let Some(id) = msg_id(i).filter(|id| !order.contains(id)) {
            order.push(id);
        }
    }
    let mut inserts: HashMap<u32, Vec<u32>> = HashMap::new();
    for id in order {
        let at = anchor[id];
        let mut add: Vec<u32> = groups[id]
            .iter()
            .copied()
            .filter(|&m| !on_chain[m as usize])
            .collect();
        add.iter().for_each(|&m| on_chain[m as usize] = true);
        let mut results = candidates.remove(id).unwrap_or_default();
        results.sort_by_key(|&r| links[r as usize].line);
        for r in results {
            let Some(f) = facts(r) else { continue };
            if on_chain[r as usize] || f.results.iter().all(|c| answered.contains(&**c)) {
                continue;
            }
            answered.extend(f.results.iter().map(|c| &**c));
            on_chain[r as usize] = true;
            add.push(r);
        }
        if !add.is_empty() {
            inserts.insert(at, add);
        }
    }
    let mut out = Vec::with_capacity(seq.len());
    for i in seq {
        out.push(i);
        out.extend(inserts.remove(&i).unwrap_or_default());
    }
    out
}

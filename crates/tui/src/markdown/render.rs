//! One markdown source, parsed by pulldown-cmark and rendered to terminal lines.
//!
//! The rendering keeps the source's line structure: a soft break is a new line and a blank
//! source line between two blocks is one blank line. That keeps the output stable as a reply
//! grows line by line — the lines of a complete source line render the same way once more text
//! follows — which is what lets the streaming view commit them to the scrollback early.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::code::CodeCache;
use super::table::Table;

/// What a render produced: its lines, and where each top-level block begins.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// Every line, in order.
    pub lines: Vec<Line<'static>>,
    /// The top-level blocks, in source order.
    pub top: Vec<TopBlock>,
}

/// Where one top-level block starts, in the source and in the rendered lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TopBlock {
    /// Byte offset of the start of the source line the block begins on.
    pub src_line_start: usize,
    /// Index of its first rendered line (after the blank line that may separate it).
    pub line: usize,
    /// What kind of block it is.
    pub kind: TopKind,
    /// How many code blocks the source has before it.
    pub code_before: usize,
}

/// The kinds of top-level block the streaming view treats apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TopKind {
    /// A table: its columns can still widen while it grows.
    Table,
    /// A paragraph: its last line may become a table's header.
    Paragraph,
    /// A fenced code block.
    Fenced,
    /// Anything else.
    Other,
}

/// The markdown extensions keel renders: GitHub's tables, strikethrough and task lists.
fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// Render a whole source; `cache` keeps highlighted code lines from an earlier render of the
/// same source (or of its beginning).
pub(crate) fn render(src: &str, cache: &mut CodeCache) -> Rendered {
    let mut r = Renderer::new(src, cache);
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(src, options()).into_offset_iter() {
        match &event {
            Event::Start(tag) => {
                if is_block(tag) {
                    let kind = match tag {
                        Tag::Table(_) => TopKind::Table,
                        Tag::Paragraph => TopKind::Paragraph,
                        Tag::CodeBlock(CodeBlockKind::Fenced(_)) => TopKind::Fenced,
                        _ => TopKind::Other,
                    };
                    r.block_start(range.start, (depth == 0).then_some(kind));
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Rule => r.block_start(range.start, (depth == 0).then_some(TopKind::Other)),
            _ => {}
        }
        r.event(event, range);
    }
    r.flush_line();
    Rendered {
        lines: r.out,
        top: r.top,
    }
}

fn is_block(tag: &Tag<'_>) -> bool {
    matches!(
        tag,
        Tag::Paragraph
            | Tag::Heading { .. }
            | Tag::BlockQuote(_)
            | Tag::CodeBlock(_)
            | Tag::HtmlBlock
            | Tag::List(_)
            | Tag::Item
            | Tag::Table(_)
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::MetadataBlock(_)
    )
}

/// A container the current line sits in: each adds its part of the line's prefix.
#[derive(Debug)]
enum Container {
    Quote,
    /// A list item: its marker ("• ", "3. ") goes on its first line, spaces of the same width
    /// on the others.
    Item {
        marker: String,
        used: bool,
    },
}

/// A list being rendered: the number of its next item (`None`: bullets).
#[derive(Debug)]
struct List {
    next: Option<u64>,
}

struct Renderer<'c> {
    /// Byte offset of the start of every source line.
    line_starts: Vec<usize>,
    out: Vec<Line<'static>>,
    /// The line being built.
    cur: Vec<Span<'static>>,
    containers: Vec<Container>,
    lists: Vec<List>,
    /// Inline state: how many emphasis / strong / strikethrough spans are open.
    italic: usize,
    bold: usize,
    strike: usize,
    /// The links open: the index in `cur` where each one's text begins, and its target.
    links: Vec<(usize, String, bool)>,
    /// Inside a heading: its level.
    heading: Option<HeadingLevel>,
    /// Inside a code block: its number, its lines so far and the text of its line not
    /// complete yet.
    code: Option<(usize, usize, String)>,
    /// How many code blocks have begun.
    code_blocks: usize,
    cache: &'c mut CodeCache,
    table: Option<Table>,
    /// Source offset just past the last content rendered (for the blank line between blocks).
    last_content: Option<usize>,
    top: Vec<TopBlock>,
}

impl<'c> Renderer<'c> {
    fn new(src: &str, cache: &'c mut CodeCache) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(memchr_newlines(src).map(|i| i + 1));
        Renderer {
            line_starts,
            out: Vec::new(),
            cur: Vec::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            italic: 0,
            bold: 0,
            strike: 0,
            links: Vec::new(),
            heading: None,
            code: None,
            code_blocks: 0,
            cache,
            table: None,
            last_content: None,
            top: Vec::new(),
        }
    }

    /// The source line an offset is on.
    fn line_of(&self, offset: usize) -> usize {
        self.line_starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    /// A block begins at `offset`: a blank line first when the source has one since the last
    /// content, and its place noted when it is a top-level block (`top`: its kind).
    fn block_start(&mut self, offset: usize, top: Option<TopKind>) {
        self.flush_line();
        if let Some(end) = self.last_content {
            let last_line = self.line_of(end.saturating_sub(1));
            let this_line = self.line_of(offset);
            if this_line > last_line + 1 {
                self.blank_line();
                // Nested blocks starting at the same place do not add another one.
                self.last_content = Some(self.line_starts[this_line]);
            }
        }
        if let Some(kind) = top {
            let line = self.line_of(offset);
            self.top.push(TopBlock {
                src_line_start: self.line_starts[line],
                line: self.out.len(),
                kind,
                code_before: self.code_blocks,
            });
        }
    }

    fn content_to(&mut self, end: usize) {
        self.last_content = Some(self.last_content.map_or(end, |e| e.max(end)));
    }

    fn event(&mut self, event: Event<'_>, range: Range<usize>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => {
                self.end(tag);
                if matches!(
                    tag,
                    TagEnd::Paragraph
                        | TagEnd::Heading(_)
                        | TagEnd::CodeBlock
                        | TagEnd::HtmlBlock
                        | TagEnd::Table
                ) {
                    self.content_to(range.end);
                }
            }
            Event::Text(t) => {
                self.content_to(range.end);
                if let Some((_, _, partial)) = self.code.as_mut() {
                    partial.push_str(&t);
                    self.code_lines();
                } else {
                    let style = self.style();
                    self.push(Span::styled(t.into_string(), style));
                }
            }
            Event::Code(t) => {
                self.content_to(range.end);
                self.push(Span::styled(t.into_string(), Style::new().fg(Color::Cyan)));
            }
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                self.content_to(range.end);
                let style = self.style();
                self.push(Span::styled(t.into_string(), style));
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                self.content_to(range.end);
                self.raw_text(&t);
            }
            Event::SoftBreak | Event::HardBreak => self.flush_line(),
            Event::Rule => {
                self.content_to(range.end);
                self.push(Span::styled(
                    "─".repeat(40),
                    Style::new().fg(Color::DarkGray),
                ));
                self.flush_line();
            }
            Event::TaskListMarker(done) => {
                if let Some(Container::Item {
                    marker,
                    used: false,
                }) = self.containers.last_mut()
                {
                    *marker = if done { "☑ " } else { "☐ " }.to_owned();
                }
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => self.heading = Some(level),
            Tag::BlockQuote(_) => self.containers.push(Container::Quote),
            Tag::CodeBlock(kind) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_lowercase()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                let n = self.code_blocks;
                self.code_blocks += 1;
                self.cache.open(n, &lang);
                self.code = Some((n, 0, String::new()));
            }
            Tag::List(start) => self.lists.push(List { next: start }),
            Tag::Item => {
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut().and_then(|l| l.next.as_mut()) {
                    Some(n) => {
                        let m = format!("{n}. ");
                        *n = n.saturating_add(1);
                        m
                    }
                    None => ["• ", "◦ ", "▪ "][depth % 3].to_owned(),
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
            }
            Tag::Table(align) => self.table = Some(Table::new(align)),
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = self.table.as_mut() {
                    t.start_row();
                }
            }
            Tag::Emphasis => self.italic += 1,
            Tag::Strong => self.bold += 1,
            Tag::Strikethrough => self.strike += 1,
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => {
                let auto = matches!(link_type, LinkType::Autolink | LinkType::Email);
                self.links
                    .push((self.cur.len(), dest_url.into_string(), auto));
            }
            Tag::Image { dest_url, .. } => {
                self.push(Span::styled("[image: ", Style::new().fg(Color::DarkGray)));
                self.links
                    .push((self.cur.len(), dest_url.into_string(), false));
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush_line(),
            TagEnd::Heading(_) => {
                self.flush_line();
                self.heading = None;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_line();
                self.containers.pop();
            }
            TagEnd::CodeBlock => {
                if let Some((n, i, partial)) = self.code.take() {
                    if !partial.is_empty() {
                        let line = self.cache.line(n, i, &partial);
                        self.push_line(line.spans);
                    }
                }
            }
            TagEnd::HtmlBlock => self.flush_line(),
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Item => {
                self.flush_line();
                self.containers.pop();
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.cur);
                if let Some(t) = self.table.as_mut() {
                    t.push_cell(cell);
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    for line in t.render() {
                        self.push_line(line.spans);
                    }
                }
            }
            TagEnd::Emphasis => self.italic = self.italic.saturating_sub(1),
            TagEnd::Strong => self.bold = self.bold.saturating_sub(1),
            TagEnd::Strikethrough => self.strike = self.strike.saturating_sub(1),
            TagEnd::Link => self.end_link(false),
            TagEnd::Image => self.end_link(true),
            _ => {}
        }
    }

    /// A link's text is shown underlined, its target after it (unless it is the text itself).
    fn end_link(&mut self, image: bool) {
        let Some((from, url, auto)) = self.links.pop() else {
            return;
        };
        let from = from.min(self.cur.len());
        let text: String = self.cur[from..]
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        if image {
            self.push(Span::styled("]", Style::new().fg(Color::DarkGray)));
        } else {
            for s in &mut self.cur[from..] {
                s.style = s.style.add_modifier(Modifier::UNDERLINED);
            }
        }
        if !auto && !url.is_empty() && url != text {
            self.push(Span::styled(
                format!(" ({url})"),
                Style::new().fg(Color::DarkGray),
            ));
        }
    }

    /// The style of inline text here.
    fn style(&self) -> Style {
        let mut st = Style::new();
        if let Some(level) = self.heading {
            st = st.add_modifier(Modifier::BOLD);
            if level == HeadingLevel::H1 {
                st = st.add_modifier(Modifier::UNDERLINED);
            }
        }
        let quoted = self
            .containers
            .iter()
            .any(|c| matches!(c, Container::Quote));
        if self.italic > 0 || quoted {
            st = st.add_modifier(Modifier::ITALIC);
        }
        if self.bold > 0 {
            st = st.add_modifier(Modifier::BOLD);
        }
        if self.strike > 0 {
            st = st.add_modifier(Modifier::CROSSED_OUT);
        }
        st
    }

    fn push(&mut self, span: Span<'static>) {
        if !span.content.is_empty() {
            self.cur.push(span);
        }
    }

    /// Raw text (HTML): each of its lines is a line.
    fn raw_text(&mut self, t: &str) {
        let mut parts = t.split('\n').peekable();
        while let Some(part) = parts.next() {
            self.push(Span::raw(part.to_owned()));
            if parts.peek().is_some() {
                self.flush_line();
            }
        }
    }

    /// Every complete line of the code block open now, highlighted.
    fn code_lines(&mut self) {
        let Some((n, i, partial)) = self.code.as_mut() else {
            return;
        };
        let Some(last_nl) = partial.rfind('\n') else {
            return;
        };
        let rest = partial.split_off(last_nl + 1);
        let done = std::mem::replace(partial, rest);
        let (n, first) = (*n, *i);
        let lines: Vec<&str> = done.lines().collect();
        *i += lines.len();
        for (k, l) in lines.into_iter().enumerate() {
            let line = self.cache.line(n, first + k, l);
            self.push_line(line.spans);
        }
    }

    /// The line being built is complete (nothing when it is empty).
    fn flush_line(&mut self) {
        if self.table.is_some() || self.cur.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.cur);
        self.push_line(spans);
    }

    /// One line, after the prefix of the containers it sits in.
    fn push_line(&mut self, spans: Vec<Span<'static>>) {
        let mut line = self.prefix(true);
        line.extend(spans);
        self.out.push(Line::from(line));
    }

    /// A blank line between two blocks (the quote bars continue through it).
    fn blank_line(&mut self) {
        let mut prefix = self.prefix(false);
        if let Some(last) = prefix.last_mut() {
            let trimmed = last.content.trim_end().to_owned();
            last.content = trimmed.into();
        }
        prefix.retain(|s| !s.content.is_empty());
        self.out.push(Line::from(prefix));
    }

    /// The prefix of a line here; `content`: the line has content, so an item's marker that
    /// has not been shown yet is shown (and spent).
    fn prefix(&mut self, content: bool) -> Vec<Span<'static>> {
        let bar = Style::new().fg(Color::DarkGray);
        let mut out = Vec::new();
        let mut pad = String::new();
        for c in &mut self.containers {
            match c {
                Container::Quote => {
                    if !pad.is_empty() {
                        out.push(Span::raw(std::mem::take(&mut pad)));
                    }
                    out.push(Span::styled("│ ", bar));
                }
                Container::Item { marker, used } => {
                    if content && !*used {
                        if !pad.is_empty() {
                            out.push(Span::raw(std::mem::take(&mut pad)));
                        }
                        out.push(Span::raw(marker.clone()));
                        *used = true;
                    } else {
                        pad.push_str(
                            &" ".repeat(unicode_width::UnicodeWidthStr::width(marker.as_str())),
                        );
                    }
                }
            }
        }
        if !pad.is_empty() {
            out.push(Span::raw(pad));
        }
        out
    }
}

/// The offsets of every `\n` in `s`.
fn memchr_newlines(s: &str) -> impl Iterator<Item = usize> + '_ {
    s.bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'\n')
        .map(|(i, _)| i)
}

//! The WebSearch tool: a search run by the provider's server-side search tool.

use std::sync::Arc;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{SearchAnswer, SearchRequest, WebHost, WebModelError};
use crate::{BoxFuture, ToolContext, ToolKind, ToolOutcome};

/// The most domains either list may hold.
pub const MAX_DOMAINS: usize = 100;
/// The longest query accepted.
pub const MAX_QUERY_CHARS: usize = 1000;

const DESCRIPTION: &str = "Search the web and get the results (titles and URLs) with a short \
summary. The search runs on the model provider's own search service, where the provider has one. \
`allowed_domains` keeps only results from those domains; `blocked_domains` drops results from \
those domains (give at most one of the two). Use it for facts newer than your training or for \
pages to read with WebFetch; cite the URLs you use.";

/// WebSearch's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// What to search for.
    query: String,
    /// Only results from these domains (e.g. "docs.rs").
    allowed_domains: Option<Vec<String>>,
    /// No results from these domains.
    blocked_domains: Option<Vec<String>>,
}

/// The WebSearch tool.
pub struct WebSearchTool {
    host: Arc<dyn WebHost>,
}

impl WebSearchTool {
    /// A WebSearch whose searches `host` runs.
    pub fn new(host: Arc<dyn WebHost>) -> Self {
        Self { host }
    }
}

fn bad(why: impl std::fmt::Display) -> ToolOutcome {
    ToolOutcome::failed(format!("Invalid input for WebSearch: {why}."))
}

fn domains(field: &str, list: Option<Vec<String>>) -> Result<Vec<String>, ToolOutcome> {
    let list = list.unwrap_or_default();
    if list.len() > MAX_DOMAINS {
        return Err(bad(format!(
            "`{field}` names more than {MAX_DOMAINS} domains"
        )));
    }
    list.into_iter()
        .map(|d| {
            let d = d.trim().to_ascii_lowercase();
            let ok = !d.is_empty()
                && d.len() <= 253
                && d.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*'));
            if ok {
                Ok(d)
            } else {
                Err(bad(format!("`{field}` holds {d:?}, which is not a domain name (write `example.com`, without a scheme or path)")))
            }
        })
        .collect()
}

fn request(inp: Input) -> Result<SearchRequest, ToolOutcome> {
    let query = inp.query.trim().to_owned();
    if query.chars().count() < 2 {
        return Err(bad("`query` must have at least 2 characters"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(bad(format!(
            "`query` is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    let allowed_domains = domains("allowed_domains", inp.allowed_domains)?;
    let blocked_domains = domains("blocked_domains", inp.blocked_domains)?;
    if !allowed_domains.is_empty() && !blocked_domains.is_empty() {
        return Err(bad("give `allowed_domains` or `blocked_domains`, not both"));
    }
    Ok(SearchRequest {
        query,
        allowed_domains,
        blocked_domains,
    })
}

/// The tool result: the links, then the model's summary.
fn render(query: &str, a: &SearchAnswer) -> String {
    let mut out = format!("Web search results for {query:?}:\n");
    if a.links.is_empty() {
        out.push_str("\nNo results.\n");
    }
    for (i, (title, url)) in a.links.iter().enumerate() {
        out.push_str(&format!("\n{}. {} — {}", i + 1, title, url));
    }
    if !a.text.trim().is_empty() {
        out.push_str("\n\n");
        out.push_str(a.text.trim());
    }
    out
}

impl crate::TypedTool for WebSearchTool {
    type Input = Input;
    const NAME: &'static str = "WebSearch";
    const KIND: crate::ToolKind = ToolKind::WebSearch;
    const DESCRIPTION: &'static str = DESCRIPTION;
    /// The query leaves the machine: decided by the WebSearch rules.
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let started = Instant::now();
            let req = match request(inp) {
                Ok(r) => r,
                Err(o) => return o,
            };
            let query = req.query.clone();
            let answer = match self.host.search(req, &cx.cancel).await {
                Ok(a) => a,
                Err(WebModelError::Cancelled) => {
                    return cx.stopped(true, String::new(), started.elapsed(), 0)
                }
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            if answer.links.is_empty() && !answer.errors.is_empty() {
                return ToolOutcome::failed(format!(
                    "The web search for {query:?} failed: the search service reported {}.",
                    answer.errors.join(", ")
                ));
            }
            let links: Vec<Value> = answer
                .links
                .iter()
                .map(|(t, u)| json!({"title": t, "url": u}))
                .collect();
            ToolOutcome::Ok {
                content: render(&query, &answer),
                meta: Some(json!({
                    "query": query,
                    "results": [{"tool_use_id": cx.tool_use_id, "content": links}],
                    "searches": answer.searches,
                    "durationSeconds": started.elapsed().as_secs_f64(),
                })),
            }
        })
    }
}

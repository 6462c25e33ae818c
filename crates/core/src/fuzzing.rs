//! Entry points for the fuzz targets (`fuzz/`) and for the tests that replay their corpora on
//! stable Rust. Each takes arbitrary bytes and must never panic, hang or allocate without
//! bound, whatever the bytes are. Not a stable API.

use std::path::Path;
use std::sync::OnceLock;

use futures_util::StreamExt;
use serde_json::json;

use crate::permissions::{PermissionConfig, PermissionMode, Rule, RuleSource};

// A runtime that cannot be built is a broken harness, not a finding about the input: the
// fuzzer must stop loudly rather than report every input as handled.
#[allow(clippy::expect_used)]
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime")
    })
}

/// An SSE body as the model API would send it: framed, decoded into events and assembled
/// into a reply, exactly as a streamed reply is.
pub fn sse(data: &[u8]) {
    let split = data.first().map(|b| *b as usize).unwrap_or(0);
    let body = data.get(1..).unwrap_or_default();
    assemble(keel_model::fuzzing::sse_events(body, split));
}

/// Assemble a reply from `events` as a streamed reply is, until it is complete or broken.
fn assemble(mut events: keel_model::EventStream) {
    runtime().block_on(async {
        let mut asm = crate::reply::Assembly::default();
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { break };
            match asm.apply(ev.event) {
                Ok(Some(reply)) => {
                    let _ = serde_json::to_string(&reply.message);
                    break;
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
    });
}

/// An OpenAI API's SSE body (the first byte picks the API: even Chat Completions, odd
/// Responses; the second is where the body is split across reads), translated into the
/// Messages API's events and assembled into a reply, exactly as a streamed reply is.
pub fn openai_sse(data: &[u8]) {
    let api = match data.first() {
        Some(b) if b % 2 == 1 => keel_model::OpenAiApi::Responses,
        _ => keel_model::OpenAiApi::Chat,
    };
    let split = data.get(1).map(|b| *b as usize).unwrap_or(0);
    let body = data.get(2..).unwrap_or_default();
    assemble(keel_model::fuzzing::openai_events(api, "fuzz", body, split));
}

/// A Bedrock event-stream body (the first byte is where it is split across reads), decoded
/// and assembled into a reply as a streamed one is.
pub fn bedrock_eventstream(data: &[u8]) {
    let split = data.first().map(|b| *b as usize).unwrap_or(0);
    let body = data.get(1..).unwrap_or_default();
    assemble(keel_model::fuzzing::bedrock_events(body, split));
}

/// A transcript file: parsed line by line, then rebuilt into a history as resume does.
pub fn transcript(data: &[u8]) {
    let loaded = crate::transcript::parse(Path::new("fuzz.jsonl"), data);
    let id = loaded
        .header
        .as_ref()
        .map(|h| h.session_id.clone())
        .unwrap_or_default();
    let _ = crate::transcript::rebuild_history(loaded.records, &id);
}

/// A settings file: read as keel reads one, then its rules compiled as decisions use them.
pub fn settings(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rules) = crate::builder::settings::parse_one(text, "fuzz.json") else {
        return;
    };
    let mut cfg = PermissionConfig::new(PermissionMode::Default, Path::new("/tmp"));
    cfg.allow = rules.allow;
    cfg.deny = rules.deny;
    for tool in ["Read", "Edit", "Bash", "Grep"] {
        let input = json!({"command": "ls -la", "file_path": "a/b.txt", "path": "."});
        let kind = match tool {
            "Read" => keel_tools::ToolKind::Read,
            "Edit" => keel_tools::ToolKind::Edit,
            "Grep" => keel_tools::ToolKind::Grep,
            _ => keel_tools::ToolKind::Bash,
        };
        let _ = cfg.decide(tool, kind, &input, tool != "Edit");
    }
}

/// A Bash command line under a rule set: the first line holds the rules (as for
/// `--allowedTools`, allow and deny separated by `|||`), the rest is the command. Lowered,
/// judged, explained and given suggestions, as a real call would be.
pub fn shell(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (rules, command) = text.split_once('\n').unwrap_or(("", &text));
    let (allow, deny) = rules.split_once("|||").unwrap_or((rules, ""));
    let parse = |s: &str| -> Vec<Rule> {
        crate::permissions::split_rule_list(s)
            .iter()
            .filter_map(|r| Rule::parse(r, RuleSource::Flag).ok())
            .collect()
    };
    let mut cfg = PermissionConfig::new(PermissionMode::Default, Path::new("/tmp"));
    cfg.allow = parse(allow);
    cfg.deny = parse(deny);
    let input = json!({ "command": command });
    let _ = cfg.decide("Bash", keel_tools::ToolKind::Bash, &input, false);
    let _ = cfg.explain_bash(command);
    let _ = crate::approval::suggestions(&cfg, "Bash", keel_tools::ToolKind::Bash, &input);
    let _ = keel_tools::is_read_only_command(command);
}

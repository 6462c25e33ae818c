//! The interactive loop: a session in its own task, the terminal's input, the session's
//! events and questions, and a frame drawn at most every 16 ms when something changed.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::Event as TermEvent;
use keel_core::builder::keel_home;
use keel_core::event::Emitted;
use keel_core::transcript::Store;
use keel_core::{
    Built, Env, SessionBuilder, SessionContext, SessionHandle, SessionOptions, TurnEnd,
};
use keel_protocol::{ApiMessage, ContentBlock, MessageContent, Role};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use tokio::sync::{mpsc, oneshot};

use crate::app::{Action, App, Listing};
use crate::approve::{Question, TerminalApprover};
use crate::editor::History;
use crate::screen::Screen;
use crate::view;

/// The shortest time between two frames (60 per second at most).
const FRAME: Duration = Duration::from_millis(16);
/// How often a spinner or countdown is refreshed.
const ANIMATE: Duration = Duration::from_millis(100);
/// What the model is told when the user retries a turn whose tools had already run.
pub const CONTINUE_AFTER_API_FAILURE: &str = "The model API failed before you could go on, and the user asked to retry. Continue from where you left off; the tool calls above ran and their results are final, so do not run them again.";

/// What the interactive UI starts with.
pub struct Launch {
    /// The working directory.
    pub cwd: PathBuf,
    /// The environment.
    pub env: Arc<Env>,
    /// The session options from the flags.
    pub options: SessionOptions,
    /// A first prompt to send at once (`keel "prompt"`).
    pub prompt: Option<String>,
}

enum Cmd {
    Turn(Vec<ContentBlock>),
    Retry,
    Shutdown(oneshot::Sender<()>),
}

/// A session running in its own task.
struct Live {
    cmds: mpsc::Sender<Cmd>,
    events: mpsc::Receiver<Emitted>,
    done: mpsc::Receiver<TurnEnd>,
    handle: SessionHandle,
    ctx: Arc<SessionContext>,
}

/// What a retry sends: nothing when the prompt never got an answer (it is sent again as it
/// was), a continuation when the history ends with tool results.
fn retry_content(last: Option<&ApiMessage>) -> Vec<ContentBlock> {
    let has_results = |m: &ApiMessage| match &m.content {
        MessageContent::Blocks(b) => b.iter().any(|b| matches!(b, ContentBlock::ToolResult(_))),
        MessageContent::Text(_) => false,
    };
    match last {
        Some(m) if m.role == Role::User && !has_results(m) => Vec::new(),
        _ => vec![ContentBlock::text(CONTINUE_AFTER_API_FAILURE)],
    }
}

fn start(built: Built) -> (Live, Vec<String>) {
    let Built {
        mut session,
        events,
        notices,
    } = built;
    let handle = session.handle();
    let ctx = session.context().clone();
    let (cmds, mut rx) = mpsc::channel::<Cmd>(4);
    let (done_tx, done) = mpsc::channel(4);
    tokio::spawn(async move {
        while let Some(cmd) = rx.recv().await {
            let content = match cmd {
                Cmd::Turn(c) => c,
                Cmd::Retry => {
                    let last = session.history().messages().pop();
                    retry_content(last.as_ref())
                }
                Cmd::Shutdown(ack) => {
                    session.shutdown().await;
                    drop(session);
                    let _ = ack.send(());
                    return;
                }
            };
            let end = session.run_turn(content).await;
            if done_tx.send(end).await.is_err() {
                break;
            }
        }
        session.shutdown().await;
    });
    (
        Live {
            cmds,
            events,
            done,
            handle,
            ctx,
        },
        notices,
    )
}

/// Restores the terminal however the UI ends (a panic included).
struct TermGuard;

impl TermGuard {
    fn enter() -> std::io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        let mut out = std::io::stdout();
        crossterm::execute!(
            out,
            crossterm::event::EnableBracketedPaste,
            crossterm::event::PushKeyboardEnhancementFlags(
                crossterm::event::KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES
            )
        )?;
        Ok(Self)
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        let _ = crossterm::execute!(
            out,
            crossterm::event::PopKeyboardEnhancementFlags,
            crossterm::event::DisableBracketedPaste
        );
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

async fn build(
    launch: &Launch,
    options: SessionOptions,
    tx: &mpsc::Sender<Question>,
) -> Result<(Live, Vec<String>), (String, i32)> {
    let mut options = options;
    options.include_partial_messages = true;
    // Every hook run is reported, so the UI can show the ones that blocked, added context or
    // failed, and the ones running now.
    options.include_hook_events = true;
    let built = SessionBuilder::new(launch.cwd.clone())
        .env(launch.env.clone())
        .options(options)
        .build()
        .await
        .map_err(|e| (e.to_string(), e.exit_code()))?;
    let (live, mut notices) = start(built);
    let approver = TerminalApprover::with_sender(tx.clone());
    live.ctx.set_approver(Some(Arc::new(approver)));
    live.ctx.tasks().enable_backgrounding();
    // The interactive UI always keeps file checkpoints, for /rewind.
    if let Some((store, refused)) = live.ctx.open_checkpoints(&*launch.env) {
        if let Some(e) = refused {
            notices.push(format!("keel: warning: {e}"));
        }
        live.ctx.set_checkpoints(Some(Arc::new(store)));
    }
    Ok((live, notices))
}

fn idle_timeout(env: &Env) -> Duration {
    env("KEEL_STREAM_IDLE_TIMEOUT_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(45))
}

fn history_file(env: &Env, cwd: &std::path::Path) -> Option<PathBuf> {
    let home = keel_home(env, cwd)?;
    Some(
        home.join("prompt-history")
            .join(format!("{}.jsonl", keel_core::transcript::slug(cwd))),
    )
}

fn refresh_status(app: &mut App, ctx: &SessionContext) {
    app.status.model = ctx.model();
    app.status.mode = ctx.permission_mode().as_str().to_owned();
    app.status.cost_usd = ctx.spent_usd();
    app.status.session_id = ctx.session_id();
    app.status.context_window = ctx.limits().context.context_window;
}

/// Run the interactive UI; returns the exit code.
pub async fn run(launch: Launch) -> i32 {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        eprintln!("keel: the interactive UI needs a terminal on stdin and stdout. To run without one, use `keel -p \"PROMPT\"` (or pipe the prompt: `echo PROMPT | keel -p`).");
        return 2;
    }
    let (q_tx, mut questions) = mpsc::channel::<Question>(16);
    let (mut live, notices) = match build(&launch, launch.options.clone(), &q_tx).await {
        Ok(l) => l,
        Err((msg, code)) => {
            eprintln!("{msg}");
            return code;
        }
    };
    let (width, height) = crossterm::terminal::size().unwrap_or((80, 24));
    let _guard = match TermGuard::enter() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("keel: cannot set up the terminal: {e}");
            return 1;
        }
    };
    let colour = launch.env.as_ref()("NO_COLOR").is_none();
    let mut screen = Screen::new(std::io::stdout(), width, colour);
    let mut height = height;
    let mut app = new_app(&launch, &live.ctx, notices);
    let mut actions = first_prompt(&mut app, &launch);
    let (r_tx, mut receipts) = mpsc::channel::<usize>(4);
    // SIGTERM, or SIGHUP when the terminal goes away: leave as on /exit, with the session
    // saved, the turn's processes stopped and the terminal restored.
    let mut term_signals = signal_stream();
    let mut input = spawn_input();
    let mut last_draw = Instant::now()
        .checked_sub(FRAME)
        .unwrap_or_else(Instant::now);
    let mut exiting = false;
    let mut urgent = false;
    let code = 'run: loop {
        for a in std::mem::take(&mut actions) {
            exiting |= perform(a, &mut live, &mut app, &launch, &q_tx, &r_tx).await;
        }
        app.prune_approvals();
        let now = Instant::now();
        // A key is drawn at once (people type far below 60 keys a second, and an echo must
        // feel instant); the session's bursts of events are held to one frame per 16 ms.
        if app.dirty && (urgent || now >= last_draw + FRAME) || exiting {
            if draw(&mut app, &mut screen, &live.ctx, height, now).is_err() {
                break 'run 1;
            }
            last_draw = now;
        }
        urgent = false;
        if exiting {
            break 'run 0;
        }
        let wake = next_wake(&app, last_draw, now);
        tokio::select! {
            ev = input.recv() => {
                urgent = on_terminal(ev, &mut app, &mut screen, &mut height, &mut actions);
            }
            Some(e) = live.events.recv() => {
                app.on_event(&e);
                // Take what else is waiting in one go: one frame for a burst of events.
                while let Ok(e) = live.events.try_recv() {
                    app.on_event(&e);
                }
            }
            Some(end) = live.done.recv() => {
                while let Ok(e) = live.events.try_recv() {
                    app.on_event(&e);
                }
                actions.extend(app.turn_ended(&end));
            }
            Some((req, reply)) = questions.recv() => app.ask(req, reply),
            Some(n) = receipts.recv() => app.interrupted(n),
            Some(()) = term_signals.recv() => actions.push(Action::Exit),
            _ = tokio::time::sleep_until(wake.into()) => {
                if app.animating() || app.retry.is_some() {
                    app.dirty = true;
                }
            }
        }
    };
    let _ = screen.finish();
    let id = live.ctx.session_id().to_owned();
    let persisted = live.ctx.transcript_path().is_some();
    shutdown(live).await;
    drop(_guard);
    if persisted {
        println!("Session saved. Resume it with: keel --resume {id}");
    }
    code
}

/// The UI's state at start: the prompt history, the status line, the welcome lines and the
/// notices of the session's start.
fn new_app(launch: &Launch, ctx: &SessionContext, notices: Vec<String>) -> App {
    let mut app = App::new(
        launch.cwd.clone(),
        History::load(history_file(&*launch.env, &launch.cwd)),
    );
    app.idle_timeout = idle_timeout(&*launch.env);
    app.in_tmux = launch.env.as_ref()("TMUX").is_some();
    refresh_status(&mut app, ctx);
    app.commit(welcome(&app, &launch.cwd));
    for n in notices {
        app.say(format!("⚠ {n}"), Style::new().fg(Color::Yellow));
    }
    app
}

/// A first prompt from the command line (`keel "prompt"`) is sent as if typed and entered.
fn first_prompt(app: &mut App, launch: &Launch) -> Vec<Action> {
    let mut actions = Vec::new();
    if let Some(p) = launch.prompt.clone().filter(|p| !p.trim().is_empty()) {
        app.editor.set_text(&p);
        actions.extend(app.on_key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Enter,
        )));
    }
    actions
}

/// Draws one frame: the lines committed since the last one, then the live part below them.
fn draw(
    app: &mut App,
    screen: &mut Screen<std::io::Stdout>,
    ctx: &SessionContext,
    height: u16,
    now: Instant,
) -> std::io::Result<()> {
    // The live settings are read once per frame, not once per event.
    refresh_status(app, ctx);
    let frame = view::frame(app, screen.width(), height.saturating_sub(1).max(3), now);
    let committed = app.take_committed();
    screen.draw(&committed, &frame)?;
    app.dirty = false;
    Ok(())
}

/// When the loop must wake without input: for the next frame of pending changes, for the next
/// step of a spinner or countdown, or (idle) not for an hour.
fn next_wake(app: &App, last_draw: Instant, now: Instant) -> Instant {
    if app.dirty {
        last_draw + FRAME
    } else if app.animating() || app.retry.is_some() {
        last_draw + ANIMATE
    } else {
        now + Duration::from_secs(3600)
    }
}

/// One event from the terminal; returns whether it is drawn at once (a key or a paste).
fn on_terminal(
    ev: Option<std::io::Result<TermEvent>>,
    app: &mut App,
    screen: &mut Screen<std::io::Stdout>,
    height: &mut u16,
    actions: &mut Vec<Action>,
) -> bool {
    match ev {
        Some(Ok(TermEvent::Key(k))) => {
            actions.extend(app.on_key(k));
            true
        }
        Some(Ok(TermEvent::Paste(text))) => {
            app.on_paste(&text);
            true
        }
        Some(Ok(TermEvent::Resize(w, h))) => {
            screen.resize(w);
            *height = h;
            app.dirty = true;
            false
        }
        Some(Ok(_)) => false,
        Some(Err(_)) | None => {
            // The terminal is gone: save and leave.
            actions.push(Action::Exit);
            false
        }
    }
}

/// Carries out one action of the UI; returns whether it is the one to leave.
async fn perform(
    a: Action,
    live: &mut Live,
    app: &mut App,
    launch: &Launch,
    q_tx: &mpsc::Sender<Question>,
    r_tx: &mpsc::Sender<usize>,
) -> bool {
    match a {
        Action::Clear => send(live, app, Cmd::Turn(vec![ContentBlock::text("/clear")])).await,
        Action::Turn(content) => {
            if let Some(store) = live.ctx.checkpoints() {
                let label = crate::rewind::label(&content);
                store.mark(&keel_core::emit::new_uuid(), &label);
            }
            send(live, app, Cmd::Turn(content)).await;
        }
        Action::Retry => send(live, app, Cmd::Retry).await,
        Action::Interrupt => {
            let h = live.handle.clone();
            let tx = r_tx.clone();
            tokio::spawn(async move {
                let r = h.interrupt().await;
                let _ = tx.send(r.processes_killed).await;
            });
        }
        Action::Background => {
            let moved = live.handle.background_running_calls();
            if moved.is_empty() {
                app.notice = Some("Nothing to move to the background".into());
            }
        }
        Action::SetMode(m) => {
            app.notice = Some(match live.ctx.set_permission_mode(m) {
                Ok(()) => format!("permission mode: {}", m.as_str()),
                Err(why) => format!("permission mode unchanged: {why}"),
            });
        }
        Action::SetModel(m) => live.ctx.set_model(m),
        Action::Show(what) => app.commit(listing(&live.ctx, what)),
        Action::Rewind(None) => match crate::rewind::prompts(live.ctx.checkpoints().as_deref()) {
            Ok(items) => app.pick_rewind(items),
            Err(lines) => app.commit(lines),
        },
        Action::Rewind(Some(n)) => {
            let lines = crate::rewind::run(live.ctx.checkpoints(), n).await;
            app.commit(lines);
        }
        Action::ResumePicker => {
            let items = sessions(&*launch.env, &launch.cwd, &live.ctx.session_id());
            app.pick(items);
        }
        Action::Resume(id) => resume(live, app, launch, q_tx, id).await,
        Action::Exit => {
            if app.running.is_some() {
                stop_for_exit(live, app).await;
            }
            return true;
        }
    }
    false
}

/// Hands a turn (or a retry) to the session's task; says so when that task has ended.
async fn send(live: &Live, app: &mut App, cmd: Cmd) {
    if live.cmds.send(cmd).await.is_err() {
        app.say(
            "The session has stopped; start keel again.",
            Style::new().fg(Color::Red),
        );
        app.running = None;
    }
}

/// Replaces the live session by the resumed one `id` (the old one is shut down only once the
/// new one has started, so a failed resume keeps the session the user had).
async fn resume(
    live: &mut Live,
    app: &mut App,
    launch: &Launch,
    q_tx: &mpsc::Sender<Question>,
    id: String,
) {
    let mut options = launch.options.clone();
    options.continue_session = false;
    options.fork_session = false;
    options.session_id = None;
    options.resume = Some(id.clone());
    match build(launch, options, q_tx).await {
        Ok((next, notices)) => {
            let old = std::mem::replace(live, next);
            shutdown(old).await;
            for n in notices {
                app.say(format!("⚠ {n}"), Style::new().fg(Color::Yellow));
            }
            app.say(
                format!("✻ Resumed session {id}"),
                Style::new().fg(Color::DarkGray),
            );
            app.prompted_retries = 0;
        }
        Err((msg, _)) => app.say(msg, Style::new().fg(Color::Red)),
    }
}

/// Stops the running turn before leaving, reading its events meanwhile so it is never held up
/// by a full channel; then shows how it ended.
async fn stop_for_exit(live: &mut Live, app: &mut App) {
    let h = live.handle.clone();
    let mut stop = tokio::spawn(async move { h.interrupt().await });
    let receipt = loop {
        tokio::select! {
            r = &mut stop => break r.ok(),
            Some(e) = live.events.recv() => app.on_event(&e),
        }
    };
    if let Some(r) = receipt {
        app.interrupted(r.processes_killed);
    }
    while let Ok(e) = live.events.try_recv() {
        app.on_event(&e);
    }
    if let Ok(end) = live.done.try_recv() {
        app.turn_ended(&end);
    }
}

/// The terminal's input, read on a thread of its own with crossterm's blocking `read` and
/// handed over on a bounded channel. crossterm is built with `use-dev-tty`, whose reader polls
/// level-triggered: its default (edge-triggered) reader could report a resize and drop the
/// readiness of keys that arrived with it, which then sat unread until the next key.
fn spawn_input() -> mpsc::Receiver<std::io::Result<TermEvent>> {
    let (tx, rx) = mpsc::channel(64);
    let spawned = std::thread::Builder::new()
        .name("keel-input".into())
        .spawn(move || loop {
            let ev = crossterm::event::read();
            let failed = ev.is_err();
            if tx.blocking_send(ev).is_err() || failed {
                break;
            }
        });
    if let Err(e) = spawned {
        // Without a reader the UI cannot be used: the receiver ends at once, and the loop
        // leaves as when the terminal goes away.
        eprintln!("keel: cannot read the terminal: {e}\r");
    }
    rx
}

fn signal_stream() -> mpsc::Receiver<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = mpsc::channel(2);
    for kind in [SignalKind::terminate(), SignalKind::hangup()] {
        if let Ok(mut s) = signal(kind) {
            let tx = tx.clone();
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    if tx.send(()).await.is_err() {
                        break;
                    }
                }
            });
        }
    }
    rx
}

async fn shutdown(live: Live) {
    let Live {
        cmds, mut events, ..
    } = live;
    let (ack, mut done) = oneshot::channel();
    if cmds.send(Cmd::Shutdown(ack)).await.is_err() {
        return;
    }
    // Read the events the shutdown emits (so the session never waits on a full channel)
    // until it says it is done.
    let _ = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            tokio::select! {
                _ = &mut done => break,
                e = events.recv() => if e.is_none() { break },
            }
        }
    })
    .await;
}

fn welcome(app: &App, cwd: &std::path::Path) -> Vec<Line<'static>> {
    vec![
        Line::from(vec![
            Span::styled("keel ", Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(
                format!(
                    "{} · {} · {}",
                    keel_core::KEEL_VERSION,
                    app.status.model,
                    cwd.display()
                ),
                Style::new().fg(Color::DarkGray),
            ),
        ]),
        Line::styled(
            "Enter sends · Esc stops a turn · /help for keys and commands · Ctrl+C twice exits",
            Style::new().fg(Color::DarkGray),
        ),
    ]
}

fn listing(ctx: &SessionContext, what: Listing) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    let mut out = Vec::new();
    match what {
        Listing::Permissions => {
            let p = ctx.permission_rules();
            out.push(Line::raw(format!("Permission mode: {}", p.mode.as_str())));
            for (label, rules) in [("allow", &p.allow), ("ask", &p.ask), ("deny", &p.deny)] {
                if rules.is_empty() {
                    out.push(Line::styled(format!("  {label}: (none)"), dim));
                }
                for r in rules {
                    out.push(Line::raw(format!("  {label}: {}", r.text())));
                }
            }
            out.push(Line::styled(
                "  Rules come from the settings files and the flags; \"don't ask again\" adds to .claude/settings.local.json.",
                dim,
            ));
        }
        Listing::Agents => {
            let names = ctx.agent_names();
            out.push(Line::raw(format!(
                "Agents the Task tool can start: {}",
                names.join(", ")
            )));
        }
        Listing::Tasks => {
            let tasks = ctx.tasks().statuses();
            if tasks.is_empty() {
                out.push(Line::styled("No background tasks.", dim));
            }
            for (id, status) in tasks {
                out.push(Line::raw(format!("  {id}: {}", status.describe())));
            }
        }
    }
    out
}

fn sessions(env: &Env, cwd: &std::path::Path, current: &str) -> Vec<(String, String)> {
    let Some(home) = keel_home(env, cwd) else {
        return Vec::new();
    };
    Store::from_env(env, cwd, Some(home.clone()))
        .unwrap_or_else(|| Store::new(home))
        .list(Some(cwd))
        .into_iter()
        .filter(|s| s.session_id != current)
        .take(50)
        .map(|s| {
            let when = chrono_like(s.last_activity);
            let prompt = s
                .first_prompt
                .as_deref()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect::<String>();
            let label = format!(
                "{}  {when}  {} messages  {prompt}",
                &s.session_id[..s.session_id.len().min(8)],
                s.messages
            );
            (s.session_id, label)
        })
        .collect()
}

fn chrono_like(t: std::time::SystemTime) -> String {
    match t.elapsed() {
        Ok(d) if d.as_secs() < 60 => "just now".into(),
        Ok(d) if d.as_secs() < 3600 => format!("{}m ago", d.as_secs() / 60),
        Ok(d) if d.as_secs() < 86_400 => format!("{}h ago", d.as_secs() / 3600),
        Ok(d) => format!("{}d ago", d.as_secs() / 86_400),
        Err(_) => "now".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::ToolResultBlock;

    #[test]
    fn a_retry_resends_an_unanswered_prompt_and_continues_after_tool_results() {
        let prompt = ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(vec![ContentBlock::text("hello")]),
        };
        assert!(retry_content(Some(&prompt)).is_empty());
        let results = ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: "t1".into(),
                content: Default::default(),
                is_error: None,
                extra: Default::default(),
            })]),
        };
        let c = retry_content(Some(&results));
        assert_eq!(c, vec![ContentBlock::text(CONTINUE_AFTER_API_FAILURE)]);
    }
}

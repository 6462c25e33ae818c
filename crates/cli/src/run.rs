//! The headless run: flags → `SessionBuilder` → events → printer → exit code.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use keel_core::transcript::MirrorSink;

use crate::printer::Mirror;
use keel_core::{BuildError, Built, Env, SessionBuilder, TurnEnd};
use keel_protocol::ContentBlock;

use crate::args::{Cli, OutputFormat};
use crate::printer;

/// A usage error: printed on stderr, nothing on stdout, exit 2.
#[derive(Debug)]
pub struct UsageError(pub String);

/// Everything a run needs that is not a flag.
pub struct RunInputs {
    /// Environment lookup.
    pub env: Arc<Env>,
    /// Working directory.
    pub cwd: PathBuf,
}

/// Check the flags every input mode shares, and build the session. A failure is reported on
/// stderr here (a refused truncating fork also as an error `result` on stdout, for hosts);
/// `Err` carries the exit code (usage errors: 2). With `--session-mirror` (stream-json), the
/// receiving end of the transcript mirror comes back too, for the printer.
pub async fn build(cli: &Cli, inputs: RunInputs) -> Result<(Built, Option<Mirror>), i32> {
    if cli.output_format == OutputFormat::StreamJson && !cli.verbose {
        eprintln!("Error: When using --print, --output-format=stream-json requires --verbose");
        return Err(2);
    }
    let mut opts = crate::args::options::session_options(cli).map_err(|e| {
        eprintln!("Error: {e}");
        2
    })?;
    if cli.session_mirror && cli.output_format != OutputFormat::StreamJson {
        eprintln!("keel: --session-mirror has no effect without --output-format stream-json (transcript_mirror frames are stream-json frames)");
    }
    let mirror = if cli.session_mirror && cli.output_format == OutputFormat::StreamJson {
        let (sink, rx) = MirrorSink::channel(keel_core::transcript::mirror::MIRROR_CAPACITY);
        opts.mirror = Some(sink.clone());
        Some(Mirror { rx, sink })
    } else {
        None
    };
    let built = SessionBuilder::new(inputs.cwd)
        .env(inputs.env)
        .options(opts)
        .build()
        .await
        .map_err(|e: BuildError| {
            eprintln!("{e}");
            if let BuildError::ResumeRejected(reason) = &e {
                refusal_result(cli, reason);
            }
            e.exit_code()
        })?;
    for n in &built.notices {
        eprintln!("{n}");
    }
    Ok((built, mirror))
}

/// A refused truncating fork ends like any run: one error `result` (json and stream-json),
/// whose `errors` carry the refusal for the SDKs to match.
fn refusal_result(cli: &Cli, reason: &str) {
    let end = TurnEnd::ResumeRejected {
        reason: reason.to_owned(),
    };
    let id = cli
        .session_id
        .as_deref()
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(keel_core::emit::new_uuid);
    let frame = keel_core::wire::result_before_start(&id, &end);
    if cli.output_format != OutputFormat::Text {
        printer::print_frame(&frame);
    }
}

/// Interrupt the session on SIGINT (the user) or SIGTERM (shutdown). The task ends after the
/// first signal; abort it when the run is over.
pub fn spawn_signal_handler(handle: keel_core::SessionHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(reason) = crate::signals::next().await else {
            return;
        };
        let receipt = handle.interrupt_with(reason).await;
        tracing::info!("interrupted: {receipt:?}");
    })
}

/// Validate flags, run one prompt headless, and return the exit code. Usage errors return `Err`.
pub async fn run(cli: Cli, inputs: RunInputs) -> Result<i32, UsageError> {
    for notice in cli.compat.notices(cli.input_format) {
        eprintln!("{notice}");
    }
    let heartbeat = printer::heartbeat_from_env(&*inputs.env).map_err(UsageError)?;
    let (
        Built {
            mut session,
            events,
            ..
        },
        mirror,
    ) = match build(&cli, inputs).await {
        Ok(b) => b,
        Err(code) => return Ok(code),
    };
    let prompt = read_prompt(&cli)?;
    // Only what can fail the session: the printer must not keep the session (and so its
    // event channel) alive.
    let failer = session.handle().failer();
    let printer = tokio::spawn(printer::print(
        events,
        None,
        mirror,
        cli.output_format,
        cli.verbose,
        Some(Box::new(move |why| failer.fail(why))),
        heartbeat,
    ));
    let signals = spawn_signal_handler(session.handle());
    let end = session.run_turn(vec![ContentBlock::text(prompt)]).await;
    // Listen before the turn's handler goes, so no signal falls between the two.
    let stops = crate::signals::Stops::install();
    signals.abort();
    let killed = crate::signals::shutdown(&session, stops).await;
    if killed > 0 {
        tracing::info!("stopped {killed} leftover process group(s) at exit");
    }
    drop(session); // closes the event channel, so the printer finishes
    let printed = printer.await.unwrap_or_default();
    Ok(finish(&end, &printed, cli.output_format))
}

/// The exit code, and the one clear stderr line of a failed run.
pub(crate) fn finish(end: &TurnEnd, printed: &printer::Printed, format: OutputFormat) -> i32 {
    if let Some(e) = &printed.write_error {
        eprintln!("keel: {e}");
        return 1;
    }
    let code = end.exit_code();
    if code != 0 {
        let text = end.result_text();
        match format {
            OutputFormat::Text => eprintln!("{text}"),
            _ => eprintln!(
                "keel: {} ({}, exit {code})",
                first_line(&text),
                end.terminal_reason().as_str()
            ),
        }
    }
    code
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn read_prompt(cli: &Cli) -> Result<String, UsageError> {
    let missing = || {
        UsageError("Error: Input must be provided either through stdin or as a prompt argument when using --print".into())
    };
    if let Some(p) = &cli.prompt {
        if !p.trim().is_empty() {
            return Ok(p.clone());
        }
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(missing());
    }
    let mut s = String::new();
    stdin
        .lock()
        .read_to_string(&mut s)
        .map_err(|e| UsageError(format!("Error: could not read the prompt from stdin: {e}")))?;
    if s.trim().is_empty() {
        return Err(missing());
    }
    Ok(s)
}

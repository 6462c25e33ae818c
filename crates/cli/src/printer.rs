//! Headless printers: text, json, stream-json. They consume the session's frames.

use std::io::Write;

use keel_protocol::Frame;
use tokio::sync::mpsc;

use crate::args::OutputFormat;

/// What the printer saw, for the exit path.
#[derive(Debug, Default)]
pub struct Printed {
    /// The last result frame.
    pub result: Option<keel_protocol::ResultFrame>,
    /// Set when writing to stdout failed.
    pub write_error: Option<String>,
}

/// Print frames until the channel closes.
pub async fn print(mut rx: mpsc::Receiver<Frame>, format: OutputFormat, verbose: bool) -> Printed {
    let mut out = Printed::default();
    let mut all: Vec<Frame> = Vec::new();
    let stdout = std::io::stdout();
    while let Some(frame) = rx.recv().await {
        if let Frame::Result(r) = &frame {
            out.result = Some(r.clone());
        }
        if out.write_error.is_some() {
            continue; // keep draining so the session never blocks on a dead printer
        }
        let res = match format {
            OutputFormat::StreamJson => {
                let mut lock = stdout.lock();
                serde_json::to_writer(&mut lock, &frame)
                    .map_err(std::io::Error::other)
                    .and_then(|_| lock.write_all(b"\n"))
                    .and_then(|_| lock.flush())
            }
            OutputFormat::Json if verbose => {
                all.push(frame);
                Ok(())
            }
            OutputFormat::Json | OutputFormat::Text => Ok(()),
        };
        if let Err(e) = res {
            out.write_error = Some(format!("writing to stdout failed: {e}"));
        }
    }
    let res = match (format, &out.result) {
        (OutputFormat::Json, _) if verbose => {
            write_line(&serde_json::to_string(&all).unwrap_or_default())
        }
        (OutputFormat::Json, Some(r)) => {
            write_line(&serde_json::to_string(&Frame::Result(r.clone())).unwrap_or_default())
        }
        (OutputFormat::Text, Some(r)) if !r.is_error => {
            write_line(r.result.as_deref().unwrap_or(""))
        }
        _ => Ok(()),
    };
    if let Err(e) = res {
        out.write_error
            .get_or_insert(format!("writing to stdout failed: {e}"));
    }
    out
}

fn write_line(s: &str) -> std::io::Result<()> {
    let mut lock = std::io::stdout().lock();
    lock.write_all(s.as_bytes())?;
    lock.write_all(b"\n")?;
    lock.flush()
}

//! A program in a pseudo-terminal, drawing on a terminal emulator (vt100): what the
//! interactive tests and the interactive benchmark drive keel with. Keys are written to the
//! terminal as a keyboard would; waits are on what the screen shows, with a deadline.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

/// How long a wait may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What the terminal received: the emulator's state and the raw bytes.
pub struct Term {
    pub parser: vt100::Parser,
    pub raw: Vec<u8>,
    /// The width at the start, and each resize: where in `raw` it happened and the new width.
    widths: Vec<(usize, u16)>,
}

/// keel running in a pseudo-terminal.
pub struct Tty {
    pub term: Arc<Mutex<Term>>,
    writer: Box<dyn Write + Send>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Tty {
    /// Start `cmd` on a new pseudo-terminal of `rows` × `cols`.
    pub fn spawn(cmd: CommandBuilder, rows: u16, cols: u16) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let child = pair.slave.spawn_command(cmd).expect("keel starts");
        drop(pair.slave);
        let term = Arc::new(Mutex::new(Term {
            parser: vt100::Parser::new(rows, cols, 0),
            raw: Vec::new(),
            widths: vec![(0, cols)],
        }));
        let mut reader = pair.master.try_clone_reader().expect("a reader");
        let t = term.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut g = t.lock().unwrap();
                g.parser.process(&buf[..n]);
                g.raw.extend_from_slice(&buf[..n]);
            }
        });
        let writer = pair.master.take_writer().expect("a writer");
        Self {
            term,
            writer,
            master: pair.master,
            child,
        }
    }

    pub fn send(&mut self, s: &str) {
        self.writer.write_all(s.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    pub fn screen(&self) -> String {
        self.term.lock().unwrap().parser.screen().contents()
    }

    pub fn raw_len(&self) -> usize {
        self.term.lock().unwrap().raw.len()
    }

    pub fn raw_since(&self, from: usize) -> String {
        String::from_utf8_lossy(&self.term.lock().unwrap().raw[from..]).into_owned()
    }

    /// Everything the terminal would hold, scrollback and screen: the same bytes replayed on a
    /// screen tall enough that nothing scrolls off it (keel draws with relative moves only, so
    /// what it wrote twice, or erased, shows the same there), resized where the real one was.
    pub fn history(&self) -> String {
        let g = self.term.lock().unwrap();
        let mut tall = vt100::Parser::new(5000, g.widths[0].1, 0);
        let mut at = 0;
        for &(offset, cols) in &g.widths[1..] {
            tall.process(&g.raw[at..offset]);
            tall.set_size(5000, cols);
            at = offset;
        }
        tall.process(&g.raw[at..]);
        tall.screen().contents()
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        {
            let mut g = self.term.lock().unwrap();
            g.parser.set_size(rows, cols);
            let at = g.raw.len();
            g.widths.push((at, cols));
        }
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
    }

    pub async fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                let raw = self.term.lock().unwrap().raw.clone();
                let tail =
                    String::from_utf8_lossy(&raw[raw.len().saturating_sub(1500)..]).into_owned();
                panic!("the screen never showed {what}; it shows:\n{s}\nthe last bytes the terminal got:\n{tail:?}");
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }

    pub async fn wait_text(&self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text)).await
    }

    /// Wait until the UI is idle at the prompt (no turn running).
    pub async fn wait_idle(&self) -> String {
        self.wait_for("an idle prompt", |s| {
            !s.contains("esc to interrupt")
                && !s.contains("Stopping…")
                && s.contains("claude-sonnet-4-5 · ")
        })
        .await
    }

    pub async fn exit(mut self) -> u32 {
        // Ctrl+U empties the prompt (Ctrl+C on a prompt with text clears it instead).
        self.send("\x15");
        self.send("\x03");
        self.send("\x03");
        // Leaving takes a moment (the transcript is synced to disk, which on a machine busy
        // writing can take seconds); a minute means keel hung on the way out.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("keel did not exit on Ctrl+C twice:\n{}", self.screen());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

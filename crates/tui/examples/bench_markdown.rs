//! How long the TUI's streamed markdown takes, on the inputs that could make it slow.
//!
//! `cargo run --release -p keel-tui --example bench_markdown`
//!
//! - one line of 50,000 / 100,000 / 200,000 / 400,000 characters of each markdown opener
//!   (`[`, `*`, a backtick, `<`, and mixed forms), through the streaming path: the time should
//!   double with the length (linear), not quadruple;
//! - a 2,000-line reply streamed line by line (a code block, a list, paragraphs), as the
//!   view renders it: the time per line should stay flat as the reply grows.

use std::time::{Duration, Instant};

use keel_tui::markdown::Markdown;

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// One long line, arriving in 20-character pieces, committed at its newline.
fn one_line(line: &str) {
    let mut md = Markdown::default();
    let mut partial = String::new();
    let chars: Vec<char> = line.chars().collect();
    for piece in chars.chunks(20) {
        partial.extend(piece);
    }
    let out = md.line(&partial);
    let rest = md.finish();
    std::hint::black_box((out, rest));
}

/// `lines` streamed one line at a time; the time per line.
fn streamed(lines: &[String]) -> Duration {
    let t = Instant::now();
    let mut md = Markdown::default();
    for l in lines {
        std::hint::black_box(md.line(l));
    }
    std::hint::black_box(md.finish());
    t.elapsed() / lines.len().max(1) as u32
}

fn main() {
    println!("one line of N characters (median of 5, ms)");
    println!(
        "{:<8} {:>9} {:>9} {:>9} {:>9}",
        "pattern", "50k", "100k", "200k", "400k"
    );
    for pattern in ["[", "*", "`", "<", "[a", "*a ", "a`", "<a ", "[](", "**a"] {
        let mut row = format!("{:<8}", format!("{pattern:?}"));
        for n in [50_000, 100_000, 200_000, 400_000] {
            let line = pattern.repeat(n / pattern.len());
            let d = median(5, || one_line(&line));
            row.push_str(&format!(" {:>9.1}", d.as_secs_f64() * 1000.0));
        }
        println!("{row}");
    }

    println!();
    println!("a reply streamed line by line (µs per line)");
    println!("{:<12} {:>9} {:>9} {:>9}", "reply", "500", "1,000", "2,000");
    type Gen = fn(usize) -> String;
    let kinds: [(&str, Gen); 3] = [
        ("code block", |i| {
            if i == 0 {
                "```rust".into()
            } else {
                format!("    let value_{i} = compute(\"input {i}\", {i}); // note")
            }
        }),
        ("list", |i| format!("- item {i} with **bold** and `code`")),
        ("paragraphs", |i| {
            if i % 2 == 0 {
                format!("Paragraph {i} says something *useful* here.")
            } else {
                String::new()
            }
        }),
    ];
    for (name, gen) in kinds {
        let mut row = format!("{name:<12}");
        for n in [500, 1_000, 2_000] {
            let lines: Vec<String> = (0..n).map(gen).collect();
            let d = streamed(&lines);
            row.push_str(&format!(" {:>9.1}", d.as_secs_f64() * 1e6));
        }
        println!("{row}");
    }
}

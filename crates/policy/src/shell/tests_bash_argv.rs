//! A property of the read-only judgement, checked against bash itself: for generated command
//! lines over read-only programs, with literal words and words bash expands (variables with
//! hostile values, globs over hostile file names, brace lists, substitutions), whenever keel
//! calls a line read-only, the argv bash really passes the program is one keel would also call
//! read-only had it seen it literally, and holds every word keel knew, in order.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// Programs the generator uses (each replaced, first on `PATH`, by a script that records its
/// argv), with words that are their flags or operands.
const PROGRAMS: &[(&str, &[&str])] = &[
    ("sort", &["-n", "-r", "-k2", "-o", "out", "f.txt", "--"]),
    ("cat", &["-n", "f.txt", "--", "-A"]),
    ("head", &["-n", "5", "-5", "f.txt", "--"]),
    ("grep", &["-n", "-e", "foo", "-r", "f.txt", "--"]),
    ("rg", &["-n", "-e", "foo", "f.txt", "--"]),
    ("ls", &["-la", "-d", ".", "--"]),
    ("wc", &["-l", "f.txt", "--"]),
    ("uniq", &["-c", "f.txt", "--"]),
    (
        "find",
        &[".", "-name", "-type", "f", "-maxdepth", "1", "-print"],
    ),
    ("git", &["diff", "log", "--stat", "--", "f.txt", "-p"]),
];

/// Words bash expands at run time.
const DYNAMIC: &[&str] = &[
    "$X",
    "\"$X\"",
    "./$X",
    "\"./$X\"",
    "$Y",
    "\"$Y\"",
    "*",
    "./*",
    "*.txt",
    "./*.txt",
    "{-o,x}",
    "x{a,b}",
    "$(echo -o x)",
    "\"$(echo -n)\"",
    "~-",
];

/// Values given to `X` and `Y`, as an attacker would choose them.
const VALUES: &[&str] = &[
    "-opwned",
    "a -opwned",
    "",
    "--output=pwned",
    "-exec touch pwned ;",
    "--pre=./e",
    "f.txt",
    "-n",
    "x y",
];

/// File names in the directory the lines run in (what globs expand to).
const FILES: &[&str] = &[
    "f.txt",
    "-opwned.txt",
    "--pre=e",
    "(",
    "!",
    "-delete",
    "a b",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: small, seeded, reproducible.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn line(rng: &mut Rng) -> String {
    let (prog, words) = PROGRAMS[(rng.next() % PROGRAMS.len() as u64) as usize];
    let mut s = format!(
        "X='{}'; Y='{}'; OLDPWD='{}'; {prog}",
        rng.pick(VALUES),
        rng.pick(VALUES),
        rng.pick(VALUES)
    );
    let n = 1 + rng.next() % 4;
    for _ in 0..n {
        s.push(' ');
        if rng.next().is_multiple_of(2) {
            s.push_str(rng.pick(words));
        } else {
            s.push_str(rng.pick(DYNAMIC));
        }
    }
    s
}

fn quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// Whether `small` is a subsequence of `big`.
fn subsequence(small: &[&str], big: &[String]) -> bool {
    let mut it = big.iter();
    small.iter().all(|w| it.any(|b| b == w))
}

#[test]
fn bash_passes_only_what_keel_judged_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    for f in FILES {
        std::fs::write(work.join(f), "x\n").unwrap();
    }
    let log = dir.path().join("log");
    let stub = format!(
        "#!/bin/sh\n{{ printf '%s\\037' \"$CASE\" \"$(basename \"$0\")\"; for a in \"$@\"; do printf '%s\\037' \"$a\"; done; printf '\\036'; }} >> '{}'\n",
        log.display()
    );
    for (p, _) in PROGRAMS {
        let path = bin.join(p);
        std::fs::write(&path, &stub).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut judged: Vec<(String, Vec<String>)> = Vec::new();
    let mut script = String::new();
    let mut generated = 0;
    while generated < 2500 {
        generated += 1;
        let l = line(&mut rng);
        let lowered = lower(&l, &work, &ShellEnv::default());
        if !(lowered.understood()
            && lowered.commands.len() == 1
            && readonly::judge(&lowered.commands[0]).is_ok())
        {
            continue;
        }
        let known: Vec<String> = lowered.commands[0]
            .argv
            .iter()
            .filter_map(|a| a.lit().map(str::to_owned))
            .collect();
        script.push_str(&format!("export CASE={}; ( {l} )\n", judged.len()));
        judged.push((l, known));
    }
    assert!(
        judged.len() >= 300,
        "too few generated lines were judged read-only ({}) for the check to mean much",
        judged.len()
    );
    eprintln!(
        "{} of {generated} generated lines judged read-only",
        judged.len()
    );
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("bash runs (keel's Bash tool needs it)");
    let _ = status;
    let raw = std::fs::read_to_string(&log).unwrap_or_default();
    let mut ran: Vec<Vec<String>> = vec![Vec::new(); judged.len()];
    let mut seen = vec![false; judged.len()];
    for rec in raw.split('\u{1e}').filter(|r| !r.is_empty()) {
        let mut parts = rec.split('\u{1f}');
        let case: usize = parts.next().unwrap().parse().unwrap();
        let argv: Vec<String> = parts.map(str::to_owned).collect();
        // The last separator leaves one empty piece after the final word.
        let argv = argv[..argv.len() - 1].to_vec();
        ran[case] = argv;
        seen[case] = true;
    }
    let mut wrong = Vec::new();
    for (i, (l, known)) in judged.iter().enumerate() {
        if !seen[i] {
            wrong.push(format!("{l:?}: the program never ran"));
            continue;
        }
        let argv = &ran[i];
        let literal: Vec<String> = argv.iter().map(|w| quote(w)).collect();
        let as_literal = literal.join(" ");
        if !is_read_only_command(&as_literal) {
            wrong.push(format!(
                "{l:?}: bash ran {argv:?}, which keel would not call read-only"
            ));
        }
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        if !subsequence(&known, argv) {
            wrong.push(format!(
                "{l:?}: bash ran {argv:?}, which lacks words keel knew {known:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} lines disagree:\n{}",
        wrong.len(),
        judged.len(),
        wrong.join("\n")
    );
}

//! `keel permissions check -- COMMAND`: how keel reads a Bash command line and what it would
//! decide, under the rules of this directory's settings files and the flags given — for
//! users writing rules.

use clap::Parser;
use keel_core::builder::options::{parse_permission_mode, parse_rules, OptionError};
use keel_core::builder::{SessionBuilder, SessionOptions};
use keel_core::permissions::{Decision, Judgement, PathUse};

/// `keel permissions check` flags.
#[derive(Debug, Parser)]
#[command(
    name = "keel permissions check",
    about = "Show how a Bash command is parsed, lowered to the commands it runs, and judged by the permission rules (settings files and the flags below). Exit 0: it would run without asking; 1: it would be asked about (denied when headless); 3: a deny rule stops it."
)]
struct CheckCli {
    /// Allow rules, as for `keel -p`.
    #[arg(long = "allowedTools", alias = "allowed-tools", num_args = 1..)]
    allowed_tools: Vec<String>,
    /// Deny rules, as for `keel -p`.
    #[arg(long = "disallowedTools", alias = "disallowed-tools", num_args = 1..)]
    disallowed_tools: Vec<String>,
    /// The permission mode.
    #[arg(long = "permission-mode")]
    permission_mode: Option<String>,
    /// A settings file or JSON, as for `keel -p`.
    #[arg(long)]
    settings: Option<String>,
    /// Which settings files to read (user,project,local).
    #[arg(long = "setting-sources")]
    setting_sources: Option<String>,
    /// Directories where edits are allowed as in the working directory.
    #[arg(long = "add-dir", num_args = 1..)]
    add_dir: Vec<std::path::PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The command line, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// The session options the check's flags ask for (parsed as `keel -p` parses them).
fn check_options(cli: &CheckCli) -> Result<SessionOptions, OptionError> {
    Ok(SessionOptions {
        allowed_tools: parse_rules(&cli.allowed_tools)?,
        disallowed_tools: parse_rules(&cli.disallowed_tools)?,
        permission_mode: cli
            .permission_mode
            .as_deref()
            .map(parse_permission_mode)
            .transpose()?,
        settings: cli.settings.clone(),
        setting_sources: cli
            .setting_sources
            .as_deref()
            .map(str::parse)
            .transpose()?
            .unwrap_or_default(),
        add_dirs: cli.add_dir.clone(),
        ..SessionOptions::default()
    })
}

/// Run `keel permissions ARGS`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some("check") => {}
        _ => {
            eprintln!("Usage: keel permissions check [--allowedTools R…] [--disallowedTools R…] [--permission-mode M] [--settings F] -- COMMAND");
            return 2;
        }
    }
    let argv =
        std::iter::once("keel permissions check".to_owned()).chain(args[1..].iter().cloned());
    let cli: CheckCli = match crate::parse_args(argv) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let cwd = match crate::working_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let options = match check_options(&cli) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("Error: {e}");
            return 2;
        }
    };
    let perms = match SessionBuilder::new(&cwd)
        .options(options)
        .permission_config()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let command = cli.command.join(" ");
    let (decision, judgement) = perms.explain_bash(&command);
    let paths = perms.path_uses(&judgement);
    let (verdict, code, detail) = match &decision {
        Decision::Allow(by) => ("allow", 0, format!("{by:?}")),
        Decision::Deny { message } => ("deny", 3, message.clone()),
        Decision::Ask => ("ask", 1, String::new()),
        Decision::AskWhy(why) => ("ask", 1, why.clone()),
    };
    let mode = perms.mode.as_str();
    if cli.json {
        print_json(&command, mode, &judgement, &paths, verdict, &detail);
    } else {
        print_text(&command, mode, &judgement, &paths, verdict, &detail);
    }
    code
}

/// The `--json` answer: the command's parts, what each reads or writes, and the decision.
fn print_json(
    command: &str,
    mode: &str,
    judgement: &Judgement,
    paths: &[PathUse],
    verdict: &str,
    detail: &str,
) {
    let commands: Vec<serde_json::Value> = judgement
        .lowered
        .commands
        .iter()
        .zip(&judgement.readonly)
        .map(|(c, ro)| {
            serde_json::json!({
                "only_reads": ro.is_ok(),
                "not_read_only_because": ro.as_ref().err().map(ToString::to_string),
                "argv": c.argv.iter().map(|a| a.text()).collect::<Vec<_>>(),
                "wrappers": c.wrappers.iter().map(|w| w.iter().map(|a| a.text()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "assigns": c.assigns,
                "writes": c.redirects.iter().filter(|r| r.write).map(|r| r.target.text()).collect::<Vec<_>>(),
                "background": c.background,
            })
        })
        .collect();
    let v = serde_json::json!({
        "command": command,
        "mode": mode,
        "commands": commands,
        "not_understood": judgement.problems(),
        "read_only": judgement.read_only(),
        "parts": judgement.parts,
        "paths": paths.iter().map(|p| serde_json::json!({
            "access": if p.writes { "write" } else { "read" },
            "word": p.word,
            "resolved": p.resolved.as_ref().map(|r| r.display().to_string()),
            "inside_project": p.inside,
            "broken": p.broken,
        })).collect::<Vec<_>>(),
        "decision": verdict,
        "detail": detail,
    });
    println!("{v}");
}

/// The answer for people: what runs, what is read-only, the files, the rules, the decision.
fn print_text(
    command: &str,
    mode: &str,
    judgement: &Judgement,
    paths: &[PathUse],
    verdict: &str,
    detail: &str,
) {
    println!("command:   {command:?}");
    println!("mode:      {mode}");
    println!("runs:");
    for (c, ro) in judgement.lowered.commands.iter().zip(&judgement.readonly) {
        match ro {
            Ok(_) => println!("  - {}  (only reads)", c.display_full()),
            Err(why) => println!("  - {}  (not read-only: {why})", c.display_full()),
        }
    }
    for p in judgement.problems() {
        println!("not understood: {p}");
    }
    println!(
        "read-only: {}",
        if judgement.read_only() {
            "yes (runs beside other read-only calls)"
        } else {
            "no (runs on its own)"
        }
    );
    if !paths.is_empty() {
        println!("files:");
        for p in paths {
            println!("{}", path_line(p));
        }
    }
    println!("judged:");
    for p in &judgement.parts {
        println!("  - {p}");
    }
    println!(
        "decision:  {verdict}{}",
        if detail.is_empty() {
            String::new()
        } else {
            format!(" — {detail}")
        }
    );
}

/// One file a command reads or writes, and where it resolves to.
fn path_line(p: &PathUse) -> String {
    let verb = if p.writes { "writes" } else { "reads " };
    let to = match (&p.resolved, &p.broken) {
        (_, Some(why)) => format!("cannot be resolved ({why})"),
        (Some(r), None) => format!(
            "{}{}",
            r.display(),
            if p.inside {
                ""
            } else {
                "  (outside the project)"
            }
        ),
        (None, None) => "not known before it runs".to_owned(),
    };
    format!("  - {verb} {:?} -> {to}", p.word)
}

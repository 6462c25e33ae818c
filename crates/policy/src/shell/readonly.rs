//! Which commands only read: an allow-list of programs and, for each, every flag it may use.
//! A command is read-only only if its program and every flag it uses are on this list;
//! anything else (an unknown flag, a flag that writes or runs a program) needs permission.

use super::command::dangerous_var;
use super::command::LoweredCommand;
pub use super::why::NotReadOnly;
use super::words::{Arg, Expansion};

/// How a program's positional arguments are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pos {
    /// They are text, not files (`echo`).
    Text,
    /// They name files or directories it reads.
    Paths,
    /// The first is a pattern (unless `-e`/`-f` gave one), the rest are paths (`grep`, `rg`).
    PatternThenPaths,
    /// At most this many, all paths (`uniq in` — a second would be written).
    AtMostPaths(usize),
    /// None allowed.
    Zero,
}

/// One program on the list.
struct Spec {
    program: &'static str,
    /// Short flags without a value; they may be combined (`-la`).
    flags: &'static str,
    /// Short flags that take a value (`-n 5`, `-n5`).
    valued: &'static str,
    /// Long flags without a value (`--all`).
    long: &'static [&'static str],
    /// Long flags that take a value (`--max-count 5`, `--max-count=5`).
    long_valued: &'static [&'static str],
    /// `-20` means a count (`head -20`).
    numeric: bool,
    pos: Pos,
    /// It reads directories given to it recursively (always, or with one of these flags).
    recursive: Recursive,
}

#[derive(Clone, Copy)]
enum Recursive {
    Never,
    Always,
    With(&'static [&'static str]),
}

const fn spec(program: &'static str, flags: &'static str, valued: &'static str, pos: Pos) -> Spec {
    Spec {
        program,
        flags,
        valued,
        long: &[],
        long_valued: &[],
        numeric: false,
        pos,
        recursive: Recursive::Never,
    }
}

/// The list. Each entry is covered by the table tests at the bottom of this file.
static SPECS: &[Spec] = &[
    spec("echo", "neE", "", Pos::Text),
    spec("printf", "", "", Pos::Text),
    spec("pwd", "LP", "", Pos::Zero),
    spec("true", "", "", Pos::Text),
    spec("false", "", "", Pos::Text),
    spec("whoami", "", "", Pos::Zero),
    spec("id", "ugGnrz", "", Pos::Text),
    spec("uname", "asnrvmpio", "", Pos::Zero),
    spec("nproc", "", "", Pos::Zero),
    spec("printenv", "0", "", Pos::Text),
    spec("hostname", "fsidA", "", Pos::Zero),
    spec("basename", "az", "s", Pos::Text),
    spec("dirname", "z", "", Pos::Text),
    spec("test", "", "", Pos::Text),
    spec("[", "", "", Pos::Text),
    spec("seq", "w", "fs", Pos::Text),
    spec("sleep", "", "", Pos::Text),
    Spec {
        long: &[
            "all",
            "almost-all",
            "human-readable",
            "recursive",
            "reverse",
            "size",
            "classify",
            "directory",
            "dereference",
            "numeric-uid-gid",
            "inode",
            "group-directories-first",
            "full-time",
            "si",
            "no-group",
            "literal",
            "quote-name",
            "escape",
        ],
        long_valued: &[
            "color",
            "sort",
            "time-style",
            "format",
            "time",
            "indicator-style",
            "block-size",
            "width",
            "ignore",
            "hide",
            "quoting-style",
        ],
        recursive: Recursive::Never,
        ..spec(
            "ls",
            "aAbBcCdfFgGhHiklLmnNopqQrRsStuUvxX1Z",
            "wITD",
            Pos::Paths,
        )
    },
    Spec {
        long: &[
            "number",
            "number-nonblank",
            "show-all",
            "show-ends",
            "squeeze-blank",
            "show-tabs",
            "show-nonprinting",
        ],
        ..spec("cat", "nbAeEsStTvu", "", Pos::Paths)
    },
    Spec {
        long: &["quiet", "silent", "verbose", "zero-terminated"],
        long_valued: &["lines", "bytes"],
        numeric: true,
        ..spec("head", "qvz", "nc", Pos::Paths)
    },
    Spec {
        long: &[
            "quiet",
            "silent",
            "verbose",
            "zero-terminated",
            "follow",
            "retry",
        ],
        long_valued: &[
            "lines",
            "bytes",
            "pid",
            "sleep-interval",
            "max-unchanged-stats",
        ],
        numeric: true,
        ..spec("tail", "qvzfFr", "ncs", Pos::Paths)
    },
    Spec {
        long: &["lines", "words", "bytes", "chars", "max-line-length"],
        ..spec("wc", "lwcmL", "", Pos::Paths)
    },
    Spec {
        long: &[
            "summarize",
            "human-readable",
            "all",
            "total",
            "si",
            "one-file-system",
            "apparent-size",
            "bytes",
            "dereference",
            "count-links",
        ],
        long_valued: &["max-depth", "block-size", "exclude", "threshold", "time"],
        ..spec("du", "shackmxLlbD0", "dBt", Pos::Paths)
    },
    Spec {
        long: &[
            "human-readable",
            "print-type",
            "inodes",
            "all",
            "local",
            "portability",
            "si",
            "total",
        ],
        long_valued: &["type", "exclude-type", "output", "block-size"],
        ..spec("df", "hTikalPH", "tx", Pos::Paths)
    },
    Spec {
        long: &["dereference", "file-system", "terse"],
        long_valued: &["format", "printf"],
        ..spec("stat", "Lft", "c", Pos::Paths)
    },
    Spec {
        long: &[
            "brief",
            "mime",
            "mime-type",
            "mime-encoding",
            "dereference",
            "no-dereference",
            "uncompress",
            "keep-going",
            "no-pad",
            "print0",
        ],
        long_valued: &["separator"],
        ..spec("file", "biLhzkN0", "F", Pos::Paths)
    },
    spec("which", "as", "", Pos::Text),
    Spec {
        long: &[
            "canonicalize",
            "canonicalize-existing",
            "canonicalize-missing",
            "no-newline",
            "quiet",
            "silent",
            "verbose",
            "zero",
        ],
        ..spec("readlink", "femnqsvz", "", Pos::Paths)
    },
    Spec {
        long: &[
            "canonicalize-existing",
            "canonicalize-missing",
            "logical",
            "physical",
            "quiet",
            "strip",
            "no-symlinks",
            "zero",
        ],
        long_valued: &["relative-to", "relative-base"],
        ..spec("realpath", "emLPqsz", "", Pos::Paths)
    },
    Spec {
        long: &["complement", "only-delimited", "zero-terminated"],
        long_valued: &[
            "delimiter",
            "fields",
            "characters",
            "bytes",
            "output-delimiter",
        ],
        ..spec("cut", "sznw", "dfcb", Pos::Paths)
    },
    Spec {
        long: &["complement", "delete", "squeeze-repeats", "truncate-set1"],
        ..spec("tr", "cCdst", "", Pos::Text)
    },
    Spec {
        long: &["utc", "universal", "rfc-email", "debug"],
        long_valued: &["date", "iso-8601", "rfc-3339", "reference", "resolution"],
        ..spec("date", "uRI", "dr", Pos::Text)
    },
    Spec {
        long: &[
            "ignore-leading-blanks",
            "dictionary-order",
            "ignore-case",
            "general-numeric-sort",
            "human-numeric-sort",
            "ignore-nonprinting",
            "month-sort",
            "numeric-sort",
            "random-sort",
            "reverse",
            "version-sort",
            "check",
            "merge",
            "stable",
            "unique",
            "zero-terminated",
            "debug",
        ],
        long_valued: &[
            "key",
            "field-separator",
            "sort",
            "buffer-size",
            "parallel",
            "random-source",
        ],
        ..spec("sort", "bdfghiMnRrVcCmsuz", "ktS", Pos::Paths)
    },
    Spec {
        long: &[
            "count",
            "repeated",
            "ignore-case",
            "unique",
            "zero-terminated",
            "all-repeated",
            "group",
        ],
        long_valued: &["skip-fields", "skip-chars", "check-chars"],
        ..spec("uniq", "cdDiuz", "fsw", Pos::AtMostPaths(1))
    },
    Spec {
        long: &[
            "recursive",
            "dereference-recursive",
            "line-number",
            "ignore-case",
            "no-ignore-case",
            "files-with-matches",
            "files-without-match",
            "count",
            "invert-match",
            "word-regexp",
            "line-regexp",
            "extended-regexp",
            "fixed-strings",
            "basic-regexp",
            "perl-regexp",
            "only-matching",
            "quiet",
            "silent",
            "no-messages",
            "no-filename",
            "with-filename",
            "text",
            "null",
            "null-data",
            "byte-offset",
            "initial-tab",
            "line-buffered",
        ],
        long_valued: &[
            "regexp",
            "file",
            "include",
            "exclude",
            "exclude-dir",
            "exclude-from",
            "color",
            "colour",
            "max-count",
            "context",
            "after-context",
            "before-context",
            "binary-files",
            "label",
            "devices",
            "directories",
        ],
        numeric: true,
        recursive: Recursive::With(&["-r", "-R", "--recursive", "--dereference-recursive"]),
        ..spec(
            "grep",
            "rRniylLcvwxEFGPoqsHhaIzZbTU",
            "efmABCdD",
            Pos::PatternThenPaths,
        )
    },
    Spec {
        long: &[
            "line-number",
            "no-line-number",
            "ignore-case",
            "smart-case",
            "case-sensitive",
            "files-with-matches",
            "files-without-match",
            "count",
            "count-matches",
            "invert-match",
            "word-regexp",
            "line-regexp",
            "fixed-strings",
            "only-matching",
            "quiet",
            "hidden",
            "no-ignore",
            "no-ignore-vcs",
            "no-ignore-dot",
            "files",
            "no-heading",
            "heading",
            "column",
            "vimgrep",
            "json",
            "multiline",
            "multiline-dotall",
            "follow",
            "null",
            "trim",
            "stats",
            "type-list",
            "pcre2",
            "no-messages",
            "with-filename",
            "no-filename",
            "byte-offset",
            "unrestricted",
            "crlf",
            "text",
            "binary",
            "one-file-system",
            "passthru",
            "no-config",
            "debug",
        ],
        long_valued: &[
            "regexp",
            "file",
            "glob",
            "iglob",
            "type",
            "type-not",
            "max-count",
            "max-depth",
            "context",
            "after-context",
            "before-context",
            "color",
            "colors",
            "sort",
            "sortr",
            "max-columns",
            "max-filesize",
            "threads",
            "replace",
            "field-match-separator",
            "path-separator",
            "engine",
            "encoding",
            "context-separator",
        ],
        numeric: true,
        recursive: Recursive::Always,
        ..spec(
            "rg",
            "nNiSslcvwxFoqLuU.HIabP",
            "efgtTmABCjMr",
            Pos::PatternThenPaths,
        )
    },
    Spec {
        long: &[
            "brief",
            "report-identical-files",
            "recursive",
            "new-file",
            "unidirectional-new-file",
            "ignore-case",
            "ignore-all-space",
            "ignore-space-change",
            "ignore-blank-lines",
            "text",
            "side-by-side",
            "suppress-common-lines",
            "expand-tabs",
            "minimal",
            "no-dereference",
            "strip-trailing-cr",
        ],
        long_valued: &[
            "unified",
            "context",
            "color",
            "exclude",
            "label",
            "width",
            "from-file",
            "to-file",
            "ignore-matching-lines",
        ],
        recursive: Recursive::With(&["-r", "--recursive"]),
        ..spec("diff", "uqsrNiwbBaycdtT", "UCxIW", Pos::Paths)
    },
    spec("cmp", "blsz", "in", Pos::Paths),
    spec("comm", "123z", "", Pos::Paths),
    Spec {
        long: &["noreport", "gitignore", "dirsfirst", "du"],
        long_valued: &["charset", "filelimit", "sort", "timefmt"],
        ..spec("tree", "adfilpsughDFqNQrtvxACJ", "LIP", Pos::Paths)
    },
    Spec {
        long: &[
            "raw-output",
            "join-output",
            "compact-output",
            "sort-keys",
            "slurp",
            "null-input",
            "exit-status",
            "tab",
            "ascii-output",
            "raw-input",
            "color-output",
            "monochrome-output",
            "seq",
            "stream",
        ],
        long_valued: &[
            "indent",
            "arg",
            "argjson",
            "slurpfile",
            "rawfile",
            "args",
            "jsonargs",
        ],
        ..spec("jq", "rjcSsneaCMR", "", Pos::PatternThenPaths)
    },
    Spec {
        long: &["number-nonblank"],
        ..spec("nl", "p", "bdfhilnsvw", Pos::Paths)
    },
    spec("md5sum", "bctwz", "", Pos::Paths),
    spec("sha256sum", "bctwz", "", Pos::Paths),
    spec("sha1sum", "bctwz", "", Pos::Paths),
    spec("cd", "LPe", "", Pos::Paths),
    spec(":", "", "", Pos::Text),
];

/// Every program the read-only list knows (the table, and those with their own checker),
/// so that the table tests can show each one is covered.
#[cfg(test)]
pub(super) fn programs() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = SPECS.iter().map(|s| s.program).collect();
    v.extend(["find", "sed", "tar", "git"]);
    v
}

/// The verdict on one lowered command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOnly {
    /// Every word that may name a file it reads (positionals and file-valued flags, and
    /// input redirections), for checks against Read deny rules.
    pub reads: Vec<Arg>,
    /// It reads directories among `reads` recursively (`grep -r`, `rg`).
    pub recursive: bool,
}

/// Whether `cmd` only reads; `Err` says why not.
pub fn judge(cmd: &LoweredCommand) -> Result<ReadOnly, NotReadOnly> {
    let prog = cmd.program().ok_or(NotReadOnly::DynamicProgram)?;
    if let Some(w) = cmd.wrappers.first() {
        let name = w.first().map(Arg::text).unwrap_or("");
        return Err(NotReadOnly::Wrapped {
            wrapper: name.to_owned(),
        });
    }
    if let Some(v) = cmd.assigns.iter().find(|v| dangerous_var(v)) {
        return Err(NotReadOnly::SetsVariable { name: v.clone() });
    }
    if cmd.background {
        return Err(NotReadOnly::Background);
    }
    if cmd.more_args {
        return Err(NotReadOnly::DynamicArguments);
    }
    if let Some(r) = cmd.redirects.iter().find(|r| r.write && !r.is_harmless()) {
        return Err(NotReadOnly::Writes {
            target: r.target.text().to_owned(),
        });
    }
    if prog.contains('/') {
        return Err(NotReadOnly::ProgramPath {
            program: prog.to_owned(),
        });
    }
    let args = &cmd.argv[1..];
    let mut out =
        match prog {
            "git" => git(cmd)?,
            "find" => find(args)?,
            "sed" => sed(args)?,
            "tar" => tar(args)?,
            "printf" => printf(args)?,
            _ => {
                let s = SPECS.iter().find(|s| s.program == prog).ok_or_else(|| {
                    NotReadOnly::NotListed {
                        program: prog.to_owned(),
                    }
                })?;
                generic(s, args)?
            }
        };
    out.reads.extend(
        cmd.redirects
            .iter()
            .filter(|r| !r.write)
            .map(|r| r.target.clone()),
    );
    Ok(out)
}

fn unknown_flag(prog: &str, flag: &str) -> NotReadOnly {
    NotReadOnly::UnknownFlag {
        program: prog.to_owned(),
        flag: flag.to_owned(),
    }
}

fn missing_value(prog: &str, flag: String) -> NotReadOnly {
    NotReadOnly::MissingValue {
        program: prog.to_owned(),
        flag,
        what: "value",
    }
}

/// What the flags of a listed program's command have said so far.
#[derive(Default)]
struct FlagScan {
    /// Files flags name for it to read (`--file F`, `grep -f F`).
    reads: Vec<Arg>,
    /// A flag gave the pattern (`-e P`, `--regexp P`), so no operand is one.
    pattern_given: bool,
}

/// A listed program's command judged by its spec: the flags it knows, what its operands are.
fn generic(s: &Spec, args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    let mut scan = FlagScan::default();
    let mut positionals = Vec::new();
    let mut recursive = matches!(s.recursive, Recursive::Always);
    let mut i = 0;
    let mut end_of_flags = false;
    while i < args.len() {
        let a = &args[i];
        let Some(w) = a.lit() else {
            dynamic_operand(
                s,
                a,
                end_of_flags,
                scan.pattern_given,
                positionals.is_empty(),
            )?;
            positionals.push(a.clone());
            i += 1;
            continue;
        };
        if end_of_flags
            || w == "-"
            || !w.starts_with('-')
            || TEXTUAL.contains(&s.program) && !looks_like_flag(s, w)
        {
            positionals.push(a.clone());
            i += 1;
            continue;
        }
        if w == "--" {
            end_of_flags = true;
            i += 1;
            continue;
        }
        recursive |= makes_recursive(s, w);
        // The flag, and its value where it takes one: as many words as that took.
        i += match w.strip_prefix("--") {
            Some(long) => long_flag(s, long, args.get(i + 1), &mut scan)?,
            None => short_flags(s, &w[1..], args.get(i + 1), &mut scan)?,
        };
    }
    let reads = operand_reads(s, positionals, scan)?;
    Ok(ReadOnly { reads, recursive })
}

/// Whether flag word `w` is one that makes `s` read the directories it is given recursively.
fn makes_recursive(s: &Spec, w: &str) -> bool {
    let Recursive::With(fl) = s.recursive else {
        return false;
    };
    fl.contains(&w)
        || (!w.starts_with("--") && fl.iter().any(|f| f.len() == 2 && w[1..].contains(&f[1..])))
}

/// A long flag of `s` (`long` is the word without its `--`), its value inline or in `next`:
/// how many words it took.
fn long_flag(
    s: &Spec,
    long: &str,
    next: Option<&Arg>,
    scan: &mut FlagScan,
) -> Result<usize, NotReadOnly> {
    let (key, val) = match long.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (long, None),
    };
    if s.long.contains(&key) && val.is_none() {
        return Ok(1);
    }
    if !s.long_valued.contains(&key) {
        return Err(unknown_flag(s.program, &format!("--{key}")));
    }
    let (v, took) = match val {
        Some(v) => (Arg::Lit(v.to_owned()), 1),
        None => {
            let v = next
                .cloned()
                .ok_or_else(|| missing_value(s.program, format!("--{key}")))?;
            one_word(s.program, &v)?;
            (v, 2)
        }
    };
    if matches!(key, "regexp" | "file") {
        scan.pattern_given = true;
    }
    if matches!(
        key,
        "file" | "files0-from" | "slurpfile" | "rawfile" | "from-file" | "to-file" | "exclude-from"
    ) {
        scan.reads.push(v);
    }
    Ok(took)
}

/// A short cluster of `s` (`-la`, `-n5`, `-20`; `body` is the word without its dash), the
/// value of its last flag inline or in `next`: how many words it took.
fn short_flags(
    s: &Spec,
    body: &str,
    next: Option<&Arg>,
    scan: &mut FlagScan,
) -> Result<usize, NotReadOnly> {
    if s.numeric && body.chars().all(|c| c.is_ascii_digit()) {
        return Ok(1);
    }
    let chars: Vec<char> = body.chars().collect();
    for (j, &c) in chars.iter().enumerate() {
        if s.flags.contains(c) {
            continue;
        }
        if !s.valued.contains(c) {
            return Err(unknown_flag(s.program, &format!("-{c}")));
        }
        let (v, took) = if j + 1 < chars.len() {
            (Arg::Lit(chars[j + 1..].iter().collect()), 1)
        } else {
            let v = next
                .cloned()
                .ok_or_else(|| missing_value(s.program, format!("-{c}")))?;
            one_word(s.program, &v)?;
            (v, 2)
        };
        if c == 'e' || c == 'f' {
            scan.pattern_given = true;
        }
        if c == 'f' && matches!(s.program, "grep" | "rg") {
            scan.reads.push(v);
        }
        return Ok(took);
    }
    Ok(1)
}

/// Everything `s` reads: what its flags named, and the operands its kind of operands says
/// are files (refused where operands would make it write or it takes none).
fn operand_reads(s: &Spec, positionals: Vec<Arg>, scan: FlagScan) -> Result<Vec<Arg>, NotReadOnly> {
    let FlagScan {
        mut reads,
        pattern_given,
    } = scan;
    match s.pos {
        Pos::Text => {}
        Pos::Zero if !positionals.is_empty() => {
            return Err(NotReadOnly::TakesArgument {
                program: s.program.to_owned(),
            })
        }
        Pos::Zero => {}
        Pos::Paths => reads.extend(positionals),
        Pos::AtMostPaths(n) => {
            if positionals.len() > n {
                return Err(NotReadOnly::WritesLastFile {
                    program: s.program.to_owned(),
                    count: positionals.len(),
                });
            }
            reads.extend(positionals);
        }
        Pos::PatternThenPaths => {
            let skip = usize::from(!pattern_given);
            reads.extend(positionals.into_iter().skip(skip));
        }
    }
    Ok(reads)
}

/// Programs whose arguments are text, where a word with a dash that is not one of their
/// flags is just text (`echo --anything`).
const TEXTUAL: &[&str] = &["echo", "printf", "test", "[", "true", "false", ":"];

/// Programs (bash builtins) for which every option there is only changes what is printed or
/// tested: a word only known at run time may become any of them harmlessly.
const ANY_OPTION_HARMLESS: &[&str] = &["echo", "test", "[", "true", "false", ":", "cd"];

/// A word only known at run time, met where `s` takes operands: refused where bash may turn
/// it into an option the program would read (GNU programs read options after operands too,
/// so only `--` ends them), or into several words where their number matters.
fn dynamic_operand(
    s: &Spec,
    a: &Arg,
    end_of_flags: bool,
    pattern_given: bool,
    first_positional: bool,
) -> Result<(), NotReadOnly> {
    let e = a.expansion().unwrap_or(Expansion::UNKNOWN);
    let shown = super::words::short(a.text());
    if e.any_dash && !end_of_flags && !ANY_OPTION_HARMLESS.contains(&s.program) {
        return Err(NotReadOnly::MayBecomeOption {
            program: s.program.to_owned(),
            word: shown,
        });
    }
    if e.splits {
        let counted = match s.pos {
            Pos::AtMostPaths(_) | Pos::Zero => true,
            // The pattern's place: a split would make a word keel takes for the pattern a
            // file it reads.
            Pos::PatternThenPaths => !pattern_given && first_positional,
            Pos::Text | Pos::Paths => false,
        };
        if counted {
            return Err(NotReadOnly::MaySplit {
                program: s.program.to_owned(),
                word: shown,
            });
        }
    }
    Ok(())
}

/// An option's value taken from the next word: a word bash may split would shift every word
/// after it (`-n $N` with N=`5 --output=x`).
fn one_word(prog: &str, v: &Arg) -> Result<(), NotReadOnly> {
    if v.may_split() {
        return Err(NotReadOnly::ValueMaySplit {
            program: prog.to_owned(),
            word: super::words::short(v.text()),
        });
    }
    Ok(())
}

/// `printf`: bash's builtin reads options only before its format, and `-v NAME` assigns a
/// variable (`printf -v PATH …` changes what every later command runs), so the first word
/// must be known not to be an option.
fn printf(args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    let first = args.first();
    let refuse = match first {
        None => false,
        Some(Arg::Lit(w)) => w.starts_with('-') && w != "--" && w != "-",
        Some(a) => a.expansion().is_none_or(|e| e.first_dash),
    };
    if refuse {
        return Err(NotReadOnly::PrintfOption {
            word: super::words::short(first.map(Arg::text).unwrap_or("")),
        });
    }
    Ok(ReadOnly {
        reads: Vec::new(),
        recursive: false,
    })
}

/// For programs whose arguments are text (`echo -n hi`), only known flags are flags.
fn looks_like_flag(s: &Spec, w: &str) -> bool {
    w.len() > 1 && w[1..].chars().all(|c| s.flags.contains(c))
}

/// `find`'s tests that take a value (the next word, whatever it looks like).
pub(super) const FIND_VALUED: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-type",
    "-xtype",
    "-maxdepth",
    "-mindepth",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-newer",
    "-anewer",
    "-cnewer",
    "-size",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-links",
    "-inum",
    "-samefile",
    "-lname",
    "-ilname",
    "-printf",
    "-regextype",
    "-used",
    "-fstype",
];

/// Whether a word only known at run time may become part of `find`'s expression (where
/// `-exec` and `-delete` live) when it stands where `find` expects a starting point: a word
/// that may start with `-`, or with `!`, `(`, `)` or `,`.
pub(super) fn find_word_may_be_expression(a: &Arg) -> bool {
    a.expansion()
        .is_none_or(|e| e.any_dash || matches!(e.leading, Some('!' | '(' | ')' | ',')))
}

/// `find`: only tests and actions that print; never `-exec`, `-delete`, `-fprint`, `-fls`.
fn find(args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    const NO_VALUE: &[&str] = &[
        "-print",
        "-print0",
        "-ls",
        "-prune",
        "-quit",
        "-empty",
        "-true",
        "-false",
        "-o",
        "-a",
        "-or",
        "-and",
        "-not",
        "!",
        "(",
        ")",
        ",",
        "-depth",
        "-follow",
        "-xdev",
        "-mount",
        "-noleaf",
        "-readable",
        "-writable",
        "-executable",
        "-nouser",
        "-nogroup",
        "-daystart",
        "-L",
        "-P",
        "-H",
        "-d",
    ];
    let mut reads = Vec::new();
    let mut i = 0;
    let mut in_expr = false;
    while i < args.len() {
        let a = &args[i];
        let Some(w) = a.lit() else {
            if in_expr || find_word_may_be_expression(a) {
                // A value like `-name "$X"` was consumed below; any other word only known
                // at run time may be (or become) a test or an action such as `-exec`.
                return Err(NotReadOnly::FindExpression {
                    word: super::words::short(a.text()),
                });
            }
            reads.push(a.clone());
            i += 1;
            continue;
        };
        if !in_expr && !w.starts_with('-') && !matches!(w, "!" | "(" | ")") {
            reads.push(a.clone());
            i += 1;
            continue;
        }
        in_expr = true;
        if NO_VALUE.contains(&w) {
            i += 1;
        } else if FIND_VALUED.contains(&w) {
            if let Some(v) = args.get(i + 1) {
                one_word("find", v)?;
            }
            i += 2;
        } else {
            return Err(unknown_flag("find", w));
        }
    }
    Ok(ReadOnly {
        reads,
        recursive: false,
    })
}

/// `sed`: only `-n` with print scripts like `1,20p`, `$p`, `5q`, and plain substitutions on
/// stdout (`s/a/b/g`); never `-i`, `w`, `e`, `r`.
fn sed(args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    let mut reads = Vec::new();
    let mut script_seen = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let w = a.lit().ok_or_else(|| NotReadOnly::DynamicArgument {
            program: "sed".to_owned(),
        })?;
        match w {
            "-n" | "--quiet" | "--silent" | "-E" | "-r" | "--regexp-extended" | "-s"
            | "--separate" | "-z" | "-u" => {}
            "-e" | "--expression" => {
                i += 1;
                let s = args
                    .get(i)
                    .and_then(Arg::lit)
                    .ok_or(NotReadOnly::SedScriptUnknown)?;
                sed_script_ok(s)?;
                script_seen = true;
            }
            _ if w.starts_with('-') && w.len() > 1 => return Err(unknown_flag("sed", w)),
            _ if !script_seen => {
                sed_script_ok(w)?;
                script_seen = true;
            }
            _ => reads.push(a.clone()),
        }
        i += 1;
    }
    Ok(ReadOnly {
        reads,
        recursive: false,
    })
}

fn sed_script_ok(s: &str) -> Result<(), NotReadOnly> {
    let addr = r"(?:\d+|\$)";
    let print = format!(r"^{addr}(?:,{addr})?[pd]$|^{addr}q$|^/[^/\n]*/[pd]$");
    let subst = r"^s/[^/\n]*/[^/\n]*/[gip0-9]*$";
    let ok = s
        .split([';', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .all(|part| regex_lite_match(&print, part) || regex_lite_match(subst, part));
    if ok {
        Ok(())
    } else {
        Err(NotReadOnly::SedScript {
            script: super::words::short(s),
        })
    }
}

fn regex_lite_match(re: &str, text: &str) -> bool {
    grep_regex::RegexMatcher::new(re)
        .map(|m| grep_matcher::Matcher::is_match(&m, text.as_bytes()).unwrap_or(false))
        .unwrap_or(false)
}

/// `tar`: only listing (`-t`) an archive.
fn tar(args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    let mut reads = Vec::new();
    let mut list = false;
    let mut i = 0;
    while i < args.len() {
        let w = args[i].lit().ok_or_else(|| NotReadOnly::DynamicArgument {
            program: "tar".to_owned(),
        })?;
        // `tar tvf x` (no dash) is the old style: the first word is a flag cluster.
        let cluster = if i == 0 && !w.starts_with('-') {
            Some(w)
        } else {
            w.strip_prefix('-').filter(|c| !c.starts_with('-'))
        };
        if let Some(c) = cluster {
            for ch in c.chars() {
                match ch {
                    't' => list = true,
                    'v' | 'z' | 'j' | 'J' | 'O' => {}
                    'f' => {
                        i += 1;
                        let v = args
                            .get(i)
                            .cloned()
                            .ok_or_else(|| NotReadOnly::MissingValue {
                                program: "tar".to_owned(),
                                flag: "-f".to_owned(),
                                what: "archive",
                            })?;
                        one_word("tar", &v)?;
                        reads.push(v);
                    }
                    _ => return Err(unknown_flag("tar", &format!("-{ch}"))),
                }
            }
        } else if w == "--list" {
            list = true;
        } else if let Some(f) = w.strip_prefix("--file=") {
            reads.push(Arg::Lit(f.to_owned()));
        } else if w.starts_with("--") {
            return Err(unknown_flag("tar", w));
        }
        i += 1;
    }
    if !list {
        return Err(NotReadOnly::TarNotListing);
    }
    Ok(ReadOnly {
        reads,
        recursive: false,
    })
}

/// `git`: a few subcommands that only look, each with its own flags.
fn git(cmd: &LoweredCommand) -> Result<ReadOnly, NotReadOnly> {
    use super::command::HARMLESS_GIT_GLOBALS as HARMLESS_GLOBALS;
    if let Some(g) = cmd
        .git_globals
        .iter()
        .find(|g| !HARMLESS_GLOBALS.contains(&g.as_str()))
    {
        return Err(NotReadOnly::GitGlobal { global: g.clone() });
    }
    let args = &cmd.argv[1..];
    let Some(sub) = args.first().and_then(Arg::lit) else {
        return Err(NotReadOnly::GitNoSubcommand);
    };
    let rest = &args[1..];
    match sub {
        "tag"
            if rest
                .iter()
                .all(|a| matches!(a.lit(), Some("-l" | "--list"))) =>
        {
            return Ok(ReadOnly {
                reads: Vec::new(),
                recursive: false,
            })
        }
        "config" => return git_config(rest).map(reads_the_repository),
        "--version" | "version" | "help" | "--help" => {
            return Ok(ReadOnly {
                reads: Vec::new(),
                recursive: false,
            })
        }
        _ => {}
    }
    let Some((_, s)) = GIT_SPECS.iter().find(|(names, _)| names.contains(&sub)) else {
        return Err(NotReadOnly::NotListed {
            program: format!("git {sub}"),
        });
    };
    let mut r = generic(s, rest)?;
    if matches!(
        sub,
        "log" | "show" | "diff" | "whatchanged" | "blame" | "cat-file" | "ls-tree"
    ) {
        // These print file contents out of the history (`git show HEAD:.env`), which no
        // path argument reveals: they count as reading the whole repository.
        // (The whole working tree includes `.git`.)
        r.reads = vec![Arg::Lit(".".to_owned())];
        r.recursive = true;
        return Ok(r);
    }
    if s.pos == Pos::Paths && r.reads.is_empty() {
        r.recursive = false;
    }
    Ok(reads_the_repository(r))
}

/// Every git subcommand reads the repository's own files (`.git/config` with its remote URLs
/// and credentials helpers, the refs, the index) whether or not an operand names them: they
/// count as read, so a Read deny rule on `.git` (or on every file) asks before they run.
fn reads_the_repository(mut r: ReadOnly) -> ReadOnly {
    r.reads.push(Arg::Lit(".git".to_owned()));
    r
}

/// Flags `git log` and its kin (`show`, `diff`, `shortlog`, `whatchanged`) take without a value.
const GIT_LOG_LIKE_LONG: &[&str] = &[
    "oneline",
    "graph",
    "decorate",
    "stat",
    "shortstat",
    "numstat",
    "name-only",
    "name-status",
    "patch",
    "no-patch",
    "all",
    "reverse",
    "no-merges",
    "merges",
    "follow",
    "abbrev-commit",
    "first-parent",
    "cached",
    "staged",
    "no-color",
    "word-diff",
    "ignore-space-change",
    "ignore-all-space",
    "exit-code",
    "quiet",
    "summary",
    "no-decorate",
    "date-order",
    "topo-order",
    "left-right",
    "cherry-pick",
    "full-history",
    "raw",
    "minimal",
    "patience",
    "histogram",
    "no-renames",
    "find-renames",
    "no-ext-diff",
    "no-textconv",
    "check",
    "compact-summary",
    "show-signature",
    "relative-date",
    "source",
    "children",
    "parents",
    "boundary",
    "branches",
    "tags",
    "remotes",
];

/// Flags `git log` and its kin take with a value.
const GIT_LOG_LIKE_VALUED: &[&str] = &[
    "max-count",
    "since",
    "after",
    "until",
    "before",
    "author",
    "committer",
    "grep",
    "format",
    "pretty",
    "date",
    "color",
    "unified",
    "skip",
    "abbrev",
    "diff-filter",
    "stat-width",
    "word-diff-regex",
    "relative",
    "decorate-refs",
    "decorate-refs-exclude",
    "dirstat",
];

/// The git subcommands that only look and take flags the way a listed program does: the
/// names each answers to, and its flags.
static GIT_SPECS: &[(&[&str], Spec)] = &[
    (
        &["status"],
        Spec {
            long: &[
                "short",
                "branch",
                "porcelain",
                "long",
                "verbose",
                "show-stash",
                "ahead-behind",
                "no-ahead-behind",
                "renames",
                "no-renames",
            ],
            long_valued: &[
                "untracked-files",
                "ignored",
                "ignore-submodules",
                "column",
                "find-renames",
                "porcelain",
            ],
            ..spec("git status", "sbvuz", "uM", Pos::Paths)
        },
    ),
    (
        &["log", "show", "diff", "shortlog", "whatchanged"],
        Spec {
            long: GIT_LOG_LIKE_LONG,
            long_valued: GIT_LOG_LIKE_VALUED,
            numeric: true,
            ..spec("git log", "pusRwbqzM", "nUSGLC", Pos::Paths)
        },
    ),
    (
        &["rev-parse"],
        Spec {
            long: &[
                "show-toplevel",
                "git-dir",
                "is-inside-work-tree",
                "is-bare-repository",
                "verify",
                "quiet",
                "short",
                "abbrev-ref",
                "symbolic-full-name",
                "show-cdup",
                "show-prefix",
                "absolute-git-dir",
                "git-common-dir",
                "all",
            ],
            ..spec("git rev-parse", "q", "", Pos::Text)
        },
    ),
    (
        &["ls-files"],
        Spec {
            long: &[
                "cached",
                "deleted",
                "modified",
                "others",
                "ignored",
                "stage",
                "unmerged",
                "killed",
                "directory",
                "no-empty-directory",
                "full-name",
                "exclude-standard",
                "error-unmatch",
                "eol",
                "debug",
                "recurse-submodules",
            ],
            long_valued: &[
                "exclude",
                "exclude-from",
                "exclude-per-directory",
                "abbrev",
                "format",
                "with-tree",
            ],
            ..spec("git ls-files", "cdmoiskuvtfz", "xX", Pos::Paths)
        },
    ),
    (
        &["branch"],
        Spec {
            long: &[
                "all",
                "remotes",
                "verbose",
                "show-current",
                "list",
                "merged",
                "no-merged",
            ],
            long_valued: &[
                "contains",
                "no-contains",
                "sort",
                "format",
                "points-at",
                "color",
            ],
            ..spec("git branch", "arvl", "", Pos::Zero)
        },
    ),
    (
        &["remote"],
        Spec {
            long: &["verbose"],
            ..spec("git remote", "v", "", Pos::Zero)
        },
    ),
    (
        &["blame"],
        Spec {
            long: &[
                "porcelain",
                "line-porcelain",
                "incremental",
                "show-stats",
                "show-name",
                "show-number",
                "show-email",
                "root",
            ],
            long_valued: &["date", "abbrev"],
            ..spec("git blame", "bcflnpstwe", "LMC", Pos::Paths)
        },
    ),
    (
        &["describe"],
        Spec {
            long: &[
                "tags",
                "all",
                "long",
                "always",
                "dirty",
                "exact-match",
                "contains",
                "first-parent",
            ],
            long_valued: &["abbrev", "match", "exclude", "candidates"],
            ..spec("git describe", "", "", Pos::Text)
        },
    ),
    (
        &["ls-tree", "merge-base", "show-ref", "rev-list", "cat-file"],
        Spec {
            long: &[
                "name-only",
                "full-name",
                "full-tree",
                "heads",
                "tags",
                "all",
                "count",
                "abbrev-commit",
                "is-ancestor",
                "batch-check",
            ],
            long_valued: &["max-count", "format", "abbrev"],
            ..spec("git ls-tree", "rtdlpse", "n", Pos::Text)
        },
    ),
];

/// `git config --get`/`--list` only read.
fn git_config(args: &[Arg]) -> Result<ReadOnly, NotReadOnly> {
    let first = args.first().and_then(Arg::lit).unwrap_or("");
    // The key must be one word that cannot be an option (`--get $K` with K=`x --add y z`).
    let key_ok = args
        .get(1)
        .is_none_or(|k| !k.may_be_option() && !k.may_split());
    if matches!(
        first,
        "--get" | "--get-all" | "--list" | "-l" | "--get-regexp"
    ) && args.len() <= 2
        && key_ok
    {
        Ok(ReadOnly {
            reads: Vec::new(),
            recursive: false,
        })
    } else {
        Err(NotReadOnly::GitConfig)
    }
}

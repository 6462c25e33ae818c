//! Why a command is not read-only: one kind per reason, with the words that made it so.
//!
//! The sentences are what `keel permissions check` and an approval prompt show after "not
//! read-only:" / "needs approval (…)"; the kinds let a caller tell them apart without
//! matching text.

/// Why [`super::readonly::judge`] does not count a command as only reading.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReadOnly {
    /// The program word is only known when the line runs (`$CMD args`).
    #[error("its program is only known when it runs")]
    DynamicProgram,
    /// It runs through a wrapper keel kept (`sudo`, `nohup`, ...).
    #[error("it runs through `{wrapper}`")]
    Wrapped {
        /// The wrapper's program word.
        wrapper: String,
    },
    /// It assigns a variable that changes what programs do (`PATH=…`, `LD_PRELOAD=…`).
    #[error("it sets `{name}`")]
    SetsVariable {
        /// The variable's name.
        name: String,
    },
    /// It runs in the background (`&`).
    #[error("it runs in the background")]
    Background,
    /// Words only known at run time may add arguments (`"$@"`, an array).
    #[error("it is given arguments only known when it runs")]
    DynamicArguments,
    /// It writes a file through a redirection.
    #[error("it writes to `{target}`")]
    Writes {
        /// The redirection's target as written.
        target: String,
    },
    /// The program is named by a path, which the read-only list does not vouch for.
    #[error("`{program}` is a path; only programs found by name are on the read-only list")]
    ProgramPath {
        /// The program word.
        program: String,
    },
    /// The program (or git subcommand, as `git push`) is not on the read-only list.
    #[error("`{program}` is not on the read-only list")]
    NotListed {
        /// The program, or `git SUBCOMMAND`.
        program: String,
    },
    /// A flag the list does not know to be safe for this program.
    #[error(
        "`{program}` is read-only only without `{flag}`, or it is not a flag keel knows to be safe"
    )]
    UnknownFlag {
        /// The program.
        program: String,
        /// The flag as given (`-i`, `--in-place`).
        flag: String,
    },
    /// A flag that takes a value is the last word.
    #[error("`{program} {flag}` is missing its {what}")]
    MissingValue {
        /// The program.
        program: String,
        /// The flag (`-n`, `--max-count`).
        flag: String,
        /// What the value is (`value`, `archive`).
        what: &'static str,
    },
    /// A program that only reads when given no argument was given one.
    #[error("`{program}` with an argument may change something")]
    TakesArgument {
        /// The program.
        program: String,
    },
    /// A program that writes its last file argument when given more than it reads.
    #[error("`{program}` with {count} file arguments writes the last one")]
    WritesLastFile {
        /// The program.
        program: String,
        /// How many file arguments it was given.
        count: usize,
    },
    /// A word only known at run time may become an option.
    #[error("`{program}` is given `{word}`, which bash may expand to an option keel has not seen")]
    MayBecomeOption {
        /// The program.
        program: String,
        /// The word (shortened).
        word: String,
    },
    /// A word only known at run time may split where the number of words matters.
    #[error("`{program}` is given `{word}`, which bash may expand to several words")]
    MaySplit {
        /// The program.
        program: String,
        /// The word (shortened).
        word: String,
    },
    /// An option's value only known at run time may split and shift every later word.
    #[error("`{program}` is given `{word}` as an option's value, which bash may expand to several words")]
    ValueMaySplit {
        /// The program.
        program: String,
        /// The word (shortened).
        word: String,
    },
    /// `printf` may be given an option (`-v NAME` assigns a variable).
    #[error("`printf {word}` may be given an option (`-v` sets a variable)")]
    PrintfOption {
        /// The first word (shortened).
        word: String,
    },
    /// A word only known at run time may become part of `find`'s expression (`-exec`).
    #[error("`find` is given `{word}`, which bash may expand to part of its expression")]
    FindExpression {
        /// The word (shortened).
        word: String,
    },
    /// A program judged word by word (`sed`, `tar`) got a word only known at run time.
    #[error("`{program}` has an argument only known when it runs")]
    DynamicArgument {
        /// The program.
        program: String,
    },
    /// `sed -e` with a script keel cannot read.
    #[error("`sed -e` needs a script keel can read")]
    SedScriptUnknown,
    /// A sed script with commands other than printing and plain substitution.
    #[error("the sed script `{script}` is not one keel knows to be read-only")]
    SedScript {
        /// The script (shortened).
        script: String,
    },
    /// `tar` doing anything but listing.
    #[error("`tar` is read-only only when it lists an archive (`-t`)")]
    TarNotListing,
    /// A git global option that changes where git looks or what it runs (`-c`, `--exec-path`).
    #[error("`git {global}` changes where git looks or what it runs")]
    GitGlobal {
        /// The global option as given.
        global: String,
    },
    /// `git` without a subcommand keel can read.
    #[error("`git` with no subcommand keel can read")]
    GitNoSubcommand,
    /// `git config` doing anything but `--get`/`--list`.
    #[error("`git config` is read-only only with --get or --list")]
    GitConfig,
}

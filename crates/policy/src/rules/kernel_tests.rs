//! Path resolution against the kernel: links in every position, and generated trees of dirs,
//! files and symlinks (relative, absolute, dangling, looping) where keel's resolution must be
//! the file the kernel opens (or creates).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::testing::PermissionConfig;
use super::{Decision, PermissionMode, Rule, RuleSource};
use crate::fs::RealFs;
use crate::paths::{Resolved, Roots};
use crate::ToolKind;
use serde_json::json;

fn roots(cwd: &Path, home: &Path) -> Roots {
    Roots {
        cwd: cwd.to_path_buf(),
        dirs: Vec::new(),
        home: Some(home.to_path_buf()),
        readable: Vec::new(),
    }
}

/// A temp dir by its real name (the system temp dir may itself be a link).
fn base() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::canonicalize(t.path()).unwrap();
    (t, b)
}

#[test]
fn links_in_every_position_resolve_where_the_kernel_goes() {
    let (_t, b) = base();
    let proj = b.join("proj");
    for d in ["proj/src/deep", "proj/x", "outside/sub", "home/.ssh"] {
        std::fs::create_dir_all(b.join(d)).unwrap();
    }
    std::fs::write(b.join("home/.ssh/id_rsa"), "secret").unwrap();
    symlink("../outside/sub", proj.join("link")).unwrap(); // first component, relative
    symlink("deep", proj.join("src/mid")).unwrap(); // middle
    symlink(proj.join("src/mid"), proj.join("linklink")).unwrap(); // a link to a link
    symlink(b.join("outside"), proj.join("abs")).unwrap(); // absolute, out of the project
    symlink(b.join("outside/nothing"), proj.join("dangling")).unwrap();
    symlink("loop_b", proj.join("loop_a")).unwrap();
    symlink("loop_a", proj.join("loop_b")).unwrap();
    symlink(b.join("home/.ssh"), proj.join("keys")).unwrap();
    symlink("../../proj/x", b.join("outside/sub/back")).unwrap(); // out and back in
    let r = roots(&proj, &b.join("home"));
    let real = |p: &str| r.resolve(&RealFs, p).real;
    // `..` after a link leaves the link's target.
    assert_eq!(real("link/../pwned"), b.join("outside/pwned"));
    assert_eq!(real("src/mid/../f"), proj.join("src/f"));
    assert_eq!(real("src/mid/f"), proj.join("src/deep/f"));
    assert_eq!(real("linklink/../g"), proj.join("src/g"));
    assert_eq!(real("abs/sub/../../h"), b.join("h"));
    // Last component a link; a dangling one leads to where its target would be created.
    assert_eq!(real("link"), b.join("outside/sub"));
    assert_eq!(real("dangling"), b.join("outside/nothing"));
    assert_eq!(real("keys/id_rsa"), b.join("home/.ssh/id_rsa"));
    // Out of the project and back in.
    assert_eq!(real("link/back/y"), proj.join("x/y"));
    // A loop is an error, never a path inside.
    let l: Resolved = r.resolve(&RealFs, "loop_a/x");
    assert!(l.broken.is_some());
    assert!(!r.contains(&RealFs, &l) && !r.readable(&RealFs, &l));
    // Inside or not, by where the kernel goes.
    assert!(!r.contains(&RealFs, &r.resolve(&RealFs, "link/../pwned")));
    assert!(r.contains(&RealFs, &r.resolve(&RealFs, "src/mid/../f")));
    assert!(!r.readable(&RealFs, &r.resolve(&RealFs, "keys/id_rsa")));
    assert!(r.readable(&RealFs, &r.resolve(&RealFs, "link/back/y")));
    assert!(!r.contains(&RealFs, &r.resolve(&RealFs, "dangling")));
}

fn cfg(
    mode: PermissionMode,
    cwd: &Path,
    home: &Path,
    allow: &[&str],
    deny: &[&str],
) -> PermissionConfig {
    let rules = |v: &[&str]| -> Vec<Rule> {
        v.iter()
            .map(|t| Rule::parse(t, RuleSource::Flag).unwrap())
            .collect()
    };
    PermissionConfig {
        mode,
        allow: rules(allow),
        deny: rules(deny),
        ask: Vec::new(),
        roots: roots(cwd, home),
    }
}

#[test]
fn decisions_follow_the_kernel_through_links() {
    let (_t, b) = base();
    let proj = b.join("proj");
    for d in [
        "proj/src",
        "proj/y",
        "outside/sub",
        "home/.ssh",
        "home/.aws",
    ] {
        std::fs::create_dir_all(b.join(d)).unwrap();
    }
    std::fs::write(proj.join(".env"), "s").unwrap();
    symlink("../outside/sub", proj.join("link")).unwrap();
    symlink("../outside/sub", proj.join("src/link")).unwrap();
    symlink("../y", proj.join("src/up")).unwrap();
    symlink(b.join("home/.ssh"), proj.join("keys")).unwrap();
    let home = b.join("home");
    let decide = |c: &PermissionConfig, kind: ToolKind, input: serde_json::Value| {
        let name = match kind {
            ToolKind::Write => "Write",
            ToolKind::Edit => "Edit",
            ToolKind::Read => "Read",
            ToolKind::Grep => "Grep",
            ToolKind::Glob => "Glob",
            _ => "Bash",
        };
        c.decide(name, kind, &input, !kind.edits_files())
    };
    let allowed = |d: &Decision| matches!(d, Decision::Allow(_));
    let edits = cfg(PermissionMode::AcceptEdits, &proj, &home, &[], &[]);
    assert!(!allowed(&decide(
        &edits,
        ToolKind::Write,
        json!({"file_path": "link/../pwned"})
    )));
    assert!(allowed(&decide(
        &edits,
        ToolKind::Write,
        json!({"file_path": "src/../ok"})
    )));
    let bash = |c: &PermissionConfig, cmd: &str| decide(c, ToolKind::Bash, json!({"command": cmd}));
    assert!(!allowed(&bash(&edits, "echo x > link/../pwned")));
    let src = cfg(PermissionMode::Default, &proj, &home, &["Edit(src/*)"], &[]);
    assert!(!allowed(&decide(
        &src,
        ToolKind::Edit,
        json!({"file_path": "src/link/../f"})
    )));
    assert!(allowed(&decide(
        &src,
        ToolKind::Edit,
        json!({"file_path": "src/f"})
    )));
    // `src/up/../.env` is `<proj>/.env` to the kernel (the lexical spelling is `src/.env`).
    let env = cfg(
        PermissionMode::Default,
        &proj,
        &home,
        &[],
        &["Read(./.env)"],
    );
    assert!(matches!(
        decide(&env, ToolKind::Read, json!({"file_path": "src/up/../.env"})),
        Decision::Deny { .. }
    ));
    // Reads outside ask, by any spelling; a rule allows them.
    let d = cfg(PermissionMode::Default, &proj, &home, &[], &[]);
    for input in [
        json!({"file_path": "~/.ssh/id_rsa"}),
        json!({"file_path": "keys/id_rsa"}),
        json!({"file_path": b.join("home/.ssh/id_rsa").display().to_string()}),
    ] {
        assert!(
            matches!(
                decide(&d, ToolKind::Read, input.clone()),
                Decision::AskWhy(_)
            ),
            "{input}"
        );
    }
    assert!(!allowed(&decide(
        &d,
        ToolKind::Grep,
        json!({"pattern": "x", "path": "~/.aws"})
    )));
    assert!(!allowed(&decide(
        &d,
        ToolKind::Glob,
        json!({"pattern": format!("{}/*", home.join(".ssh").display())})
    )));
    assert!(!allowed(&decide(
        &d,
        ToolKind::Glob,
        json!({"pattern": "*", "path": "keys"})
    )));
    for cmd in [
        "cat ~/.aws/credentials",
        "head keys/id_rsa",
        "grep -r x ~/.ssh",
        "cd ~/.ssh && ls",
    ] {
        assert!(!allowed(&bash(&d, cmd)), "{cmd}");
    }
    assert!(allowed(&bash(&d, "cat src/../.env")));
    assert!(allowed(&decide(
        &d,
        ToolKind::Read,
        json!({"file_path": "/usr/share/x"})
    )));
    assert!(!allowed(&decide(
        &d,
        ToolKind::Read,
        json!({"file_path": "/usr/share/../../etc/shadow"})
    )));
    let msg = d.headless_denial(
        "Read",
        ToolKind::Read,
        &json!({"file_path": "~/.ssh/id_rsa"}),
        None,
    );
    assert!(
        msg.contains(&format!("Read(/{}/**)", home.join(".ssh").display())),
        "{msg}"
    );
    assert!(msg.contains("--add-dir"), "{msg}");
    let rule = format!("Read(/{}/**)", home.join(".ssh").display());
    let ok = cfg(PermissionMode::Default, &proj, &home, &[&rule], &[]);
    assert!(allowed(&decide(
        &ok,
        ToolKind::Read,
        json!({"file_path": "keys/id_rsa"})
    )));
    assert!(allowed(&bash(&ok, "head ~/.ssh/id_rsa")));
    let mut added = cfg(PermissionMode::Default, &proj, &home, &[], &[]);
    added.roots.dirs.push(home.join(".aws"));
    assert!(allowed(&bash(&added, "cat ~/.aws/credentials")));
    let bypass = cfg(PermissionMode::BypassPermissions, &proj, &home, &[], &[]);
    assert!(allowed(&decide(
        &bypass,
        ToolKind::Read,
        json!({"file_path": "~/.ssh/id_rsa"})
    )));
    // The tool is handed the judged file.
    assert_eq!(
        d.judged_path(ToolKind::Write, &json!({"file_path": "link/../pwned"})),
        Some(b.join("outside/pwned"))
    );
}

#[test]
fn mcp_resource_tools_answer_to_server_rules() {
    let (_t, b) = base();
    let d = |mode, allow: &[&str], deny: &[&str], tool: &str, server: Option<&str>| {
        let c = cfg(mode, &b, &b, allow, deny);
        let input = match server {
            Some(s) => json!({"server": s, "uri": "file:///x"}),
            None => json!({}),
        };
        c.decide(tool, ToolKind::External, &input, false)
    };
    use PermissionMode::*;
    let read = "ReadMcpResourceTool";
    let list = "ListMcpResourcesTool";
    for rule in ["mcp__srv", "mcp__*", read] {
        assert!(
            matches!(
                d(BypassPermissions, &[read], &[rule], read, Some("srv")),
                Decision::Deny { .. }
            ),
            "{rule}"
        );
    }
    assert!(matches!(
        d(BypassPermissions, &[], &["mcp__srv"], list, None),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        d(BypassPermissions, &[], &["mcp__srv"], read, Some("other")),
        Decision::Allow(_)
    ));
    assert!(matches!(
        d(Default, &[], &["mcp__srv__tool"], read, Some("srv")),
        Decision::AskWhy(_)
    ));
    assert!(matches!(
        d(Default, &["mcp__srv"], &[], read, Some("srv")),
        Decision::Allow(_)
    ));
    assert!(matches!(
        d(Default, &["mcp__srv"], &[], read, Some("other")),
        Decision::AskWhy(_)
    ));
    assert!(matches!(
        d(Default, &["mcp__srv"], &[], list, None),
        Decision::AskWhy(_)
    ));
}

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, v: &'a [&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
}

const NAMES: [&str; 5] = ["a", "b", "c", "l", "m"];

/// A relative spelling of up to three parts (names, `.`, `..`).
fn rel(g: &mut Gen) -> String {
    let n = 1 + g.below(3);
    let parts: Vec<&str> = (0..n)
        .map(|_| g.pick(&["a", "b", "c", "l", "m", "..", ".", "zz"]))
        .collect();
    parts.join("/")
}

/// Build a tree of dirs, files and symlinks under `b` (in `proj` and `out`).
fn tree(g: &mut Gen, b: &Path) {
    let mut dirs = vec![b.join("proj"), b.join("out")];
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    for _ in 0..10 {
        let parent = dirs[g.below(dirs.len())].clone();
        let p = parent.join(g.pick(&NAMES));
        if std::fs::symlink_metadata(&p).is_ok() {
            continue;
        }
        match g.below(5) {
            0 | 1 => {
                std::fs::create_dir(&p).unwrap();
                dirs.push(p);
            }
            2 => std::fs::write(&p, "f").unwrap(),
            3 => symlink(rel(g), &p).unwrap(),
            _ => {
                let anchor = dirs[g.below(dirs.len())].clone();
                symlink(anchor.join(rel(g)), &p).unwrap()
            }
        }
    }
}

/// What the kernel opens for `p` (following a final link), by `O_PATH` and /proc/self/fd.
fn kernel_open(p: &Path) -> Result<PathBuf, nix::errno::Errno> {
    use nix::fcntl::{open, OFlag};
    let fd = open(
        p,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let got = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    let _ = nix::unistd::close(fd);
    Ok(got)
}

#[cfg(target_os = "linux")]
#[test]
fn resolution_agrees_with_the_kernel_on_generated_trees() {
    use nix::errno::Errno;
    let mut counts = [0usize; 4]; // opened, created, loops, skipped
    for seed in 1..=300u64 {
        let mut g = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let (_t, b) = base();
        tree(&mut g, &b);
        let proj = b.join("proj");
        let r = roots(&proj, &b);
        for _ in 0..6 {
            let spelled = if g.below(4) == 0 {
                b.join(g.pick(&["proj", "out"]))
                    .join(rel(&mut g))
                    .display()
                    .to_string()
            } else {
                rel(&mut g)
            };
            let keel = r.resolve(&RealFs, &spelled);
            let full = proj.join(&spelled);
            match kernel_open(&full) {
                Ok(k) => {
                    assert_eq!(keel.real, k, "seed {seed}: {spelled}");
                    assert!(keel.broken.is_none(), "seed {seed}: {spelled}");
                    counts[0] += 1;
                }
                Err(Errno::ELOOP) => {
                    assert!(keel.broken.is_some(), "seed {seed}: {spelled} is a loop");
                    counts[2] += 1;
                }
                Err(Errno::ENOENT) => {
                    // Create it as a writer would; the kernel then opens what keel judged.
                    let made = full
                        .parent()
                        .map(|p| std::fs::create_dir_all(p).is_ok())
                        .unwrap_or(false)
                        && std::fs::OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(false)
                            .open(&full)
                            .is_ok();
                    match (made, kernel_open(&full)) {
                        (true, Ok(k)) => {
                            assert_eq!(keel.real, k, "seed {seed}: {spelled} (created)");
                            counts[1] += 1;
                        }
                        _ => counts[3] += 1,
                    }
                }
                Err(_) => counts[3] += 1,
            }
        }
    }
    // The generator really reaches every kind of case.
    assert!(
        counts[0] > 150 && counts[1] > 30 && counts[2] > 3,
        "{counts:?}"
    );
}

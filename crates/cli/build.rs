//! Links the `keel` binary with the code a run executes placed together.
//!
//! `order/keel.order` lists the functions a short run executes (start-up, a turn, the common tools),
//! as the linker names them. Given to the linker (`--symbol-ordering-file`), they are laid out
//! side by side at the start of the code, so a run maps a few hundred KB of code instead of
//! pages scattered over the whole binary. Release builds only, and only when the linker takes the
//! option (LLD, the default linker of recent Rust toolchains on Linux, and mold do; GNU ld does
//! not): a quick test link decides, and without it the binary is the same, only less compact.
//! Names the file lists that this build does not have (another compiler version changes the
//! names' hashes) are skipped without a warning. `order/make.sh` makes the file again.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=order/keel.order");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("PROFILE") != "release"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || std::env::var_os("KEEL_NO_SYMBOL_ORDER").is_some()
    {
        return;
    }
    let order = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("order/keel.order");
    if !order.is_file() {
        return;
    }
    let args = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if linker_takes(&args) {
        for a in &args {
            println!("cargo:rustc-link-arg-bin=keel={a}");
        }
    } else {
        println!(
            "cargo:warning=keel is linked without its code order: the linker does not take \
             --symbol-ordering-file (LLD and mold do). keel works the same, mapping more of its code"
        );
    }
}

/// Whether linking an empty program with `args` succeeds, with the compiler, target, flags and
/// linker this build uses.
fn linker_takes(args: &[String]) -> bool {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("order-probe");
    if std::fs::create_dir_all(&out).is_err() {
        return false;
    }
    let src = out.join("probe.rs");
    if std::fs::write(&src, "fn main() {}\n").is_err() {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.arg(&src)
        .arg("-o")
        .arg(out.join("probe"))
        .arg("--target")
        .arg(std::env::var("TARGET").unwrap_or_default());
    if let Ok(flags) = std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        cmd.arg(format!("-Clinker={linker}"));
    }
    for a in args {
        cmd.arg(format!("-Clink-arg={a}"));
    }
    let ok = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_dir_all(Path::new(&out));
    ok
}

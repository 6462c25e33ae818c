//! A launcher for keel-tools' own tests (`keel` is its own launcher; a program that embeds
//! keel's engine can do the same: serve when given `keel_tools::launcher::LAUNCHER_ARG`).

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == keel_tools::launcher::LAUNCHER_ARG)
    {
        keel_tools::launcher::serve_stdin();
    }
    eprintln!(
        "keel-test-launcher: only serves as keel's command launcher ({} as its argument)",
        keel_tools::launcher::LAUNCHER_ARG
    );
    std::process::exit(2);
}

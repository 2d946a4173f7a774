//! The man pages in `man/` are generated from the clap definitions and must be
//! current. `WSLEDGER_BLESS=1 cargo test --test man_pages` rewrites them.

use std::collections::BTreeMap;
use std::path::Path;

fn generate(dir: &Path) {
    clap_mangen::generate_to(wsledger::cli::command(), dir).unwrap();
}

fn read_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn man_pages_are_current() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let fresh = read_dir(tmp.path());
    if std::env::var_os("WSLEDGER_BLESS").is_some() {
        let man = Path::new("man");
        if man.exists() {
            for old in read_dir(man).keys() {
                std::fs::remove_file(man.join(old)).unwrap();
            }
        }
        std::fs::create_dir_all(man).unwrap();
        for (name, bytes) in &fresh {
            std::fs::write(man.join(name), bytes).unwrap();
        }
    }
    let committed = read_dir(Path::new("man"));
    let fresh_names: Vec<_> = fresh.keys().collect();
    let committed_names: Vec<_> = committed.keys().collect();
    assert_eq!(
        fresh_names, committed_names,
        "man page set differs: run `WSLEDGER_BLESS=1 cargo test --test man_pages`"
    );
    for (name, bytes) in &fresh {
        assert!(
            committed[name] == *bytes,
            "man/{name} is stale: run `WSLEDGER_BLESS=1 cargo test --test man_pages`"
        );
    }
    // Every subcommand has a page.
    for sub in wsledger::cli::command().get_subcommands() {
        let page = format!("wsledger-{}.1", sub.get_name());
        assert!(
            fresh.contains_key(&page),
            "no man page for {}",
            sub.get_name()
        );
    }
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wsledger"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for sub in wsledger::cli::command().get_subcommands() {
            assert!(
                text.contains(sub.get_name()),
                "{shell} completion lacks {}",
                sub.get_name()
            );
        }
    }
}

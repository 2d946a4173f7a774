//! Shared helpers for the CLI tests: run the built binary with a clean environment.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `wsledger` with `args`, no inherited WSLEDGER_* variables, no colour.
pub fn wsledger(args: &[&str]) -> Output {
    wsledger_env(args, &[])
}

/// [`wsledger`] with extra environment variables.
pub fn wsledger_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(args)
        .env_remove("WSLEDGER_WORKSPACE")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "120")
        .envs(env.iter().copied())
        .output()
        .expect("run wsledger");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every real fixture workspace directory.
pub fn real_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("verdict.json").exists())
        .collect();
    v.sort();
    v
}

/// Copies a fixture workspace into a fresh temporary directory.
pub fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new("fixtures").join(name);
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            continue; // e.g. `recovered-by-release/` beside a release fixture
        }
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// SHA-256 of a file's bytes (hex), or "absent".
pub fn file_hash(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    match std::fs::read(p) {
        Ok(b) => hex::encode(Sha256::digest(b)),
        Err(_) => "absent".into(),
    }
}

pub mod file_release;
pub mod maka_tests;

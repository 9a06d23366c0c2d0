//! Puts the commit loopgate was built from into `--version` (LOOPGATE_COMMIT); "unknown" when
//! the source is not a git checkout (a crates.io package, a tarball). Also relinks when the
//! hook path's link order changes.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// The platform layer's Linux fast paths (`src/platform`), unless the `portable` feature asks for
/// the code macOS and Windows run: `loopgate_fast_linux` (the worktree walk's `O_PATH` handles)
/// on any Linux, `loopgate_fast_start` (the C entry point) on glibc only, which hands `main` the
/// arguments std needs.
fn platform_cfgs() {
    println!("cargo::rustc-check-cfg=cfg(loopgate_fast_linux)");
    println!("cargo::rustc-check-cfg=cfg(loopgate_fast_start)");
    if std::env::var_os("CARGO_FEATURE_PORTABLE").is_some() {
        return;
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" {
        println!("cargo::rustc-cfg=loopgate_fast_linux");
        if env == "gnu" {
            println!("cargo::rustc-cfg=loopgate_fast_start");
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    platform_cfgs();
    // The x86_64 Linux linker reads these (contrib/link-hot-first): a new order must relink.
    println!("cargo:rerun-if-changed=contrib/hot-functions.txt");
    println!("cargo:rerun-if-changed=contrib/link-hot-first");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LOOPGATE_COMMIT={commit}");
    // Rebuild when HEAD moves: watch HEAD and the branch it points to, when they are files.
    let mut watch = vec!["HEAD".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(branch);
    }
    for name in watch {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if std::path::Path::new(&path).is_file() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}

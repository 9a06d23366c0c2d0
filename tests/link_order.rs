//! `contrib/link-hot-first`, the linker of x86_64 Linux builds (`.cargo/config.toml`), run with
//! stand-ins for `cc` and `nm`: every link but the static loopgate binary's must reach `cc`
//! unchanged, that one must get the hot functions in the list's order, resolved against the
//! objects' real (hashed) names, and a failing ordered link must fall back to the plain one.

use std::path::{Path, PathBuf};
use std::process::Command;

const LIST: &str = "\
# a comment, then the order wanted
_ZN5serde2de3foo
malloc
_ZN8loopgate4hook3run
_ZN8loopgate4gone
";

/// What the objects define, as `nm --defined-only` prints it.
const SYMBOLS: &str = "\
0000000000000010 T _ZN8loopgate4hook3run17h0123456789abcdefE
0000000000000020 t _ZN8loopgate5other4func17hfedcba9876543210E
0000000000000030 T _ZN5serde2de3foo17h1111111111111111E
0000000000000040 t _ZN5serde2de3foo17h2222222222222222E
";

const FAKE_CC: &str = r#"#!/bin/sh
ordered=
for a in "$@"; do
    case "$a" in *--symbol-ordering-file=*) ordered=1; cp "${a#*=}" "$FAKE/order.txt" ;; esac
done
printf '%s\n' "$*" >>"$FAKE/calls.log"
if [ -n "$ordered" ] && [ -f "$FAKE/fail-ordered" ]; then exit 1; fi
if [ -f "$FAKE/fail-all" ]; then exit 7; fi
exit 0
"#;

struct Linker {
    dir: tempfile::TempDir,
}

impl Linker {
    fn new() -> Linker {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/link-hot-first");
        std::fs::copy(script, dir.path().join("link-hot-first")).unwrap();
        std::fs::write(dir.path().join("hot-functions.txt"), LIST).unwrap();
        std::fs::write(dir.path().join("symbols"), SYMBOLS).unwrap();
        write_exec(&bin.join("cc"), FAKE_CC);
        write_exec(
            &bin.join("nm"),
            "#!/bin/sh\n[ \"$1\" = --defined-only ] && cat \"$FAKE/symbols\"\n",
        );
        Linker { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the wrapper: its exit code and each `cc` call's arguments.
    fn link(&self, args: &[&str]) -> (i32, Vec<String>) {
        let out = Command::new("sh")
            .arg(self.path("link-hot-first"))
            .args(args)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.path("bin").display()),
            )
            .env("FAKE", self.dir.path())
            .env("TMPDIR", self.path("tmp"))
            .output()
            .unwrap();
        let left: Vec<_> = std::fs::read_dir(self.path("tmp")).unwrap().collect();
        assert!(left.is_empty(), "the ordering file is removed: {left:?}");
        let calls = std::fs::read_to_string(self.path("calls.log")).unwrap_or_default();
        (
            out.status.code().unwrap_or(-1),
            calls.lines().map(String::from).collect(),
        )
    }

    fn order(&self) -> Option<String> {
        std::fs::read_to_string(self.path("order.txt")).ok()
    }
}

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const STATIC_LOOPGATE: &[&str] = &[
    "-m64",
    "/t/release/deps/loopgate-abc.loopgate.7f3-cgu.0.rcgu.o",
    "-static",
    "-o",
    "/t/release/deps/loopgate-abc",
];

#[test]
fn the_static_loopgate_binary_gets_its_hot_functions_first_in_the_lists_order() {
    let l = Linker::new();
    let (code, calls) = l.link(STATIC_LOOPGATE);
    assert_eq!(code, 0);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].starts_with(&STATIC_LOOPGATE.join(" ")),
        "the link's own arguments come first, unchanged: {}",
        calls[0]
    );
    assert!(calls[0].contains("-Wl,--no-warn-symbol-ordering"));
    assert_eq!(
        l.order().unwrap(),
        "_ZN5serde2de3foo17h1111111111111111E\n\
         _ZN5serde2de3foo17h2222222222222222E\n\
         malloc\n\
         _ZN8loopgate4hook3run17h0123456789abcdefE\n",
        "every instantiation of a listed Rust name, C names as they are, unlisted and missing \
         names left out"
    );
}

#[test]
fn other_links_reach_cc_unchanged() {
    for args in [
        // A build script, a test binary: not static.
        &[
            "-m64",
            "/t/debug/deps/x.rcgu.o",
            "-o",
            "/t/debug/deps/loopgate-abc",
        ][..],
        // Static, but not loopgate (the bench's minimal binary).
        &[
            "-m64",
            "/t/release/deps/floor-1.rcgu.o",
            "-static",
            "-o",
            "/t/release/deps/floor-1",
        ],
    ] {
        let l = Linker::new();
        let (code, calls) = l.link(args);
        assert_eq!(code, 0);
        assert_eq!(calls, vec![args.join(" ")]);
        assert!(l.order().is_none());
    }
}

#[test]
fn a_failing_ordered_link_falls_back_to_the_plain_link() {
    let l = Linker::new();
    std::fs::write(l.path("fail-ordered"), "").unwrap();
    let (code, calls) = l.link(STATIC_LOOPGATE);
    assert_eq!(code, 0, "the plain link succeeded: {calls:?}");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].contains("--symbol-ordering-file="));
    assert_eq!(calls[1], STATIC_LOOPGATE.join(" "));
}

#[test]
fn a_failing_plain_link_fails_the_build_with_its_code() {
    let l = Linker::new();
    std::fs::write(l.path("fail-all"), "").unwrap();
    let (code, calls) = l.link(&["-m64", "a.o", "-o", "/t/deps/b"]);
    assert_eq!(code, 7);
    assert_eq!(calls.len(), 1);
    let (code, calls) = l.link(STATIC_LOOPGATE);
    assert_eq!(code, 7, "{calls:?}");
}

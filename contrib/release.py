#!/usr/bin/env python3
"""Builds loopgate's release files into one directory.

    contrib/release.py OUTDIR [TARGET...]            build each target, then package
    contrib/release.py OUTDIR --prebuilt T=PATH ...  package binaries built elsewhere
    contrib/release.py OUTDIR --assemble             only the main npm package and SHA256SUMS

For each target OUTDIR gets `loopgate-<version>-<target>.tar.gz` (`.zip` for Windows) and the
platform's npm package `loopgate-cli-<os>-<cpu>-<version>.tgz` (`npm pack` of
`@loopgate/cli-<os>-<cpu>`); then the main npm package `loopgate-<version>.tgz`, whose
optionalDependencies name every platform package in OUTDIR, and `SHA256SUMS` over all of them.
The release workflow (.github/workflows/release.yml) runs this per runner, then `--assemble` once
over everything the runners made. The version is Cargo.toml's.

With no TARGET, every target this machine can link is built; the Apple targets need Apple's SDK,
so elsewhere they are skipped with a line saying so (name them to try anyway). Linux targets are
static musl builds through `cargo zigbuild`; it installs nothing: what is missing is named.

Python 3.8+ standard library only, so the same command runs on Linux, macOS and Windows runners.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NPM_SCOPE = "@loopgate"

# target triple -> (npm os, npm cpu): Node's process.platform / process.arch names.
TARGETS = {
    "x86_64-unknown-linux-musl": ("linux", "x64"),
    "aarch64-unknown-linux-musl": ("linux", "arm64"),
    "x86_64-apple-darwin": ("darwin", "x64"),
    "aarch64-apple-darwin": ("darwin", "arm64"),
    "x86_64-pc-windows-gnu": ("win32", "x64"),
}

# Every release archive and package has files stamped with this time (2020-01-01), so the same
# binaries give byte-identical archives and the SHA256SUMS can be reproduced.
EPOCH = 1577836800


def say(msg):
    print(f"release: {msg}", flush=True)


def die(msg):
    print(f"release: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def version():
    text = (REPO / "Cargo.toml").read_text(encoding="utf-8")
    package = text.split("[package]", 1)[1].split("\n[", 1)[0]
    m = re.search(r'^version\s*=\s*"([^"]+)"', package, re.M)
    if not m:
        die("no version in Cargo.toml's [package]")
    return m.group(1)


def exe_name(target):
    return "loopgate.exe" if "windows" in target else "loopgate"


def npm_name(target):
    os_name, cpu = TARGETS[target]
    return f"{NPM_SCOPE}/cli-{os_name}-{cpu}"


def can_link_here(target):
    return "apple-darwin" not in target or sys.platform == "darwin"


def run(cmd, **kw):
    say("$ " + " ".join(str(c) for c in cmd))
    try:
        subprocess.run([str(c) for c in cmd], check=True, **kw)
    except FileNotFoundError:
        die(f"{cmd[0]} is not installed")
    except subprocess.CalledProcessError as e:
        die(f"{' '.join(str(c) for c in cmd[:3])}… failed with exit code {e.returncode}")


def require(tool, hint):
    if shutil.which(tool) is None:
        die(f"{tool} not found; {hint}")


def build(target):
    """Builds the release binary for `target` and returns its path."""
    require("cargo", "install Rust from https://rustup.rs")
    cmd = ["cargo"]
    flags = []
    if target.endswith("-linux-musl"):
        # Static and non-PIE, as the glibc build-static: a hook call starts no loader and applies
        # no relocations (README, "Benchmark").
        require("cargo-zigbuild", "pip install cargo-zigbuild ziglang")
        cmd.append("zigbuild")
        flags = ["--config", f"target.{target}.rustflags=['-C','relocation-model=static']"]
    elif target.endswith("-apple-darwin") and sys.platform != "darwin":
        require("cargo-zigbuild", "pip install cargo-zigbuild ziglang")
        cmd.append("zigbuild")
    elif target == "x86_64-pc-windows-gnu" and sys.platform != "win32":
        require("x86_64-w64-mingw32-gcc", "install mingw-w64 (Debian: gcc-mingw-w64-x86-64)")
        cmd.append("build")
    else:
        cmd.append("build")
    run(cmd + ["--release", "--locked", "--target", target] + flags, cwd=REPO)
    out = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not out.is_absolute():
        out = REPO / out
    built = out / target / "release" / exe_name(target)
    if not built.is_file():
        die(f"the build finished but {built} is missing")
    return built


def tar_info(name, size, mode):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(outdir, target, binary, ver):
    """`loopgate-<v>-<target>/` holding the binary, LICENSE and README.md, as cargo-binstall's
    `bin-dir` in Cargo.toml expects."""
    top = f"loopgate-{ver}-{target}"
    files = [
        (exe_name(target), binary.read_bytes(), 0o755),
        ("LICENSE", (REPO / "LICENSE").read_bytes(), 0o644),
        ("README.md", (REPO / "README.md").read_bytes(), 0o644),
    ]
    if "windows" in target:
        path = outdir / f"{top}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data, mode in files:
                zi = zipfile.ZipInfo(f"{top}/{name}", date_time=(2020, 1, 1, 0, 0, 0))
                zi.external_attr = (0o100000 | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
    else:
        path = outdir / f"{top}.tar.gz"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name, data, mode in files:
                t.addfile(tar_info(f"{top}/{name}", len(data), mode), io.BytesIO(data))
        with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=EPOCH, filename="") as g:
            g.write(buf.getvalue())
    say(f"wrote {path.name}")


def base_manifest(ver):
    main = json.loads((REPO / "npm" / "loopgate" / "package.json").read_text(encoding="utf-8"))
    keep = ("license", "homepage", "repository", "engines")
    return {k: main[k] for k in keep if k in main}, main


def npm_pack(stage, outdir):
    require("npm", "install Node.js (npm packs the packages)")
    out = subprocess.run(
        ["npm", "pack", "--silent", "--pack-destination", str(outdir.resolve())],
        cwd=stage, check=False, capture_output=True, text=True, shell=(sys.platform == "win32"),
    )
    if out.returncode != 0:
        die(f"npm pack in {stage} failed:\n{out.stderr}")
    name = out.stdout.strip().splitlines()[-1]
    say(f"wrote {name}")
    return name


def write_platform_package(outdir, target, binary, ver):
    os_name, cpu = TARGETS[target]
    common, _ = base_manifest(ver)
    manifest = {
        "name": npm_name(target),
        "version": ver,
        "description": f"The loopgate binary for {os_name}-{cpu} ({target}); installed by the `loopgate` package",
        **common,
        "os": [os_name],
        "cpu": [cpu],
        "files": ["bin/", "LICENSE"],
        "preferUnplugged": True,
    }
    # Linux binaries are static (musl): they run on glibc and musl systems alike, so no `libc`.
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        (stage / "bin").mkdir()
        dest = stage / "bin" / exe_name(target)
        shutil.copyfile(binary, dest)
        dest.chmod(0o755)
        shutil.copyfile(REPO / "LICENSE", stage / "LICENSE")
        (stage / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        npm_pack(stage, outdir)


def platform_packages(outdir, ver):
    """The platform packages of this version already in `outdir`, by npm name."""
    found = []
    for target in TARGETS:
        os_name, cpu = TARGETS[target]
        if (outdir / f"loopgate-cli-{os_name}-{cpu}-{ver}.tgz").is_file():
            found.append(npm_name(target))
    return found


def write_main_package(outdir, ver):
    names = platform_packages(outdir, ver)
    if not names:
        die(f"no platform packages of {ver} in {outdir}: build a target first")
    _, manifest = base_manifest(ver)
    manifest["version"] = ver
    manifest["optionalDependencies"] = {n: ver for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        (stage / "bin").mkdir()
        shutil.copyfile(REPO / "npm" / "loopgate" / "bin" / "loopgate.js", stage / "bin" / "loopgate.js")
        (stage / "bin" / "loopgate.js").chmod(0o755)
        for helper in ("agent-sdk.js", "agent-sdk.d.ts"):
            shutil.copyfile(REPO / "npm" / "loopgate" / helper, stage / helper)
        shutil.copyfile(REPO / "npm" / "loopgate" / "README.md", stage / "README.md")
        # OpenCode's and Kilo's plugin, as `loopgate setup --agent opencode|kilo` writes it (with
        # the binary's path filled in); this copy runs `loopgate` from PATH.
        (stage / "opencode").mkdir()
        shutil.copyfile(REPO / "src" / "setup" / "opencode-plugin.js", stage / "opencode" / "loopgate.js")
        shutil.copyfile(REPO / "LICENSE", stage / "LICENSE")
        (stage / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        npm_pack(stage, outdir)
    say("the main package depends on: " + ", ".join(names))


def write_sums(outdir, ver):
    names = sorted(
        p.name for p in outdir.iterdir()
        if p.is_file() and ver in p.name and p.name.endswith((".tar.gz", ".zip", ".tgz"))
    )
    lines = []
    for name in names:
        digest = hashlib.sha256((outdir / name).read_bytes()).hexdigest()
        lines.append(f"{digest}  {name}\n")
    (outdir / "SHA256SUMS").write_text("".join(lines), encoding="utf-8", newline="\n")
    say(f"wrote SHA256SUMS ({len(lines)} files)")


def main():
    ap = argparse.ArgumentParser(
        description="Build loopgate's release archives, npm packages and SHA256SUMS into OUTDIR.",
        epilog="Targets: " + ", ".join(TARGETS),
    )
    ap.add_argument("outdir", type=Path)
    ap.add_argument("targets", nargs="*", metavar="TARGET")
    ap.add_argument("--prebuilt", action="append", default=[], metavar="TARGET=PATH",
                    help="package this binary for TARGET instead of building it (repeatable)")
    ap.add_argument("--assemble", action="store_true",
                    help="build nothing: write the main npm package and SHA256SUMS from OUTDIR")
    args = ap.parse_args()

    ver = version()
    outdir = args.outdir
    outdir.mkdir(parents=True, exist_ok=True)

    prebuilt = {}
    for item in args.prebuilt:
        target, sep, path = item.partition("=")
        if not sep or target not in TARGETS:
            die(f"--prebuilt {item}: expected TARGET=PATH with TARGET one of {', '.join(TARGETS)}")
        if not Path(path).is_file():
            die(f"--prebuilt {item}: {path} is not a file")
        prebuilt[target] = Path(path)
    for target in args.targets:
        if target not in TARGETS:
            die(f"unknown target {target}; known: {', '.join(TARGETS)}")

    if args.assemble:
        wanted = []
    elif args.targets or prebuilt:
        wanted = list(dict.fromkeys(args.targets + list(prebuilt)))
    else:
        wanted = []
        for target in TARGETS:
            if can_link_here(target):
                wanted.append(target)
            else:
                say(f"skipping {target}: linking needs Apple's SDK (a macOS runner builds it; "
                    "name it to try anyway)")

    say(f"loopgate {ver} -> {outdir}")
    for target in wanted:
        binary = prebuilt.get(target) or build(target)
        write_archive(outdir, target, binary, ver)
        write_platform_package(outdir, target, binary, ver)
    write_main_package(outdir, ver)
    write_sums(outdir, ver)


if __name__ == "__main__":
    main()

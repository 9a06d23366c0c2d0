#!/usr/bin/env node
// The npm package's `loopgate` command: runs the native loopgate binary shipped in the platform
// package npm selected (`@loopgate/cli-<platform>-<arch>`, one of this package's
// optionalDependencies; npm installs only the one whose `os`/`cpu` match). Arguments, stdin,
// stdout, stderr and the exit code pass through unchanged.
//
// The hooks never run this file: `loopgate setup` through it first copies the native binary to a
// stable per-user place and wires that (`--bin`), so hook calls pay no Node start-up and survive
// npx clearing its cache or `npm uninstall -g`. See docs/install.md.
"use strict";

const { spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const exe = process.platform === "win32" ? "loopgate.exe" : "loopgate";
const packageName = `@loopgate/cli-${process.platform}-${process.arch}`;

function fail(message) {
  process.stderr.write(`loopgate: ${message}\n`);
  process.exit(1);
}

function nativeBinary() {
  let manifest;
  try {
    manifest = require.resolve(`${packageName}/package.json`);
  } catch (_) {
    const own = require("../package.json");
    const known = Object.keys(own.optionalDependencies || {}).join(", ") || "none";
    fail(
      `no prebuilt binary for ${process.platform}-${process.arch} (${packageName} is not installed). ` +
        `Prebuilt: ${known}. If yours is listed, reinstall without --no-optional/--omit=optional; ` +
        "otherwise build from source: cargo install loopgate"
    );
  }
  return path.join(path.dirname(manifest), "bin", exe);
}

// Where `setup` puts the binary the hooks run: a per-user directory that no package manager
// cleans up. The Claude Code plugin's hook wrapper looks here too (hooks/loopgate-hook).
function stableBinDir() {
  const home = os.homedir();
  if (process.platform === "win32") {
    return path.join(process.env.LOCALAPPDATA || path.join(home, "AppData", "Local"), "loopgate", "bin");
  }
  if (process.platform === "darwin") {
    return path.join(home, "Library", "Application Support", "loopgate", "bin");
  }
  return path.join(process.env.XDG_DATA_HOME || path.join(home, ".local", "share"), "loopgate", "bin");
}

// The subcommand and whether `setup` should get the stable copy: only a plain install, not when
// the user names the binary, removes or restores, asks for help, or installs managed settings
// (which want a root-owned binary the user chooses).
const GLOBAL_WITH_VALUE = new Set(["--state-dir", "--config", "--agent"]);
function setupNeedsStableBin(args) {
  let i = 0;
  while (i < args.length && args[i].startsWith("-")) {
    i += GLOBAL_WITH_VALUE.has(args[i]) ? 2 : 1;
  }
  if (args[i] !== "setup") return false;
  return !args.slice(i + 1).some((a) => {
    const flag = a.split("=")[0];
    return ["--bin", "--uninstall", "--restore", "--managed", "--managed-dir", "-h", "--help"].includes(flag);
  });
}

// Copies the binary into place atomically (a hook may be running the old one); unchanged bytes
// are left alone.
function installStable(source) {
  const dir = stableBinDir();
  const target = path.join(dir, exe);
  const bytes = fs.readFileSync(source);
  try {
    if (fs.readFileSync(target).equals(bytes)) return target;
  } catch (_) {
    // not there yet
  }
  fs.mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${exe}.${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, bytes, { mode: 0o755 });
    fs.renameSync(tmp, target);
  } catch (e) {
    try {
      fs.unlinkSync(tmp);
    } catch (_) {
      // nothing to clean
    }
    fail(`cannot install the binary at ${target}: ${e.message}` +
      (process.platform === "win32" ? " (close running agent sessions and retry)" : ""));
  }
  process.stderr.write(`loopgate: installed the native binary at ${target}; the hooks run it\n`);
  return target;
}

function main() {
  const binary = nativeBinary();
  const args = process.argv.slice(2);
  if (setupNeedsStableBin(args)) {
    args.push("--bin", installStable(binary));
  }
  const result = spawnSync(binary, args, { stdio: "inherit", windowsHide: true });
  if (result.error) {
    fail(`cannot run ${binary}: ${result.error.message}`);
  }
  if (result.signal) {
    // Die the way the binary died, so a caller sees the same signal.
    process.removeAllListeners(result.signal);
    process.kill(process.pid, result.signal);
  }
  process.exit(result.status === null ? 1 : result.status);
}

main();

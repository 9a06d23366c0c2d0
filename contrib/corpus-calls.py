#!/usr/bin/env python3
"""Writes tests/data/corpus_calls.json: every Bash command and file edit of a directory of Claude
Code transcripts (JSONL), deduplicated, edit texts clipped (the guard reads them only for settings
and startup files), the sessions' home directories anonymised. Usage:
contrib/corpus-calls.py TRANSCRIPTS_DIR > tests/data/corpus_calls.json
"""
import glob
import json
import os
import re
import sys

TOOLS = ("Bash", "Edit", "Write", "MultiEdit", "NotebookEdit")


# A user's home as the transcripts name it (macOS or Linux), written as `$HOME`: no machine's
# path or user name ends up in the repository, and a command still names a home directory.
HOME = re.compile(r"/(?:Users|home)/[^/\s\"'`:;|&)]+")
# A directory named `work` is where this project's own machines keep their checkouts: written
# `code`, so that no path in the repository looks like one of them.
WORK = re.compile(r"/work(?=[/\s\"'`:;|&)]|$)")


def anonymise(v):
    if isinstance(v, str):
        return WORK.sub("/code", HOME.sub("$HOME", v))
    if isinstance(v, list):
        return [anonymise(x) for x in v]
    if isinstance(v, dict):
        return {k: anonymise(x) for k, x in v.items()}
    return v


def clip(v):
    if isinstance(v, str):
        return v[:160]
    if isinstance(v, list):
        return [clip(x) for x in v]
    if isinstance(v, dict):
        return {k: clip(x) for k, x in v.items() if k != "description"}
    return v


def main(root):
    out, seen = [], set()
    for path in sorted(glob.glob(os.path.join(root, "*.jsonl"))):
        for line in open(path, errors="replace"):
            try:
                content = json.loads(line)["message"]["content"]
            except (ValueError, KeyError, TypeError):
                continue
            for block in content if isinstance(content, list) else []:
                if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                    continue
                tool, inp = block.get("name"), block.get("input") or {}
                if tool not in TOOLS:
                    continue
                inp = {"command": inp.get("command", "")} if tool == "Bash" else clip(inp)
                inp = anonymise(inp)
                key = json.dumps([tool, inp], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append([tool, inp])
    about = (
        "Every Bash command and file edit (Edit, Write, MultiEdit) in the 78 real Claude Code "
        "sessions of the project's transcript corpus, deduplicated; edit texts clipped to 160 "
        "characters (the guard reads them only for settings and startup files); home directories "
        "written $HOME. Regenerate with "
        "contrib/corpus-calls.py."
    )
    json.dump({"about": about, "calls": out}, sys.stdout, indent=0, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1])

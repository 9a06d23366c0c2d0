#!/usr/bin/env python3
"""Which module of src/ uses which, and the circles among them.

Reads every `crate::<module>` path in src/ (in `use` lines and in code), maps each file to its
top-level module (src/engine.rs and src/detectors/repeat.rs are `engine` and `detectors`), and
prints the strongly connected components with more than one module: each is an import circle.
With --edges it also prints every module's uses. Exit status 1 when there is a circle.

    python3 contrib/import-graph.py            # the circles
    python3 contrib/import-graph.py --edges    # and who uses whom
"""

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
# `use crate::{a, b::c}`: the braces name several modules at once.
GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)


def module_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    first = rel.parts[0]
    return first[:-3] if first.endswith(".rs") else first


def uses(text: str) -> set:
    found = set(PATH.findall(text))
    for group in GROUP.findall(text):
        for item in group.split(","):
            name = item.strip().split("::")[0].strip()
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                found.add(name)
    return found


def graph() -> dict:
    edges = {}
    for path in sorted(SRC.rglob("*.rs")):
        text = path.read_text(encoding="utf-8")
        # Tests may reach anywhere; the layering is about the code that ships.
        text = text.split("#[cfg(test)]")[0]
        me = module_of(path)
        if me in ("lib", "main"):
            continue
        edges.setdefault(me, set()).update(u for u in uses(text) if u != me)
    known = set(edges)
    return {m: {u for u in us if u in known} for m, us in edges.items()}


def circles(edges: dict) -> list:
    """Tarjan's strongly connected components, the ones with more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    edges = graph()
    if "--edges" in sys.argv:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")
        print()
    found = circles(edges)
    for comp in found:
        print("circle: " + " <-> ".join(comp))
        # The most direct circles in it: two modules that use each other.
        for a in comp:
            for b in comp:
                if a < b and b in edges[a] and a in edges[b]:
                    print(f"  {a} <-> {b}")
    print(f"{len(edges)} modules, {len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

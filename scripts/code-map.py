#!/usr/bin/env python3
"""Prints the code map of src/ for CONTRIBUTING.md: every source file, grouped by top-level module in
layer order (highest first), each with the first sentence of its module doc (`//!`).

    python3 scripts/code-map.py            # print the map (Markdown)
    python3 scripts/code-map.py --write    # replace the map between the markers in CONTRIBUTING.md
    python3 scripts/code-map.py --check    # exit 1 if CONTRIBUTING.md's map is stale, or if a file
                                           # imports a top-level module above its own layer

The layer order is LAYERS below; CONTRIBUTING.md explains it. Unit-test files (`tests.rs`,
`test_support.rs`) are left out. Standard library only.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")
BEGIN, END = "<!-- code map begin (scripts/code-map.py --write) -->", "<!-- code map end -->"

# Top-level modules, highest layer first: each imports only from the ones after it.
LAYERS = [
    "main.rs", "lib.rs", "bin", "cli", "runtime", "admin", "decision", "proxy", "pipeline", "snapshot", "policy",
    "quota", "upstream", "concurrency", "identity", "edge", "routing", "region", "response",
    "observe", "live", "store", "tls", "config", "limit", "tenant_id", "http", "hashing", "pending",
]


def files():
    out = []
    for root, dirs, names in os.walk(SRC):
        dirs.sort()
        for n in sorted(names):
            if n.endswith(".rs") and n not in ("tests.rs", "test_support.rs"):
                out.append(os.path.relpath(os.path.join(root, n), SRC))
    return out


def top(rel):
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") and head not in ("main.rs", "lib.rs") else head


def summary(rel):
    doc = []
    for line in open(os.path.join(SRC, rel), encoding="utf-8"):
        s = line.strip()
        if s.startswith("//!"):
            doc.append(s[3:].strip())
        elif s and not s.startswith("#!"):
            break
    text = " ".join(d for d in doc if d)
    m = re.match(r"(.+?\.)(\s|$)", text)
    first = m.group(1) if m else text
    return first if len(first) <= 200 else first[:197].rsplit(" ", 1)[0] + " ..."


def render():
    groups = {}
    for rel in files():
        groups.setdefault(top(rel), []).append(rel)
    unknown = sorted(set(groups) - set(LAYERS))
    if unknown:
        sys.exit(f"code-map: top-level modules missing from LAYERS: {', '.join(unknown)}")
    lines = [BEGIN, ""]
    for layer in LAYERS:
        for rel in groups.get(layer, []):
            lines.append(f"- `src/{rel}`: {summary(rel)}")
    lines += ["", END]
    return "\n".join(lines)


def strip(text):
    """Source without comments, string literals and `#[cfg(test)] mod x { ... }` blocks."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def upward_imports():
    """(file, module) for every `crate::<module>` path that names a layer above the file's own.
    An import marked deliberate (a comment containing `layering: deliberate` on its line) is
    allowed."""
    rank = {m: i for i, m in enumerate(LAYERS)}
    bad = []
    for rel in files():
        own = top(rel)
        if own in ("main.rs", "lib.rs", "bin"):
            continue
        raw = open(os.path.join(SRC, rel), encoding="utf-8").read()
        allowed = {m.group(1) for line in raw.splitlines() if "layering: deliberate" in line
                   for m in re.finditer(r"crate::(\w+)", line)}
        used = set(re.findall(r"\bcrate::(\w+)", strip(raw)))
        for module in sorted(used - allowed):
            if module in rank and rank[module] < rank[own]:
                bad.append((rel, module))
    return bad


def main():
    text = render()
    if "--check" in sys.argv:
        failed = False
        doc = open(CONTRIBUTING, encoding="utf-8").read()
        if text not in doc:
            print("code-map: CONTRIBUTING.md's code map is stale: run python3 scripts/code-map.py --write")
            failed = True
        for rel, module in upward_imports():
            print(f"code-map: src/{rel} imports crate::{module}, a layer above its own")
            failed = True
        if not failed:
            print(f"code-map: {text.count(chr(10) + '- ')} files mapped, no upward import")
        sys.exit(1 if failed else 0)
    if "--write" not in sys.argv:
        print(text)
        return
    doc = open(CONTRIBUTING, encoding="utf-8").read()
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        sys.exit(f"code-map: markers not found in CONTRIBUTING.md")
    open(CONTRIBUTING, "w", encoding="utf-8").write(doc)


if __name__ == "__main__":
    main()

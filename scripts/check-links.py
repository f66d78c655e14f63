#!/usr/bin/env python3
"""Check tollgate's documentation links and the code's citations of the docs.

    python3 scripts/check-links.py [--root DIR]

(a) Every relative Markdown link in README.md, CONTRIBUTING.md, docs/*.md and bench/*.md
    (`[x](path)`, `[x](path#anchor)`, `[x](#anchor)`, images and reference definitions too) must
    name an existing file or directory, and its anchor a heading of the target Markdown file
    (GitHub's slugs: lower case, punctuation other than `-` and `_` dropped, spaces to `-`, repeated
    headings suffixed -1, -2, ...). http(s)/mailto links, links inside fenced code blocks and inside
    inline code are ignored.
(b) Every citation of a docs page in src/**/*.rs must name an existing file: `docs/<name>.md`,
    `docs/<name>.md#<anchor>` (the anchor must exist), and `docs/<name>.md <N>` or
    `docs/<name>.md section(s) <N>[, <M>, <N>-<M>, <N>/<M>]` where N looks like a section number
    (`1`, `4c`): the page must have a heading starting with that number (`## 4c.`, `### 4c.`).
(c) A `README "<X>"` citation left in src/**/*.rs must name a heading of README.md.
(d) A path (src/..., lua/..., docs/...) named in a comment of lua/**/*.lua must exist.

Prints each broken link or citation as `file:line: ...` and exits 1 if there is any; 0 otherwise.
Python 3 standard library only.
"""

import argparse
import glob
import os
import re
import sys

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")

# Citations in Rust sources. Between the page and its section number: an optional closing
# backtick, whitespace (a line break and a comment marker included), an optional "section(s)".
GAP = r"`?(?:[ \t]+|[ \t]*\n[ \t]*//[/!]?[ \t]*)"
SECNUM = r"\d+[a-z]?(?![\w.])"
DOC_CITE = re.compile(
    r"docs/([A-Za-z0-9_.-]+?\.md)(#[A-Za-z0-9_-]+)?"
    r"(?:" + GAP + r"(?:sections?" + GAP + r")?"
    r"(" + SECNUM + r"(?:[ \t]*(?:[-–/,]|and)[ \t]*" + SECNUM + r")*))?"
)
README_CITE = re.compile(r"README(?:\.md)?,?" + GAP.replace("`?", "") + r"\\?\"([^\"\\\n]+)\\?\"")


def slugify(text):
    """GitHub's heading anchor for the heading text `text` (before de-duplication)."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)  # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w is Unicode-aware: letters, digits, _
    return text.replace(" ", "-")


def markdown_lines(path):
    """(line number, text, in_fence) for each line of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            yield no, line, True
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            yield no, line, True
            continue
        yield no, line, False


_headings = {}


def headings(path):
    """(anchors, heading texts) of a Markdown file, cached."""
    path = os.path.normpath(path)
    if path not in _headings:
        anchors, texts, seen = set(), [], {}
        prev = None
        for _, line, in_fence in markdown_lines(path):
            text = None
            if not in_fence:
                m = ATX.match(line)
                if m:
                    text = m.group(2)
                elif prev and prev.strip() and SETEXT.match(line) and not ATX.match(prev):
                    text = prev.strip()
                for a in HTML_ANCHOR.findall(line):
                    anchors.add(a)
            prev = None if in_fence else line
            if text is None:
                continue
            texts.append(text)
            slug = slugify(text)
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else "%s-%d" % (slug, n))
        _headings[path] = (anchors, texts)
    return _headings[path]


def check_markdown(root, rel, errors):
    path = os.path.join(root, rel)
    base = os.path.dirname(path)
    count = 0
    for no, line, in_fence in markdown_lines(path):
        if in_fence:
            continue
        targets = []
        m = REF_DEF.match(line)
        if m:
            targets.append(m.group(1))
        plain = CODE_SPAN.sub(lambda m: "code", line)
        targets += [t for t in INLINE_LINK.findall(plain)]
        for target in targets:
            if not target or EXTERNAL.match(target):
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
            where = "%s:%d" % (rel, no)
            if not os.path.exists(dest):
                errors.append("%s: link to %s: no such file" % (where, target))
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if anchor not in headings(dest)[0]:
                    errors.append(
                        "%s: link to %s: no heading with anchor #%s in %s"
                        % (where, target, anchor, os.path.relpath(dest, root))
                    )
    return count


def section_numbers(spec):
    return re.findall(SECNUM, spec)


def has_section(path, number):
    pattern = re.compile(r"^" + re.escape(number) + r"\.(\s|$)")
    return any(pattern.match(text) for text in headings(path)[1])


def check_sources(root, errors):
    count = 0
    readme = os.path.join(root, "README.md")
    readme_texts = {slugify(t) for t in headings(readme)[1]} if os.path.exists(readme) else set()
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()

        def line_of(pos):
            return text.count("\n", 0, pos) + 1

        for m in DOC_CITE.finditer(text):
            count += 1
            page, anchor, spec = m.group(1), m.group(2), m.group(3)
            where = "%s:%d" % (rel, line_of(m.start()))
            dest = os.path.join(root, "docs", page)
            cited = m.group(0).replace("\n", " ")
            if not os.path.isfile(dest):
                errors.append("%s: cites docs/%s: no such file" % (where, page))
                continue
            if anchor and anchor[1:] not in headings(dest)[0]:
                errors.append("%s: cites docs/%s%s: no such heading" % (where, page, anchor))
            if spec:
                for number in section_numbers(spec):
                    if not has_section(dest, number):
                        errors.append(
                            "%s: cites %r: docs/%s has no heading starting with %s."
                            % (where, cited, page, number)
                        )
        for m in README_CITE.finditer(text):
            count += 1
            title = m.group(1)
            if slugify(title) not in readme_texts:
                errors.append(
                    '%s: cites README "%s": README.md has no such heading (cite the docs page instead)'
                    % (rel + ":" + str(line_of(m.start())), title)
                )
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args()
    root = os.path.normpath(args.root)

    files = ["README.md", "CONTRIBUTING.md"]
    files += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    files += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "bench", "*.md")))
    errors = []
    links = 0
    for rel in files:
        if os.path.isfile(os.path.join(root, rel)):
            links += check_markdown(root, rel, errors)
        else:
            errors.append("%s: missing" % rel)
    citations = check_sources(root, errors)
    # Source files named in code spans (`src/quota/mod.rs`) exist; dated entries in
    # bench/RESULTS.md keep the paths of their commit and are not checked.
    for rel in files:
        if rel == os.path.join("bench", "RESULTS.md") or not os.path.isfile(os.path.join(root, rel)):
            continue
        for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8"), 1):
            for path in re.findall(r"`(src/[A-Za-z0-9_./-]+\.rs)`", line):
                if not os.path.isfile(os.path.join(root, path)):
                    errors.append("%s:%d: names %s, which does not exist" % (rel, n, path))

    # Paths named in the Lua scripts' comments (src/..., lua/..., docs/...) exist.
    for lua in sorted(glob.glob(os.path.join(root, "lua", "**", "*.lua"), recursive=True)):
        rel = os.path.relpath(lua, root)
        for n, line in enumerate(open(lua, encoding="utf-8"), 1):
            if not line.lstrip().startswith("--"):
                continue
            for path in re.findall(r"\b((?:src|lua|docs)/[A-Za-z0-9_./-]*[A-Za-z0-9_])", line):
                if not os.path.exists(os.path.join(root, path)):
                    errors.append("%s:%d: names %s, which does not exist" % (rel, n, path))

    for e in errors:
        print(e)
    print(
        "check-links: %d links in %d Markdown files, %d citations in src/: %s"
        % (links, len(files), citations, "%d broken" % len(errors) if errors else "all resolve")
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

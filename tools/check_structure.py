#!/usr/bin/env python3
"""Structure checks for chutney's sources (issue 26).

  tools/check_structure.py [--max-lines N] [--list] [--root DIR]   (meson test: `structure`, suite unit)

1. Include graph between the folders of core/: prints each folder's dependencies
   and every cycle (a folder that reaches itself through #include "other/...").
2. Function length in core/ and backends/ (C, C++, CUDA, OpenCL C, GLSL): a
   function is counted from the line that opens its body to the line that
   closes it; lambdas count as part of the function around them.

Exits 1 when a cycle exists or a function is longer than --max-lines (120),
so the test command can hold the line. --list prints the 20 longest functions.
"""
import argparse
import os
import re
import sys

SRC_EXT = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".cl", ".glsl", ".comp")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/')
NOT_FUNC = re.compile(r"\b(if|for|while|switch|catch|do|else|namespace|struct|class|"
                      r"enum|union|extern|try|return)\b\s*[^;]*$")


def core_graph(root):
    core = os.path.join(root, "core")
    folders = sorted(d for d in os.listdir(core) if os.path.isdir(os.path.join(core, d)))
    deps = {f: set() for f in folders}
    for f in folders:
        for name in os.listdir(os.path.join(core, f)):
            if not name.endswith(SRC_EXT):
                continue
            with open(os.path.join(core, f, name), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    m = INCLUDE_RE.match(line)
                    if m and m.group(1) in deps and m.group(1) != f:
                        deps[f].add(m.group(1))
    return deps


def cycles(deps):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps[v]):
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

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def strip_code(text):
    """Blank out comments and string/char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = strip_code(fh.read())
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)  # preprocessor lines
    res = []
    stack = []  # entries: (kind, start_line, name)
    header = []
    line = 1
    in_func = 0
    for ch in text:
        if ch == "\n":
            line += 1
            header.append(ch)
        elif ch == "{":
            h = "".join(header).strip()
            is_func = False
            if not in_func and h.endswith(")") or (not in_func and re.search(
                    r"\)\s*(const|noexcept|override|final|mutable|->\s*[\w:<>*&\s]+)*\s*$", h)):
                is_func = not NOT_FUNC.search(h.split("\n")[-1] if "\n" in h else h) \
                    and "=" not in h.split("(")[0]
            if is_func:
                m = re.search(r"([~\w:]+)\s*\(", h)
                stack.append(("f", line, m.group(1) if m else "?"))
                in_func += 1
            else:
                stack.append(("b", line, ""))
            header = []
        elif ch == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "f":
                    in_func -= 1
                    res.append((line - start + 1, start, name))
            header = []
        elif ch == ";":
            header = []
        else:
            header.append(ch)
    return res


def walk(root, sub):
    for dp, dns, fns in os.walk(os.path.join(root, sub)):
        dns[:] = sorted(d for d in dns if not d.startswith("."))
        for fn in sorted(fns):
            if fn.endswith(SRC_EXT):
                yield os.path.join(dp, fn)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--max-lines", type=int, default=120)
    ap.add_argument("--list", action="store_true", help="print the 20 longest functions")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    bad = False

    deps = core_graph(root)
    print("core folder dependencies:")
    for f in sorted(deps):
        print(f"  {f:9s} -> {' '.join(sorted(deps[f])) or '(none)'}")
    cyc = cycles(deps)
    for c in cyc:
        print("include cycle between core folders: " + " <-> ".join(c))
        bad = True
    if not cyc:
        print("no include cycle between core folders")

    allf = []
    for sub in ("core", "backends"):
        for p in walk(root, sub):
            for n, start, name in functions(p):
                allf.append((n, os.path.relpath(p, root), start, name))
    allf.sort(reverse=True)
    long = [f for f in allf if f[0] > a.max_lines]
    for n, p, start, name in long:
        print(f"function too long: {p}:{start} {name}: {n} lines (limit {a.max_lines})")
        bad = True
    if a.list:
        for n, p, start, name in allf[:20]:
            print(f"  {n:4d}  {p}:{start} {name}")
    print(f"{len(allf)} functions in core/ and backends/, longest {allf[0][0] if allf else 0} lines,"
          f" {len(long)} over {a.max_lines}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

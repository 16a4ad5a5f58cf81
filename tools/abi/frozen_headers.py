#!/usr/bin/env python3
"""Released ABI header sets, kept as one frozen text file per minor (tests/abi/compat/1.N.frozen).

  frozen_headers.py pack ABI_DIR VERSION OUT.frozen   freeze abi/chutney/*.h as released
  frozen_headers.py unpack IN.frozen OUT_DIR [STAMP]  write OUT_DIR/chutney/*.h (build time)
  frozen_headers.py check IN.frozen                   verify the file's checksum

A frozen file is a release artefact, not source: the headers exactly as a minor shipped them,
each after a line `@@@@ chutney-frozen-file: chutney/NAME.h`, and a first line naming the
version and the SHA-256 of everything after it. `unpack` (run by Meson at configure time)
refuses a file whose checksum does not match, so an edit to a released header set fails the
build instead of silently weakening the compatibility suite (docs/ABI.md). A new minor adds its
own file with `pack`; nobody edits an old one.
"""
import hashlib
import os
import sys

MARK = "@@@@ chutney-frozen-file: "
HEAD = "# chutney frozen ABI header set {version} sha256 {digest} (tools/abi/frozen_headers.py; never edit)\n"


def body_of(text):
    first, _, body = text.partition("\n")
    if not first.startswith("# chutney frozen ABI header set "):
        raise ValueError("not a frozen header set (first line is not its header)")
    words = first.split()
    try:
        version, digest = words[6], words[8]
    except IndexError:
        raise ValueError("malformed header line: " + first) from None
    actual = hashlib.sha256(body.encode()).hexdigest()
    if actual != digest:
        raise ValueError(f"checksum mismatch: the header says {digest}, the content is {actual};"
                         " released headers are never edited (pack a new minor instead)")
    return version, body


def pack(abi_dir, version, out):
    parts = []
    src = os.path.join(abi_dir, "chutney")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".h"):
            continue
        with open(os.path.join(src, name), encoding="utf-8") as fh:
            text = fh.read()
        if MARK in text:
            raise ValueError(f"{name} contains the frozen-file marker")
        if not text.endswith("\n"):
            text += "\n"
        parts.append(f"{MARK}chutney/{name}\n{text}")
    body = "".join(parts)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(HEAD.format(version=version, digest=hashlib.sha256(body.encode()).hexdigest()))
        fh.write(body)


def files_of(body):
    files, name, lines = {}, None, []
    for line in body.splitlines(keepends=True):
        if line.startswith(MARK):
            if name:
                files[name] = "".join(lines)
            name, lines = line[len(MARK):].strip(), []
            if name.startswith("/") or ".." in name.split("/"):
                raise ValueError("unsafe file name in frozen set: " + name)
        elif name is None:
            raise ValueError("content before the first file marker")
        else:
            lines.append(line)
    if name:
        files[name] = "".join(lines)
    return files


def unpack(path, out_dir, stamp=None):
    with open(path, encoding="utf-8") as fh:
        version, body = body_of(fh.read())
    for name, text in files_of(body).items():
        dest = os.path.join(out_dir, name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        old = None
        if os.path.exists(dest):
            with open(dest, encoding="utf-8") as fh:
                old = fh.read()
        if old != text:  # keep mtimes (and the build) stable across reconfigures
            with open(dest, "w", encoding="utf-8") as fh:
                fh.write(text)
    if stamp:
        with open(stamp, "w", encoding="utf-8") as fh:
            fh.write(f"{version}\n")


def main(argv):
    try:
        if len(argv) == 4 and argv[0] == "pack":
            pack(argv[1], argv[2], argv[3])
        elif len(argv) in (3, 4) and argv[0] == "unpack":
            unpack(*argv[1:])
        elif len(argv) == 2 and argv[0] == "check":
            with open(argv[1], encoding="utf-8") as fh:
                version, _ = body_of(fh.read())
            print(f"{argv[1]}: header set {version}, checksum OK")
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, ValueError) as e:
        print(f"frozen_headers.py: {argv[1] if len(argv) > 1 else ''}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

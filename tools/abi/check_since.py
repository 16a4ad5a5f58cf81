#!/usr/bin/env python3
"""Checks that every function of the public headers carries a `since 1.N` tag.

A function is a CTN_API declaration in abi/chutney/*.h. Its doc comment is the /* ... */ comment
right above it; a comment documents every declaration that follows it up to the next blank line
or the next comment (a group such as the typed op helpers shares one). The tag's minor must not
exceed CTN_ABI_MINOR. Exit status 1 lists the offenders.
"""
import argparse
import os
import re
import sys


def check(abi_dir):
    with open(os.path.join(abi_dir, 'version.h')) as f:
        minor = int(re.search(r'#define CTN_ABI_MINOR (\d+)', f.read()).group(1))
    problems, count = [], 0
    for name in sorted(os.listdir(abi_dir)):
        if not name.endswith('.h'):
            continue
        path = os.path.join(abi_dir, name)
        lines = open(path).read().split('\n')
        comment = None  # the text of the comment that documents the current group
        in_comment, buf = False, []
        for no, line in enumerate(lines, 1):
            s = line.strip()
            if in_comment:
                buf.append(s)
                if '*/' in s:
                    in_comment = False
                    comment = ' '.join(buf)
                continue
            if s.startswith('/*'):
                buf = [s]
                if '*/' in s:
                    comment = s
                else:
                    in_comment = True
                continue
            if not s:
                comment = None
                continue
            m = re.match(r'CTN_API\s+[^(]*?\b(ctn_\w+)\s*\(', s)
            if not m:
                continue
            count += 1
            fn = m.group(1)
            tags = re.findall(r'since 1\.(\d+)', comment or '')
            if not tags:
                problems.append('%s:%d: %s has no "since 1.N" in its doc comment' % (name, no, fn))
            elif any(int(t) > minor for t in tags):
                problems.append('%s:%d: %s says since 1.%s but the ABI is 1.%d' % (name, no, fn, max(tags), minor))
    return count, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('abi_dir', help='the abi/chutney directory')
    args = ap.parse_args()
    count, problems = check(args.abi_dir)
    for p in problems:
        print(p)
    print('%d functions, %d without a valid since tag' % (count, len(problems)))
    return 1 if problems or count == 0 else 0


if __name__ == '__main__':
    sys.exit(main())

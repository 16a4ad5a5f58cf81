#!/bin/sh
# Fails when the C block in README.md differs from bindings/c/readme.c (minus its 3-line header
# comment), so the example people copy is the one the 'abi' suite compiles and runs.
# usage: check-readme.sh README.md bindings/c/readme.c
set -eu
readme=$1
source=$2
tmp=${TMPDIR:-/tmp}/ctn-readme-$$
trap 'rm -f "$tmp.a" "$tmp.b"' EXIT
awk '/^```c$/ { inside = 1; next } /^```$/ { inside = 0 } inside' "$readme" > "$tmp.a"
sed -n '4,$p' "$source" > "$tmp.b"
if ! [ -s "$tmp.a" ]; then
  echo "no \`\`\`c block found in $readme" >&2
  exit 1
fi
if ! diff -u "$tmp.b" "$tmp.a"; then
  echo "README.md's C example and $source differ: update one from the other" >&2
  exit 1
fi
echo "README.md example matches $source"

#!/usr/bin/env bash
# Shows that libdsv4.so exports exactly the public API: every defined dynamic symbol is a
# dsv4_* function declared in include/dsv4/*.h, and every such function that is not a
# header inline (DSV4_HD, static) is exported. Usage: test_exports.sh <libdsv4.so> <include/dsv4>
set -u
lib=$1 inc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 77; }
# Declared: every dsv4_name( in the headers. Inline: names defined in a header line that
# starts with DSV4_HD or static.
cat "$inc"/*.h | grep -oE '\bdsv4_[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | sort -u >"$work/declared"
cat "$inc"/*.h | grep -E '^(DSV4_HD|static)\b' | grep -oE '\bdsv4_[A-Za-z0-9_]+[[:space:]]*\(' \
  | sed -E 's/[[:space:]]*\($//' | sort -u >"$work/inline"
comm -23 "$work/declared" "$work/inline" >"$work/required"
nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u >"$work/exported"
fail=0
extra=$(comm -13 "$work/declared" "$work/exported")
if [ -n "$extra" ]; then
  echo "FAIL: $(echo "$extra" | wc -l) exported symbol(s) not declared in the public headers:"
  echo "$extra" | sed 's/^/  /'
  fail=1
fi
missing=$(comm -23 "$work/required" "$work/exported")
if [ -n "$missing" ]; then
  echo "FAIL: $(echo "$missing" | wc -l) public function(s) not exported:"
  echo "$missing" | sed 's/^/  /'
  fail=1
fi
[ $fail -eq 0 ] && echo "PASS: $(wc -l <"$work/exported") exported symbols, all declared in the public headers"
exit $fail

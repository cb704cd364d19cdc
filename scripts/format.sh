#!/usr/bin/env bash
# Formats every C / C++ / CUDA source of the repository with clang-format (.clang-format).
#
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   change nothing; list the files that would change and exit 1
#                               if there are any (CI)
#
# The files: every *.c, *.h, *.cu, *.cuh that git tracks or would track (not ignored);
# without git, those under bench/, examples/, include/, src/, tests/ and tools/.
# CLANG_FORMAT names the binary (default clang-format-14, else clang-format): another major
# version formats differently.
set -eu
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do command -v "$c" >/dev/null 2>&1 && { cf=$c; break; }; done
fi
if [ -z "$cf" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "format: installing clang-format-14"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-format-14 >/dev/null && cf=clang-format-14
fi
[ -n "$cf" ] || { echo "format: clang-format not found (Debian: apt-get install clang-format-14)" >&2; exit 2; }
case "$("$cf" --version)" in *" 14."*) ;; *) echo "format: warning: $("$cf" --version) is not clang-format 14" >&2 ;; esac

files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do [ -f "$f" ] && files+=("$f"); done \
    < <(git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.cuh')
else
  while IFS= read -r -d '' f; do files+=("$f"); done \
    < <(find bench examples include src tests tools -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 2>/dev/null)
fi
[ ${#files[@]} -gt 0 ] || { echo "format: no sources found" >&2; exit 2; }

if [ $check = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 "$cf" -i --style=file
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} of ${#files[@]} files are not formatted (run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format: ${#files[@]} files formatted correctly"

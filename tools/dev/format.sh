#!/usr/bin/env bash
# Formats the tracked C and C++ files with clang-format-14 and the root
# .clang-format (Google style, 100 columns). third_party/ and the frozen ABI
# 1.0 headers (tests/abi/v1_0/) are left as they are.
#
#   tools/dev/format.sh          # formats in place
#   tools/dev/format.sh --check  # lists the files that are not formatted;
#                                # exits 1 when there are any
set -uo pipefail
cd "$(dirname "$0")/../.."

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: tools/dev/format.sh [--check]" >&2; exit 2 ;;
esac

clang_format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "format.sh: $clang_format not found; install it (apt-get install clang-format-14)" >&2
  exit 2
fi

mapfile -d '' files < <(git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' \
  ':!:third_party/**' ':!:tests/abi/v1_0/**')

if [[ $check -eq 0 ]]; then
  [[ ${#files[@]} -eq 0 ]] || "$clang_format" -i --style=file "${files[@]}"
  exit $?
fi

unformatted=0
for file in "${files[@]}"; do
  if ! "$clang_format" --style=file --dry-run --Werror "$file" >/dev/null 2>&1; then
    echo "$file"
    unformatted=$((unformatted + 1))
  fi
done
if [[ $unformatted -gt 0 ]]; then
  echo "format.sh: $unformatted file(s) not formatted; run tools/dev/format.sh" >&2
  exit 1
fi

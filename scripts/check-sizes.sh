#!/usr/bin/env bash
# The size rules of docs/ARCHITECTURE.md §1 ("One job per file"): outside tests/ and bench/,
# no source file over 900 lines and no C function over 120 lines, counted from the line of
# its opening brace at the start of a line to its closing one (strings, characters and
# comments are left out of the brace count). Prints each file or function over its bound.
#   scripts/check-sizes.sh [SOURCE_DIR]     (default: this checkout)
set -uo pipefail
src="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$src" || exit 2
max_file=900 max_fn=120
files=$(git ls-files 2>/dev/null || find . -type f | sed 's|^\./||')
files=$(printf '%s\n' "$files" | grep -E '\.(c|h|cpp|cl|inc)$' | grep -vE '^(tests|bench)/')
fail=0
for f in $files; do
    n=$(wc -l <"$f")
    if [ "$n" -gt $max_file ]; then
        echo "check-sizes: $f has $n lines (at most $max_file outside tests/ and bench/)"
        fail=1
    fi
done
for f in $(printf '%s\n' "$files" | grep -E '\.(c|cpp)$'); do
    out=$(awk -v f="$f" -v max=$max_fn '
    { line = $0
      # comments, strings and characters hold no braces that count
      if (incomment) { if (sub(/.*\*\//, "", line)) incomment = 0; else next }
      gsub(/"(\\.|[^"\\])*"/, "\"\"", line); gsub(/\047(\\.|[^\047\\])*\047/, "\047\047", line)
      gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", line); sub(/\/\/.*/, "", line)
      if (sub(/\/\*.*/, "", line)) incomment = 1
      if (depth == 0 && line ~ /^\{/) { start = NR; name = prev }
      opens = gsub(/\{/, "{", line); closes = gsub(/\}/, "}", line)
      if (start) depth += opens - closes
      if (start && depth == 0) {
          if (NR - start + 1 > max)
              printf "check-sizes: %s:%d: %s is %d lines (at most %d outside tests/ and bench/)\n",
                     f, start, name, NR - start + 1, max
          start = 0
      }
      if ($0 !~ /^[ \t]*$/) prev = $0
    }' "$f")
    if [ -n "$out" ]; then
        echo "$out"
        fail=1
    fi
done
exit $fail

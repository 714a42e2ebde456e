#!/bin/sh
# The exported dynamic symbols of what clformer builds are exactly what its ABI promises:
#   libclformer.so    the clf_ functions and variables declared in core/include/clformer/*.h
#                     (each marked CLF_API, clformer/export.h), no more and no fewer;
#   clformer-<b>.so   (backends) clf_backend_entry only, and they import from libclformer
#                     nothing but that public API;
#   clformer-plugin-<p>.so  clf_plugin_entry only, and they import nothing from libclformer
#                     (a plugin needs only clformer/plugin.h).
# Usage: test_symbols.sh NM LIBCLFORMER_SO INCLUDE_DIR BACKEND_DIR
set -eu
export LC_ALL=C
nm=$1 lib=$2 include_dir=$3 backend_dir=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for f in "$lib" "$backend_dir/clformer-cpu.so"; do
    if [ ! -f "$f" ]; then
        echo "FAIL: $f is missing (build everything first: cmake --build build)"
        exit 1
    fi
done

awk -f "$(dirname "$0")/public_decls.awk" "$include_dir"/*.h | sort -u -k1,1 >"$tmp/declared"
cut -d' ' -f1 "$tmp/declared" >"$tmp/declared.names"
"$nm" -D --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/exported"
if [ "$(wc -l <"$tmp/declared.names")" -lt 50 ]; then
    echo "FAIL: only $(wc -l <"$tmp/declared.names") clf_ declarations parsed from $include_dir/*.h"
    exit 1
fi

comm -13 "$tmp/declared.names" "$tmp/exported" >"$tmp/extra"
while read -r sym; do
    echo "FAIL: $(basename "$lib") exports $sym, which no header in core/include/clformer/ declares."
    echo "      If it is internal: drop CLF_API (or visibility(\"default\")) from it; the core"
    echo "      is built with -fvisibility=hidden, so a function declared in a private header"
    echo "      under core/src/<layer>/ stays inside the library (make it static if only its"
    echo "      own file calls it)."
    echo "      If it is meant to be public API: declare it in core/include/clformer/<module>.h"
    echo "      as 'CLF_API <type> $sym(...);' (clformer/export.h)."
    fail=1
done <"$tmp/extra"

comm -23 "$tmp/declared.names" "$tmp/exported" >"$tmp/missing"
while read -r sym; do
    hdr=$(awk -v s="$sym" '$1 == s { print $2 }' "$tmp/declared")
    echo "FAIL: $sym is declared in $hdr but $(basename "$lib") does not export it."
    echo "      Start its declaration with CLF_API ('CLF_API <type> $sym(...);', from"
    echo "      clformer/export.h, which the header must include) and define it in core/src"
    echo "      (not static); or, if it is not public API, move the declaration to a private"
    echo "      header under core/src/<layer>/."
    fail=1
done <"$tmp/missing"

# Backends and plugins export their entry point and nothing else. What a backend imports
# from libclformer must be public API (else it binds to internals that may change).
n_modules=0
for so in "$backend_dir"/clformer-*.so; do
    name=$(basename "$so")
    n_modules=$((n_modules + 1))
    case $name in
    clformer-plugin-*) entry=clf_plugin_entry ;;
    *) entry=clf_backend_entry ;;
    esac
    exports=$("$nm" -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u | tr '\n' ' ')
    if [ "$exports" != "$entry " ]; then
        echo "FAIL: $name exports '$exports'; it may export $entry only. Build it with"
        echo "      C_VISIBILITY_PRESET hidden and mark $entry __attribute__((visibility(\"default\")))."
        fail=1
    fi
    "$nm" -D --undefined-only "$so" | awk '{ print $NF }' | sed 's/@.*//' | grep '^clf_' |
        sort -u >"$tmp/imports" || true
    case $name in
    clformer-plugin-*)
        if [ -s "$tmp/imports" ]; then
            echo "FAIL: $name imports $(tr '\n' ' ' <"$tmp/imports")from libclformer; a plugin"
            echo "      needs only clformer/plugin.h (what it may call comes in its tables)."
            fail=1
        fi
        ;;
    *)
        comm -23 "$tmp/imports" "$tmp/declared.names" | while read -r sym; do
            echo "FAIL: $name imports $sym, which is not public API (core/include/clformer/)."
        done | tee "$tmp/bad_imports"
        if [ -s "$tmp/bad_imports" ]; then fail=1; fi
        ;;
    esac
done

if [ "$fail" = 0 ]; then
    echo "OK: $(basename "$lib") exports the $(wc -l <"$tmp/exported") clf_ symbols its headers declare;"
    echo "    $n_modules backends and plugins export only their entry points."
fi
exit "$fail"

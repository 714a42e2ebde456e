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
nm=$1 lib=$2 include_dir=$3 backend_dir=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Prints "name header" for each clf_ function or variable the headers declare at file scope,
# skipping typedefs (function pointer types such as clf_backend_entry_fn) and static inline
# functions (compiled into the caller, never exported). Comments and preprocessor lines are
# dropped, and so is everything inside braces (struct and enum bodies, inline function
# bodies), __attribute__((...)) and extern "C".
decls_awk='
function strip_attr(s,   i, j, k, c, depth, out) {
    out = ""
    while ((i = index(s, "__attribute__")) > 0) {
        out = out substr(s, 1, i - 1)
        s = substr(s, i + 13)
        j = index(s, "(")
        depth = 0
        for (k = j; k <= length(s); k++) {
            c = substr(s, k, 1)
            if (c == "(") depth++
            else if (c == ")" && --depth == 0) break
        }
        s = substr(s, k + 1)
    }
    return out s
}
function emit(d,   name, p, head) {
    d = strip_attr(d)
    gsub(/[ \t]+/, " ", d)
    if (d ~ /(^| )(typedef|static)( |$)/) return
    p = index(d, "(")
    if (p > 0 && substr(d, p + 1) ~ /^ *\*/) {          # a function pointer variable: (*name)
        name = substr(d, p + 1)
        sub(/^ *\* */, "", name)
        sub(/[^A-Za-z0-9_].*/, "", name)
    } else {
        head = p > 0 ? substr(d, 1, p - 1) : d          # a function, or a variable
        sub(/\[.*/, "", head)
        sub(/=.*/, "", head)
        if (!match(head, /[A-Za-z_][A-Za-z0-9_]* *$/)) return
        name = substr(head, RSTART, RLENGTH)
        sub(/ +$/, "", name)
    }
    if (name ~ /^clf_/) print name, FILENAME
}
FNR == 1 { buf = ""; depth = 0; incomment = 0; inmacro = 0 }
{
    line = $0
    if (inmacro) { inmacro = (line ~ /\\$/); next }
    if (!incomment && line ~ /^[ \t]*#/) { inmacro = (line ~ /\\$/); next }
    out = ""
    while (length(line) > 0) {
        if (incomment) {
            e = index(line, "*/")
            if (e == 0) break
            line = substr(line, e + 2)
            incomment = 0
            continue
        }
        s = index(line, "/*")
        sl = index(line, "//")
        if (sl > 0 && (s == 0 || sl < s)) { out = out substr(line, 1, sl - 1); break }
        if (s == 0) { out = out line; break }
        out = out substr(line, 1, s - 1) " "
        line = substr(line, s + 2)
        incomment = 1
    }
    for (k = 1; k <= length(out); k++) {
        c = substr(out, k, 1)
        if (c == "{") {
            if (depth == 0 && buf ~ /extern *"C" *$/) buf = ""   # not a scope of its own
            else depth++
            continue
        }
        if (c == "}") {
            if (depth == 0) { buf = ""; continue }           # the end of extern "C"
            if (--depth == 0 && buf ~ /\) *$/) { emit(buf); buf = "" }  # an inline body
            continue
        }
        if (depth > 0) continue
        if (c == ";") { emit(buf); buf = ""; continue }
        buf = buf c
    }
    buf = buf " "
}'

for f in "$lib" "$backend_dir/clformer-cpu.so"; do
    if [ ! -f "$f" ]; then
        echo "FAIL: $f is missing (build everything first: cmake --build build)"
        exit 1
    fi
done

# shellcheck disable=SC2086
awk "$decls_awk" "$include_dir"/*.h | sort -u -k1,1 >"$tmp/declared"
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
# shellcheck disable=SC2231
for so in "$backend_dir"/clformer-*.so; do
    name=$(basename "$so")
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
    echo "    $(ls "$backend_dir"/clformer-*.so | wc -l) backends and plugins export only their entry points."
fi
exit "$fail"

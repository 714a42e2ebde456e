#!/usr/bin/env bash
# Checks the layer rules of docs/ARCHITECTURE.md §1 against a build: which layer of core/src
# calls which (the undefined symbols of each object file, matched to the object that defines
# them), which private headers each file includes, that no two files of core/ call or include
# each other both ways, and what backends, plugins and the CLI may reach. The allowed calls
# are read from the layer table of ARCHITECTURE.md itself (its "may call" column), so the
# table is the rule and this script its enforcement.
#   scripts/check-layers.sh [BUILD_DIR]     (default: build)
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build}"
doc="$src/docs/ARCHITECTURE.md"
objdir="$build/core/CMakeFiles/clformer-core.dir/src"
[ -d "$objdir" ] || { echo "check-layers: $objdir: no core objects (build first)"; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "check-layers: $*"; fail=1; }

# The table's rows: | `layer/` | owns | may call |. "may call" is a comma-separated list of
# layer names, or "libc only".
awk -F'|' '/^\| `[a-z]+\/` \|/ {
    name = $2; gsub(/[ `\/]/, "", name)
    calls = $(NF - 1); gsub(/`|\//, "", calls); gsub(/libc only/, "", calls)
    gsub(/,/, " ", calls); gsub(/^ +| +$/, "", calls)
    print name ":" calls
}' "$doc" >"$tmp/allowed"
layers=" $(cut -d: -f1 "$tmp/allowed" | tr '\n' ' ')"
for dir in "$src"/core/src/*/; do
    l="$(basename "$dir")"
    grep -q "^$l:" "$tmp/allowed" || bad "core/src/$l/ has no row in the layer table of docs/ARCHITECTURE.md"
done
while IFS=: read -r l calls; do
    for c in $calls; do
        case "$layers" in *" $c "*) ;; *) bad "ARCHITECTURE.md: layer $l may call '$c', which is no layer" ;; esac
    done
done <"$tmp/allowed"
allowed() { # allowed FROM TO
    [ "$1" = "$2" ] && return 0
    grep -q "^$1:.*\b$2\b" "$tmp/allowed"
}

# Symbols: "<symbol> <layer>/<file>" for every global definition, "<file> <symbol>" for every use.
: >"$tmp/defs"
: >"$tmp/uses"
for o in $(cd "$objdir" && find . -name '*.o' | sed 's|^\./||' | sort); do
    f="${o%.o}"
    [ -f "$src/core/src/$f" ] || continue # an object left from a source since removed
    nm -g --defined-only "$objdir/$o" | awk -v f="$f" 'NF == 3 { print $3, f }' >>"$tmp/defs"
    nm -u "$objdir/$o" | awk -v f="$f" '{ print f, $2 }' >>"$tmp/uses"
done
sort -u "$tmp/defs" >"$tmp/defs.s"
# "<from file> <to file> <symbol>" for every call between two files of core.
sort -k2 "$tmp/uses" | join -1 2 -2 1 -o 1.1,2.2,0 - "$tmp/defs.s" | awk '$1 != $2' | sort -u >"$tmp/calls"
while read -r from to sym; do
    lf="${from%%/*}"
    lt="${to%%/*}"
    allowed "$lf" "$lt" || bad "core/src/$from calls $sym of core/src/$to: $lf/ may not call $lt/ (docs/ARCHITECTURE.md §1)"
done <"$tmp/calls"
awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"
awk '{ print $2, $1 }' "$tmp/edges" | sort -u | comm -12 - "$tmp/edges" | awk '$1 < $2' |
    while read -r a b; do bad "core/src/$a and core/src/$b call each other both ways"; done | tee -a "$tmp/out"

# Private headers: "<layer>/<name>.h" named from core/src. A header whose name is a source's
# (io/json_jansson.h, json_jansson.c) belongs to that file for the both-ways check.
: >"$tmp/incs"
for f in $(cd "$src/core/src" && find . -name '*.c' -o -name '*.cc' -o -name '*.h' | sed 's|^\./||' | sort); do
    lf="${f%%/*}"
    grep -o '#include "[a-z_]*/[a-z_0-9]*\.h"' "$src/core/src/$f" | sed 's/#include "\(.*\)"/\1/' |
        while read -r h; do
            lh="${h%%/*}"
            [ "$lh" = clformer ] && continue
            [ -f "$src/core/src/$h" ] || { echo "BAD core/src/$f includes \"$h\", which is no header of core/src"; continue; }
            allowed "$lf" "$lh" || echo "BAD core/src/$f includes $h: $lf/ may not call $lh/ (docs/ARCHITECTURE.md §1)"
            base="${h%.h}"
            self="${f%.*}"
            [ "$base" = "$self" ] && continue
            for ext in c cc; do
                if [ -f "$src/core/src/$base.$ext" ]; then echo "EDGE $self $base"; fi
            done
        done
done >"$tmp/incs"
if grep -q '^BAD ' "$tmp/incs"; then
    grep '^BAD ' "$tmp/incs" | sed 's/^BAD /check-layers: /'
    fail=1
fi
grep '^EDGE ' "$tmp/incs" | awk '{ print $2, $3 }' | sort -u >"$tmp/iedges"
awk '{ print $2, $1 }' "$tmp/iedges" | sort -u | comm -12 - "$tmp/iedges" | awk '$1 < $2' >"$tmp/icycles"
while read -r a b; do bad "core/src/$a and core/src/$b include each other's header both ways"; done <"$tmp/icycles"
[ -s "$tmp/out" ] && fail=1

# Outside libclformer. Backends include only these public headers and call only what they
# declare; plugins include plugin.h alone and call nothing of libclformer; the CLI and the
# backends never include a private header of core/src.
backend_headers="backend.h plugin.h status.h fs.h hash.h fault.h export.h"
for f in $(cd "$src" && ls backends/*/*.c backends/*/*.h plugins/*/*.c 2>/dev/null); do
    grep -o '#include "clformer/[a-z_]*\.h"' "$src/$f" | sed 's|.*clformer/\(.*\)"|\1|' | while read -r h; do
        case "$f" in
        plugins/*) [ "$h" = plugin.h ] || echo "check-layers: $f includes clformer/$h: a plugin includes only clformer/plugin.h" ;;
        *) case " $backend_headers " in *" $h "*) ;; *) echo "check-layers: $f includes clformer/$h: a backend includes only clformer/{${backend_headers// /,}}" ;; esac ;;
        esac
    done
done >"$tmp/outside"
for f in $(cd "$src" && ls tools/*.c tools/*.h backends/*/*.c backends/*/*.h plugins/*/*.c 2>/dev/null); do
    if grep -n '#include "\(base\|runtime\|config\|io\|numeric\|text\|graph\|train\|decode\|translate\)/' "$src/$f" >/dev/null; then
        echo "check-layers: $f includes a private header of core/src (the public API is core/include/clformer)"
    fi
done >>"$tmp/outside"
for so in "$build"/lib/clformer/clformer-*.so; do
    [ -f "$so" ] || continue
    name="$(basename "$so")"
    for sym in $(nm -D -u "$so" | awk '$2 ~ /^clf_/ { print $2 }'); do
        case "$name" in
        clformer-plugin-*) echo "check-layers: $name calls $sym: a plugin calls nothing of libclformer" ;;
        *)
            found=0
            for h in $backend_headers; do
                grep -q "\b$sym(" "$src/core/include/clformer/$h" 2>/dev/null && found=1
            done
            [ $found = 1 ] || echo "check-layers: $name calls $sym, which no header a backend may include declares"
            ;;
        esac
    done
done >>"$tmp/outside"
if [ -s "$tmp/outside" ]; then
    cat "$tmp/outside"
    fail=1
fi

if [ $fail = 0 ]; then
    echo "check-layers: $(wc -l <"$tmp/calls") calls between files of core/src, $(wc -l <"$tmp/allowed") layers: every call and include as docs/ARCHITECTURE.md §1 allows"
fi
exit $fail

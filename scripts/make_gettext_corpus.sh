#!/usr/bin/env bash
# Builds an English->German parallel corpus offline from the gettext catalogs the system has
# installed (/usr/share/locale/de/LC_MESSAGES/*.mo: every translated program message is an
# English msgid and its German msgstr). Nothing is downloaded; CI does not run this.
#
#   scripts/make_gettext_corpus.sh OUT_DIR [VALID_PAIRS]      (default 500)
#
# Writes OUT_DIR/train.tsv and OUT_DIR/valid.tsv, "english<TAB>german" per line, and prints
# what it kept and dropped. Environment: CLF_LOCALE_DIR (catalog folder), CLF_CORPUS_SEED
# (default 1), CLF_CORPUS_MAX_WORDS (default 40). Needs msgunfmt and msgconv (Debian:
# gettext) and python3.
#
# Per message: plural entries, the header, untranslated (empty msgstr) and fuzzy ones are
# skipped; a menu accelerator (_ or & before a letter: "_File" / "_Datei", "E_xit") is
# removed on both sides, identifiers such as LC_ALL are left alone; leading and trailing
# white space goes, and a message with a TAB or line break inside (usage texts, tables) is
# dropped rather than cut; runs of white space (no-break spaces too) become one space; pairs
# with an empty side, no letter on a side, control characters, more than MAX_WORDS words on
# a side, or a msgstr equal to its msgid (not a translation) are dropped; duplicates go.
# The order is a hash of (seed, English text): the same on every machine. Validation takes
# whole English sentences (all their translations), so no source sentence is in both files.
set -euo pipefail

usage() {
  echo "usage: $0 OUT_DIR [VALID_PAIRS]" >&2
  exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
out=$1
valid=${2:-500}
case $valid in '' | *[!0-9]*) usage ;; esac
locale_dir=${CLF_LOCALE_DIR:-/usr/share/locale/de/LC_MESSAGES}
seed=${CLF_CORPUS_SEED:-1}
max_words=${CLF_CORPUS_MAX_WORDS:-40}

for tool in msgunfmt msgconv python3; do
  command -v "$tool" >/dev/null || {
    echo "$0: $tool not found (Debian: apt-get install gettext python3)" >&2
    exit 2
  }
done
shopt -s nullglob
catalogs=("$locale_dir"/*.mo)
[ ${#catalogs[@]} -gt 0 ] || {
  echo "$0: no .mo files in $locale_dir" >&2
  exit 2
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# .mo -> .po text in UTF-8 (a few catalogs are ISO-8859-1); a catalog that does not convert
# is reported and left out rather than stopping the whole run.
for mo in "${catalogs[@]}"; do
  name=$(basename "$mo" .mo)
  if ! msgunfmt "$mo" 2>"$tmp/err" | msgconv --to-code=UTF-8 - >"$tmp/$name.po" 2>>"$tmp/err"; then
    echo "skipping $mo: $(head -n1 "$tmp/err")" >&2
    rm -f "$tmp/$name.po"
  fi
done
mkdir -p "$out"

python3 - "$tmp" "$out" "$valid" "$seed" "$max_words" <<'PY'
import collections, glob, hashlib, os, re, sys

po_dir, out_dir, n_valid, seed, max_words = sys.argv[1:6]
n_valid, max_words = int(n_valid), int(max_words)
drops = collections.Counter()

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
           '"': '"', "\\": "\\", "'": "'", "?": "?"}

def unquote(s):
    """A PO string literal ("..." with C escapes) as text."""
    s = s.strip()
    assert s.startswith('"') and s.endswith('"'), s
    s = s[1:-1]
    def esc(m):
        e = m.group(1)
        if e[0] in "01234567":
            return chr(int(e, 8))
        if e[0] == "x":
            return chr(int(e[1:], 16))
        return ESCAPES.get(e, e)
    return re.sub(r'\\([0-7]{1,3}|x[0-9a-fA-F]+|.)', esc, s)

def entries(text):
    """Yields dicts msgctxt/msgid/msgid_plural/msgstr/msgstr[0].../fuzzy of a .po text."""
    cur, key = {}, None
    def done():
        return cur and "msgid" in cur and any(k.startswith("msgstr") for k in cur)
    for line in text.splitlines():
        if not line.strip() or line.startswith("#,") or line.startswith("msgctxt") or \
                (line.startswith("msgid ") and "msgid" in cur):
            if done():
                yield cur
                cur, key = {}, None
            if line.startswith("#,") and "fuzzy" in line:
                cur["fuzzy"] = True
            if not line.strip() or line.startswith("#,"):
                continue
        if line.startswith("#"):
            continue
        if line.startswith('"'):
            cur[key] += unquote(line)
            continue
        key, rest = line.split(" ", 1)
        cur[key] = unquote(rest)
    if done():
        yield cur

MARKER = re.compile(r"[_&](?=[^\W\d_])")  # _ or & before a letter

def word_at(s, i):
    a = i
    while a > 0 and not s[a - 1].isspace():
        a -= 1
    b = i
    while b < len(s) and not s[b].isspace():
        b += 1
    return s[a:b]

def strip_accelerators(src, tgt):
    """Removes one menu accelerator per side. An identifier (LC_ALL, the same word with
    the marker inside on both sides) stays."""
    for c in "_&":
        ms = [m.start() for m in MARKER.finditer(src) if src[m.start()] == c]
        mt = [m.start() for m in MARKER.finditer(tgt) if tgt[m.start()] == c]
        if len(ms) != 1 or len(mt) > 1:
            continue
        i = ms[0]
        at_start_upper = (i == 0 or not src[i - 1].isalnum()) and src[i + 1].isupper()
        if mt and word_at(src, i) == word_at(tgt, mt[0]) and not at_start_upper:
            continue  # an identifier, the same on both sides
        src = src[:i] + src[i + 1:]
        if mt:
            tgt = tgt[:mt[0]] + tgt[mt[0] + 1:]
    return src, tgt

WS = re.compile(r"\s+")

def clean_pair(src, tgt):
    src, tgt = src.strip(), tgt.strip()
    if any(ch in s for s in (src, tgt) for ch in "\t\n\r"):
        return None, "tab or line break inside"
    src, tgt = strip_accelerators(src, tgt)
    src, tgt = WS.sub(" ", src).strip(), WS.sub(" ", tgt).strip()
    if not src or not tgt:
        return None, "empty side"
    if any(ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 for s in (src, tgt) for ch in s):
        return None, "control characters"
    if not any(ch.isalpha() for ch in src) or not any(ch.isalpha() for ch in tgt):
        return None, "no letters"
    if src == tgt:
        return None, "msgstr = msgid"
    if len(src.split()) > max_words or len(tgt.split()) > max_words:
        return None, "over %d words" % max_words
    return (src, tgt), None

pairs, n_catalogs, n_messages = set(), 0, 0
for po in sorted(glob.glob(os.path.join(po_dir, "*.po"))):
    n_catalogs += 1
    with open(po, encoding="utf-8") as f:
        text = f.read()
    for e in entries(text):
        n_messages += 1
        if e.get("msgid", "") == "":
            drops["header"] += 1
        elif "msgid_plural" in e:
            drops["plural"] += 1
        elif e.get("fuzzy"):
            drops["fuzzy"] += 1
        elif not e.get("msgstr", ""):
            drops["untranslated"] += 1
        else:
            pair, why = clean_pair(e["msgid"], e["msgstr"])
            if why:
                drops[why] += 1
            elif pair in pairs:
                drops["duplicate"] += 1
            else:
                pairs.add(pair)

def rank(text):
    return hashlib.sha256(("%s\t%s" % (seed, text)).encode("utf-8")).hexdigest()

by_src = collections.defaultdict(list)
for s, t in pairs:
    by_src[s].append(t)
sources = sorted(by_src, key=lambda s: (rank(s), s))
train, valid = [], []
for s in sources:
    dest = valid if len(valid) < n_valid else train
    dest.extend((s, t) for t in sorted(by_src[s]))
for name, rows in (("train.tsv", train), ("valid.tsv", valid)):
    with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="\n") as f:
        for s, t in rows:
            f.write("%s\t%s\n" % (s, t))

print("catalogs: %d, messages: %d" % (n_catalogs, n_messages))
for why, n in sorted(drops.items(), key=lambda kv: -kv[1]):
    print("  dropped %-28s %d" % (why + ":", n))
print("pairs: %d (%d distinct English sentences)" % (len(pairs), len(by_src)))
print("train: %d pairs -> %s" % (len(train), os.path.join(out_dir, "train.tsv")))
print("valid: %d pairs -> %s" % (len(valid), os.path.join(out_dir, "valid.tsv")))
PY

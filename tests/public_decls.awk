# Prints "name header" for each clf_ function or variable that the C headers given as
# arguments declare at file scope (tests/test_symbols.sh). Typedefs (function pointer types
# such as clf_backend_entry_fn) and static inline functions (compiled into the caller, never
# exported) are skipped. Comments and preprocessor lines are dropped, and so is everything
# inside braces (struct and enum bodies, inline function bodies), __attribute__((...)) and
# extern "C".
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
}

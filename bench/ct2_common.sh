# The parts bench/ct2_compare.sh and bench/python_ct2.sh share, sourced from the repository
# root. Sets THREADS (2), REPEAT (3), MAX_LEN (64), venv (CLF_CT2_VENV, default
# /work/venv-ct2) and ct2py, the Python that runs CTranslate2 (CT2_PYTHON, default the
# venv's) where the environment does not. The functions below that translate call
# the script's own run ENGINE BEAM BATCH INPUT OUTPUT, which prints the rates of one run
# (its last field tokens/s).
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3} MAX_LEN=${MAX_LEN:-64}
venv=${CLF_CT2_VENV:-/work/venv-ct2}
ct2py=${CT2_PYTHON:-$venv/bin/python}

# ct2_venv: makes $venv (--system-site-packages) with ctranslate2 CT2_VERSION (default
# 4.8.5) when it lacks ctranslate2; nothing where CT2_PYTHON names the Python to use.
ct2_venv() {
  [ -n "${CT2_PYTHON:-}" ] && return 0
  if ! "$venv/bin/python" -c 'import ctranslate2' 2> /dev/null; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q "ctranslate2==${CT2_VERSION:-4.8.5}"
  fi
}

# ct2_header CLFORMER CT2: the header of the results: date, machine, the two versions and
# the settings, and the load average before.
ct2_header() {
  local cpu avx512
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
  avx512=$(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $cpu, $(nproc) cores, AVX-512: $avx512"
  echo "# clformer $1, CTranslate2 $2, $THREADS threads," \
    "up to $MAX_LEN output tokens, length penalty 0, median of $REPEAT"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ct2_check SENTENCES: the same tokens first: the first 20 sentences translated by
# CTranslate2 float32 and clformer f32, greedy and beam 4; exits 1 where they differ.
ct2_check() {
  head -n 20 "$1" > "$out/check.txt"
  for beam in 1 4; do
    run ct2-float32 "$beam" 32 "$out/check.txt" "$out/check.ct2.$beam.txt" > /dev/null
    run clf-f32 "$beam" 32 "$out/check.txt" "$out/check.clf.$beam.txt" > /dev/null
    "$ct2py" bench/ct2_compare.py check "$out/check.clf.$beam.txt" \
      "$out/check.ct2.$beam.txt"
  done
}

# ct2_time SENTENCES: each row of ROWS (mode:batch:sentences) on the first sentences of
# SENTENCES, every engine of $engines in turn in each of REPEAT rounds, written to
# $out/rates.txt as "ROW ENGINE RATES..."; then how many of the row's timed lines the first
# clformer and the first CTranslate2 engine give alike, for information (ct2_check is the
# gate).
ct2_time() {
  local row mode batch n beam r e a b
  : > "$out/rates.txt"
  for row in $ROWS; do
    IFS=: read -r mode batch n <<< "$row"
    beam=1
    [ "$mode" != greedy ] && beam=${mode#beam}
    head -n "$n" "$1" > "$out/input.txt"
    for ((r = 0; r < REPEAT; r++)); do
      for e in $engines; do
        echo "$row $e $(run "$e" "$beam" "$batch" "$out/input.txt" "$out/out.$row.$e.txt")" |
          tee -a "$out/rates.txt"
      done
    done
    # the row's first clformer and first CTranslate2 engines
    a=$(tr ' ' '\n' <<< "$engines" | grep -m1 '^clf' || true)
    b=$(tr ' ' '\n' <<< "$engines" | grep -m1 '^ct2' || true)
    if [ -f "$out/out.$row.$a.txt" ] && [ -f "$out/out.$row.$b.txt" ]; then
      echo "# $row: $a and $b equal on $(paste -d'\n' "$out/out.$row.$a.txt" \
        "$out/out.$row.$b.txt" | paste - - | awk -F'\t' '$1 == $2 {n++} END {print n + 0 "/" NR}') lines"
    fi
  done
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ct2_table COL TITLES CELLS: the results table of $out/rates.txt, field COL of its lines the
# rate: a line per row of the workload and the median rate of each engine, then the
# columns titled TITLES (" a | b |") whose cells the awk function CELLS() prints (ending the
# line): it reads m[ENGINE], the row's medians, e[1..ne] the engines, f[1..3] the row's
# mode, batch and sentences, and ref and dev, the script's $ref and $DEVICE.
ct2_table() {
  awk -v engines="$engines" -v col="$1" -v titles="$2" -v ref="${ref:-}" -v dev="${DEVICE:-cpu}" '
    { v[$1, $2] = v[$1, $2] " " $col; if (!($1 in seen)) { seen[$1] = 1; rows[++nr] = $1 } }
    function median(s, a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      ne = split(engines, e, " ")
      nt = gsub(/\|/, "|", titles)
      printf "| workload |"; for (i = 1; i <= ne; i++) printf " %s |", e[i]; print titles
      printf "|---|"; for (i = 1; i <= ne + nt; i++) printf "---:|"; print ""
      for (r = 1; r <= nr; r++) {
        split(rows[r], f, ":"); printf "| %s, batch %s, %s sentences |", f[1], f[2], f[3]
        for (i = 1; i <= ne; i++) { m[e[i]] = median(v[rows[r], e[i]]); printf " %.0f |", m[e[i]] }
        cells()
        delete m
      }
    }'"$3" "$out/rates.txt"
}

#!/usr/bin/env bash
# Indexing throughput side by side (issue 14): `mmrag index` with embeddings of the same
# PDFs by two binaries (a named baseline commit's and this tree's), in alternation, each
# into a fresh collection, so both see the same machine noise. Prints pages/s, the time
# the text encoder took, texts encoded, peak RSS, and the ratio new/base per round and
# as the median of the rounds.
# Usage: scripts/bench-index.sh BASE_BIN NEW_BIN MODELS ROUNDS PDF...
#   `make bench-index [BENCH_BASE=rev] [ROUNDS=2]` builds BASE_BIN from a git revision
#   (default: the commit before issue 14's work, see the Makefile) in a worktree.
# Env: for the new binary only, NEW_ENV="MMRAG_SENTVEC=context" and the like.
set -euo pipefail
base=$1 new=$2 models=$3 rounds=$4
shift 4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-bindex.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pages=0
for f in "$@"; do pages=$((pages + $(pdfinfo "$f" | awk '/^Pages:/ {print $2}'))); done

one() {   # one BIN ENV... : prints "seconds embed_seconds encoded peak_kib"
  local bin=$1; shift
  rm -rf "$tmp/db"
  env "$@" MMRAG_MODELS="$models" /usr/bin/time -f "%e %M" -o "$tmp/time" \
    "$bin" index --db "$tmp/db" "${PDFS[@]}" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
  local emb enc
  emb=$(sed -n 's/^embedded .* in \([0-9.]*\) s.*/\1/p' "$tmp/out")
  enc=$(sed -n 's/.*(\([0-9]*\) texts encoded.*/\1/p' "$tmp/out")
  read -r wall rss <"$tmp/time"
  echo "$wall ${emb:-0} ${enc:--} $rss"
}

PDFS=("$@")
echo "bench-index: $# PDFs, $pages pages, $rounds rounds, base $(basename "$base") vs new $(basename "$new") ${NEW_ENV:-}"
for r in $(seq "$rounds"); do
  b=$(one "$base") || exit 1
  # shellcheck disable=SC2086
  n=$(one "$new" ${NEW_ENV:-}) || exit 1
  echo "$b" >>"$tmp/base"; echo "$n" >>"$tmp/new"
done
python3 - "$tmp/base" "$tmp/new" "$pages" <<'PY'
import statistics, sys
pages = int(sys.argv[3])
rows = [[l.split() for l in open(p)] for p in sys.argv[1:3]]
for name, rs in zip(("base", "new"), rows):
    for r in rs:
        wall, emb, enc, rss = float(r[0]), float(r[1]), r[2], int(r[3])
        print(f"  {name:4}  {pages / wall:6.2f} pages/s  wall {wall:7.1f} s  encoder {emb:7.1f} s  "
              f"texts encoded {enc:>6}  peak RSS {rss / 1024:6.0f} MiB")
ratios = [float(b[0]) / float(n[0]) for b, n in zip(*rows)]
rss = [int(n[3]) / int(b[3]) for b, n in zip(*rows)]
print(f"  pages/s new/base: median x{statistics.median(ratios):.2f} (rounds: "
      + " ".join(f"x{x:.2f}" for x in ratios) + f"); peak RSS new/base x{statistics.median(rss):.2f}")
PY

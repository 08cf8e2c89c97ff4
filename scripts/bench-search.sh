#!/usr/bin/env bash
# Search latency side by side: two mmrag binaries (e.g. the previous commit's and this
# one's), each on its own collection of the same PDFs, asked the same questions in
# alternation (so both see the same machine noise). Prints p50/p90 of encode + search as
# mmrag itself measures them (`search --explain`: model loading and process start are
# not counted) and the ratio new/base.
# Usage: scripts/bench-search.sh BASE_BIN BASE_DB NEW_BIN NEW_DB QUESTIONS.json [ROUNDS]
set -euo pipefail
base=$1 bdb=$2 new=$3 ndb=$4 qs=$5 rounds=${6:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-bsearch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -c 'import json,sys; [print(q["query"]) for q in json.load(open(sys.argv[1]))["questions"]]' "$qs" >"$tmp/q"
ms() { "$1" search --db "$2" "$3" --explain -k 10 | sed -n 's/^time: encode \([0-9.]*\) ms, search \([0-9.]*\) ms$/\1 \2/p'; }
for r in $(seq "$rounds"); do
  while IFS= read -r q; do
    ms "$base" "$bdb" "$q" >>"$tmp/base"
    ms "$new" "$ndb" "$q" >>"$tmp/new"
  done <"$tmp/q"
done
python3 - "$tmp/base" "$tmp/new" <<'PY'
import sys
def load(p):
    rows = [tuple(map(float, l.split())) for l in open(p) if l.strip()]
    return [e + s for e, s in rows], [s for e, s in rows]
def pct(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
(bt, bs), (nt, ns) = load(sys.argv[1]), load(sys.argv[2])
print("queries %d each" % len(bt))
for name, b, n in (("encode+search", bt, nt), ("search only", bs, ns)):
    print("  %-14s base p50 %7.1f ms p90 %7.1f ms | new p50 %7.1f ms p90 %7.1f ms | p50 ratio %.2fx"
          % (name, pct(b, .5), pct(b, .9), pct(n, .5), pct(n, .9), pct(n, .5) / max(pct(b, .5), 1e-9)))
PY

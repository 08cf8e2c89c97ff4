#!/usr/bin/env bash
# Remakes tests/data/golden/gemma3_270m_llamacpp.json, llama.cpp's reading of the real
# gemma-3-270m Q4_K_M (`make models-extra`) that tests/test_archs.c's gemma3_270m_real checks
# the engine against: the tokens llama.cpp makes of tests/data/llamacpp_prompt.txt (BOS
# first), its 16 greedy tokens after it, and at a few rows (both sides of the 512-token
# sliding window and of the 512-token prefill chunk) its top-10 logits and logit range.
# Needs llama.cpp (scripts/build-llamacpp.sh) and Debian's numpy.
# Usage: scripts/golden_gemma3_270m.sh [MODELS_DIR] [BUILD_DIR]
set -euo pipefail
models=${1:-models}; build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
m=$models/gemma3/gemma-3-270m-q4_k_m.gguf
lc=$build/llamacpp/llamacpp-logits
[ -x "$lc" ] || { echo "run make check-llamacpp first (it builds $lc)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$lc" "$m" --text "$(cat "$here/../tests/data/llamacpp_prompt.txt")" --gen 16 --threads 2 --out "$tmp/ref.bin" > "$tmp/out"
/usr/bin/python3 - "$tmp/out" "$tmp/ref.bin" "$here/../tests/data/golden/gemma3_270m_llamacpp.json" <<'PY'
import json, sys, numpy as np
out = dict(l.split(":", 1) for l in open(sys.argv[1]).read().splitlines() if ":" in l and l.split(":", 1)[0] in ("ids", "gen", "desc"))
ids = [int(x) for x in out["ids"].split(",")]
gen = [int(x) for x in out["gen"].split(",")]
L = np.fromfile(sys.argv[2], dtype="<f4").reshape(len(ids), -1)
rows = []
for r in (0, 1, 100, 300, 510, 511, 512, 513, len(ids) - 1):
    top = np.argsort(-L[r])[:10]
    rows.append({"row": r, "range": float(L[r].max() - L[r].min()),
                 "top_ids": [int(t) for t in top], "top_logits": [round(float(L[r][t]), 5) for t in top]})
json.dump({"model": "gemma-3-270m-q4_k_m.gguf (sha256 a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818)",
           "reference": "llama.cpp from llama-cpp-python 0.3.16 (scripts/llamacpp-logits.c, KV f32)",
           "n_vocab": int(L.shape[1]), "ids": ids, "greedy": gen, "rows": rows},
          open(sys.argv[3], "w"), indent=1)
PY
echo "wrote tests/data/golden/gemma3_270m_llamacpp.json"

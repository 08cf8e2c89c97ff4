#!/usr/bin/env bash
# The text encoder against PyTorch and ONNX Runtime on real chunks (issue 14: mmrag int8
# >= 1.5x ONNX Runtime int8 at 2 threads): the first N chunks mmrag makes of R-admin +
# R-intro (section path, then text, as embed.c encodes them; one a line), then
# bench_textenc on them at 1 and 2 threads (every side includes tokenization).
# Usage: scripts/bench-textenc.sh BUILD MODELS DEBIAN_DOCS_DIR [N]
set -euo pipefail
build=$1 models=$2 docs=$3 n=${4:-300}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-btextenc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$build/mmrag" index --db "$tmp/db" --no-embed "$docs/R-admin.pdf" "$docs/R-intro.pdf" >/dev/null
/usr/bin/python3 - "$tmp/db/mmrag.db" "$n" > "$tmp/chunks.txt" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for sec, text in db.execute("SELECT section, text FROM chunks ORDER BY id LIMIT ?", (int(sys.argv[2]),)):
    print(" ".join(((sec + "\n") if sec else "") .split() + text.split()))
PY
echo "texts: the first $(wc -l < "$tmp/chunks.txt") chunks of R-admin + R-intro"
MMRAG_MODELS=$models MMRAG_TMP=$tmp BENCH_TEXTS_FILE="$tmp/chunks.txt" BENCH_TEXTS=$n \
  "$build/bench/bench_textenc"

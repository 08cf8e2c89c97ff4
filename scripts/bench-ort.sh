#!/usr/bin/env bash
# ONNX Runtime baseline for bench_textenc (see scripts/bench_ort.py): makes the pinned venv
# and the ONNX export of models/minilm once, cached per machine under
# ${XDG_CACHE_HOME:-~/.cache}/mmrag, then prints bench_ort.py's lines.
# Usage: scripts/bench-ort.sh MODELS TEXTS THREADS
set -euo pipefail
MODELS=${1:-models}; TEXTS=$2; THREADS=${3:-1}
ORT_VERSION=1.20.1   # pinned: bump deliberately (the baseline moves with it)
ONNX_VERSION=1.17.0  # quantize_dynamic needs the onnx package
NUMPY_VERSION=1.26.4
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag
VENV=$CACHE/venv-ort-$ORT_VERSION
here=$(cd "$(dirname "$0")" && pwd)
if ! "$VENV/bin/python" -c "import onnxruntime, onnx" 2>/dev/null; then
  echo "bench-ort: installing onnxruntime $ORT_VERSION into $VENV" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "onnxruntime==$ORT_VERSION" \
    "onnx==$ONNX_VERSION" "numpy==$NUMPY_VERSION" >&2
fi
# the export is keyed by the weights' hash: another model file gets its own export
sum=$(sha256sum "$MODELS/minilm/model.safetensors" | cut -c1-16)
dir=$CACHE/onnx-minilm-$sum
if [ ! -s "$dir/minilm.onnx" ]; then
  mkdir -p "$dir"
  /usr/bin/python3 "$here/golden_minilm.py" --models "$MODELS" --export-onnx "$dir/minilm.tmp.onnx" \
    >/dev/null 2>&1 && mv "$dir/minilm.tmp.onnx" "$dir/minilm.onnx"
fi
exec "$VENV/bin/python" "$here/bench_ort.py" --onnx "$dir/minilm.onnx" --models "$MODELS" \
  --texts "$TEXTS" --threads "$THREADS"

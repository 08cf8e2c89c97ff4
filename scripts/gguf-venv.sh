#!/usr/bin/env bash
# Prints the python of a venv holding PyPI's `gguf` (pinned), creating it on first use
# under ${XDG_CACHE_HOME:-~/.cache}/mmrag. A test-time reference only (its numpy
# dequantizers check ours bit for bit); mmrag itself never imports it. The venv sees the
# system site-packages so Debian's numpy is reused.
set -euo pipefail
GGUF_VERSION=0.19.0
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/venv-gguf-$GGUF_VERSION
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if ! "$VENV/bin/python" -c "import gguf, sys; from importlib.metadata import version; sys.exit(version('gguf') != '$GGUF_VERSION')" 2>/dev/null; then
  echo "gguf-venv: installing gguf $GGUF_VERSION into $VENV" >&2
  rm -rf "$VENV"
  "$PY" -m venv --system-site-packages "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "gguf==$GGUF_VERSION" >&2
fi
echo "$VENV/bin/python"

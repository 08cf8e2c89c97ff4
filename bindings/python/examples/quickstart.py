"""Index PDFs, search, ask with a streamed answer, locate a figure, list and delete.
Usage: quickstart.py DB_DIR PDF... (models: $MMRAG_MODELS; library: $MMRAG_LIB or the prefix)"""
import sys

import mmrag


def main(db: str, pdfs: list) -> int:
    with mmrag.Collection(db) as c:
        ids = c.index_files(pdfs)   # parsed in parallel, embedded beside
        assert c.index_file(pdfs[-1]) == ids[-1]
        with open(pdfs[0], "rb") as f:   # the same bytes again: the existing id, nothing added
            assert c.index_bytes(f.read(), "again.pdf") == ids[0]
        for d in c.list():
            print(f"doc {d.id}: {d.title} ({d.pages} pages, {d.chunks} chunks)")

        for h in c.search("revenue by quarter", k=3):
            print(f"hit p.{h.page} {h.kind} {h.score:.3f}: {h.text[:60]}")

        stream = c.ask_stream("What was Q3 revenue?", max_tokens=48)
        for piece in stream:
            print(piece, end="", flush=True)
        a = stream.answer
        print(f"\n[{a.stop_reason}] {len(a.citations)} citations")
        for i, cit in enumerate(a.citations, 1):
            print(f"  [{i}] {cit.title}, page {cit.page}, box {tuple(round(x, 3) for x in cit.box)}")

        r = c.locate(ids[0], "the bar chart of revenue")
        print("locate:", f"page {r.page} {r.kind} {r.confidence:.2f}" if r.found else "not found")

        try:
            c.delete(999999)
        except mmrag.MmragError as e:   # mmrag's own message, and its status
            print(f"delete 999999: {e} (status {e.status})")
        c.delete(ids[-1])
        print("documents left:", len(c.list()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

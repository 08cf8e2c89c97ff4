#!/usr/bin/env python3
"""Check a retrieval question set (tests/data/eval_questions*.json) against its PDFs.

For every answer {"doc", "page", "text"} it extracts that one page with
`pdftotext -f PAGE -l PAGE` (reading order; --layout adds -layout) and asserts that
`text` occurs in it after the normalisation mmrag's `eval retrieval` applies
(retrieval/eval.c: lowercase, whitespace runs -> one space). It also checks the file's
shape: an "about" string, unique ids, a known type, pages within the PDF.
Answers with a "box" and no "text" are only checked for doc and page.

Usage: scripts/check-question-set.py [--layout] QUESTIONS.json PDF_DIR
Prints the number of answers checked; exits 1 listing every failure.
Needs python3 (stdlib only) and pdftotext/pdfinfo (poppler-utils).
"""
import json
import os
import re
import subprocess
import sys

TYPES = {"fact", "howto", "concept", "figure", "table"}


def squash(s):
    return re.sub(r"\s+", " ", s).strip().lower()


def main(argv):
    layout = "--layout" in argv
    args = [a for a in argv if a != "--layout"]
    if len(args) != 2:
        sys.stderr.write(__doc__.split("\n\n")[2] + "\n")
        return 2
    qpath, pdfdir = args
    with open(qpath, encoding="utf-8") as f:
        data = json.load(f)
    fails = []
    if not isinstance(data.get("about"), str) or not data["about"].strip():
        fails.append("file: no \"about\" string")
    qs = data.get("questions")
    if not isinstance(qs, list) or not qs:
        print("%s: no \"questions\" array" % qpath)
        return 1
    pages, cache, seen, checked = {}, {}, set(), 0

    def npages(doc):
        if doc not in pages:
            out = subprocess.run(["pdfinfo", os.path.join(pdfdir, doc)], capture_output=True, text=True).stdout
            m = re.search(r"^Pages:\s+(\d+)", out, re.M)
            pages[doc] = int(m.group(1)) if m else 0
        return pages[doc]

    def page_text(doc, page):
        key = (doc, page)
        if key not in cache:
            cmd = ["pdftotext", "-q", "-enc", "UTF-8", "-f", str(page), "-l", str(page)]
            if layout:
                cmd.append("-layout")
            cmd += [os.path.join(pdfdir, doc), "-"]
            cache[key] = squash(subprocess.run(cmd, capture_output=True).stdout.decode("utf-8", "replace"))
        return cache[key]

    for i, q in enumerate(qs):
        qid = q.get("id") or "#%d" % i
        if qid in seen:
            fails.append("%s: duplicate id" % qid)
        seen.add(qid)
        if q.get("type") not in TYPES:
            fails.append("%s: type %r not one of %s" % (qid, q.get("type"), sorted(TYPES)))
        if not isinstance(q.get("query"), str) or not q["query"].strip():
            fails.append("%s: empty query" % qid)
        answers = q.get("answers")
        if not isinstance(answers, list) or not answers:
            fails.append("%s: no answers" % qid)
            continue
        for a in answers:
            doc, page, text = a.get("doc"), a.get("page"), a.get("text")
            where = "%s: %s p%s" % (qid, doc, page)
            if not doc or not os.path.isfile(os.path.join(pdfdir, doc)):
                fails.append("%s: no such PDF in %s" % (where, pdfdir))
                continue
            n = npages(doc)
            if not isinstance(page, int) or not 1 <= page <= n:
                fails.append("%s: page outside 1..%d" % (where, n))
                continue
            if text is None:
                if "box" not in a:
                    fails.append("%s: neither text nor box" % where)
                continue
            checked += 1
            t = squash(text)
            if not t or t not in page_text(doc, page):
                fails.append("%s: text %r not on the page" % (where, text))
    print("%s: %d questions, %d answer texts checked%s, %d failures"
          % (qpath, len(qs), checked, " (pdftotext -layout)" if layout else "", len(fails)))
    for f in fails:
        print("  FAIL " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

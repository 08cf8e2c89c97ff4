#!/usr/bin/env python3
"""Raw PDFs that are legal but hard on a parser (tests of isolated ingest).

  gen_hostile_pdf.py stall OUT [PAGES] [STROKES]
      PAGES pages (default 300) that all share ONE content stream of STROKES line strokes
      (default 50,000): small on disk (the stream is stored once, deflated), slow to parse
      (every page renders and text-scans the whole stream).
  gen_hostile_pdf.py poster OUT
      one 14,400 pt square page (the largest PDF allows) with a titled bar chart and its
      caption, so ingest must render it to find the figure.
"""
import random
import sys
import zlib


def write_pdf(path, objects):
    """objects: list of bytes bodies, object i+1; the catalog must be object 1."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    with open(path, "wb") as f:
        f.write(out)


def stream(data, deflate=True):
    if deflate:
        data = zlib.compress(data, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def stall(path, pages=300, strokes=50000):
    rnd = random.Random(16)
    ops = [b"BT /F1 12 Tf 72 720 Td (Shared stream stress test) Tj ET\n0.2 w\n"]
    for _ in range(strokes):
        x0, y0, x1, y1 = (rnd.uniform(36, 576), rnd.uniform(36, 756), rnd.uniform(36, 576), rnd.uniform(36, 756))
        ops.append(b"%.1f %.1f m %.1f %.1f l S\n" % (x0, y0, x1, y1))
    # objects: 1 catalog, 2 pages, 3 font, 4 shared content, 5.. pages
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, kids),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            stream(b"".join(ops))]
    for _ in range(pages):
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                    b"/Resources << /Font << /F1 3 0 R >> >> >>")
    write_pdf(path, objs)


def poster(path):
    size = 14400
    ops = [b"BT /F1 240 Tf 1200 13400 Td (Regional output poster) Tj ET\n",
           b"BT /F1 120 Tf 1200 12900 Td (Output of the four plants over one year, measured monthly.) Tj ET\n"]
    for i, h in enumerate([3000, 5200, 4100, 6900]):
        x = 2000 + i * 2600
        ops.append(b"0.2 0.4 0.8 rg %d 3000 1800 %d re f\n" % (x, h))
    ops.append(b"0 0 0 RG 40 w 1600 3000 m 12800 3000 l S 1600 3000 m 1600 11000 l S\n")
    ops.append(b"BT /F1 160 Tf 1200 2200 Td (Figure 1: Output by plant in gigawatt hours.) Tj ET\n")
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Count 1 /Kids [5 0 R] >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            stream(b"".join(ops)),
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (size, size)]
    write_pdf(path, objs)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("stall", "poster"):
        sys.exit(__doc__)
    if sys.argv[1] == "stall":
        stall(sys.argv[2], *(int(a) for a in sys.argv[3:5]))
    else:
        poster(sys.argv[2])

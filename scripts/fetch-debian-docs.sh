#!/usr/bin/env bash
# The second corpus: real PDFs from Debian documentation packages (DESIGN.md, evaluation
# data). Downloads the pinned .debs with `apt-get download` (nothing is installed), checks
# the PDFs inside by sha256 and caches them once per machine. Prints the cache folder.
#   debian-reference-en 2.100        debian-reference.en.pdf  261 pages (xdvipdfmx, tables)
#   gnuplot-doc 5.4.4+dfsg1-2        gnuplot.pdf              311 pages (pdfTeX)
# and, for the untuned second question set (tests/data/eval_questions_debian2.json):
#   r-doc-pdf 4.2.2.20221110-2       R-intro.pdf              113 pages (pdfTeX-1.40.24)
#   r-doc-pdf 4.2.2.20221110-2       R-admin.pdf               85 pages (pdfTeX-1.40.24)
#   asymptote-doc 2.85+ds-1          asymptote.pdf            196 pages (pdfTeX-1.40.24, figures)
# and, for the untuned third set (tests/data/eval_questions_debian3.json), the same .deb's
#   R-FAQ.pdf 52 pages, R-data.pdf 41, R-lang.pdf 69, R-ints.pdf 81 (pdfTeX-1.40.24)
# and, with --more, for the blind answer set tests/data/answer_questions_deb4.json:
#   r-doc-pdf 4.2.2.20221110-2       R-exts.pdf               236 pages (pdfTeX-1.40.24)
#   texlive-latex-recommended-doc 2022.20230122-3  beameruserguide.pdf  234 pages (a 50 MB .deb)
# Usage: scripts/fetch-debian-docs.sh [--more]   (exit 1 with a one-line reason when unavailable)
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/debian-docs
# package=version  path in the .deb  sha256 of the PDF
pins=(
"debian-reference-en=2.100 ./usr/share/debian-reference/debian-reference.en.pdf 32775deeca0770ac25282b0c894cbaae83f4dd4ab00e891b94e8f009c0366728"
"gnuplot-doc=5.4.4+dfsg1-2 ./usr/share/doc/gnuplot/gnuplot.pdf df68dd0613f043141512fc4436d17aaf96727d5a758d85233915ac5056a97206"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-intro.pdf 337ccd0b490b1e66f7e783b45f4588d0599730b4206c0c051edfe1419c568c51"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-admin.pdf 50e256b5f873bbee4c8482df3754fa8654f02ef693409fe5e30b2f114e3efe9f"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-FAQ.pdf de8768520d4fb90dad64c28483ffb92dca7dd9d8dc8556905b35c2e62a939255"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-data.pdf 9381a39ffeb8545a745c2618ba955b4ae4e10b9c8373cd5bc1984fff8318f8ca"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-lang.pdf 4a6120ba505021d7c208078b575fe3f5d5dc91636dcf17de8a4208adda90d7dc"
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-ints.pdf cdcca722b4de6682a9100550b4361dcd3dd41b5b274d97b9a6230572be63901f"
"asymptote-doc=2.85+ds-1 ./usr/share/doc/asymptote/asymptote.pdf e17165321f74a5ec1b884cf20773cc43361df8f7fc707b071debf4ef707de051"
)
[ "${1:-}" = --more ] && pins+=(
"r-doc-pdf=4.2.2.20221110-2 ./usr/share/R/doc/manual/R-exts.pdf 792220b273d40e8629664d5dd0d6ae4151419d14f613a949aebe85b8c2a1f85c"
"texlive-latex-recommended-doc=2022.20230122-3 ./usr/share/doc/texlive-doc/latex/beamer/beameruserguide.pdf 9a1f87ab1036dec58ac19b59a27607d5ed51d115103cec41f8fd4d963ef9eb68"
)
mkdir -p "$cache"
for pin in "${pins[@]}"; do
  set -- $pin
  pdf=$cache/$(basename "$2")
  if [ -f "$pdf" ] && echo "$3  $pdf" | sha256sum -c --status; then continue; fi
  work=$(mktemp -d "$cache/dl.XXXXXX")
  # apt's sandbox user cannot write into root's cache: download from inside the temp dir
  chmod 755 "$work"
  if ! (cd "$work" && apt-get download -qq "$1" >/dev/null 2>&1); then
    rm -rf "$work"; echo "debian-docs: apt-get download $1 failed (offline or no longer in the archive)" >&2; exit 1
  fi
  dpkg-deb --fsys-tarfile "$work"/*.deb | tar -xO "$2" > "$work/pdf"
  if ! echo "$3  $work/pdf" | sha256sum -c --status; then
    rm -rf "$work"; echo "debian-docs: $(basename "$2") from $1 has an unexpected sha256" >&2; exit 1
  fi
  mv "$work/pdf" "$pdf"
  rm -rf "$work"
done
echo "$cache"

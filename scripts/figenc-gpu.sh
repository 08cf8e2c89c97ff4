#!/bin/sh
# Stage 1 of the figure encoder on a lent GPU, in one call (issue 13). The device machine is
# offline and takes at most 64 MiB with the tree (~20 MB), so MiniLM travels as an fp16 copy
# (~44 MB; cosine >= 0.999999 to fp32, and the text tower is only the target here):
#
#   here:     scripts/figenc-gpu.sh pack MODELS            -> .figenc-gpu/minilm (git-ignored)
#   device:   run(command="scripts/figenc-gpu.sh train $OUT 470", carry=[".figenc-gpu"],
#                 timeout_s=560)                            -> $OUT/figenc/{model.safetensors,...}
#   here:     make finetune-figure-encoder FIGENC_BASE=<files_at>/figenc   (CPU, ~55 min), then
#             the dev sets (scripts/eval_figures.py --dev-X --quick) and make calibrate-locate
#
# Stage 1 as committed drew charts only (doc share 0, print share 0: MODEL_CARD.md); this run
# mixes in the manual-style figures that stages 2-3 could add only on the CPU, and a share of
# charts in the print style. FIGENC_GPU_ARGS overrides the mix (later arguments win, so a
# smoke test here: PYTHON=/usr/bin/python3 FIGENC_GPU_ARGS="... --device cpu --workers 2").
set -eu
cd "$(dirname "$0")/.."
DIR=.figenc-gpu
case "${1:-}" in
pack)
	models=${2:?usage: figenc-gpu.sh pack MODELS}
	mkdir -p $DIR/minilm
	cp "$models"/minilm/config.json "$models"/minilm/vocab.txt "$models"/minilm/tokenizer_config.json $DIR/minilm/
	/usr/bin/python3 - "$models"/minilm $DIR/minilm <<'EOF'
import sys
sys.path.insert(0, "vision/train")
import torch
from figenc_model import MiniLM, st_read, st_write
src, dst = sys.argv[1], sys.argv[2]
w = {k: v.half() for k, v in st_read(src + "/model.safetensors").items() if v.dtype != torch.int64}
st_write(dst + "/model.safetensors", w, {"format": "pt", "producer": "mmrag scripts/figenc-gpu.sh (fp16 copy)"})
texts = ["a bar chart", "a drawing of geometric shapes", "a line plot with two red lines"]
cos = (MiniLM(src).embed(texts) * MiniLM(dst).embed(texts)).sum(1).min().item()
if cos < 0.9999:
    sys.exit(f"figenc-gpu.sh: the fp16 MiniLM drifts (cosine {cos:.6f})")
print(f"{dst}: fp16 MiniLM, cosine to fp32 >= {cos:.7f}")
EOF
	du -sh $DIR
	;;
train)
	out=${2:?usage: figenc-gpu.sh train OUT [SECONDS]}
	secs=${3:-470}
	[ -f $DIR/minilm/model.safetensors ] || { echo "figenc-gpu.sh: no $DIR/minilm (run pack here, carry $DIR)" >&2; exit 1; }
	nvidia-smi -L || true
	PYTHONUNBUFFERED=1 ${PYTHON:-python3} vision/train/train_figenc.py --minilm $DIR/minilm --out "$out"/figenc \
		--device cuda --workers 15 --batch 512 --seconds "$secs" \
		${FIGENC_GPU_ARGS:---doc-share 0.4 --print-share 0.2}
	;;
*)
	echo "usage: figenc-gpu.sh pack MODELS | train OUT [SECONDS]" >&2
	exit 2
	;;
esac

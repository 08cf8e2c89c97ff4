#!/usr/bin/env python3
"""Golden fixture for mmrag's own figure encoder (vision/data/figenc): the training code's
forward pass (vision/train/figenc_model.py, PyTorch: nn.Linear patch embedding,
F.interpolate bicubic position embeddings) on patches drawn from the shared PRNG of
scripts/golden_clip.py / tests/clip_gen.h, so no input needs committing.

  /usr/bin/python3 scripts/golden_figenc.py > tests/data/golden/figenc.json

Cases: grids 14x14 (the training grid), 11x17 and 3x9 (resampled position embeddings).
Values: pooled embedding (384) and the first 4 patch tokens, fp32 from the fp16 file."""
import hashlib
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "vision", "train"))
from golden_clip import uniform  # noqa: E402
from figenc_model import FigureViT  # noqa: E402

D = os.path.join(ROOT, "vision", "data", "figenc")


def main():
    path = os.path.join(D, "model.safetensors")
    cfg = json.load(open(os.path.join(D, "config.json")))
    m = FigureViT.from_file(path, cfg).eval()
    p = cfg["vision_config"]["patch_size"]
    cases = []
    for gh, gw in ((14, 14), (11, 17), (3, 9)):
        name = f"figenc.patches.{gh}x{gw}"
        x = torch.from_numpy(2.0 * uniform(name, gh * gw * 3 * p * p)).reshape(1, gh * gw, 3 * p * p)
        with torch.no_grad():
            e, t = m(x, gh, gw, tokens=True)
        cases.append({"name": name, "gh": gh, "gw": gw, "scale": 2.0,
                      "embedding": [round(float(v), 7) for v in e[0]],
                      "tokens": [[round(float(v), 7) for v in t[0, i]] for i in range(4)]})
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    json.dump({"model": "vision/data/figenc/model.safetensors", "sha256": sha,
               "generator": f"scripts/golden_figenc.py (torch {torch.__version__})",
               "cases": cases}, sys.stdout, indent=None)
    print()


if __name__ == "__main__":
    main()

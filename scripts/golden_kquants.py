#!/usr/bin/env python3
"""Dequantization reference for tests/test_kernels.c, from PyPI's `gguf` package.

  golden_kquants.py OUT.bin     (run with the python of scripts/gguf-venv.sh)

Writes random blocks of every quantized type mmrag reads and what gguf.quants.dequantize
makes of them. The blocks are random bytes (every bit pattern of the quants and packed
scales occurs) with finite fp16 scale fields; numpy's RandomState keeps them the same
across versions. The C test dequantizes the same bytes on every CPU path and requires
bit-identical floats.

Record format (little-endian), repeated until end of file:
  u32 ggml type, u32 number of blocks, u32 bytes of block data,
  block data, then float32 values (blocks x block size)
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

# byte offsets of the fp16 fields (scales, mins) inside one block of each type
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
N_BLOCKS = 64


def random_blocks(rs, qtype):
    bsize, tsize = GGML_QUANT_SIZES[qtype]
    raw = rs.randint(0, 256, size=(N_BLOCKS, tsize)).astype(np.uint8)
    for off in FP16_FIELDS[qtype]:
        vals = (rs.standard_normal(N_BLOCKS) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = vals.view(np.uint8).reshape(N_BLOCKS, 2)
    return raw


def main(out):
    rs = np.random.RandomState(20261203)
    with open(out, 'wb') as f:
        for qtype in FP16_FIELDS:
            raw = random_blocks(rs, qtype)
            deq = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
            f.write(struct.pack('<III', int(qtype), N_BLOCKS, raw.size))
            f.write(raw.tobytes())
            f.write(deq.tobytes())
        # bf16: random finite values (exponent field never all ones)
        v = rs.randint(0, 1 << 16, size=N_BLOCKS * 32).astype(np.uint16)
        v = np.where((v & 0x7F80) == 0x7F80, v & 0xBFFF, v).astype(np.uint16)
        deq = quants.dequantize(v.view(np.uint8), T.BF16).astype(np.float32).reshape(-1)
        f.write(struct.pack('<III', int(T.BF16), v.size, v.nbytes))
        f.write(v.tobytes())
        f.write(deq.tobytes())
    return 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))

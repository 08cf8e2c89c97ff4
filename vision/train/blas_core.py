"""Import before numpy and torch: OpenBLAS picks its kernels by CPU model when it loads, and
0.3.21 (Debian 12) takes a model it does not know (a 2024 Xeon, model 207) for a Prescott,
whose SSE3 sgemm runs torch's matmuls ~3x slow. Only $OPENBLAS_CORETYPE, set before it loads,
changes that; this sets it the way mmrag's own main does (kernels/kernels.h,
kern_blas_core_better): SkylakeX with AVX-512 F/BW/DQ/VL, Haswell with AVX2 and FMA, and only
when OpenBLAS, asked in a child process, chose Prescott. A value already set is kept."""
import os
import subprocess
import sys

_ASK = ("import ctypes, ctypes.util\n"
        "for n in ('libopenblas.so.0', 'libblas.so.3', ctypes.util.find_library('openblas')):\n"
        "    try:\n"
        "        f = ctypes.CDLL(n).openblas_get_corename\n"
        "    except (OSError, AttributeError, TypeError):\n"
        "        continue\n"
        "    f.restype = ctypes.c_char_p\n"
        "    print(f().decode())\n"
        "    break\n")


def _flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pick(chosen, flags):
    """The kernels to set, or None (kern_blas_core_pick's rule)."""
    if chosen != "Prescott" or not {"avx2", "fma"} <= flags:
        return None
    return "SkylakeX" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags else "Haswell"


if "OPENBLAS_CORETYPE" not in os.environ:
    try:
        _chosen = subprocess.run([sys.executable, "-c", _ASK], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        _chosen = ""
    _core = pick(_chosen, _flags())
    if _core:
        os.environ["OPENBLAS_CORETYPE"] = _core

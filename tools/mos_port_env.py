"""mos_port_env.py: the process setup of tools/mos_port.py (speed only): glibc malloc, the thread
pools, which BLAS torch's GEMMs run on; and the machine and commit its records are stamped with.
Imports no torch: tune_process_env must run first."""

import argparse
import os
import subprocess
import sys


def tune_process_env():
    """Before torch is loaded: re-execute this script once with glibc malloc keeping its memory
    (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge), the BLAS/OpenMP pools at --threads and
    OMP_WAIT_POLICY=PASSIVE (any of them already set is kept). Without the malloc settings every
    large tensor is a fresh mmap whose first touch page-faults, which on a 2-core AMD EPYC made
    elementwise ops ~20x slower (a [1400,10000] exp: 300 ms against 13 ms); with torch's OpenMP
    threads spinning beside OpenBLAS's, a small-mos step at 2 threads on a busy machine took
    ~3x longer than with passive waits."""
    if os.environ.get("MOS_PORT_ENV"):
        return
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=0)
    threads = pre.parse_known_args()[0].threads
    env = dict(os.environ, MOS_PORT_ENV="1")
    env.setdefault("MALLOC_MMAP_MAX_", "0")
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 40))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # OpenMP and OpenBLAS pools share the cores
    if threads > 0:
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(k, str(threads))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def blas_library():
    """The BLAS torch's GEMMs run on (Debian's torch uses the system libblas.so.3: the reference
    BLAS is ~10x slower than OpenBLAS; `apt-get install libopenblas0-pthread` switches it)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() or "mkl" in line}
        return ", ".join(sorted(os.path.realpath(p) for p in libs)) or "unknown"
    except OSError:
        return "unknown"


def cpu_name():
    """The CPU's model name and vector extensions, as mosgrad's records name a machine."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "unknown"
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                 if ln.startswith("model name")), "unknown")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines()
                      if ln.startswith("flags")), []))
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{name} ({simd}{', AVX512_BF16' if 'avx512_bf16' in flags else ''})"


def source_commit():
    """The commit of the checkout this script runs from ("" outside a git checkout)."""
    try:
        return subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse",
                               "--short=12", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""

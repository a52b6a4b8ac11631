#!/usr/bin/python3
"""torch.mm GFLOP/s on the shapes of bench/bench_gemm.cpp, for comparison with mosgrad's GEMM.

Run with the system interpreter (Debian python3-torch 1.13, which calls the system BLAS):
    /usr/bin/python3 bench/torch_gemm.py [--runs R] [--threads T]

Prints `gemm <shape> torch <GFLOP/s>` (median of the runs), the same shape names as
bench_gemm, so a driver script can merge the two. Lines starting with '#' are commentary (best
and worst run, GFLOP per second of process CPU time).

Debian's torch goes through libblas.so.3, which update-alternatives may point at OpenBLAS
(pthreads or OpenMP build), BLIS or the reference BLAS; which one is active is printed, because
the reference BLAS is ~50x slower and would make the comparison meaningless.
OPENBLAS_CORETYPE=SkylakeX makes OpenBLAS use its AVX-512 kernels on CPUs it does not know by
name (AMD Zen 4/5 are detected as older cores otherwise); it is set here, overriding the
environment (MOSGRAD_OPENBLAS_CORETYPE=Haswell etc. to compare another core type).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

# Must precede loading libopenblas. Forced, not defaulted: this workplace's environment exports
# OPENBLAS_CORETYPE=Haswell, which would measure OpenBLAS's AVX2 kernels. MOSGRAD_OPENBLAS_CORETYPE
# picks another core for comparison.
os.environ["OPENBLAS_CORETYPE"] = os.environ.get("MOSGRAD_OPENBLAS_CORETYPE", "SkylakeX")

import torch  # noqa: E402

# (trans_a, trans_b, M, K, N): op(A) is M x K, op(B) is K x N, as in bench/bench_gemm.cpp.
SHAPES = [
    (False, False, 1024, 1024, 1024),
    (False, False, 700, 200, 10000),
    (False, True, 700, 200, 10000),
    (False, False, 3500, 200, 10000),
    (False, False, 700, 10000, 200),
    (False, False, 20, 400, 1600),
    (False, False, 700, 400, 1600),
]


def shape_name(ta, tb, m, k, n):
    name = f"{m}x{k}@{k}x{n}"
    if ta or tb:
        name += "-" + ("T" if ta else "N") + ("T" if tb else "N")
    return name


def active_blas():
    """The library libblas.so.3 resolves to, as update-alternatives reports it."""
    try:
        out = subprocess.run(
            ["update-alternatives", "--display", "libblas.so.3-x86_64-linux-gnu"],
            capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if "link currently points to" in line:
                return line.split("points to", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    blas = active_blas()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, libblas.so.3 -> {blas}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}, median of {args.runs} runs")
    if "openblas-openmp" not in blas:
        print("# note: libopenblas0-openmp is not the active libblas.so.3; torch numbers reflect "
              f"{blas}")

    gen = torch.Generator().manual_seed(42)
    for ta, tb, m, k, n in SHAPES:
        # Store the operands the way bench_gemm does, then view them transposed where needed, so
        # torch.mm sees the same memory layout (a transposed view goes to sgemm as a 'T' flag).
        a = torch.rand(k, m, generator=gen).t() if ta else torch.rand(m, k, generator=gen)
        b = torch.rand(n, k, generator=gen).t() if tb else torch.rand(k, n, generator=gen)
        a, b = a * 2 - 1, b * 2 - 1  # elementwise: keeps the (transposed) strides
        out = torch.empty(m, n)
        flop = 2.0 * m * n * k
        torch.mm(a, b, out=out)
        once = 1e9
        for _ in range(3):  # sized from the fastest call, as in bench_gemm.cpp
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            once = min(once, max(time.perf_counter() - t0, 1e-7))
        calls = max(1, int(0.2 / once))
        rates, per_cpu_s = [], []
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                torch.mm(a, b, out=out)
            rates.append(flop * calls / (time.perf_counter() - t0) / 1e9)
            per_cpu_s.append(flop * calls / max(time.process_time() - c0, 1e-9) / 1e9)
        name = shape_name(ta, tb, m, k, n)
        print(f"gemm {name} torch {statistics.median(rates):.1f}")
        # GFLOP per second of process CPU time, as in bench_gemm: robust to time-sharing.
        print(f"# {name} best {max(rates):.1f} worst {min(rates):.1f} ({calls} calls per run), "
              f"per CPU-second {statistics.median(per_cpu_s):.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

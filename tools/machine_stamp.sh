# Sourced by the tools that stamp a measured row (tools/time_fresh_clone.sh,
# tools/record_mutations.sh): sets `machine` to this CPU's name, family and model, its widest SIMD,
# and its core count, e.g. "AMD EPYC (family 26 model 2, AVX-512, AVX512_BF16), 2 cores".
cpu=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')
family=$(grep -m1 '^cpu family' /proc/cpuinfo | sed 's/.*: //')
model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | sed 's/.*: //')
simd=AVX2
grep -qw avx512f /proc/cpuinfo && simd=AVX-512
grep -qw avx512_bf16 /proc/cpuinfo && simd="$simd, AVX512_BF16"
machine="$cpu (family $family model $model, $simd), $(nproc) cores"

// The CUDA backend's entry points: plain host functions on raw device pointers, one group per file
// of cuda/, each group mirroring the CPU file named in its heading. The ops in autograd/ and nn/
// call them when their inputs live on the GPU (Tensor::device() == Device::CUDA); everything above
// (shapes, checks, the autograd graph) is shared with the CPU path.
//
// Each function is declared once here, through MG_CUDA_API, and defined by one of two siblings
// chosen when the programs are linked: cuda/*.cu (`make CUDA=1`), or cuda/without_cuda.cpp (plain
// `make`), which expands this same list into stubs that throw "built without CUDA: rebuild with
// make CUDA=1". No tensor can reach the GPU in a build without CUDA (Tensor::to throws first), and
// the calling code still compiles, so it cannot rot. Nothing above cuda/ is compiled differently
// for the GPU: a CUDA build compiles the .cu files and links them with the plain build's objects.
//
// Conventions: pointers are device pointers unless named host_*; sizes are element counts; every
// launch goes on the current stream (the default stream) and returns without synchronising, except
// the functions that hand a number back to the host. Errors throw std::runtime_error naming the
// failing call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "math/op_kinds.h"

namespace mg {

// Up to this many dims for the strided copy and broadcasting kernels (all of mosgrad uses <= 4).
constexpr int kCudaMaxDims = 8;

// A strided view passed to a kernel by value: element (i0..i_{rank-1}) is at
// offset + sum_d i_d * strides[d].
struct CudaLayout {
  int rank = 0;
  int64_t shape[kCudaMaxDims] = {};
  int64_t strides[kCudaMaxDims] = {};
  int64_t offset = 0;
};

// The [outer, n, inner] view of a contiguous tensor around one dim (tensor/kernels.h DimSplit).
struct CudaSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

enum class CudaOptimizer { SGD, ASGD, Adam };  // lm/optim.h OptimizerKind, same order

// A declaration, except in cuda/without_cuda.cpp, which defines MG_CUDA_API as a stub's
// definition before it includes this header.
#ifndef MG_CUDA_API
#define MG_CUDA_API(...) __VA_ARGS__;
#endif

// ---- cuda/runtime.cu: the device, the caching allocator (tensor/allocator.cpp), copies, cuBLAS
// ---- True when a driver and at least one GPU are present; otherwise false with the reason in
// *why.
bool cuda_is_available(std::string* why = nullptr);
// True when the CUDA backend is linked in (`make CUDA=1`), whether or not a GPU is present.
bool cuda_is_built_in();
MG_CUDA_API(std::string cuda_device_description())  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
// Device memory in 256-byte aligned buckets, cached like host memory; never managed memory.
// Running out throws naming the request and the free memory.
MG_CUDA_API(void* cuda_allocate_bytes(size_t bytes))
MG_CUDA_API(void cuda_release_bytes(void* p, size_t bytes))
MG_CUDA_API(int64_t cuda_peak_live_bytes())  // high-water mark of bytes handed out
MG_CUDA_API(void cuda_copy_to_device(void* dst, const void* host_src, size_t bytes))
MG_CUDA_API(void cuda_copy_to_host(void* host_dst, const void* src, size_t bytes))  // synchronises
MG_CUDA_API(void cuda_copy_on_device(void* dst, const void* src, size_t bytes))
MG_CUDA_API(void cuda_synchronize())
// TF32 tensor-core math in cuBLAS (off by default: FP32 results that match the CPU).
MG_CUDA_API(void cuda_set_tf32(bool on))
// The CPU gemm's contract (tensor/gemm.h): row-major C[M,N] = alpha op(A) op(B) + beta C.
MG_CUDA_API(void cuda_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                           float* C, int64_t ldc))
// Benchmarks only: while on, every cuda_gemm is bracketed by CUDA events; turning it off waits for
// the GPU and returns the seconds the GEMMs ran since it was turned on.
MG_CUDA_API(double cuda_gemm_timing(bool on))
// G independent gemms, matrix g at A + g*stride_a, B + g*stride_b, C + g*stride_c (bmm).
MG_CUDA_API(void cuda_gemm_batched(bool trans_a, bool trans_b, int64_t G, int64_t M, int64_t N,
                                   int64_t K, float alpha, const float* A, int64_t lda,
                                   int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                                   float beta, float* C, int64_t ldc, int64_t stride_c))

// ---- cuda/ops_elementwise.cu: tensor/kernels.h map_unary/map_binary, ops_binary.cpp broadcasting
// ----
MG_CUDA_API(void cuda_fill(float* out, int64_t n, float value))
MG_CUDA_API(void cuda_unary(UnaryOp fn, const float* x, float* y, int64_t n, float scalar))
MG_CUDA_API(void cuda_binary(BinaryOp fn, const float* a, const float* b, float* out, int64_t n))
// out (contiguous, shape out.shape) = fn(a, b) where a and b are read through layouts of out's rank
// whose strides are 0 along broadcast dims.
MG_CUDA_API(void cuda_broadcast_binary(BinaryOp fn, const float* a, CudaLayout a_layout,
                                       const float* b, CudaLayout b_layout, float* out,
                                       CudaLayout out_layout))
// dst viewed through dst_layout = src viewed through src_layout (same shape): copy_contiguous,
// narrow's backward, cat. Pointers are the storages' first elements; the layouts carry the offsets.
MG_CUDA_API(void cuda_copy_strided(const float* src, CudaLayout src_layout, float* dst,
                                   CudaLayout dst_layout))
// a[i] += b[i] (gradient accumulation into a leaf).
MG_CUDA_API(void cuda_accumulate(float* a, const float* b, int64_t n))
MG_CUDA_API(void cuda_swap(float* a, float* b, int64_t n))

// ---- cuda/ops_reduce.cu: ops_reduce.cpp and ops_softmax.cpp ----
// Deterministic: every output is summed by one thread block in a fixed order (double accumulators).
MG_CUDA_API(void cuda_sum_all(const float* x, int64_t n,
                              float* out))  // out: one float on the device
MG_CUDA_API(void cuda_sum_dim(const float* x, CudaSplit s, float* out))  // out [outer*inner]
MG_CUDA_API(void cuda_logsumexp_dim(const float* x, CudaSplit s, float* out))
MG_CUDA_API(void cuda_softmax(const float* x, CudaSplit s, float* y, bool log_space))
MG_CUDA_API(void cuda_softmax_backward(const float* g, const float* y, CudaSplit s, float* dx,
                                       bool log_space))
// host_totals[i] = Σ xs[i]² in double for `count` tensors of ns[i] floats (clip_grad_norm): every
// tensor reduced on the device, then one copy back, so a step waits for the GPU once, not once
// per parameter.
MG_CUDA_API(void cuda_sum_squares(int count, const float* const* xs, const int64_t* ns,
                                  double* host_totals))

// ---- cuda/ops_index.cu: ops_index.cpp, ops_loss.cpp ----
// Index arrays are int64 on the device (upload with cuda_copy_to_device).
MG_CUDA_API(void cuda_index_select(const float* table, int64_t C, const int64_t* index, int64_t n,
                                   float* out))
// grad [R,C] (zeroed by the caller) += rows of g [n,C] scattered to index. Deterministic without
// atomics: `order` lists positions 0..n-1 sorted by index (stable), `starts` [U+1] where each of
// the U distinct rows begins in it; row index[order[starts[u]]] sums its positions in that order.
MG_CUDA_API(void cuda_index_add(const float* g, int64_t C, const int64_t* index,
                                const int64_t* order, const int64_t* starts, int64_t U,
                                float* grad))
MG_CUDA_API(void cuda_gather_rows(const float* x, int64_t N, int64_t C, const int64_t* index,
                                  float* out))
// grad [N,C] (zeroed by the caller): grad[i, index[i]] = g[i] * scale (g null: scale alone).
MG_CUDA_API(void cuda_scatter_rows(const float* g, float scale, int64_t N, int64_t C,
                                   const int64_t* index, float* grad))

// ---- cuda/philox.cu: tensor/philox.cpp and nn/dropout.cpp dropout_mask ----
// mask[i] = uniform(first + i) >= p ? 1/(1-p) : 0, the CPU's dropout_mask.
MG_CUDA_API(void cuda_dropout_mask(uint64_t seed, uint64_t first, int64_t n, float p, float* mask))

// ---- cuda/lstm_fused.cu: nn/lstm_fused.cpp ----
// Forward over T steps. x [T*B,in], h0/c0 [B,H], w_ih [4H,in], w_hh [4H,H], bias [4H] (b_ih +
// b_hh). Writes acts [T*B,4H] (post-activation i,f,g,o), cells [T*B,H] and y [T+1,B,H] (h_1..h_T,
// then c_T).
MG_CUDA_API(void cuda_lstm_forward(int64_t T, int64_t B, int64_t in, int64_t H, const float* x,
                                   const float* h0, const float* c0, const float* w_ih,
                                   const float* w_hh, const float* bias, float* acts, float* cells,
                                   float* y))
// How each step's recurrent product and gates run (cuda/lstm_fused.cu says when each is used):
// Persistent: one cooperative launch for all T steps, W_hh held in shared memory across the GPU;
// Staged: one kernel per forward step with h_{t-1} in shared memory; PerUnit: one kernel per step,
// one block per hidden unit; Gemm: a cuBLAS GEMM plus a gate kernel. Auto (the default) picks by
// shape; the others force a path wherever the shape allows it (B <= 32, for Staged and Persistent
// the shared memory), for the tests and bench/bench_lstm_cuda, which compare them.
enum class CudaLstmSteps { Auto, Persistent, Staged, PerUnit, Gemm };
MG_CUDA_API(void cuda_lstm_set_steps(CudaLstmSteps steps))
// BPTT. grad_y [T+1,B,H] as y. Writes d_gates [T*B,4H], dh [B,H] (d h0), dc [B,H] (d c0); the
// weight and input gradients are then GEMMs the caller runs (as on the CPU). need_dh0: compute dh
// for t = 0.
MG_CUDA_API(void cuda_lstm_backward(int64_t T, int64_t B, int64_t H, const float* acts,
                                    const float* cells, const float* c0, const float* w_hh,
                                    const float* grad_y, bool need_dh0, float* d_gates, float* dh,
                                    float* dc))

// ---- cuda/fused_head_loss.cu: nn/fused_head_loss.cpp ----
// For chunk rows i (context row r = r0 + i, target targets[r / K]): lse[r] and comp[r] = the
// component's log-prob of the target, softmax or sigsoftmax (sig) of the row z + b (z [rows,V]
// holds ctx W^T alone; the kernels add b [V] as they read it).
MG_CUDA_API(void cuda_head_row_stats(const float* z, const float* b, int64_t rows, int64_t V,
                                     int64_t r0, int64_t K, const int64_t* targets, bool sig,
                                     float* lse, float* comp))
// The longest rows (V) cuda_head_row_stats keeps in a block's shared memory on this GPU, reading z
// once; longer rows read it twice.
MG_CUDA_API(int64_t cuda_head_row_stats_staged_max_v())
// Per target row n: a_k = comp + log π (log_pi null: 0); nll[n] = -logsumexp_k a_k; resp =
// softmax_k a.
MG_CUDA_API(void cuda_head_mix(const float* comp, const float* log_pi, int64_t N, int64_t K,
                               float* resp, float* nll))
// Overwrites the chunk's logits z (without b, as above) with d loss / d (z + b) (see
// logits_to_grad) for the output gradient g [1] (read on the device, so the host never waits):
// scale = g[0] * inv_n, inv_n = 1/N.
MG_CUDA_API(void cuda_head_logits_to_grad(float* z, const float* b, int64_t rows, int64_t V,
                                          int64_t r0, int64_t K, const int64_t* targets,
                                          const float* resp, const float* lse, const float* g,
                                          float inv_n, bool sig))

// ---- cuda/optim.cu: lm/optim.cpp ----
// One update of n parameters (see Optimizer::step); a, b are the optimizer buffers (or null).
MG_CUDA_API(void cuda_optimizer_step(CudaOptimizer kind, float* p, const float* g, float* a,
                                     float* b, int64_t n, float lr, float wd, float mu, float beta1,
                                     float beta2, float eps, float bc1, float bc2))

#undef MG_CUDA_API

}  // namespace mg

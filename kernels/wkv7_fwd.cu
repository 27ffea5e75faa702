// RWKV-7 WKV forward (inference): the recurrence the smoke-inference gate runs on CUDA.
//
// Per (batch, head), with S the N x N fp32 state indexed S[i = value row, j = key column]
// (the rwkv package's state[3*layer+1][head] layout), and per timestep t:
//
//     decay_j = exp(-exp(w_j))                 (the model passes w = log(-log decay))
//     S       = S * diag(decay) + (S a) b^T + v k^T
//     y       = S r
//
// Design: one thread block per (batch, head) and one thread per value row i, so each thread
// owns row S[i, :] in registers for the whole sequence and the only cross-thread data is the
// per-timestep vectors r, decay, k, a, b, which every thread reads in full.  Those are staged in
// a double-buffered shared-memory slot: the write to slot t&1 cannot race a reader of step t-2,
// because every thread has passed step t-1's barrier, so one __syncthreads per step suffices.
// The next step's inputs are fetched into registers before the current step computes, so the
// global-load latency overlaps the arithmetic instead of following the barrier.

#include <c10/util/BFloat16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace rwkv_registry {

constexpr int kHeadSize = 64;  // N: threads per block and length of each state row

// Row dot products are split over independent partial sums: a single accumulator would make
// each step a chain of N dependent FMAs, which is the latency bound of this kernel at small B.
constexpr int kPartialSums = 8;

template <int L>
__device__ __forceinline__ float sum_partials(float (&part)[L]) {
#pragma unroll
    for (int stride = L / 2; stride > 0; stride /= 2) {
#pragma unroll
        for (int l = 0; l < stride; ++l) part[l] += part[l + stride];
    }
    return part[0];
}

// One timestep's raw inputs for this thread's lane, held in their storage type so the loads
// can stay in flight while the previous step computes.
template <typename F>
struct StepInputs {
    F r, w, k, v, a, b;
};

template <typename F>
__device__ __forceinline__ StepInputs<F> load_step(const F* __restrict__ r, const F* __restrict__ w,
                                                   const F* __restrict__ k, const F* __restrict__ v,
                                                   const F* __restrict__ a, const F* __restrict__ b,
                                                   int64_t at) {
    return {r[at], w[at], k[at], v[at], a[at], b[at]};
}

template <typename F>
__global__ void __launch_bounds__(kHeadSize)
    wkv7_forward_kernel(int64_t T, int64_t H, float* __restrict__ state, const F* __restrict__ r,
                        const F* __restrict__ w, const F* __restrict__ k, const F* __restrict__ v,
                        const F* __restrict__ a, const F* __restrict__ b, F* __restrict__ y) {
    constexpr int N = kHeadSize;
    const int64_t batch_head = blockIdx.x;  // batch * H + head: also the state matrix index
    const int64_t batch = batch_head / H;
    const int64_t head = batch_head % H;
    const int i = threadIdx.x;
    const int64_t C = H * N;

    float* __restrict__ row = state + (batch_head * N + i) * N;
    float s[N];
#pragma unroll
    for (int j = 0; j < N; ++j) s[j] = row[j];

    __shared__ __align__(16) float sh_r[2][N];
    __shared__ __align__(16) float sh_decay[2][N];
    __shared__ __align__(16) float sh_k[2][N];
    __shared__ __align__(16) float sh_a[2][N];
    __shared__ __align__(16) float sh_b[2][N];

    int64_t at = batch * T * C + head * N + i;  // element (batch, t, head, i) of a [B, T, H*N] input
    StepInputs<F> next = T > 0 ? load_step(r, w, k, v, a, b, at) : StepInputs<F>{};

    for (int64_t t = 0; t < T; ++t, at += C) {
        const int slot = t & 1;
        const StepInputs<F> cur = next;
        sh_r[slot][i] = static_cast<float>(cur.r);
        sh_decay[slot][i] = __expf(-__expf(static_cast<float>(cur.w)));
        sh_k[slot][i] = static_cast<float>(cur.k);
        sh_a[slot][i] = static_cast<float>(cur.a);
        sh_b[slot][i] = static_cast<float>(cur.b);
        const float v_i = static_cast<float>(cur.v);
        if (t + 1 < T) next = load_step(r, w, k, v, a, b, at + C);
        __syncthreads();

        float sa_part[kPartialSums] = {};
#pragma unroll
        for (int j = 0; j < N; ++j) sa_part[j % kPartialSums] += s[j] * sh_a[slot][j];
        const float sa = sum_partials(sa_part);

        float out_part[kPartialSums] = {};
#pragma unroll
        for (int j = 0; j < N; ++j) {
            s[j] = s[j] * sh_decay[slot][j] + sa * sh_b[slot][j] + v_i * sh_k[slot][j];
            out_part[j % kPartialSums] += s[j] * sh_r[slot][j];
        }
        y[at] = static_cast<F>(sum_partials(out_part));
    }

#pragma unroll
    for (int j = 0; j < N; ++j) row[j] = s[j];
}

// Host launcher; the binding has checked shapes, dtypes and contiguity and turns the returned
// launch status into a Python exception.
template <typename F>
cudaError_t wkv7_forward_cuda(int64_t B, int64_t T, int64_t H, float* state, const F* r, const F* w, const F* k,
                              const F* v, const F* a, const F* b, F* y, cudaStream_t stream) {
    if (B == 0 || H == 0) return cudaSuccess;
    wkv7_forward_kernel<F><<<dim3(static_cast<unsigned>(B * H)), dim3(kHeadSize), 0, stream>>>(
        T, H, state, r, w, k, v, a, b, y);
    return cudaGetLastError();
}

template cudaError_t wkv7_forward_cuda<float>(int64_t, int64_t, int64_t, float*, const float*, const float*,
                                              const float*, const float*, const float*, const float*,
                                              float*, cudaStream_t);
template cudaError_t wkv7_forward_cuda<c10::BFloat16>(int64_t, int64_t, int64_t, float*, const c10::BFloat16*,
                                                      const c10::BFloat16*, const c10::BFloat16*,
                                                      const c10::BFloat16*, const c10::BFloat16*,
                                                      const c10::BFloat16*, c10::BFloat16*, cudaStream_t);

}  // namespace rwkv_registry

// Torch binding of the RWKV-7 WKV forward kernel (wkv7_fwd.cu).
//
// Registered through TORCH_LIBRARY rather than pybind so the op goes through the dispatcher with
// a schema that declares the in-place state update: torch.ops.rwkv_registry.wkv7_forward.
// Only a CUDA implementation is registered; the Python wrapper routes CPU tensors to the
// pure-torch reference, and any other misuse is caught here with a message naming the argument.

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>

namespace rwkv_registry {

constexpr int64_t kHeadSize = 64;  // must match kHeadSize in wkv7_fwd.cu

template <typename F>
cudaError_t wkv7_forward_cuda(int64_t B, int64_t T, int64_t H, float* state, const F* r, const F* w, const F* k,
                              const F* v, const F* a, const F* b, F* y, cudaStream_t stream);

namespace {

// Messages name the argument and at most dtypes, never sizes: under torch 2.11+cu130 a failing
// check whose message formatted integers and sizes segfaulted instead of raising, while these
// name/dtype messages raise normally (cause not isolated).  The Python wrapper checks shapes
// first and reports them in full.
void check_cuda_contiguous(const at::Tensor& t, const char* name, const at::Tensor& like) {
    TORCH_CHECK(t.is_cuda(), "wkv7_forward: ", name, " must be a CUDA tensor");
    TORCH_CHECK(t.device() == like.device(), "wkv7_forward: ", name, " must be on the device of r");
    TORCH_CHECK(t.is_contiguous(), "wkv7_forward: ", name, " must be contiguous");
}

// r, w, k, v, a, b: [B, T, H*64] in one dtype; state: [B, H, 64, 64] fp32.
void check_inputs(const at::Tensor& r, const at::Tensor& w, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& a, const at::Tensor& b, const at::Tensor& state) {
    static_assert(kHeadSize == 64, "the messages below spell out N = 64");
    TORCH_CHECK(r.dim() == 3, "wkv7_forward: r must be [B, T, H*64]");
    const std::pair<const at::Tensor*, const char*> inputs[] = {{&r, "r"}, {&w, "w"}, {&k, "k"},
                                                                {&v, "v"}, {&a, "a"}, {&b, "b"}};
    for (const auto& [t, name] : inputs) {
        check_cuda_contiguous(*t, name, r);
        TORCH_CHECK(t->sizes() == r.sizes(), "wkv7_forward: ", name, " must have the shape of r");
        TORCH_CHECK(t->scalar_type() == r.scalar_type(), "wkv7_forward: ", name, " is ", t->scalar_type(),
                    ", r is ", r.scalar_type());
    }
    check_cuda_contiguous(state, "state", r);
    TORCH_CHECK(state.scalar_type() == at::kFloat, "wkv7_forward: state must be float32, got ",
                state.scalar_type());
    TORCH_CHECK(state.dim() == 4 && state.size(0) == r.size(0) && state.size(2) == kHeadSize &&
                    state.size(3) == kHeadSize && state.size(1) * kHeadSize == r.size(2),
                "wkv7_forward: state must be [B, H, 64, 64] with B = r.size(0) and H*64 = r.size(2)");
}

at::Tensor wkv7_forward(const at::Tensor& r, const at::Tensor& w, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& a, const at::Tensor& b, const at::Tensor& state) {
    check_inputs(r, w, k, v, a, b, state);
    const c10::cuda::CUDAGuard guard(r.device());
    at::Tensor y = at::empty_like(r);
    const int64_t B = r.size(0), T = r.size(1), H = state.size(1);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

#define WKV7_DTYPES(...) AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__) AT_DISPATCH_CASE(at::kBFloat16, __VA_ARGS__)
    AT_DISPATCH_SWITCH(r.scalar_type(), "wkv7_forward", WKV7_DTYPES([&] {
                           C10_CUDA_CHECK(wkv7_forward_cuda<scalar_t>(
                               B, T, H, state.data_ptr<float>(), r.const_data_ptr<scalar_t>(),
                               w.const_data_ptr<scalar_t>(), k.const_data_ptr<scalar_t>(),
                               v.const_data_ptr<scalar_t>(), a.const_data_ptr<scalar_t>(),
                               b.const_data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), stream));
                       }));
#undef WKV7_DTYPES
    return y;
}

}  // namespace
}  // namespace rwkv_registry

TORCH_LIBRARY(rwkv_registry, m) {
    m.def("wkv7_forward(Tensor r, Tensor w, Tensor k, Tensor v, Tensor a, Tensor b, Tensor(a!) state) -> Tensor");
}

TORCH_LIBRARY_IMPL(rwkv_registry, CUDA, m) { m.impl("wkv7_forward", &rwkv_registry::wkv7_forward); }

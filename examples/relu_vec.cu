// A plain vectorised ReLU as a sweeper kernel: one 16-byte vector per thread and step
// (ld.global.v4 / st.global.v4), default cache operators, a grid-stride loop (correct for any
// grid) and a scalar tail. Launched with one vector per thread (--kernel-grid onepass16B) it
// is one tile per block, torch's shape.
//
// Contract (docs/external-kernels.md): one extern "C" kernel per dtype, NAME_<dtype>(const
// T* x, T* y, unsigned long long n), y[i] = x[i] > 0 ? x[i] : 0 bit-exactly, any grid.
//
//   sweeper audit examples/relu_vec.cu:relu_vec --kernel-grid onepass16B --modes hot

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

__device__ __forceinline__ float relu1(float v) { return v > 0.f ? v : 0.f; }
__device__ __forceinline__ __half relu1(__half v) {
  const __half zero = __ushort_as_half(0);
  return __hgt(v, zero) ? v : zero;  // false for NaN: NaN -> +0
}
__device__ __forceinline__ __nv_bfloat16 relu1(__nv_bfloat16 v) {
  const __nv_bfloat16 zero = __ushort_as_bfloat16(0);
  return __hgt(v, zero) ? v : zero;
}
__device__ __forceinline__ signed char relu1(signed char v) {
  return v > 0 ? v : static_cast<signed char>(0);
}

template <typename T>
__device__ __forceinline__ void relu_vec(const T* __restrict__ x, T* __restrict__ y,
                                         unsigned long long n) {
  constexpr unsigned long long E = 16 / sizeof(T);
  const unsigned long long nvec = n / E;
  const unsigned long long first = blockIdx.x * static_cast<unsigned long long>(blockDim.x)
                                   + threadIdx.x;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint4* __restrict__ yv = reinterpret_cast<uint4*>(y);
  for (unsigned long long i = first; i < nvec; i += step) {
    uint4 w = xv[i];
    T* e = reinterpret_cast<T*>(&w);
#pragma unroll
    for (int k = 0; k < static_cast<int>(E); ++k) e[k] = relu1(e[k]);
    yv[i] = w;
  }
  for (unsigned long long i = nvec * E + first; i < n; i += step) y[i] = relu1(x[i]);
}

}  // namespace

#define RELU_VEC(DT, T)                                                                      \
  extern "C" __global__ void relu_vec_##DT(const T* __restrict__ x, T* __restrict__ y,      \
                                           unsigned long long n) {                          \
    relu_vec<T>(x, y, n);                                                                    \
  }

RELU_VEC(fp32, float)
RELU_VEC(fp16, __half)
RELU_VEC(bf16, __nv_bfloat16)
RELU_VEC(int8, signed char)

// The v2 load rule as a sweeper kernel: evict-first streaming loads (__ldcs, ld.global.cs)
// for every working set of 32 MiB or more, default loads below. The working set is what
// one call moves, input plus output: 2 * n * sizeof(T) bytes. 16-byte vectors, a grid-stride
// loop (correct for any grid) and a scalar tail; default stores.
//
// Contract (docs/external-kernels.md): one extern "C" kernel per dtype, NAME_<dtype>(const
// T* x, T* y, unsigned long long n), y[i] = x[i] > 0 ? x[i] : 0 bit-exactly, any grid.
//
//   sweeper audit examples/relu_v2.cu:relu_v2 --kernel-grid stride1 --modes hot,after-write

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr unsigned long long kStreamingFrom = 32ull << 20;  // bytes of working set

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
__device__ __forceinline__ uint4 relu16(uint4 w) {
  T* e = reinterpret_cast<T*>(&w);
#pragma unroll
  for (int k = 0; k < static_cast<int>(16 / sizeof(T)); ++k) e[k] = relu1(e[k]);
  return w;
}

template <typename T>
__device__ __forceinline__ void relu_v2(const T* __restrict__ x, T* __restrict__ y,
                                        unsigned long long n) {
  constexpr unsigned long long E = 16 / sizeof(T);
  const unsigned long long nvec = n / E;
  const unsigned long long first = blockIdx.x * static_cast<unsigned long long>(blockDim.x)
                                   + threadIdx.x;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const uint4* __restrict__ xv = reinterpret_cast<const uint4*>(x);
  uint4* __restrict__ yv = reinterpret_cast<uint4*>(y);
  if (2ull * n * sizeof(T) >= kStreamingFrom) {
    for (unsigned long long i = first; i < nvec; i += step) yv[i] = relu16<T>(__ldcs(xv + i));
  } else {
    for (unsigned long long i = first; i < nvec; i += step) yv[i] = relu16<T>(xv[i]);
  }
  for (unsigned long long i = nvec * E + first; i < n; i += step) y[i] = relu1(x[i]);
}

}  // namespace

#define RELU_V2(DT, T)                                                                       \
  extern "C" __global__ void relu_v2_##DT(const T* __restrict__ x, T* __restrict__ y,       \
                                          unsigned long long n) {                           \
    relu_v2<T>(x, y, n);                                                                     \
  }

RELU_V2(fp32, float)
RELU_V2(fp16, __half)
RELU_V2(bf16, __nv_bfloat16)
RELU_V2(int8, signed char)

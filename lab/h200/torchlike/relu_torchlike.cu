// ATen's vectorized elementwise kernel (vectorized_elementwise_kernel<4>, the one torch 2.11
// launches for fp32 clamp_min on the H200: 128 threads, n / 1024 blocks) written out for fp32
// ReLU: each block owns 1024 consecutive floats; thread t loads the 16-byte vectors t and
// t + 128 of its block's tile, int indices, the block size a compile-time constant, plain C++
// loads and stores, __launch_bounds__(128); the last, partial tile element by element with
// bounds checks (ATen's unrolled policy). Correct only for its own grid:
//
//   sweeper run --kernel lab/h200/torchlike/relu_torchlike.cu:relu_tl --kernel-block 128 \
//     --kernel-grid onepass32B ...
//
// Three variants change one thing each, towards the exported header's flat kernel:
// relu_tlasm (loads and stores as inline PTX on a cvta.to.global address, as the header's
// hint structs emit them), relu_tlrt (the block size read from blockDim at run time),
// relu_tlll (64-bit index maths).

namespace {
constexpr int kThreads = 128;
constexpr int kVec = 4;                            // floats per 16-byte vector
constexpr int kPerThread = 8;                      // two vectors
constexpr int kTile = kThreads * kPerThread;       // 1024 floats per block

struct alignas(16) F4 {
  float v[kVec];
};

__device__ __forceinline__ float relu1(float v) { return v > 0.f ? v : 0.f; }
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    relu_tl_fp32(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(kTile) * blockIdx.x);
  const int base = kTile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < kTile) {  // the partial last tile
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = t + k * kThreads;
      if (i < remaining) y[base + i] = relu1(x[base + i]);
    }
    return;
  }
  const F4* xv = reinterpret_cast<const F4*>(x + base);
  F4* yv = reinterpret_cast<F4*>(y + base);
  F4 w[kPerThread / kVec];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) w[k] = xv[t + k * kThreads];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w[k].v[j] = relu1(w[k].v[j]);
    yv[t + k * kThreads] = w[k];
  }
}

namespace {
__device__ __forceinline__ unsigned long long to_global(const void* p) {
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(reinterpret_cast<unsigned long long>(p)));
  return g;
}
__device__ __forceinline__ F4 ld4(unsigned long long a) {
  F4 r;
  asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.v[0]), "=f"(r.v[1]), "=f"(r.v[2]), "=f"(r.v[3]) : "l"(a));
  return r;
}
__device__ __forceinline__ void st4(unsigned long long a, const F4& w) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};"
               :: "l"(a), "f"(w.v[0]), "f"(w.v[1]), "f"(w.v[2]), "f"(w.v[3]) : "memory");
}
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    relu_tlasm_fp32(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(kTile) * blockIdx.x);
  const int base = kTile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < kTile) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = t + k * kThreads;
      if (i < remaining) y[base + i] = relu1(x[base + i]);
    }
    return;
  }
  const unsigned long long xa = to_global(x + base), ya = to_global(y + base);
  F4 w[kPerThread / kVec];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) w[k] = ld4(xa + 16ull * (t + k * kThreads));
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w[k].v[j] = relu1(w[k].v[j]);
    st4(ya + 16ull * (t + k * kThreads), w[k]);
  }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    relu_tlrt_fp32(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  const int bs = static_cast<int>(blockDim.x), tile = bs * kPerThread;
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(tile) * blockIdx.x);
  const int base = tile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < tile) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = t + k * bs;
      if (i < remaining) y[base + i] = relu1(x[base + i]);
    }
    return;
  }
  const F4* xv = reinterpret_cast<const F4*>(x + base);
  F4* yv = reinterpret_cast<F4*>(y + base);
  F4 w[kPerThread / kVec];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) w[k] = xv[t + k * bs];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w[k].v[j] = relu1(w[k].v[j]);
    yv[t + k * bs] = w[k];
  }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    relu_tlll_fp32(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  const long long remaining = static_cast<long long>(n) - static_cast<long long>(kTile) * blockIdx.x;
  const long long base = static_cast<long long>(kTile) * blockIdx.x;
  const long long t = threadIdx.x;
  if (remaining < kTile) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const long long i = t + k * kThreads;
      if (i < remaining) y[base + i] = relu1(x[base + i]);
    }
    return;
  }
  const F4* xv = reinterpret_cast<const F4*>(x + base);
  F4* yv = reinterpret_cast<F4*>(y + base);
  F4 w[kPerThread / kVec];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) w[k] = xv[t + k * kThreads];
#pragma unroll
  for (int k = 0; k < kPerThread / kVec; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) w[k].v[j] = relu1(w[k].v[j]);
    yv[t + k * kThreads] = w[k];
  }
}

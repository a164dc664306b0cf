// ATen's vectorized elementwise kernel (vectorized_elementwise_kernel<4>, the one torch 2.11
// launches for fp32 clamp_min on the H200: 128 threads, n / 1024 blocks) written out for fp32
// ReLU: each block owns 1024 consecutive floats; thread t loads the 16-byte vectors t and
// t + 128 of its block's tile, int indices, the block size a compile-time constant, plain C++
// loads and stores, __launch_bounds__(128); the last, partial tile element by element with
// bounds checks (ATen's unrolled policy). Correct only for its own grid:
//
//   sweeper run --kernel lab/h200/torchlike/relu_torchlike.cu:relu_tl --kernel-block 128 \
//     --kernel-grid onepass32B ...

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

// GPU probe kernels (scripts/probe_layouts.py), session 4: which flat-kernel layout closes the
// fp32 gap to torch at 8-14 MiB on the H200? Written in CUDA C so layouts can be tried without
// touching the variant grid. Reuses the exported header's bit-exact relu_word.
// Build: nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_90 -I results/h200/hot-8 scripts/probe_layouts.cu
#include "relu_policy.cuh"

using sweeper_relu::Dt;
using sweeper_relu::detail::relu_word;

template <Dt D> __device__ __forceinline__ uint4 relu4(uint4 v) {
  return make_uint4(relu_word<D>(v.x), relu_word<D>(v.y), relu_word<D>(v.z), relu_word<D>(v.w));
}

// U 16-byte vectors per thread, no loop. ADJ: thread t of the grid takes vectors U*t..U*t+U-1
// (one contiguous 16*U-byte run); else block b takes the tile b*U*blockDim.., thread t the
// vectors t, t+blockDim, ... (torch's layout). I: the index type (int32 vs int64 maths).
template <Dt D, int U, bool ADJ, typename I>
__global__ void lean(const uint4* x, uint4* y, I nvec) {
  const I bs = I(blockDim.x);
  const I b = ADJ ? (I(blockIdx.x) * bs + I(threadIdx.x)) * U : I(blockIdx.x) * bs * U + I(threadIdx.x);
  const I step = ADJ ? I(1) : bs;
  if (b + (U - 1) * step < nvec) {
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) v[k] = x[b + k * step];
#pragma unroll
    for (int k = 0; k < U; ++k) y[b + k * step] = relu4<D>(v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (b + k * step < nvec) y[b + k * step] = relu4<D>(x[b + k * step]);
  }
}

template <Dt D, int U, bool ADJ, typename I, int B>
static void go(const void* x, void* y, long long nvec, cudaStream_t s) {
  const long long blocks = (nvec + (long long)B * U - 1) / ((long long)B * U);
  lean<D, U, ADJ, I><<<unsigned(blocks), B, 0, s>>>((const uint4*)x, (uint4*)y, I(nvec));
}

// which -> (U, ADJ, index, block); keep in step with KERNELS in probe_layouts.py
template <Dt D>
static int launch(int which, const void* x, void* y, long long nvec, cudaStream_t s) {
  switch (which) {
    case 0: go<D, 1, false, int, 128>(x, y, nvec, s); break;
    case 1: go<D, 1, false, long long, 128>(x, y, nvec, s); break;
    case 2: go<D, 2, false, int, 128>(x, y, nvec, s); break;
    case 3: go<D, 2, false, long long, 128>(x, y, nvec, s); break;
    case 4: go<D, 2, true, int, 128>(x, y, nvec, s); break;
    case 5: go<D, 1, false, int, 256>(x, y, nvec, s); break;
    case 6: go<D, 1, false, int, 512>(x, y, nvec, s); break;
    case 7: go<D, 1, false, int, 1024>(x, y, nvec, s); break;
    case 8: go<D, 4, false, int, 128>(x, y, nvec, s); break;
    case 9: go<D, 2, false, int, 256>(x, y, nvec, s); break;
    case 10: go<D, 1, false, int, 64>(x, y, nvec, s); break;
    case 11: go<D, 4, true, int, 128>(x, y, nvec, s); break;
    default: return -1;
  }
  return int(cudaGetLastError());
}

extern "C" int probe_launch(int which, int dt, unsigned long long x, unsigned long long y,
                            long long nvec, cudaStream_t s) {
  const void* px = (const void*)x;
  void* py = (void*)y;
  switch (dt) {
    case 0: return launch<Dt::F32>(which, px, py, nvec, s);
    case 1: return launch<Dt::F16>(which, px, py, nvec, s);
    case 2: return launch<Dt::BF16>(which, px, py, nvec, s);
    default: return launch<Dt::I8>(which, px, py, nvec, s);
  }
}

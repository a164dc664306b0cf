// GPU probe kernels (scripts/probe_ideas.py): ideas for the two unmet H200 targets, written
// in CUDA C so they can be tried without touching the variant grid. Reuses the exported
// header's bit-exact relu_word. Build: nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_90
//   -I results/h200/hot-4 scripts/probe_ideas.cu
#include "relu_policy.cuh"

using sweeper_relu::Dt;
using sweeper_relu::detail::relu_word;

#define LD4(Q, POL)                                                                        \
  asm volatile("{\n.reg .b64 p;\n" POL "ld.global" Q ".v4.u32 {%0,%1,%2,%3}, [%4]" ARG ";\n}" \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a))
#define ST4(Q, POL)                                                                          \
  asm volatile("{\n.reg .b64 p;\n" POL "st.global" Q ".v4.u32 [%0], {%1,%2,%3,%4}" ARG ";\n}" \
               :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory")

#define ARG ""
struct LdPlain { __device__ static uint4 ld(uint64_t a) { uint4 v; LD4("", ""); return v; } };
struct StPlain { __device__ static void st(uint64_t a, uint4 v) { ST4("", ""); } };
struct StCs { __device__ static void st(uint64_t a, uint4 v) { ST4(".cs", ""); } };
#undef ARG
#define ARG ", p"
#define POLICY(P) "createpolicy.fractional.L2::" P ";\n"
struct LdEL { __device__ static uint4 ld(uint64_t a) { uint4 v; LD4(".L2::cache_hint", POLICY("evict_last.b64 p, 1.0")); return v; } };
struct LdEL75 { __device__ static uint4 ld(uint64_t a) { uint4 v; LD4(".L2::cache_hint", POLICY("evict_last.L2::evict_first.b64 p, 0.75")); return v; } };
struct StEL { __device__ static void st(uint64_t a, uint4 v) { ST4(".L2::cache_hint", POLICY("evict_last.b64 p, 1.0")); } };
struct StEL50 { __device__ static void st(uint64_t a, uint4 v) { ST4(".L2::cache_hint", POLICY("evict_last.L2::evict_first.b64 p, 0.5")); } };
struct StEL25 { __device__ static void st(uint64_t a, uint4 v) { ST4(".L2::cache_hint", POLICY("evict_last.L2::evict_first.b64 p, 0.25")); } };
struct StEF { __device__ static void st(uint64_t a, uint4 v) { ST4(".L2::cache_hint", POLICY("evict_first.b64 p, 1.0")); } };
#undef ARG

template <Dt D> __device__ __forceinline__ uint4 relu4(uint4 v) {
  return make_uint4(relu_word<D>(v.x), relu_word<D>(v.y), relu_word<D>(v.z), relu_word<D>(v.w));
}

// One 16-byte vector per thread, 32-bit index, no loop: the leanest small-size kernel.
template <Dt D, class LD, class ST>
__global__ void lean(uint64_t x, uint64_t y, unsigned nvec) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nvec) ST::st(y + 16ull * i, relu4<D>(LD::ld(x + 16ull * i)));
}

// Grid-stride over tiles of U x blockDim vectors, all U loads before the stores.
template <Dt D, class LD, class ST, int U>
__global__ void strided(uint64_t x, uint64_t y, long long nvec) {
  const long long bs = blockDim.x;
  for (long long t = blockIdx.x; t * bs * U < nvec; t += gridDim.x) {
    const long long b = t * bs * U + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (b + k * bs < nvec) v[k] = LD::ld(x + 16ull * (b + k * bs));
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (b + k * bs < nvec) ST::st(y + 16ull * (b + k * bs), relu4<D>(v[k]));
  }
}

template <Dt D>
static int launch(int which, uint64_t x, uint64_t y, long long n, int sms, cudaStream_t s) {
  const long long nvec = n * (D == Dt::F32 ? 4 : D == Dt::I8 ? 1 : 2) / 16;  // n % (16/size) == 0
  const unsigned lean_blocks = unsigned((nvec + 127) / 128);
  const long long tiles = (nvec + 256 * 4 - 1) / (256 * 4);
  const unsigned sblocks = unsigned(tiles < 4LL * sms * 8 ? tiles : 4LL * sms * 8);
  switch (which) {
    case 0: lean<D, LdPlain, StPlain><<<lean_blocks, 128, 0, s>>>(x, y, unsigned(nvec)); break;
    case 1: lean<D, LdEL, StCs><<<lean_blocks, 128, 0, s>>>(x, y, unsigned(nvec)); break;
    case 2: strided<D, LdEL, StCs, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    case 3: strided<D, LdEL, StEL, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    case 4: strided<D, LdEL, StEL50, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    case 5: strided<D, LdEL, StEL25, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    case 6: strided<D, LdEL, StEF, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    case 7: strided<D, LdEL75, StCs, 4><<<sblocks, 256, 0, s>>>(x, y, nvec); break;
    default: return -1;
  }
  return int(cudaGetLastError());
}

extern "C" int probe_launch(int which, int dt, uint64_t x, uint64_t y, long long n, int sms,
                            cudaStream_t s) {
  switch (dt) {
    case 0: return launch<Dt::F32>(which, x, y, n, sms, s);
    case 1: return launch<Dt::F16>(which, x, y, n, sms, s);
    case 2: return launch<Dt::BF16>(which, x, y, n, sms, s);
    default: return launch<Dt::I8>(which, x, y, n, sms, s);
  }
}

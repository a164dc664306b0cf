// fp32 ReLU in five forms, each launched as torch launches clamp_min at fp32: 128 threads,
// 2 x 16-byte vectors per thread, n / 1024 blocks (forms.py times them beside torch).
//
//   tl       ATen's vectorized elementwise kernel written out (lab/h200/torchlike)
//   hdr      the exported header's flat32 kernel: block size read from blockDim, a check per
//            thread, accesses as volatile inline PTX, ReLU as integer maths on the words
//   cb       hdr with the block size a compile-time constant and __launch_bounds__(128)
//   cbtile   cb with ATen's check: one per block (the block's tile whole or not)
//   cbplain  cb with plain C++ loads and stores
//   cbnc     cb with non-coherent loads (ld.global.nc, what nvcc emits for a read-only
//            __restrict__ input)
//   tlnr     tl without __restrict__
//   tlint    tl with the ReLU as the header's integer maths on the words
//   cboff    cb with the second vector's address as the first's plus a constant
//   cboffmax cboff with the ReLU as fmaxf(x, 0) (one FMNMX per word, as in tl)
//   cbncmax  cboffmax with non-coherent loads: tl's instructions in the header's form

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

namespace {
constexpr int NW = 4, U = 2, BS = 128, TILE = BS * U;

__device__ __forceinline__ i64 sx(unsigned v) { return i64(int(v)); }
__device__ __forceinline__ u64 to_global(const void* p) {
  u64 g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(reinterpret_cast<u64>(p)));
  return g;
}
__device__ __forceinline__ u32 relu_word(u32 w) { return (w - 1u) < 0x7F800000u ? w : 0u; }

struct Asm {
  static __device__ __forceinline__ void load(u64 a, u32 (&w)[NW]) {
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(a));
  }
  static __device__ __forceinline__ void store(u64 a, const u32 (&w)[NW]) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
  }
};
struct Nc {
  static __device__ __forceinline__ void load(u64 a, u32 (&w)[NW]) {
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(a));
  }
  static __device__ __forceinline__ void store(u64 a, const u32 (&w)[NW]) { Asm::store(a, w); }
};
struct Plain {
  static __device__ __forceinline__ void load(u64 a, u32 (&w)[NW]) {
    const uint4 v = *reinterpret_cast<const uint4*>(a);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  static __device__ __forceinline__ void store(u64 a, const u32 (&w)[NW]) {
    *reinterpret_cast<uint4*>(a) = make_uint4(w[0], w[1], w[2], w[3]);
  }
};

template <class A>
__device__ __forceinline__ void two(u64 xa, u64 ya, int v0, int step) {
  u32 w[U][NW];
#pragma unroll
  for (int k = 0; k < U; ++k) A::load(xa + u64(i64(v0 + k * step)) * 16, w[k]);
#pragma unroll
  for (int k = 0; k < U; ++k) {
#pragma unroll
    for (int j = 0; j < NW; ++j) w[k][j] = relu_word(w[k][j]);
    A::store(ya + u64(i64(v0 + k * step)) * 16, w[k]);
  }
}

// the partial tile: slot v < nvec is a vector, nvec <= v < nvec + n % 4 a tail element
__device__ __forceinline__ void slow(u64 xa, u64 ya, int b, int step, i64 n, int nv) {
  for (int k = 0; k < U; ++k) {
    const int v = b + k * step;
    if (v < nv) {
      u32 c[NW];
      Plain::load(xa + u64(i64(v)) * 16, c);
      for (int j = 0; j < NW; ++j) c[j] = relu_word(c[j]);
      Plain::store(ya + u64(i64(v)) * 16, c);
    } else {
      const i64 e = i64(nv) * 4 + (i64(v) - nv);
      if (e < n) *reinterpret_cast<u32*>(ya + u64(e) * 4) = relu_word(*reinterpret_cast<const u32*>(xa + u64(e) * 4));
    }
  }
}
}  // namespace

extern "C" __global__ void __launch_bounds__(BS)
    relu_tl(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  constexpr int kPer = 8, kTile = BS * kPer;
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(kTile) * blockIdx.x);
  const int base = kTile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < kTile) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = t + k * BS;
      if (i < remaining) y[base + i] = x[base + i] > 0.f ? x[base + i] : 0.f;
    }
    return;
  }
  const float4* xv = reinterpret_cast<const float4*>(x + base);
  float4* yv = reinterpret_cast<float4*>(y + base);
  float4 w[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) w[k] = xv[t + k * BS];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w[k].x = w[k].x > 0.f ? w[k].x : 0.f; w[k].y = w[k].y > 0.f ? w[k].y : 0.f;
    w[k].z = w[k].z > 0.f ? w[k].z : 0.f; w[k].w = w[k].w > 0.f ? w[k].w : 0.f;
    yv[t + k * BS] = w[k];
  }
}

extern "C" __global__ void __launch_bounds__(BS)
    relu_tlint(const float* __restrict__ x, float* __restrict__ y, unsigned long long n) {
  constexpr int kPer = 8, kTile = BS * kPer;
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(kTile) * blockIdx.x);
  const int base = kTile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < kTile) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = t + k * BS;
      if (i < remaining) y[base + i] = x[base + i] > 0.f ? x[base + i] : 0.f;
    }
    return;
  }
  const float4* xv = reinterpret_cast<const float4*>(x + base);
  float4* yv = reinterpret_cast<float4*>(y + base);
  float4 w[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) w[k] = xv[t + k * BS];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w[k].x = __uint_as_float(relu_word(__float_as_uint(w[k].x)));
    w[k].y = __uint_as_float(relu_word(__float_as_uint(w[k].y)));
    w[k].z = __uint_as_float(relu_word(__float_as_uint(w[k].z)));
    w[k].w = __uint_as_float(relu_word(__float_as_uint(w[k].w)));
    yv[t + k * BS] = w[k];
  }
}

extern "C" __global__ void __launch_bounds__(BS)
    relu_tlnr(const float* x, float* y, unsigned long long n) {
  constexpr int kPer = 8, kTile = BS * kPer;
  const int remaining = static_cast<int>(n - static_cast<unsigned long long>(kTile) * blockIdx.x);
  const int base = kTile * static_cast<int>(blockIdx.x);
  const int t = static_cast<int>(threadIdx.x);
  if (remaining < kTile) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = t + k * BS;
      if (i < remaining) y[base + i] = x[base + i] > 0.f ? x[base + i] : 0.f;
    }
    return;
  }
  const float4* xv = reinterpret_cast<const float4*>(x + base);
  float4* yv = reinterpret_cast<float4*>(y + base);
  float4 w[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) w[k] = xv[t + k * BS];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w[k].x = w[k].x > 0.f ? w[k].x : 0.f; w[k].y = w[k].y > 0.f ? w[k].y : 0.f;
    w[k].z = w[k].z > 0.f ? w[k].z : 0.f; w[k].w = w[k].w > 0.f ? w[k].w : 0.f;
    yv[t + k * BS] = w[k];
  }
}

extern "C" __global__ void relu_hdr(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int bs = int(sx(blockDim.x));
  const int b = int(sx(blockIdx.x)) * bs * U + int(sx(threadIdx.x));
  if (b + (U - 1) * bs < nv) two<Asm>(xa, ya, b, bs);
  else slow(xa, ya, b, bs, i64(n), nv);
}

extern "C" __global__ void __launch_bounds__(BS) relu_cb(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int b = int(blockIdx.x) * TILE + int(threadIdx.x);
  if (b + (U - 1) * BS < nv) two<Asm>(xa, ya, b, BS);
  else slow(xa, ya, b, BS, i64(n), nv);
}

extern "C" __global__ void __launch_bounds__(BS) relu_cbtile(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int base = int(blockIdx.x) * TILE;
  const int b = base + int(threadIdx.x);
  if (nv - base >= TILE) two<Asm>(xa, ya, b, BS);
  else slow(xa, ya, b, BS, i64(n), nv);
}

extern "C" __global__ void __launch_bounds__(BS) relu_cbplain(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int b = int(blockIdx.x) * TILE + int(threadIdx.x);
  if (b + (U - 1) * BS < nv) two<Plain>(xa, ya, b, BS);
  else slow(xa, ya, b, BS, i64(n), nv);
}

extern "C" __global__ void __launch_bounds__(BS) relu_cbnc(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int b = int(blockIdx.x) * TILE + int(threadIdx.x);
  if (b + (U - 1) * BS < nv) two<Nc>(xa, ya, b, BS);
  else slow(xa, ya, b, BS, i64(n), nv);
}

// cb with the second vector's address the first's plus a constant; MAX: the ReLU as fmaxf
template <class A, bool MAX>
__device__ __forceinline__ void cboff(const float* x, float* y, unsigned long long n) {
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(i64(n) / 4);
  const int b = int(blockIdx.x) * TILE + int(threadIdx.x);
  if (b + (U - 1) * BS < nv) {
    const u64 o = u64(i64(b)) * 16;
    u32 w[U][NW];
#pragma unroll
    for (int k = 0; k < U; ++k) A::load(xa + o + k * BS * 16, w[k]);
#pragma unroll
    for (int k = 0; k < U; ++k) {
#pragma unroll
      for (int j = 0; j < NW; ++j)
        w[k][j] = MAX ? __float_as_uint(fmaxf(__uint_as_float(w[k][j]), 0.f)) : relu_word(w[k][j]);
      A::store(ya + o + k * BS * 16, w[k]);
    }
  } else {
    slow(xa, ya, b, BS, i64(n), nv);
  }
}

extern "C" __global__ void __launch_bounds__(BS) relu_cboff(const float* x, float* y, unsigned long long n) {
  cboff<Asm, false>(x, y, n);
}
extern "C" __global__ void __launch_bounds__(BS) relu_cboffmax(const float* x, float* y, unsigned long long n) {
  cboff<Asm, true>(x, y, n);
}
extern "C" __global__ void __launch_bounds__(BS) relu_cbncmax(const float* x, float* y, unsigned long long n) {
  cboff<Nc, true>(x, y, n);
}

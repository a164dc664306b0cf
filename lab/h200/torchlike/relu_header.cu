// The exported header's flat kernel (sweeper/export/templates/relu_policy.cuh,
// relu_flat_kernel<F32, 4, 2, Ld_default, St_default, int>: the floor's code) as a user's kernel,
// fp32 only, and the same kernel with its default-hint accesses as plain C++ loads and stores
// instead of volatile inline PTX (relu_hdrplain). Both with torch's launch:
//
//   sweeper run --kernel lab/h200/torchlike/relu_header.cu:relu_hdr --kernel-block 128 \
//     --kernel-grid onepass32B ...

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

namespace {
constexpr int NW = 4, U = 2;

__device__ __forceinline__ i64 sx(unsigned v) { return i64(int(v)); }
__device__ __forceinline__ u64 to_global(const void* p) {
  u64 g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(reinterpret_cast<u64>(p)));
  return g;
}
__device__ __forceinline__ u32 relu_word(u32 w) { return (w - 1u) < 0x7F800000u ? w : 0u; }

struct AsmAccess {  // the header's Ld_default / St_default
  static __device__ __forceinline__ void load(u64 a, u32 (&w)[NW]) {
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(a));
  }
  static __device__ __forceinline__ void store(u64 a, const u32 (&w)[NW]) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
  }
  static __device__ __forceinline__ u32 load1(u64 a) {
    u32 v;
    asm volatile("ld.global.b32 %0, [%1];" : "=r"(v) : "l"(a));
    return v;
  }
  static __device__ __forceinline__ void store1(u64 a, u32 v) {
    asm volatile("st.global.b32 [%0], %1;" :: "l"(a), "r"(v) : "memory");
  }
};

struct PlainAccess {  // the same accesses as C++ loads and stores
  static __device__ __forceinline__ void load(u64 a, u32 (&w)[NW]) {
    const uint4 v = *reinterpret_cast<const uint4*>(a);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  static __device__ __forceinline__ void store(u64 a, const u32 (&w)[NW]) {
    *reinterpret_cast<uint4*>(a) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  static __device__ __forceinline__ u32 load1(u64 a) { return *reinterpret_cast<const u32*>(a); }
  static __device__ __forceinline__ void store1(u64 a, u32 v) { *reinterpret_cast<u32*>(a) = v; }
};

template <class A>
__device__ __forceinline__ void flat(const void* x, void* y, i64 n) {
  constexpr int E = NW;  // fp32 elements per vector
  const i64 nvec = n / E;
  const u64 xa = to_global(x), ya = to_global(y);
  const int nv = int(nvec);
  const int bs = int(sx(blockDim.x));
  const int b = int(sx(blockIdx.x)) * bs * U + int(sx(threadIdx.x));
  if (b + (U - 1) * bs < nv) {
    u32 w[U][NW];
#pragma unroll
    for (int k = 0; k < U; ++k) A::load(xa + u64(i64(b + k * bs)) * (4 * NW), w[k]);
#pragma unroll
    for (int k = 0; k < U; ++k) {
#pragma unroll
      for (int j = 0; j < NW; ++j) w[k][j] = relu_word(w[k][j]);
      A::store(ya + u64(i64(b + k * bs)) * (4 * NW), w[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int v = b + k * bs;
      if (v < nv) {
        u32 c[NW];
        A::load(xa + u64(i64(v)) * (4 * NW), c);
#pragma unroll
        for (int j = 0; j < NW; ++j) c[j] = relu_word(c[j]);
        A::store(ya + u64(i64(v)) * (4 * NW), c);
      } else {
        const i64 e = nvec * E + (i64(v) - nvec);
        if (e < n) A::store1(ya + u64(e) * 4, relu_word(A::load1(xa + u64(e) * 4)));
      }
    }
  }
}
}  // namespace

extern "C" __global__ void relu_hdr_fp32(const float* x, float* y, unsigned long long n) {
  flat<AsmAccess>(x, y, i64(n));
}

extern "C" __global__ void relu_hdrplain_fp32(const float* x, float* y, unsigned long long n) {
  flat<PlainAccess>(x, y, i64(n));
}

"""Render a (merged) policy for production code: a CUDA header, a runtime JSON, or Python.

The CUDA header mirrors the Numba variants of sweeper_kernels exactly:

* the same index layout (kernels/source.py): `nvec = n / E` whole vectors; tiles of
  `U * blockDim` vectors, block b doing tiles b, b + gridDim, ...; in a tile thread t touches
  vectors t, t + blockDim, ... (coalesced); all U loads issued before any store; the partial
  last tile one vector per thread, started by the "rotated" blocks; the `n % E` tail
  elements one per thread by the same rotated threads;
* the same PTX: `ld.global{hint}{.v2|.v4}.u32` / `st.global{hint}...` main accesses and
  `.b8/.b16/.b32` element accesses, all as volatile asm, on `cvta.to.global` addresses;
* the same bit-level ReLU on 32-bit words (kernels/bitmath.py: SWAR for 16/8-bit lanes;
  NaN -> +0, -0 -> +0, denormals kept, no float instruction touches the data);
* the same launch shape (kernels/launch.py): `block` threads; "onepass" one block per tile
  (the tail elements counted as one more vector); "strideW" caps the grid at W waves of
  sm_count * (max_threads_per_sm / block) blocks (grid-stride); "flat" is the loop-free form
  (its own kernel, relu_flat_kernel): one slot per vector and per tail element, U slots per
  thread (t, t + blockDim, ... within the block's tile), ceil(slots / (U * block)) blocks.

Added for production (no Numba counterpart): if either pointer is not aligned to the vector
width, a scalar grid-stride kernel with the same cache operators runs instead.
"""

from __future__ import annotations

import re

from sweeper_kernels.intrinsics import L2_POLICY, LOAD_QUALIFIERS, STORE_QUALIFIERS, createpolicy

from sweeper.analyze.policy import DTYPES
from sweeper.errors import SweeperError

EXPORT_VEC_BYTES = (4, 8, 16)

CTYPE = {"fp32": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "int8": "int8_t"}
DT_ENUM = {"fp32": "Dt::F32", "fp16": "Dt::F16", "bf16": "Dt::BF16", "int8": "Dt::I8"}
BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8}


def _ident(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", s)


def check_configs(doc: dict) -> None:
    for name, c in doc["configs"].items():
        if c["vec_bytes"] not in EXPORT_VEC_BYTES:
            raise SweeperError(
                f"config {name!r}: vec_bytes {c['vec_bytes']} cannot be exported "
                f"(the kernels use {EXPORT_VEC_BYTES})"
            )
        if c["load_hint"] not in LOAD_QUALIFIERS:
            raise SweeperError(f"config {name!r}: unknown load hint {c['load_hint']!r}")
        if c["store_hint"] not in STORE_QUALIFIERS:
            raise SweeperError(f"config {name!r}: unknown store hint {c['store_hint']!r}")


def _hint_struct(kind: str, hint: str) -> str:
    return f"{'Ld' if kind == 'load' else 'St'}_{_ident(hint)}"


def _waves(grid: str) -> int:
    """The header's WAVES: 0 = onepass, -1 = flat, -2 = flat32, W = strideW."""
    if grid == "onepass":
        return 0
    if grid in ("flat", "flat32"):
        return -1 if grid == "flat" else -2
    return int(grid[len("stride") :])


def _num(x: float) -> str:
    """A double literal that round-trips exactly."""
    return repr(float(x))


def _mib(b: float | None) -> str:
    return "inf" if b is None else f"{b / 2**20:.3f} MiB"


# ---- CUDA ---------------------------------------------------------------------------------

_PRELUDE = r"""
#pragma once
#ifdef __CUDACC_RTC__
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef signed char int8_t;
typedef unsigned long long uintptr_t;
#else
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <mutex>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

namespace sweeper_relu {

enum class Dt { F32, F16, BF16, I8 };

namespace detail {

// ---- ReLU on one 32-bit word of bit patterns (kernels/bitmath.py) ------------------------
// fp32: keep w iff 1 <= w <= 0x7F800000 (sign clear, non-zero, at most +inf).
// 16/8-bit lanes (SWAR): keep a lane iff sign clear, magnitude non-zero, not NaN.
template <Dt D> struct Swar;
template <> struct Swar<Dt::F16> { static constexpr uint32_t MAGS = 0x7FFF7FFFu, BIG = 0x03FF03FFu, SIGNS = 0x80008000u, ONES = 0xFFFFu; static constexpr int L = 16; static constexpr bool HAS_BIG = true; };
template <> struct Swar<Dt::BF16> { static constexpr uint32_t MAGS = 0x7FFF7FFFu, BIG = 0x007F007Fu, SIGNS = 0x80008000u, ONES = 0xFFFFu; static constexpr int L = 16; static constexpr bool HAS_BIG = true; };
template <> struct Swar<Dt::I8> { static constexpr uint32_t MAGS = 0x7F7F7F7Fu, BIG = 0u, SIGNS = 0x80808080u, ONES = 0xFFu; static constexpr int L = 8; static constexpr bool HAS_BIG = false; };

template <Dt D> __host__ __device__ __forceinline__ uint32_t relu_word(uint32_t w) {
  if constexpr (D == Dt::F32) {
    return (w - 1u) < 0x7F800000u ? w : 0u;
  } else {
    using S = Swar<D>;
    const uint32_t m = w & S::MAGS;
    uint32_t keep = (m + S::MAGS) & ~w;
    if constexpr (S::HAS_BIG) keep &= ~(m + S::BIG);
    keep &= S::SIGNS;
    return w & ((keep >> (S::L - 1)) * S::ONES);
  }
}

template <Dt D> struct Bits { static constexpr int value = (D == Dt::F32) ? 32 : (D == Dt::I8) ? 8 : 16; };

// Numba types threadIdx.x, blockIdx.x, blockDim.x and gridDim.x as signed 32-bit integers and
// widens them by sign extension; sx() does the same, so the index arithmetic (and so the SASS)
// matches the Numba kernel's. (With unsigned widening, hot-9's verify found the 2-vector flat
// export 2-8% slower than its Numba twin; their SASS differed only in that arithmetic.)
__device__ __forceinline__ int64_t sx(unsigned v) { return int64_t(int(v)); }

__device__ __forceinline__ uint64_t to_global(const void* p) {
  uint64_t g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(reinterpret_cast<uint64_t>(p)));
  return g;
}
"""

_KERNELS = r"""
// ---- the kernel: index layout of kernels/source.py --------------------------------------
// nvec = n / E whole vectors, ntiles = nvec / (blockDim * U) whole tiles, shift = ntiles % gridDim
template <Dt D, int NW, int U, class LD, class ST>
__global__ void relu_kernel(const void* x, void* y, int64_t n, int64_t nvec, int64_t ntiles, int64_t shift) {
  constexpr int BITS = Bits<D>::value;
  constexpr int E = NW * 32 / BITS;  // elements per vector
  const uint64_t xa = to_global(x), ya = to_global(y);
  const int64_t tid = sx(threadIdx.x), bid = sx(blockIdx.x), nb = sx(gridDim.x), bs = sx(blockDim.x);
  for (int64_t t = bid; t < ntiles; t += nb) {
    const int64_t b = t * bs * U + tid;
    uint32_t w[U][NW];
#pragma unroll
    for (int k = 0; k < U; ++k) LD::template vec<NW>(xa + uint64_t(b + k * bs) * (4 * NW), w[k]);
#pragma unroll
    for (int k = 0; k < U; ++k) {
#pragma unroll
      for (int j = 0; j < NW; ++j) w[k][j] = relu_word<D>(w[k][j]);
      ST::template vec<NW>(ya + uint64_t(b + k * bs) * (4 * NW), w[k]);
    }
  }
  int64_t rot = bid - shift;  // blocks that did one tile fewer start the leftovers
  if (rot < 0) rot += nb;
  for (int64_t r = ntiles * bs * U + rot * bs + tid; r < nvec; r += nb * bs) {
    uint32_t c[NW];
    LD::template vec<NW>(xa + uint64_t(r) * (4 * NW), c);
#pragma unroll
    for (int j = 0; j < NW; ++j) c[j] = relu_word<D>(c[j]);
    ST::template vec<NW>(ya + uint64_t(r) * (4 * NW), c);
  }
  if constexpr (E > 1) {
    const int64_t e = nvec * E + rot * bs + tid;
    if (e < n) ST::template elem<BITS>(ya + uint64_t(e) * (BITS / 8), relu_word<D>(LD::template elem<BITS>(xa + uint64_t(e) * (BITS / 8))));
  }
}

// The flat form (grids "flat" and "flat32"), no loop. U = 1: thread i does vector i
// (i < nvec) or tail element i - nvec. U > 1: block b covers slots b * U * blockDim onwards,
// thread t takes slots t, t + blockDim, ... (U of them); slot v is vector v (v < nvec) or tail
// element v - nvec. I is the slot index type: int64_t ("flat") or int ("flat32": 32-bit
// index maths, as torch's kernel; the host falls back to int64_t past 2^31 slots). A slot
// index widens to a byte offset by sign extension, as in Numba.
template <Dt D, int NW, int U, class LD, class ST, class I>
__global__ void relu_flat_kernel(const void* x, void* y, int64_t n, int64_t nvec) {
  constexpr int BITS = Bits<D>::value;
  constexpr int E = NW * 32 / BITS;  // elements per vector
  const uint64_t xa = to_global(x), ya = to_global(y);
  const I nv = I(nvec);
  if constexpr (U == 1) {
    const I i = I(sx(blockIdx.x)) * I(sx(blockDim.x)) + I(sx(threadIdx.x));
    if (i < nv) {
      uint32_t c[NW];
      LD::template vec<NW>(xa + uint64_t(int64_t(i)) * (4 * NW), c);
#pragma unroll
      for (int j = 0; j < NW; ++j) c[j] = relu_word<D>(c[j]);
      ST::template vec<NW>(ya + uint64_t(int64_t(i)) * (4 * NW), c);
    } else if constexpr (E > 1) {
      const int64_t e = nvec * E + (int64_t(i) - nvec);
      if (e < n) ST::template elem<BITS>(ya + uint64_t(e) * (BITS / 8), relu_word<D>(LD::template elem<BITS>(xa + uint64_t(e) * (BITS / 8))));
    }
  } else {
    const I bs = I(sx(blockDim.x));
    const I b = I(sx(blockIdx.x)) * bs * U + I(sx(threadIdx.x));
    if (b + (U - 1) * bs < nv) {  // every block but the last: no checks
      uint32_t w[U][NW];
#pragma unroll
      for (int k = 0; k < U; ++k) LD::template vec<NW>(xa + uint64_t(int64_t(b + k * bs)) * (4 * NW), w[k]);
#pragma unroll
      for (int k = 0; k < U; ++k) {
#pragma unroll
        for (int j = 0; j < NW; ++j) w[k][j] = relu_word<D>(w[k][j]);
        ST::template vec<NW>(ya + uint64_t(int64_t(b + k * bs)) * (4 * NW), w[k]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const I v = b + k * bs;
        if (v < nv) {
          uint32_t c[NW];
          LD::template vec<NW>(xa + uint64_t(int64_t(v)) * (4 * NW), c);
#pragma unroll
          for (int j = 0; j < NW; ++j) c[j] = relu_word<D>(c[j]);
          ST::template vec<NW>(ya + uint64_t(int64_t(v)) * (4 * NW), c);
        } else if constexpr (E > 1) {
          const int64_t e = nvec * E + (int64_t(v) - nvec);
          if (e < n) ST::template elem<BITS>(ya + uint64_t(e) * (BITS / 8), relu_word<D>(LD::template elem<BITS>(xa + uint64_t(e) * (BITS / 8))));
        }
      }
    }
  }
}

// Scalar path for pointers not aligned to the vector width (no Numba counterpart).
template <Dt D, class LD, class ST>
__global__ void relu_scalar_kernel(const void* x, void* y, int64_t n) {
  constexpr int BITS = Bits<D>::value;
  const uint64_t xa = to_global(x), ya = to_global(y);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x)
    ST::template elem<BITS>(ya + uint64_t(e) * (BITS / 8), relu_word<D>(LD::template elem<BITS>(xa + uint64_t(e) * (BITS / 8))));
}

}  // namespace detail
"""

_HOST = r"""
struct DeviceInfo {
  cudaError_t status = cudaSuccess;
  int major = 0, minor = 0, sms = 0, max_threads_per_sm = 0;
  long long l2 = 0;
  int entry[4] = {-1, -1, -1, -1};  // per Dt: index into the entry table, -1 = none
};

struct EntryKey { int major, minor; long long l2; bool has[4]; };

// Fallback rule: exact (cc, l2) > same cc major, nearest l2 (log scale) > nearest l2 (log scale).
inline int pick_entry(const EntryKey* keys, int count, int dt, int major, int minor, long long l2) {
  int best = -1;
  double best_score = 0;
  for (int i = 0; i < count; ++i) {
    if (!keys[i].has[dt]) continue;
    if (keys[i].major == major && keys[i].minor == minor && keys[i].l2 == l2) return i;
    double score = std::fabs(std::log(double(keys[i].l2) / double(l2 > 0 ? l2 : 1)));
    if (keys[i].major != major) score += 1e6;
    if (best < 0 || score < best_score) { best = i; best_score = score; }
  }
  return best;
}

inline const EntryKey* entry_keys(int* count);

// Device properties, read once per device (thread-safe), then the entry per dtype.
inline const DeviceInfo& device_info() {
  constexpr int kMaxDevices = 64;
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag flags[kMaxDevices];
  static DeviceInfo bad;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    bad.status = e != cudaSuccess ? e : cudaErrorInvalidDevice;
    return bad;
  }
  std::call_once(flags[dev], [dev] {
    DeviceInfo d;
    int l2 = 0;
    if ((d.status = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev)) == cudaSuccess &&
        (d.status = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, dev)) == cudaSuccess &&
        (d.status = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev)) == cudaSuccess &&
        (d.status = cudaDeviceGetAttribute(&d.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev)) == cudaSuccess &&
        (d.status = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)) == cudaSuccess) {
      d.l2 = l2;
      int count = 0;
      const EntryKey* keys = entry_keys(&count);
      for (int dt = 0; dt < 4; ++dt) d.entry[dt] = pick_entry(keys, count, dt, d.major, d.minor, d.l2);
    }
    infos[dev] = d;
  });
  return infos[dev];
}

// Working set (input + output bytes) relative to this device's L2: what the bands are in.
inline double ws_over_l2(size_t n, size_t itemsize, long long l2) {
  return 2.0 * double(n) * double(itemsize) / double(l2 > 0 ? l2 : 1);
}

// W waves of blocks: W * sm_count * (max_threads_per_sm / BLOCK), at least one block per SM.
template <int BLOCK, int WAVES>
inline int64_t max_grid(const DeviceInfo& d) {
  const int64_t per_sm = d.max_threads_per_sm / BLOCK > 0 ? d.max_threads_per_sm / BLOCK : 1;
  return int64_t(WAVES) * d.sms * per_sm;
}

// One config = one variant: vector bytes, unroll, cache operators, block, waves (0 = onepass,
// -1 = flat, -2 = flat32).
template <int VB, int U, class LD, class ST, int BLOCK, int WAVES>
struct Variant {
  template <Dt D>
  static cudaError_t launch(const void* in, void* out, size_t n, const DeviceInfo& d, cudaStream_t s) {
    if (n == 0) return cudaSuccess;
    constexpr int E = VB * 8 / Bits<D>::value;
    const int64_t nn = int64_t(n);
    if ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % VB != 0) {
      int64_t grid = (nn + BLOCK - 1) / BLOCK;
      if (WAVES > 0 && grid > max_grid<BLOCK, WAVES>(d)) grid = max_grid<BLOCK, WAVES>(d);
      if (grid > 0x7FFFFFFF) grid = 0x7FFFFFFF;
      relu_scalar_kernel<D, LD, ST><<<unsigned(grid), BLOCK, 0, s>>>(in, out, nn);
      return cudaGetLastError();
    }
    // Launch shape of sweeper_kernels.launch.launch_shape: the tail elements ride in one
    // extra "vector" slot; a wave = every SM full of resident blocks by thread count.
    if constexpr (WAVES < 0) {  // flat: one slot per vector and per tail element, U per thread
      const int64_t nvec = nn / E, slots = nvec + nn % E, tile = int64_t(BLOCK) * U;
      const int64_t blocks = (slots + tile - 1) / tile;
      if (WAVES == -2 && blocks * tile <= 2147483647LL)  // flat32: 32-bit slot indices fit
        relu_flat_kernel<D, VB / 4, U, LD, ST, int><<<unsigned(blocks), BLOCK, 0, s>>>(in, out, nn, nvec);
      else
        relu_flat_kernel<D, VB / 4, U, LD, ST, int64_t><<<unsigned(blocks), BLOCK, 0, s>>>(in, out, nn, nvec);
      return cudaGetLastError();
    }
    const int64_t nvec = nn / E, tile = int64_t(BLOCK) * U;
    const int64_t units = nvec + (nn % E ? 1 : 0);
    int64_t grid = (units + tile - 1) / tile;
    if (WAVES > 0 && grid > max_grid<BLOCK, WAVES>(d)) grid = max_grid<BLOCK, WAVES>(d);
    if (grid < 1) grid = 1;
    const int64_t ntiles = nvec / tile;
    relu_kernel<D, VB / 4, U, LD, ST><<<unsigned(grid), BLOCK, 0, s>>>(in, out, nn, nvec, ntiles, ntiles % grid);
    return cudaGetLastError();
  }
};
"""


def _load_struct(h: str, q: str, policy: bool) -> str:
    """The load struct for hint h: `ld.global{q}`, with its L2 cache-policy operand (the
    `createpolicy` of intrinsics.L2_POLICY) when `policy`."""
    if policy:
        pol = f'    uint64_t pol; asm volatile("{createpolicy(h, "%0")}" : "=l"(pol));\n'
        p1, p2, p4, pin = ", %2", ", %3", ", %5", ', "l"(pol)'
    else:
        pol, p1, p2, p4, pin = "", "", "", "", ""
    return f"""struct {_hint_struct("load", h)} {{  // load hint '{h}': ld.global{q}
  template <int NW> static __device__ __forceinline__ void vec(uint64_t a, uint32_t (&w)[NW]) {{
{pol}    if constexpr (NW == 1) asm volatile("ld.global{q}.u32 %0, [%1]{p1};" : "=r"(w[0]) : "l"(a){pin});
    else if constexpr (NW == 2) asm volatile("ld.global{q}.v2.u32 {{%0, %1}}, [%2]{p2};" : "=r"(w[0]), "=r"(w[1]) : "l"(a){pin});
    else asm volatile("ld.global{q}.v4.u32 {{%0, %1, %2, %3}}, [%4]{p4};" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(a){pin});
  }}
  template <int BITS> static __device__ __forceinline__ uint32_t elem(uint64_t a) {{
    uint32_t v;
{pol}    if constexpr (BITS == 8) asm volatile("ld.global{q}.b8 %0, [%1]{p1};" : "=r"(v) : "l"(a){pin});
    else if constexpr (BITS == 16) asm volatile("ld.global{q}.b16 %0, [%1]{p1};" : "=r"(v) : "l"(a){pin});
    else asm volatile("ld.global{q}.b32 %0, [%1]{p1};" : "=r"(v) : "l"(a){pin});
    return v;
  }}
}};"""


def _hint_structs(doc: dict) -> str:
    loads = sorted({c["load_hint"] for c in doc["configs"].values()})
    stores = sorted({c["store_hint"] for c in doc["configs"].values()})
    out = ["// ---- cache operators: one struct per hint used by the policy ---------------------"]
    for h in loads:
        if h in L2_POLICY:
            # sm_80+: the priority rides on a cache policy; older targets get a plain load.
            out.append("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800")
            out.append(_load_struct(h, "", False))
            out.append("#else")
            out.append(_load_struct(h, LOAD_QUALIFIERS[h], True))
            out.append("#endif")
        else:
            out.append(_load_struct(h, LOAD_QUALIFIERS[h], False))
    for h in stores:
        q = STORE_QUALIFIERS[h]
        out.append(
            f"""struct {_hint_struct("store", h)} {{  // store hint '{h}': st.global{q}
  template <int NW> static __device__ __forceinline__ void vec(uint64_t a, const uint32_t (&w)[NW]) {{
    if constexpr (NW == 1) asm volatile("st.global{q}.u32 [%0], %1;" :: "l"(a), "r"(w[0]) : "memory");
    else if constexpr (NW == 2) asm volatile("st.global{q}.v2.u32 [%0], {{%1, %2}};" :: "l"(a), "r"(w[0]), "r"(w[1]) : "memory");
    else asm volatile("st.global{q}.v4.u32 [%0], {{%1, %2, %3, %4}};" :: "l"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
  }}
  template <int BITS> static __device__ __forceinline__ void elem(uint64_t a, uint32_t v) {{
    if constexpr (BITS == 8) asm volatile("st.global{q}.b8 [%0], %1;" :: "l"(a), "r"(v) : "memory");
    else if constexpr (BITS == 16) asm volatile("st.global{q}.b16 [%0], %1;" :: "l"(a), "r"(v) : "memory");
    else asm volatile("st.global{q}.b32 [%0], %1;" :: "l"(a), "r"(v) : "memory");
  }}
}};"""
        )
    return "\n".join(out) + "\n"


def _variant_aliases(doc: dict) -> str:
    out = [
        "// ---- the configs the policy uses (sweeper variant fields) --------------------------"
    ]
    for name, c in doc["configs"].items():
        out.append(
            f"// {name}: vec_bytes={c['vec_bytes']} unroll={c['unroll']} load={c['load_hint']} "
            f"store={c['store_hint']} block={c['block']} grid={c['grid']}"
        )
        out.append(
            f"using V_{_ident(name)} = Variant<{c['vec_bytes']}, {c['unroll']}, "
            f"{_hint_struct('load', c['load_hint'])}, {_hint_struct('store', c['store_hint'])}, "
            f"{c['block']}, {_waves(c['grid'])}>;"
        )
    return "\n".join(out) + "\n"


def _band_comment(b: dict, l2: int, runs: str) -> str:
    hi = "inf" if b["hi_rel"] is None else f"{b['hi_rel']:.6f}"
    text = (
        f"  // [{b['lo_rel']:.6f}, {hi}) x L2 = [{_mib(b['lo_bytes'])}, {_mib(b['hi_bytes'])}) "
        f"on the source GPU: {b['config']}"
    )
    if b.get("first_measured") is not None:
        text += (
            f"; measured {_mib(b['first_measured'])}..{_mib(b['last_measured'])}, "
            f"worst {b['worst_frac_of_best']:.3f} of the fastest"
        )
    if b.get("bracket_below"):
        lo, hi_b = b["bracket_below"]
        text += f"\n  //   lower edge: between measured {lo} and {hi_b} bytes (run {runs})"
    return text


def _dispatchers(doc: dict) -> str:
    out = [
        "// ---- dispatch: one function per (entry, dtype); bands relative to l2CacheSize ------"
    ]
    for k, e in enumerate(doc["entries"]):
        src = e["source"]
        runs = ", ".join(src.get("run_ids", []))
        out.append(
            f"// entry {k}: {e['gpu']} {e.get('device_name', '')} (cc {e['cc'][0]}.{e['cc'][1]}, "
            f"L2 {e['l2_bytes']} bytes) from run(s) {runs}, plan {src.get('plan_hash', '')}, "
            f"mode {src.get('mode', '')}, tolerance {src.get('tolerance')}, file {src.get('file')}"
        )
        for dt, d in e["dtypes"].items():
            out.append(
                f"inline cudaError_t dispatch_e{k}_{dt}(const void* in, void* out, size_t n, "
                "const DeviceInfo& d, cudaStream_t s) {"
            )
            out.append(f"  const double rel = ws_over_l2(n, {BITS[dt] // 8}, d.l2);")
            for b in d["bands"]:
                out.append(_band_comment(b, e["l2_bytes"], runs))
                call = f"V_{_ident(b['config'])}::launch<{DT_ENUM[dt]}>(in, out, n, d, s)"
                if b["hi_rel"] is None:
                    out.append(f"  return {call};")
                else:
                    out.append(f"  if (rel < {_num(b['hi_rel'])}) return {call};")
            out.append("}")
            out.append(
                f"inline const char* choice_e{k}_{dt}(size_t n, const DeviceInfo& d) {{\n"
                f"  const double rel = ws_over_l2(n, {BITS[dt] // 8}, d.l2);"
            )
            for b in d["bands"]:
                if b["hi_rel"] is None:
                    out.append(f'  return "{b["config"]}";')
                else:
                    out.append(f'  if (rel < {_num(b["hi_rel"])}) return "{b["config"]}";')
            out.append("}")
    keys = []
    for e in doc["entries"]:
        has = ", ".join("true" if dt in e["dtypes"] else "false" for dt in DTYPES)
        keys.append(
            f"    {{{e['cc'][0]}, {e['cc'][1]}, {e['l2_bytes']}LL, {{{has}}}}},  // {e['gpu']}"
        )
    out.append(
        "inline const EntryKey* entry_keys(int* count) {\n"
        "  static const EntryKey keys[] = {\n" + "\n".join(keys) + "\n  };\n"
        f"  *count = {len(doc['entries'])};\n  return keys;\n}}"
    )
    return "\n".join(out) + "\n"


def _launchers(doc: dict) -> str:
    out = ["}  // namespace detail", ""]
    out.append(
        "// ---- public API: launch_relu overloads (graph-capturable: launches only) --------"
    )
    for i, dt in enumerate(DTYPES):
        ct = CTYPE[dt]
        cases = [
            f"    case {k}: return detail::dispatch_e{k}_{dt}(in, out, n, d, s);"
            for k, e in enumerate(doc["entries"])
            if dt in e["dtypes"]
        ]
        choice_cases = [
            f"    case {k}: return detail::choice_e{k}_{dt}(n, d);"
            for k, e in enumerate(doc["entries"])
            if dt in e["dtypes"]
        ]
        out.append(
            f"inline cudaError_t launch_relu(const {ct}* in, {ct}* out, size_t n, cudaStream_t s = 0) {{\n"
            "  const detail::DeviceInfo& d = detail::device_info();\n"
            "  if (d.status != cudaSuccess) return d.status;\n"
            f"  switch (d.entry[{i}]) {{\n" + "\n".join(cases) + "\n"
            "    default: return cudaErrorNotSupported;  // the policy has no bands for this dtype\n"
            "  }\n}"
        )
        out.append(
            f"// The config launch_relu would use for {dt} and n on the current device (for tests).\n"
            f"inline const char* relu_choice_{dt}(size_t n) {{\n"
            "  const detail::DeviceInfo& d = detail::device_info();\n"
            '  if (d.status != cudaSuccess) return "";\n'
            f"  switch (d.entry[{i}]) {{\n" + "\n".join(choice_cases) + "\n"
            '    default: return "";\n  }\n}'
        )
    out.append("#endif  // __CUDACC_RTC__")
    out.append("}  // namespace sweeper_relu")
    out.append("")
    out.append('// extern "C" entry points for loading from Python (ctypes). Define')
    out.append("// SWEEPER_RELU_DEFINE_C_API in exactly one translation unit to emit them.")
    out.append("#if defined(SWEEPER_RELU_DEFINE_C_API) && !defined(__CUDACC_RTC__)")
    for dt in DTYPES:
        ct = CTYPE[dt]
        out.append(
            f'extern "C" cudaError_t sweeper_launch_relu_{dt}(const void* in, void* out, size_t n, cudaStream_t s) {{\n'
            f"  return sweeper_relu::launch_relu(static_cast<const {ct}*>(in), static_cast<{ct}*>(out), n, s);\n}}\n"
            f'extern "C" const char* sweeper_relu_choice_{dt}(size_t n) {{ return sweeper_relu::relu_choice_{dt}(n); }}'
        )
    out.append("#endif")
    return "\n".join(out) + "\n"


def render_cuda(doc: dict) -> str:
    """The header text for a merged policy (see sweeper.analyze.policy.load_any)."""
    check_configs(doc)
    head = [
        "// relu_policy.cuh: generated by `sweeper export --format cuda`. Do not edit by hand;",
        "// re-run the export. Kernels mirror the Numba variants of sweeper_kernels exactly.",
        "//",
        "// Policy: working set ws = 2 * n * sizeof(T) bytes, bands in ws / l2CacheSize.",
        "// Entry choice per device: " + " > ".join(doc["fallback"]) + ".",
    ]
    for e in doc["entries"]:
        s = e["source"]
        head.append(
            f"//   {e['gpu']}: cc {e['cc'][0]}.{e['cc'][1]}, L2 {e['l2_bytes']} bytes; "
            f"runs {', '.join(s.get('run_ids', []))}; plan {s.get('plan_hash', '')}"
        )
    for d in doc.get("disagreements", []):
        hi = "inf" if d["rel"][1] is None else f"{d['rel'][1]:.4f}"
        head.append(
            f"// GPUs disagree: {d['dtype']} [{d['rel'][0]:.4f}, {hi}) x L2: "
            f"{d['gpus'][0]} uses {d['configs'][0]}, {d['gpus'][1]} uses {d['configs'][1]}"
        )
    body = [
        "\n".join(head),
        _PRELUDE,
        _hint_structs(doc),
        _KERNELS,
        "#ifndef __CUDACC_RTC__  // host code: nvcc only (NVRTC compiles the kernels above)",
        "namespace detail {",
        _HOST,
        _variant_aliases(doc),
        _dispatchers(doc),
        _launchers(doc),
    ]
    return "\n".join(body)

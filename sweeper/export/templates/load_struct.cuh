struct $name {  // load hint '$hint': ld.global$q
  template <int NW> static __device__ __forceinline__ void vec(uint64_t a, uint32_t (&w)[NW]) {
${pol}    if constexpr (NW == 1) asm volatile("ld.global$q.u32 %0, [%1]$p1;" : "=r"(w[0]) : "l"(a)$pin);
    else if constexpr (NW == 2) asm volatile("ld.global$q.v2.u32 {%0, %1}, [%2]$p2;" : "=r"(w[0]), "=r"(w[1]) : "l"(a)$pin);
    else asm volatile("ld.global$q.v4.u32 {%0, %1, %2, %3}, [%4]$p4;" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(a)$pin);
  }
  template <int BITS> static __device__ __forceinline__ uint32_t elem(uint64_t a) {
    uint32_t v;
${pol}    if constexpr (BITS == 8) asm volatile("ld.global$q.b8 %0, [%1]$p1;" : "=r"(v) : "l"(a)$pin);
    else if constexpr (BITS == 16) asm volatile("ld.global$q.b16 %0, [%1]$p1;" : "=r"(v) : "l"(a)$pin);
    else asm volatile("ld.global$q.b32 %0, [%1]$p1;" : "=r"(v) : "l"(a)$pin);
    return v;
  }
};

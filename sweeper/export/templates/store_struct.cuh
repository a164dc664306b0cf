struct $name {  // store hint '$hint': st.global$q
  template <int NW> static __device__ __forceinline__ void vec(uint64_t a, const uint32_t (&w)[NW]) {
    if constexpr (NW == 1) asm volatile("st.global$q.u32 [%0], %1;" :: "l"(a), "r"(w[0]) : "memory");
    else if constexpr (NW == 2) asm volatile("st.global$q.v2.u32 [%0], {%1, %2};" :: "l"(a), "r"(w[0]), "r"(w[1]) : "memory");
    else asm volatile("st.global$q.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
  }
  template <int BITS> static __device__ __forceinline__ void elem(uint64_t a, uint32_t v) {
    if constexpr (BITS == 8) asm volatile("st.global$q.b8 [%0], %1;" :: "l"(a), "r"(v) : "memory");
    else if constexpr (BITS == 16) asm volatile("st.global$q.b16 [%0], %1;" :: "l"(a), "r"(v) : "memory");
    else asm volatile("st.global$q.b32 [%0], %1;" :: "l"(a), "r"(v) : "memory");
  }
};

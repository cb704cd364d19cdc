/*
 * Global stores that keep their width.
 *
 * nvcc may scalarize a C++ vector store whose value is assembled from separately computed
 * words (make_uint4 of four packed results) into four st.global.u32: four times the store
 * instructions, each writing 4 bytes of 8 token rows, and four times the L2 write requests.
 * It happened in kv_warp_store_record (kvcache) and in the tensor-core mhc projection, where
 * ncu counted 2.6x the expected L2 write sectors. These helpers issue the vector store
 * as written. `p` must be aligned to the store's width.
 */
#ifndef DSV4_PRIM_STORE_CUH
#define DSV4_PRIM_STORE_CUH

#include <stdint.h>

static __device__ __forceinline__ void dsv4_st_v2(void *p, uint32_t a, uint32_t b) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(p), "r"(a), "r"(b) : "memory");
}
static __device__ __forceinline__ void dsv4_st_v4(void *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
static __device__ __forceinline__ void dsv4_st_v4(void *p, uint4 v) { dsv4_st_v4(p, v.x, v.y, v.z, v.w); }

/* The same stores predicated on `on` inside the instruction: no branch around them, so
 * warp-collective code after them stays provably converged (no divergent-shuffle helper
 * calls, no extra registers). */
static __device__ __forceinline__ void dsv4_st_v2_if(void *p, uint32_t a, uint32_t b, bool on) {
    asm volatile("{\n .reg .pred q;\n setp.ne.u32 q, %3, 0;\n @q st.global.v2.u32 [%0], {%1, %2};\n}\n" ::"l"(p),
                 "r"(a), "r"(b), "r"((uint32_t)on)
                 : "memory");
}
static __device__ __forceinline__ void dsv4_st_v4_if(void *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d, bool on) {
    asm volatile("{\n .reg .pred q;\n setp.ne.u32 q, %5, 0;\n @q st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(
                     p),
                 "r"(a), "r"(b), "r"(c), "r"(d), "r"((uint32_t)on)
                 : "memory");
}
static __device__ __forceinline__ void dsv4_st_u8_if(void *p, uint32_t a, bool on) {
    asm volatile("{\n .reg .pred q;\n setp.ne.u32 q, %2, 0;\n @q st.global.u8 [%0], %1;\n}\n" ::"l"(p), "r"(a),
                 "r"((uint32_t)on)
                 : "memory");
}
static __device__ __forceinline__ void dsv4_st_u32_if(void *p, uint32_t a, bool on) {
    asm volatile("{\n .reg .pred q;\n setp.ne.u32 q, %2, 0;\n @q st.global.u32 [%0], %1;\n}\n" ::"l"(p), "r"(a),
                 "r"((uint32_t)on)
                 : "memory");
}

#endif

/*
 * Completion flags between the CTAs of one grid, kept in a caller's workspace.
 *
 * A producer CTA publishes its workspace results by storing the call's tag
 * (common/call_tag.h: a NaN payload no fp32 arithmetic produces, different for two calls
 * in flight); the one CTA that consumes them waits for that value and stores 0 back, so
 * every call leaves its flags at 0 for the next and no memset is needed (CUDA-graph
 * replays work). A flag word holding an earlier call's float results, another call's
 * tag or a fresh allocation's bytes does not read as set (but for a 2^-22 collision). A
 * consumer waits only on CTAs with lower block indices, which are dispatched before it
 * (the assumption CUTLASS's stream-K fix-up also makes), so waiting cannot deadlock; it
 * still gives up after DSV4_GRID_WAIT_POLLS looks (a second call in flight on the same
 * workspace can clear or overwrite its flags) and then poisons its outputs with NaN.
 *
 * Tagged words carry the same value as a tag beside one fp32 result in a 64-bit word
 * written by one store: a reader that sees the tag has the result, with no fence on
 * either side and no second round trip for the data. The reader stores 0 back, as for a
 * flag. (Only results a single 64-bit access can carry; a store of 8 naturally aligned
 * bytes is single-copy atomic.)
 *
 * Users: the sparse MLA decode merge kept in the attention launch (flags); the mhc
 * small-T route (its gate CTAs poll tagged partials of the projection CTAs).
 */
#ifndef DSV4_PRIM_GRID_FLAG_CUH
#define DSV4_PRIM_GRID_FLAG_CUH

/* Looks before a waiting consumer gives up: each look is an L2 round trip (about half a
 * microsecond), so about 2 s, far beyond any producer of a running call. */
#define DSV4_GRID_WAIT_POLLS (1u << 22)

/* Called by every thread of the CTA after its result stores: one fenced store per flag
 * (`mine`: this thread stores one). */
static __device__ __forceinline__ void dsv4_grid_flag_publish(unsigned *flag, bool mine, unsigned tag) {
    __syncthreads();
    if (mine) {
        __threadfence(); /* cumulative: the CTA's stores (ordered by the barrier) come first */
        *(volatile unsigned *)flag = tag;
    }
}

/* One look at a flag (not cached in L1). After it reads set: __threadfence(), then read
 * the results with L2 loads (__ldcg, cp.async.cg), then store 0 to the flag. */
static __device__ __forceinline__ bool dsv4_grid_flag_is_set(const unsigned *flag, unsigned tag) {
    return *(const volatile unsigned *)flag == tag;
}

/* A tagged word's store (relaxed, gpu scope: no ordering with anything else is needed). */
static __device__ __forceinline__ void dsv4_tagged_store(unsigned long long *w, float v, unsigned tag) {
    const unsigned long long x = (unsigned long long)tag << 32 | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(w), "l"(x) : "memory");
}
/* One look at a tagged word's 64 bits (not cached in L1). A reader issues every word of a
 * look before it tests any (dsv4_tagged_is_set): a test between two loads makes the second
 * wait for the first's round trip. */
static __device__ __forceinline__ unsigned long long dsv4_tagged_look(const unsigned long long *w) {
    unsigned long long x;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(x) : "l"(w) : "memory");
    return x;
}
static __device__ __forceinline__ bool dsv4_tagged_is_set(unsigned long long x, unsigned tag) {
    return (unsigned)(x >> 32) == tag;
}
static __device__ __forceinline__ float dsv4_tagged_value(unsigned long long x) { return __uint_as_float((unsigned)x); }

#endif /* DSV4_PRIM_GRID_FLAG_CUH */

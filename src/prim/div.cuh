/*
 * Correctly rounded x / d for many x sharing one divisor d: the bits of __fdiv_rn, with
 * the divisor's work done once.
 *
 * __fdiv_rn compiles to a fast path (MUFU.RCP of d, two FFMAs refining it to r, then
 * q0 = x r, e = x - d q0, q = q0 + r e, all FFMAs) guarded by FCHK, which sends operands
 * whose quotient or residual could leave the normal range to a slow subroutine. Inside
 * that range the fast path is the IEEE quotient (Markstein's correction: e is exact
 * by FMA and r is within an ulp of 1/d). Here the refinement of r runs once per
 * divisor, each quotient costs 3 FFMAs, and the range is a fixed window instead of
 * FCHK: |x| and d in [2^-60, 2^60), where every intermediate is normal. Outside it the
 * caller uses __fdiv_rn. tests/prim compares the two bit for bit on 2^22 random pairs
 * in four exponent bands (anywhere, d near 1, the window's edges, quotient near 1).
 */
#ifndef DSV4_PRIM_DIV_CUH
#define DSV4_PRIM_DIV_CUH

struct dsv4_divisor {
    float d, r; /* the divisor and its refined reciprocal */
};

static __device__ __forceinline__ dsv4_divisor dsv4_divisor_make(float d) {
    dsv4_divisor v;
    float r0;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(d));
    v.d = d;
    v.r = __fmaf_rn(r0, __fmaf_rn(-d, r0, 1.0f), r0);
    return v;
}

/* |x| in [2^-60, 2^60): x may take the fast path (d must be in the window too). */
static __device__ __forceinline__ bool dsv4_div_in_window(float x) {
    return (__float_as_uint(x) & 0x7FFFFFFFu) - 0x21800000u < 0x5D800000u - 0x21800000u;
}

/* x / v.d, correctly rounded, when x and v.d are both in the window. */
static __device__ __forceinline__ float dsv4_div_fast(float x, const dsv4_divisor &v) {
    const float q0 = __fmaf_rn(x, v.r, 0.0f);
    return __fmaf_rn(v.r, __fmaf_rn(-v.d, q0, x), q0);
}

#endif

/*
 * Online-softmax and finalisation arithmetic shared by the attention kernel (direct
 * write of a single split) and the split merge (include/dsv4/attention.h, Finalisation).
 *
 * Bitwise S = 1 equivalence: the direct path and the merge both call the functions
 * below, in the same order, with every product and sum rounded separately (__fmul_rn /
 * __fadd_rn cannot be contracted into FMAs) and IEEE division (__fdiv_rn):
 *   M = max(m_0, ..., m_{S-1}) then max(M, sink);  w_s = mla_rescale(m_s, M)
 *   L = w_0 * l_0, then L + w_s * l_s for s >= 1, then L + mla_rescale(sink, M)
 *   x = w_0 * acc_0, then x + w_s * acc_s;  out = L > 0 ? x / max(L, 1e-30) : (L NaN ? NaN : 0)
 * With S = 1 the merge's first terms are exactly the direct path's products (there is
 * no "0 +" step that could turn a -0 into +0).
 *
 * exp: __expf, i.e. ex2.approx(x * log2 e), the lowering upstream Triton uses for exp.
 * Its relative error (~2^-21 over the range a softmax sees) is far below the 2^-9 of
 * rounding p to bf16, the dominant term of the error budget (DSV4_MLA_TOL_MAX_ABS).
 */
#ifndef DSV4_ATTENTION_MLA_SOFTMAX_CUH
#define DSV4_ATTENTION_MLA_SOFTMAX_CUH

#include <float.h>
#include <stdint.h>

#include "attention/sparse_mla_config.h"
#include "prim/div.cuh"

/* e^(m_old - m_new); exactly 1 when the max did not move (also -FLT_MAX == -FLT_MAX),
 * so the common case never depends on the approximation. */
static __device__ __forceinline__ float mla_rescale(float m_old, float m_new) {
    return m_old == m_new ? 1.0f : __expf(m_old - m_new);
}

/* The lazy reference max (mla_tile.cuh's numerics note): it moves to the tile's max
 * only when that exceeds it by more than MLA_RESCALE_SLACK, so p = e^(s - m) <= e^slack
 * and most tiles leave alpha at exactly 1. */
static __device__ __forceinline__ float mla_lazy_max(float m_run, float tile_max) {
    return tile_max > m_run + MLA_RESCALE_SLACK ? tile_max : m_run;
}

/* p = e^(s - m) of a key against the row's reference max; 0 for an invalid key. */
static __device__ __forceinline__ float mla_prob(float s, float m, bool valid) {
    return valid ? __expf(__fsub_rn(s, m)) : 0.0f;
}

/* The row's running sum after a tile: l * alpha + the tile's sum of p. */
static __device__ __forceinline__ float mla_running_sum(float l, float alpha, float psum) {
    return __fadd_rn(__fmul_rn(l, alpha), psum);
}

/* A row's sink, loaded once per row ahead of its use: the finalisation
 * runs behind the row's output stores, which a global load of the sink there would
 * have to wait for (the compiler cannot move it above them). */
struct mla_row_sink {
    float v;
    bool has;
};
static __device__ __forceinline__ mla_row_sink mla_load_row_sink(const float *sink, int head) {
    mla_row_sink r;
    r.has = sink != NULL;
    r.v = sink ? sink[head] : 0.0f;
    return r;
}

/* The max the finalisation normalises with: the splits' max, then the sink. */
static __device__ __forceinline__ float mla_sink_max(float m, const mla_row_sink &s) {
    return s.has ? fmaxf(m, s.v) : m;
}

/* L += e^(sink - M), added last. */
static __device__ __forceinline__ float mla_add_sink(float L, const mla_row_sink &s, float M) {
    return s.has ? __fadd_rn(L, mla_rescale(s.v, M)) : L;
}

/* out = L > 0 ? x / max(L, 1e-30) : 0, and NaN for a NaN L (a NaN or +inf score: the row
 * turns NaN, attention.h). x = +0 returns before the division: __fdiv_rn's FCHK sends a
 * zero x to its slow subroutine (prim/div.cuh), and +0 / L is +0. */
static __device__ __forceinline__ float mla_normalize(float x, float L) {
    if (!(L > 0.0f)) return L == L ? 0.0f : L;
    if (__float_as_uint(x) == 0u) return x;
    return __fdiv_rn(x, fmaxf(L, 1e-30f));
}

/* The same for a row's many x: its divisor prepared once (prim/div.cuh gives the bits of
 * __fdiv_rn inside its window); `fast` says whether L > 0 and the divisor is in the window,
 * each x must be checked too (mla_normalize otherwise). */
struct mla_row_div {
    dsv4_divisor v;
    bool fast;
};
static __device__ __forceinline__ mla_row_div mla_row_divisor(float L) {
    mla_row_div r;
    r.v = dsv4_divisor_make(fmaxf(L, 1e-30f));
    r.fast = L > 0.0f && dsv4_div_in_window(r.v.d);
    return r;
}

/* Finalisation of one split held in registers (the direct path): w and L per row. */
struct mla_final {
    float w, L;
};
static __device__ __forceinline__ mla_final mla_final_single(float m, float l, const mla_row_sink &sink) {
    mla_final f;
    const float M = mla_sink_max(m, sink);
    f.w = mla_rescale(m, M);
    f.L = mla_add_sink(__fmul_rn(f.w, l), sink, M);
    return f;
}
static __device__ __forceinline__ float mla_final_apply(const mla_final &f, float acc) {
    return mla_normalize(__fmul_rn(f.w, acc), f.L);
}

#endif

/*
 * dsv4_compress per element and per row, for the CPU reference and the kernel alike
 * (static inline C on the host, __host__ __device__ under nvcc), so the two cannot round
 * differently where the contract asks for bits (ratio 1) and share every index rule.
 *
 *   partial  p_l = fmaf(x0, x0, x1 * x1) + fmaf(x2, x2, x3 * x3)  (dims 4l .. 4l + 3)
 *   rms      rr  = 1 / sqrtf(ssq / 512 + eps)
 *   out      y   = bf16((x * rr) * gamma)
 *   pool     the ratio-2 two-row softmax pooling of one dim
 * The halving tree over the 128 partials (+64, +32, ..., +1) is written out twice, as a
 * loop here (cl_row_rms_inv) and as shared memory plus xor shuffles in latent_block.cuh; a
 * sum of two values is the same in either operand order, so every lane of the butterfly
 * ends with the tree's bits.
 *
 * Every operation is rounded on its own: on the device through the __f*_rn intrinsics,
 * which nvcc never contracts; on the host the build never contracts (C11 without
 * fast-math). x / 512 and x * 2^-9 are the same correctly rounded value. exp is expf on
 * both sides and differs between them (hence the ratio-2 tolerance).
 */
#ifndef DSV4_COMPRESS_LATENT_MATH_H
#define DSV4_COMPRESS_LATENT_MATH_H

#include <math.h>
#include <stdint.h>

#include "dsv4/compress.h"
#include "dsv4/numerics.h"

#if defined(__CUDA_ARCH__)
#define CL_FMUL(a, b) __fmul_rn((a), (b))
#define CL_FADD(a, b) __fadd_rn((a), (b))
#define CL_FDIV(a, b) __fdiv_rn((a), (b))
#define CL_FSQRT(a) __fsqrt_rn(a)
#define CL_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define CL_FMUL(a, b) ((a) * (b))
#define CL_FADD(a, b) ((a) + (b))
#define CL_FDIV(a, b) ((a) / (b))
#define CL_FSQRT(a) sqrtf(a)
#define CL_FMA(a, b, c) fmaf((a), (b), (c))
#endif

#define CL_PARTIALS 128 /* partial sums of squares per row: 4 dims each */

/* The sum of squares of 4 consecutive dims. */
DSV4_HD float cl_partial4(float x0, float x1, float x2, float x3) {
    return CL_FADD(CL_FMA(x0, x0, CL_FMUL(x1, x1)), CL_FMA(x2, x2, CL_FMUL(x3, x3)));
}

/* rr = 1 / sqrt(ssq / n + eps) for a row of n = 128 or 512 dims (ssq / n: an exact
 * power-of-two product). */
DSV4_HD float cl_rms_inv_n(float ssq, int n, float eps) {
    return CL_FDIV(1.0f, CL_FSQRT(CL_FADD(CL_FMUL(ssq, n == 128 ? 0x1p-7f : 0x1p-9f), eps)));
}
/* rr of a 512-dim row. */
DSV4_HD float cl_rms_inv(float ssq, float eps) { return cl_rms_inv_n(ssq, 512, eps); }

/* One normalized element, fp32: (x * rr) * gamma. */
DSV4_HD float cl_norm(float x, float rr, uint16_t gamma) { return CL_FMUL(CL_FMUL(x, rr), dsv4_bf16_to_f32(gamma)); }

/* One latent element: bf16((x * rr) * gamma). */
DSV4_HD uint16_t cl_out(float x, float rr, uint16_t gamma) { return dsv4_f32_to_bf16(cl_norm(x, rr, gamma)); }

/* rr of an n-dim row (n = 128 or 512), the references' way: the n/4 partials, then the
 * halving tree as a loop (the kernels: shared memory and xor shuffles, latent_block.cuh,
 * or an xor butterfly within one warp at n = 128). */
static inline float cl_row_rms_inv(const float *x, int n, float eps) {
    float p[CL_PARTIALS];
    for (int l = 0; l < n / 4; ++l) p[l] = cl_partial4(x[4 * l], x[4 * l + 1], x[4 * l + 2], x[4 * l + 3]);
    for (int h = n / 8; h >= 1; h /= 2)
        for (int l = 0; l < h; ++l) p[l] = CL_FADD(p[l], p[l + h]);
    return cl_rms_inv_n(p[0], n, eps);
}

/* One pooled dim of rows P (kv p, score sp) and Q (kv q, score sq). A comparison for the
 * maximum: two -inf scores give -inf - -inf = NaN, as the contract says, and a NaN score
 * gives NaN either way. */
DSV4_HD float cl_pool(float p, float q, float sp, float sq) {
    const float m = sp > sq ? sp : sq;
    const float ep = expf(CL_FADD(sp, -m)), eq = expf(CL_FADD(sq, -m)), s = CL_FADD(ep, eq);
    return CL_FADD(CL_FMUL(p, CL_FDIV(ep, s)), CL_FMUL(q, CL_FDIV(eq, s)));
}

/* ---- ratio-2 indexing ------------------------------------------------------------------- */
/* Does the row at position pos with ring slot rs get a latent (apart from its request)? */
DSV4_HD int cl_closes(int64_t pos, int64_t rs, int64_t ring_rows) {
    return pos >= 1 && (pos & 1) && rs >= 0 && rs < ring_rows;
}

/* The request whose rows hold t: the largest b <= num_reqs with qsl[b] <= t, or -1 when
 * there is none or it is num_reqs (t past the last request). A binary search; on a
 * query_start_loc that is not ascending it still returns -1 or a b < num_reqs. */
DSV4_HD int64_t cl_request_of(const int32_t *qsl, int64_t num_reqs, int64_t t) {
    int64_t lo = 0, hi = num_reqs + 1; /* first index with qsl[i] > t lies in [lo, hi] */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)qsl[mid] <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo >= 1 && lo <= num_reqs ? lo - 1 : -1;
}

/* The first row of request b, clamped at 0: row t > first reads row t - 1 >= 0. */
DSV4_HD int64_t cl_first_row(const int32_t *qsl, int64_t b) { return qsl[b] > 0 ? (int64_t)qsl[b] : 0; }

/* The ring row of position pos - 1 in the block of ring slot rs (cap a power of two). */
DSV4_HD int64_t cl_prev_ring_row(int64_t rs, int64_t pos, int64_t cap) {
    return (rs & ~(cap - 1)) + ((pos - 1) & (cap - 1));
}

/* The rows request b stores into the ring: the last min(rows, cap) of its chunk, the
 * chunk clamped to [0, num_tokens). Empty when *hi <= *lo. */
DSV4_HD void cl_store_rows(const int32_t *qsl, int64_t b, int64_t num_tokens, int64_t cap, int64_t *lo, int64_t *hi) {
    const int64_t q1 = qsl[b + 1] < num_tokens ? (int64_t)qsl[b + 1] : num_tokens;
    const int64_t q0 = cl_first_row(qsl, b);
    *hi = q1;
    *lo = q1 - cap > q0 ? q1 - cap : q0;
}

#endif /* DSV4_COMPRESS_LATENT_MATH_H */

/*
 * src/prim on the GPU: one-warp mma.sync products against a host matmul (exact on small
 * integers, fp32-accurate on normal data), raw ldmatrix registers against the documented
 * layouts, cp.async zero fill, the fast e4m3 decode on all 65,536 (byte, enc) pairs, and
 * the shared-divisor division against __fdiv_rn.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dsv4/numerics.h"
#include "harness.h"
#include "test_prim.h"

/* fp32 -> fp16 bits, RNE, for the small test values used here (normal range only). */
static uint16_t f16_bits(float f) {
    uint32_t u = dsv4_f32_bits(f), sign = (u >> 16) & 0x8000u;
    if ((u & 0x7FFFFFFFu) == 0) return (uint16_t)sign;
    int e = (int)((u >> 23) & 0xFF) - 127 + 15;
    uint32_t m = u & 0x7FFFFFu, keep = m >> 13, rest = m & 0x1FFFu;
    keep += (rest > 0x1000u) || (rest == 0x1000u && (keep & 1u));
    return (uint16_t)(sign | (((uint32_t)e << 10) + keep));
}
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void run_mma_case(th_ctx_t *t, int bf16, int exact) {
    th_rng_t *r = th_rng(t);
    uint16_t A[256], Bk[128], Bn[128];
    double a[256], b[128];
    for (int i = 0; i < 256; ++i) {
        float v = exact ? (float)th_rng_range(r, -8, 8) : (float)th_rng_normal(r);
        A[i] = bf16 ? dsv4_f32_to_bf16(v) : f16_bits(v);
        a[i] = bf16 ? dsv4_bf16_to_f32(A[i]) : f16_value(A[i]);
    }
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) {
            float v = exact ? (float)th_rng_range(r, -8, 8) : (float)th_rng_normal(r);
            uint16_t h = bf16 ? dsv4_f32_to_bf16(v) : f16_bits(v);
            Bk[k * 8 + n] = h;
            Bn[n * 16 + k] = h;
            b[k * 8 + n] = bf16 ? dsv4_bf16_to_f32(h) : f16_value(h);
        }
    uint16_t *dA, *dBk, *dBn;
    float *dD, D[384];
    TH_CUDA(t, cudaMalloc((void **)&dA, sizeof A));
    TH_CUDA(t, cudaMalloc((void **)&dBk, sizeof Bk));
    TH_CUDA(t, cudaMalloc((void **)&dBn, sizeof Bn));
    TH_CUDA(t, cudaMalloc((void **)&dD, sizeof D));
    TH_CUDA(t, cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemcpy(dBk, Bk, sizeof Bk, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemcpy(dBn, Bn, sizeof Bn, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemset(dD, 0xFF, sizeof D));
    TH_CUDA(t, prim_run_mma(bf16, dA, dBk, dBn, dD));
    TH_CUDA(t, cudaMemcpy(D, dD, sizeof D, cudaMemcpyDeviceToHost));
    double ref[128], got[128];
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
            double s = 0;
            for (int k = 0; k < 16; ++k) s += a[m * 16 + k] * b[k * 8 + n];
            ref[m * 8 + n] = s;
        }
    static const char *variant[3] = {"ldmatrix x4 + x2.trans", "ldmatrix x4 + x2", "hand-built fragments"};
    for (int v = 0; v < 3; ++v) {
        if (exact) {
            for (int i = 0; i < 128; ++i)
                TH_CHECK(t, D[v * 128 + i] == (float)ref[i], "%s %s: D[%d][%d] = %g, expected %g",
                         bf16 ? "bf16" : "fp16", variant[v], i / 8, i % 8, D[v * 128 + i], ref[i]);
        } else {
            th_f32_to_f64(D + v * 128, got, 128);
            /* fp32 accumulation of 16 products: a few ulp of the largest partial sum. */
            th_check_err(t, variant[v], th_err_f64(got, ref, 128), 1e-5, 1e-6);
        }
    }
    cudaFree(dA);
    cudaFree(dBk);
    cudaFree(dBn);
    cudaFree(dD);
}

static void test_mma_bf16_exact(th_ctx_t *t) { run_mma_case(t, 1, 1); }
static void test_mma_bf16_random(th_ctx_t *t) { run_mma_case(t, 1, 0); }
static void test_mma_f16_exact(th_ctx_t *t) { run_mma_case(t, 0, 1); }
static void test_mma_f16_random(th_ctx_t *t) { run_mma_case(t, 0, 0); }

static void test_ldmatrix_layouts(th_ctx_t *t) {
    uint16_t M[256];
    for (int i = 0; i < 256; ++i) M[i] = (uint16_t)(th_rng_u32(th_rng(t)) & 0xFFFF);
    uint16_t *dM;
    uint32_t *dout, out[6 * 128];
    TH_CUDA(t, cudaMalloc((void **)&dM, sizeof M));
    TH_CUDA(t, cudaMalloc((void **)&dout, sizeof out));
    TH_CUDA(t, cudaMemcpy(dM, M, sizeof M, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemset(dout, 0, sizeof out));
    TH_CUDA(t, prim_run_ldmatrix(dM, dout));
    TH_CUDA(t, cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    static const int nmat[6] = {1, 1, 2, 2, 4, 4};
    for (int v = 0; v < 6; ++v) {
        int trans = v & 1;
        for (int lane = 0; lane < 32; ++lane) {
            int g = lane / 4, tq = lane % 4;
            for (int i = 0; i < nmat[v]; ++i) {
                const uint16_t *mi = M + 64 * i;
                uint32_t lo = trans ? mi[(2 * tq) * 8 + g] : mi[g * 8 + 2 * tq];
                uint32_t hi = trans ? mi[(2 * tq + 1) * 8 + g] : mi[g * 8 + 2 * tq + 1];
                uint32_t want = lo | (hi << 16), got = out[v * 128 + lane * 4 + i];
                TH_CHECK(t, got == want, "variant %d lane %d reg %d: 0x%08x, expected 0x%08x", v, lane, i, got, want);
            }
        }
    }
    cudaFree(dM);
    cudaFree(dout);
}

static void test_cp_async_zfill(th_ctx_t *t) {
    uint8_t src[512], out[512];
    for (int i = 0; i < 512; ++i) src[i] = (uint8_t)(th_rng_u32(th_rng(t)) | 1); /* never zero */
    void *dsrc, *ddst;
    TH_CUDA(t, cudaMalloc(&dsrc, 512));
    TH_CUDA(t, cudaMalloc(&ddst, 512));
    TH_CUDA(t, cudaMemcpy(dsrc, src, 512, cudaMemcpyHostToDevice));
    TH_CUDA(t, prim_run_zfill(dsrc, ddst));
    TH_CUDA(t, cudaMemcpy(out, ddst, 512, cudaMemcpyDeviceToHost));
    for (int lane = 0; lane < 32; ++lane) {
        int from = 31 - lane; /* dst[lane] = s[31 - lane] */
        for (int j = 0; j < 16; ++j) {
            uint8_t want = (from & 1) ? 0 : src[from * 16 + j];
            TH_CHECK(t, out[lane * 16 + j] == want, "chunk %d byte %d", from, j);
        }
    }
    cudaFree(dsrc);
    cudaFree(ddst);
}

static void test_fp8_fast_decode_all_pairs(th_ctx_t *t) {
    uint16_t *d, *h = malloc(65536 * sizeof(uint16_t));
    TH_CUDA(t, cudaMalloc((void **)&d, 65536 * sizeof(uint16_t)));
    TH_CUDA(t, cudaMemset(d, 0x5A, 65536 * sizeof(uint16_t)));
    TH_CUDA(t, prim_run_fp8(d));
    TH_CUDA(t, cudaMemcpy(h, d, 65536 * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    int bad = 0, bad_real = 0;
    for (int enc = 0; enc < 256; ++enc)
        for (int b = 0; b < 256; ++b) {
            uint16_t want = dsv4_dequant_e4m3((uint8_t)b, dsv4_ue8m0_to_f32((uint8_t)enc));
            uint16_t got = h[enc * 256 + b];
            int both_nan = (got & 0x7FFF) > 0x7F80 && (want & 0x7FFF) > 0x7F80;
            if (got != want && !both_nan) {
                if (enc >= 1 && enc <= 254) ++bad_real;
                if (bad++ < 8) th_note(t, "byte 0x%02x enc %d: fast 0x%04x exact 0x%04x", b, enc, got, want);
            }
        }
    th_note(t, "%d differences in all 65,536 pairs, %d of them at enc 1..254", bad, bad_real);
    /* The header promises equality for enc 1..254 (NaN codes included). */
    TH_CHECK(t, bad_real == 0, "fast e4m3 decode differs from dsv4_dequant_e4m3 at %d pairs with enc 1..254", bad_real);
    free(h);
    cudaFree(d);
}

/* A float with the given unbiased exponent, a random mantissa (or an edge one) and sign. */
static float div_operand(th_rng_t *r, int exp, int negative_ok) {
    const uint32_t pick = th_rng_u32(r) % 8;
    uint32_t mant = th_rng_u32(r) & 0x7FFFFFu;
    if (pick == 0) mant = 0;         /* a power of two */
    if (pick == 1) mant = 0x7FFFFFu; /* all ones */
    if (pick == 2) mant = 1;         /* one ulp above */
    const uint32_t sign = negative_ok && (th_rng_u32(r) & 1) ? 0x80000000u : 0;
    return dsv4_bits_f32(sign | ((uint32_t)(exp + 127) << 23) | mant);
}

/* prim/div.cuh: the shared-divisor fast path gives the bits of __fdiv_rn inside its
 * window (and the test routes the rest to __fdiv_rn, as callers do). Exponents span
 * [-66, 66], so both sides of both window edges (2^-60, 2^60) are covered; both are
 * also checked against the host's IEEE division. */
static void test_div_shared_divisor(th_ctx_t *t) {
    th_rng_t *r = th_rng(t);
    const int n = 1 << 22;
    float *x = malloc((size_t)n * 4), *d = malloc((size_t)n * 4), *fast = malloc((size_t)n * 4),
          *ref = malloc((size_t)n * 4);
    int in_window = 0;
    for (int i = 0; i < n; ++i) {
        const int band = i % 4; /* 0: anywhere; 1: d near 1; 2: x, d at the window edges; 3: quotient near 1 */
        int ex = (int)(th_rng_u32(r) % 133) - 66, ed = (int)(th_rng_u32(r) % 133) - 66;
        if (band == 1) ed = (int)(th_rng_u32(r) % 3) - 1;
        if (band == 2) {
            const int edges[4] = {-61, -60, 59, 60};
            ex = edges[th_rng_u32(r) % 4];
            ed = edges[th_rng_u32(r) % 4];
        }
        if (band == 3) ed = ex + (int)(th_rng_u32(r) % 3) - 1;
        if (ed < -126 || ed > 127) ed = 0;
        x[i] = div_operand(r, ex, 1);
        d[i] = div_operand(r, ed, 1);
        in_window += ex >= -60 && ex < 60 && ed >= -60 && ed < 60;
    }
    float *dx, *dd, *dfast, *dref;
    TH_CUDA(t, cudaMalloc((void **)&dx, (size_t)n * 4));
    TH_CUDA(t, cudaMalloc((void **)&dd, (size_t)n * 4));
    TH_CUDA(t, cudaMalloc((void **)&dfast, (size_t)n * 4));
    TH_CUDA(t, cudaMalloc((void **)&dref, (size_t)n * 4));
    TH_CUDA(t, cudaMemcpy(dx, x, (size_t)n * 4, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemcpy(dd, d, (size_t)n * 4, cudaMemcpyHostToDevice));
    TH_CUDA(t, cudaMemset(dfast, 0xFF, (size_t)n * 4));
    TH_CUDA(t, cudaMemset(dref, 0xFF, (size_t)n * 4));
    TH_CUDA(t, prim_run_div(dx, dd, dfast, dref, n));
    TH_CUDA(t, cudaMemcpy(fast, dfast, (size_t)n * 4, cudaMemcpyDeviceToHost));
    TH_CUDA(t, cudaMemcpy(ref, dref, (size_t)n * 4, cudaMemcpyDeviceToHost));
    int bad = 0, bad_host = 0;
    for (int i = 0; i < n; ++i) {
        if (dsv4_f32_bits(fast[i]) != dsv4_f32_bits(ref[i]) && bad++ < 8)
            th_note(t, "%.9g / %.9g: fast %.9g (0x%08x), __fdiv_rn %.9g (0x%08x)", x[i], d[i], fast[i],
                    dsv4_f32_bits(fast[i]), ref[i], dsv4_f32_bits(ref[i]));
        const float host = x[i] / d[i];
        if (fabsf(host) >= 0x1p-126f && dsv4_f32_bits(host) != dsv4_f32_bits(ref[i]) && bad_host++ < 4)
            th_note(t, "%.9g / %.9g: __fdiv_rn %.9g, host %.9g", x[i], d[i], ref[i], host);
    }
    th_note(t, "%d of %d pairs inside the window, %d differ from __fdiv_rn, %d normal quotients from the host",
            in_window, n, bad, bad_host);
    TH_CHECK(t, in_window > n / 4, "too few pairs inside the window (%d)", in_window);
    TH_CHECK(t, bad == 0, "shared-divisor division differs from __fdiv_rn at %d pairs", bad);
    TH_CHECK(t, bad_host == 0, "__fdiv_rn differs from the host's IEEE division at %d pairs", bad_host);
    cudaFree(dx);
    cudaFree(dd);
    cudaFree(dfast);
    cudaFree(dref);
    free(x);
    free(d);
    free(fast);
    free(ref);
}

static const th_test_t tests[] = {
    {"prim.mma_bf16_exact", test_mma_bf16_exact, TH_GPU},
    {"prim.mma_bf16_random", test_mma_bf16_random, TH_GPU},
    {"prim.mma_f16_exact", test_mma_f16_exact, TH_GPU},
    {"prim.mma_f16_random", test_mma_f16_random, TH_GPU},
    {"prim.ldmatrix_layouts", test_ldmatrix_layouts, TH_GPU},
    {"prim.cp_async_zfill", test_cp_async_zfill, TH_GPU},
    {"prim.fp8_fast_decode_all_pairs", test_fp8_fast_decode_all_pairs, TH_GPU},
    {"prim.div_shared_divisor", test_div_shared_divisor, TH_GPU},
};

int main(int argc, char **argv) { return th_main(argc, argv, tests, TH_COUNT(tests)); }

/*
 * Kernels that exercise src/prim on one warp, and their launchers. The host side
 * (test_prim.c) builds inputs, runs these and checks the results against host math
 * and against the fragment layouts documented in src/prim/mma.cuh.
 */
#include <cuda_runtime.h>

#include "prim/cp_async.cuh"
#include "prim/div.cuh"
#include "prim/fp8.cuh"
#include "prim/mma.cuh"
#include "test_prim.h"

/* D[0] via ldmatrix x4 (A) + x2.trans (B stored K-major), D[1] via x4 + x2 (B stored
 * N-major), D[2] via fragments built by hand from the documented layout. All three
 * inputs arrive through cp.async. */
template <bool BF16> __global__ void mma_kernel(const uint16_t *A, const uint16_t *Bk, const uint16_t *Bn, float *D) {
    __shared__ __align__(128) uint16_t sA[16 * 16];
    __shared__ __align__(128) uint16_t sBk[16 * 8];
    __shared__ __align__(128) uint16_t sBn[8 * 16];
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    dsv4_cp_async_16(sA + lane * 8, A + lane * 8); /* 32 chunks of 16 B */
    if (lane < 16) dsv4_cp_async_16(sBk + lane * 8, Bk + lane * 8);
    else dsv4_cp_async_16(sBn + (lane - 16) * 8, Bn + (lane - 16) * 8);
    dsv4_cp_async_commit();
    dsv4_cp_async_wait<0>();
    __syncthreads();

    uint32_t a[4], b[2];
    float c[3][4];
    for (int v = 0; v < 3; ++v)
        for (int j = 0; j < 4; ++j) c[v][j] = 0.0f;
    dsv4_ldmatrix_x4(a, sA + (lane % 16) * 16 + 8 * (lane / 16));
    dsv4_ldmatrix_x2_trans(b, sBk + (lane % 16) * 8);
    if (BF16) dsv4_mma_bf16_16816(c[0], a, b, c[0]);
    else dsv4_mma_f16_16816(c[0], a, b, c[0]);
    dsv4_ldmatrix_x2(b, sBn + (lane % 8) * 16 + 8 * ((lane / 8) % 2));
    if (BF16) dsv4_mma_bf16_16816(c[1], a, b, c[1]);
    else dsv4_mma_f16_16816(c[1], a, b, c[1]);

    /* By hand, from the layout comment of mma.cuh. */
    const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int i = 0; i < 4; ++i) a[i] = sA[ar[i] * 16 + ac[i]] | ((uint32_t)sA[ar[i] * 16 + ac[i] + 1] << 16);
    for (int i = 0; i < 2; ++i) {
        int k = 2 * t + 8 * i;
        b[i] = sBk[k * 8 + g] | ((uint32_t)sBk[(k + 1) * 8 + g] << 16);
    }
    if (BF16) dsv4_mma_bf16_16816(c[2], a, b, c[2]);
    else dsv4_mma_f16_16816(c[2], a, b, c[2]);

    for (int v = 0; v < 3; ++v) {
        float *d = D + v * 128;
        d[g * 8 + 2 * t] = c[v][0];
        d[g * 8 + 2 * t + 1] = c[v][1];
        d[(g + 8) * 8 + 2 * t] = c[v][2];
        d[(g + 8) * 8 + 2 * t + 1] = c[v][3];
    }
}

extern "C" int prim_run_mma(int bf16, const uint16_t *A, const uint16_t *Bk, const uint16_t *Bn, float *D) {
    if (bf16) mma_kernel<true><<<1, 32>>>(A, Bk, Bn, D);
    else mma_kernel<false><<<1, 32>>>(A, Bk, Bn, D);
    return (int)cudaGetLastError();
}

/* Raw ldmatrix registers: out[variant][lane][4]. M is 4 matrices of 8 x 8 (row-major,
 * matrix i at M + 64 i). Variants: x1, x1.trans, x2, x2.trans, x4, x4.trans. */
__global__ void ldmatrix_kernel(const uint16_t *M, uint32_t *out) {
    __shared__ __align__(128) uint16_t s[256];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) s[i] = M[i];
    __syncthreads();
    const uint16_t *row = s + lane * 8; /* lane l addresses row l % 8 of matrix l / 8 */
    uint32_t r[4] = {0, 0, 0, 0};
    uint32_t *o = out + lane * 4;
    dsv4_ldmatrix_x1(r, row);
    o[0 * 128 + 0] = r[0];
    dsv4_ldmatrix_x1_trans(r, row);
    o[1 * 128 + 0] = r[0];
    dsv4_ldmatrix_x2(r, row);
    o[2 * 128 + 0] = r[0], o[2 * 128 + 1] = r[1];
    dsv4_ldmatrix_x2_trans(r, row);
    o[3 * 128 + 0] = r[0], o[3 * 128 + 1] = r[1];
    dsv4_ldmatrix_x4(r, row);
    for (int i = 0; i < 4; ++i) o[4 * 128 + i] = r[i];
    dsv4_ldmatrix_x4_trans(r, row);
    for (int i = 0; i < 4; ++i) o[5 * 128 + i] = r[i];
}

extern "C" int prim_run_ldmatrix(const uint16_t *M, uint32_t *out) {
    ldmatrix_kernel<<<1, 32>>>(M, out);
    return (int)cudaGetLastError();
}

/* cp.async with zero fill: lanes with odd index copy nothing and must get zeros. The L2
 * prefetch before it is only a hint: the data must arrive unchanged. */
__global__ void zfill_kernel(const uint4 *src, uint4 *dst) {
    __shared__ uint4 s[32];
    const int lane = threadIdx.x;
    dsv4_prefetch_l2(&src[lane]);
    dsv4_cp_async_16_zfill(&s[lane], &src[lane], (lane & 1) == 0);
    dsv4_cp_async_commit();
    dsv4_cp_async_wait<0>();
    __syncthreads();
    dst[lane] = s[31 - lane];
}

extern "C" int prim_run_zfill(const void *src, void *dst) {
    zfill_kernel<<<1, 32>>>((const uint4 *)src, (uint4 *)dst);
    return (int)cudaGetLastError();
}

/* Fast e4m3 dequantization for every (byte, enc): out[enc * 256 + byte]. */
__global__ void fp8_kernel(uint16_t *out) {
    const uint32_t enc = blockIdx.x, q = threadIdx.x; /* 64 quads of bytes */
    uint32_t w = (4 * q) | ((4 * q + 1) << 8) | ((4 * q + 2) << 16) | ((4 * q + 3) << 24);
    uint32_t v[2];
    dsv4_e4m3x4_dequant_bf16(w, dsv4_ue8m0_bf16x2(enc), v);
    uint16_t *o = out + enc * 256 + 4 * q;
    o[0] = (uint16_t)v[0], o[1] = (uint16_t)(v[0] >> 16), o[2] = (uint16_t)v[1], o[3] = (uint16_t)(v[1] >> 16);
}

extern "C" int prim_run_fp8(uint16_t *out) {
    fp8_kernel<<<256, 64>>>(out);
    return (int)cudaGetLastError();
}

/* dsv4_div_fast (inside the window) or __fdiv_rn, and __fdiv_rn alone, for n pairs. */
__global__ void div_kernel(const float *x, const float *d, float *fast, float *ref, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const dsv4_divisor v = dsv4_divisor_make(d[i]);
    fast[i] = dsv4_div_in_window(x[i]) && dsv4_div_in_window(d[i]) ? dsv4_div_fast(x[i], v) : __fdiv_rn(x[i], d[i]);
    ref[i] = __fdiv_rn(x[i], d[i]);
}

extern "C" int prim_run_div(const float *x, const float *d, float *fast, float *ref, int n) {
    div_kernel<<<(n + 255) / 256, 256>>>(x, d, fast, ref, n);
    return (int)cudaGetLastError();
}

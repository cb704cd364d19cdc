// How long is one Sinkhorn pass of the mHC gates (include/dsv4/mhc.h) in one warp, and do
// other lane layouts with the same operations in the same order run it faster?
//   A  the library's mhc_sinkhorn_lane: lane e holds C[j][k] (e = 4j + k); every pass
//      gathers its row (column) by 4 width-16 shuffles, sums in index order, divides once.
//   B  lane e holds column k = e & 3 (4 values): the column pass is local (4 divisions by
//      one sum); the row pass gathers all 16 values (16 shuffles) and divides 4 values.
//   C  every lane holds all 16 values: no shuffles after the first gather, 16 divisions
//      per pass.
// Each warp runs N tokens back to back, each token's logits depending on the previous
// result, and reports clock cycles per token; every variant's comb is compared bit for
// bit with A over 2^20 random tokens (model-like logits and wide ones). docs/mhc.md has
// the result: B and C are bit-equal to A and slower, so A stays in the library.
// Build: cmake -DDSV4_BUILD_TOOLS=ON (target sinkhorn_probe), or
// nvcc -O3 -arch=sm_90 -Iinclude -Isrc tools/sinkhorn_probe.cu
#include <cstdio>
#include <cstdint>
#include <cstring>

#include "mhc/mhc_device.cuh"

static __device__ float sk_col(float L, int e, float eps, int iters) {
    const int j = e >> 2, k = e & 3;
    const float c0 = mhc_sinkhorn_softmax(L, e, eps);
    float col[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) col[i] = __shfl_sync(MHC_FULL_MASK, c0, 4 * i + k, 16);
    for (int it = 0; it < iters; ++it) {
        if (it > 0) { /* row pass: C[i][kk] from lane kk (column kk) */
            float m[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) m[i][kk] = __shfl_sync(MHC_FULL_MASK, col[i], kk, 16);
#pragma unroll
            for (int i = 0; i < 4; ++i)
                col[i] = __fdiv_rn(col[i], __fadd_rn(mhc_sum4(m[i][0], m[i][1], m[i][2], m[i][3]), eps));
        }
        const float d = __fadd_rn(mhc_sum4(col[0], col[1], col[2], col[3]), eps);
#pragma unroll
        for (int i = 0; i < 4; ++i) col[i] = __fdiv_rn(col[i], d);
    }
    return j == 0 ? col[0] : j == 1 ? col[1] : j == 2 ? col[2] : col[3];
}

static __device__ float sk_full(float L, int e, float eps, int iters) {
    const float c0 = mhc_sinkhorn_softmax(L, e, eps);
    float m[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) m[i] = __shfl_sync(MHC_FULL_MASK, c0, i, 16);
    for (int it = 0; it < iters; ++it) {
        if (it > 0)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float d = __fadd_rn(mhc_sum4(m[4 * j], m[4 * j + 1], m[4 * j + 2], m[4 * j + 3]), eps);
#pragma unroll
                for (int k = 0; k < 4; ++k) m[4 * j + k] = __fdiv_rn(m[4 * j + k], d);
            }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float d = __fadd_rn(mhc_sum4(m[k], m[4 + k], m[8 + k], m[12 + k]), eps);
#pragma unroll
            for (int j = 0; j < 4; ++j) m[4 * j + k] = __fdiv_rn(m[4 * j + k], d);
        }
    }
    float r = m[0];
#pragma unroll
    for (int i = 1; i < 16; ++i) r = e == i ? m[i] : r;
    return r;
}

template <int V> static __device__ float sk(float L, int e, float eps, int iters) {
    if (V == 0) return mhc_sinkhorn_lane(L, e, eps, iters);
    if (V == 1) return sk_col(L, e, eps, iters);
    return sk_full(L, e, eps, iters);
}

/* warp w of the grid: tokens w, w + W, ...; chained: each token's logits get + 0 * the
 * previous result, so the tokens run back to back and the clock measures the chain */
template <int V> __global__ void run(const float *L, float *out, long long n, int chained, long long *cyc) {
    const int lane = threadIdx.x & 31, e = lane & 15;
    const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5, W = gridDim.x * (blockDim.x >> 5);
    float prev = 0.0f;
    const long long t0 = clock64();
    for (long long t = w; t < n; t += W) {
        float l = L[16 * t + e];
        if (chained) l = __fadd_rn(l, __fmul_rn(prev, 0.0f));
        prev = sk<V>(l, e, 1e-6f, 20);
        if (lane < 16) out[16 * t + e] = prev;
    }
    const long long t1 = clock64();
    if (lane == 0) cyc[w] = t1 - t0;
}

static uint32_t rng = 12345u;
static float urand() {
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) * (1.0f / 16777216.0f);
}

template <int V>
static void variant(const char *name, const float *dL, float *dout, float *hout, const float *ref, long long n,
                    long long *dcyc) {
    /* timing: one warp on one SM, 256 chained tokens */
    long long cyc = 0;
    run<V><<<1, 32>>>(dL, dout, 256, 1, dcyc);
    run<V><<<1, 32>>>(dL, dout, 256, 1, dcyc);
    cudaMemcpy(&cyc, dcyc, 8, cudaMemcpyDeviceToHost);
    /* 4 warps per SM (one per scheduler), as the gates epilogue's gate CTA */
    long long c4[132 * 4];
    run<V><<<132, 128>>>(dL, dout, 132 * 4 * 64, 1, dcyc);
    cudaMemcpy(c4, dcyc, sizeof c4, cudaMemcpyDeviceToHost);
    long long mx = 0;
    for (int i = 0; i < 132 * 4; ++i) mx = c4[i] > mx ? c4[i] : mx;
    /* bits over all tokens */
    run<V><<<264, 256>>>(dL, dout, n, 0, dcyc);
    cudaMemcpy(hout, dout, n * 16 * 4, cudaMemcpyDeviceToHost);
    long long diff = 0;
    if (ref)
        for (long long i = 0; i < n * 16; ++i) diff += memcmp(&hout[i], &ref[i], 4) != 0;
    printf(
        "%-34s %7.1f cycles/token alone (%5.1f per pass), %7.1f with 4 warps per SM; %lld of %lld values differ from A "
        "(%s)\n",
        name, cyc / 256.0, cyc / 256.0 / 40.0, mx / 64.0, diff, n * 16, cudaGetErrorString(cudaGetLastError()));
}

int main() {
    const long long n = 1 << 20;
    float *hL = new float[n * 16], *ref = new float[n * 16], *hout = new float[n * 16];
    for (long long t = 0; t < n; ++t) {
        const int kind = t % 8; /* 0-5 model-like: N(0,1)-ish * [0.5,1.5] + base; 6 wide; 7 huge */
        const float sc = kind < 6 ? 0.5f + urand() : (kind == 6 ? 20.0f : 200.0f);
        for (int i = 0; i < 16; ++i) {
            const float g = (urand() + urand() + urand() + urand() - 2.0f) * 1.7f;
            hL[16 * t + i] = g * sc + (urand() - 0.5f);
        }
    }
    float *dL, *dout;
    long long *dcyc;
    cudaMalloc(&dL, n * 64);
    cudaMalloc(&dout, n * 64);
    cudaMalloc(&dcyc, 264 * 8 * 8);
    cudaMemcpy(dL, hL, n * 64, cudaMemcpyHostToDevice);
    printf("seed 12345, %lld tokens (2 of 8 with wide logits), eps 1e-6, 20 iterations\n", n);
    variant<0>("A lane = element (library)", dL, dout, ref, nullptr, n, dcyc);
    variant<1>("B lane = column", dL, dout, hout, ref, n, dcyc);
    variant<2>("C lane = whole matrix", dL, dout, hout, ref, n, dcyc);
    return 0;
}

// How fast can a pass shaped like the mHC seam's projection pass stream the seam's counted bytes at T = 512,
// H = 5120 (R and x read, R_new and yb written: 52.4 MB), with no mma and a few integer
// operations per value? Event-timed like dsv4_bench, L2 flushed (256 MB memset) before
// each of 40 reps. A: the projection pass's shape (32-token blocks, 8 threads per token row, 16 bytes per
// stream, the next chunk's loads issued before this chunk's stores). B: 4x the bytes per
// thread (128-token blocks, 2 tokens x 32 bytes of each stream). Also times a plain copy
// of the same bytes. docs/mhc.md uses it to bound the seam at T = 512.
// Build: cmake -DDSV4_BUILD_TOOLS=ON (target seam_stream_probe), or nvcc -O3 -arch=sm_90
// tools/seam_stream_probe.cu.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#define T 512
#define H 5120
__device__ __forceinline__ uint4 mix(uint4 a, uint4 b) {
    return make_uint4(a.x + b.x, a.y ^ b.y, a.z + b.z, a.w ^ b.w);
}
// A: grid (T/32, S), 256 thr; chunk = 64 channels of each stream; CTA does 80/S chunks.
__global__ void __launch_bounds__(256, 2) kA(const uint4 *R, const uint4 *x, uint4 *Rn, uint4 *yb, int S) {
    const int row = threadIdx.x / 8, grp = threadIdx.x % 8, t = blockIdx.x * 32 + row;
    const int cps = 80 / S, c0 = blockIdx.y * cps;
    uint4 r[4], xv;
    auto ld = [&](int c) {
        const int v = c * 8 + grp; /* vector index in a 5120-channel row (640 vectors) */
        for (int s = 0; s < 4; ++s) r[s] = R[((size_t)t * 4 + s) * 640 + v];
        xv = x[(size_t)t * 640 + v];
    };
    ld(c0);
    for (int c = c0; c < c0 + cps; ++c) {
        uint4 o[4], y = xv;
        for (int s = 0; s < 4; ++s) {
            o[s] = mix(r[s], xv);
            y = mix(y, o[s]);
        }
        if (c + 1 < c0 + cps) ld(c + 1);
        const int v = c * 8 + grp;
        for (int s = 0; s < 4; ++s) Rn[((size_t)t * 4 + s) * 640 + v] = o[s];
        yb[(size_t)t * 640 + v] = y;
    }
}
// B: grid (T/128, S), 256 thr = 8 warps x 16 tokens; thread (g, tq): tokens g, g+8 of its warp,
// 32 B (2 vectors) of each stream at channel offset 16 tq of the 64-channel chunk.
__global__ void __launch_bounds__(256, 2) kB(const uint4 *R, const uint4 *x, uint4 *Rn, uint4 *yb, int S) {
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    const int cps = 80 / S, c0 = blockIdx.y * cps;
    for (int c = c0; c < c0 + cps; ++c) {
        uint4 r[2][4][2], xv[2][2];
        for (int h = 0; h < 2; ++h) {
            const int t = blockIdx.x * 128 + w * 16 + g + 8 * h, v = c * 8 + tq * 2;
            for (int s = 0; s < 4; ++s)
                for (int q = 0; q < 2; ++q) r[h][s][q] = R[((size_t)t * 4 + s) * 640 + v + q];
            for (int q = 0; q < 2; ++q) xv[h][q] = x[(size_t)t * 640 + v + q];
        }
        for (int h = 0; h < 2; ++h) {
            const int t = blockIdx.x * 128 + w * 16 + g + 8 * h, v = c * 8 + tq * 2;
            for (int q = 0; q < 2; ++q) {
                uint4 y = xv[h][q];
                for (int s = 0; s < 4; ++s) {
                    const uint4 o = mix(r[h][s][q], xv[h][q]);
                    y = mix(y, o);
                    Rn[((size_t)t * 4 + s) * 640 + v + q] = o;
                }
                yb[(size_t)t * 640 + v + q] = y;
            }
        }
    }
}
__global__ void kcopy(const uint4 *a, uint4 *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = a[i];
}
int main() {
    const size_t nR = (size_t)T * 4 * H / 8, nx = (size_t)T * H / 8;
    uint4 *R, *x, *Rn, *yb;
    char *fl;
    cudaMalloc(&R, nR * 16);
    cudaMalloc(&x, nx * 16);
    cudaMalloc(&Rn, nR * 16);
    cudaMalloc(&yb, nx * 16);
    cudaMalloc(&fl, 256 << 20);
    cudaMemset(R, 1, nR * 16);
    cudaMemset(x, 2, nx * 16);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const double bytes = (nR + nx) * 32.0;
    auto time = [&](const char *name, auto launch) {
        float us[40];
        int n = 0;
        for (int rep = 0; rep < 40; ++rep) {
            cudaMemset(fl, rep, 256 << 20);
            cudaEventRecord(e0);
            launch();
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            us[n++] = ms * 1000;
        }
        std::sort(us, us + n);
        printf("%-34s median %7.2f us  p10 %7.2f  -> %6.0f GB/s (%.1f MB)\n", name, us[n / 2], us[n / 10],
               bytes / us[n / 2] / 1e3, bytes / 1e6);
    };
    time("empty launch", [&] { kcopy<<<1, 32>>>(R, Rn, 0); });
    time("copy same bytes (R+x -> Rn+yb)", [&] {
        kcopy<<<132 * 8, 256>>>(R, Rn, nR);
        kcopy<<<132 * 8, 256>>>(x, yb, nx);
    });
    for (int S : {8, 16, 20}) {
        char nm[64];
        snprintf(nm, 64, "A projection-pass-like S=%d (%d CTAs)", S, T / 32 * S);
        time(nm, [&] { kA<<<dim3(T / 32, S), 256>>>(R, x, Rn, yb, S); });
    }
    for (int S : {16, 40, 80}) {
        char nm[64];
        snprintf(nm, 64, "B 4x per thread S=%d (%d CTAs)", S, T / 128 * S);
        time(nm, [&] { kB<<<dim3(T / 128, S), 256>>>(R, x, Rn, yb, S); });
    }
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}

/*
 * The CTA-level half of norm512 for the compress kernels: 128 threads, thread i holding
 * dims 4i .. 4i + 3 of a row, turn their partial sums into rr, each thread ending with
 * the halving tree's bits (latent_math.h's cl_row_rms_inv is the same tree as a loop).
 * One barrier: after it every warp forms (p_l + p_(l+64)) + (p_(l+32) + p_(l+96)) for
 * its lane l (tree steps +64, +32) and finishes with xor shuffles 16, 8, 4, 2, 1 (steps
 * +16 .. +1); a sum of two values is the same in either order, so every lane of the
 * butterfly holds the tree's value and no second barrier is needed.
 */
#ifndef DSV4_COMPRESS_LATENT_BLOCK_CUH
#define DSV4_COMPRESS_LATENT_BLOCK_CUH

#include "compress/latent_math.h"

/* part: CL_PARTIALS floats of shared memory, not read again by the caller. Every thread
 * of the CTA calls it (it holds a barrier); the 128 with `active` set hold the row, the
 * others (i >= 128) only take part in the barrier and get the same rr. */
static __device__ __forceinline__ float cl_block_rms_inv(float *part, int i, bool active, float4 x, float eps) {
    if (active) part[i] = cl_partial4(x.x, x.y, x.z, x.w);
    __syncthreads();
    const int lane = i & 31;
    float s = CL_FADD(CL_FADD(part[lane], part[lane + 64]), CL_FADD(part[lane + 32], part[lane + 96]));
#pragma unroll
    for (int k = 16; k >= 1; k >>= 1) s = CL_FADD(s, __shfl_xor_sync(0xFFFFFFFFu, s, k));
    return cl_rms_inv(s, eps);
}

#endif /* DSV4_COMPRESS_LATENT_BLOCK_CUH */

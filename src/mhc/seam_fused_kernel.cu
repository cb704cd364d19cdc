/*
 * The V4.1 seam on the tensor-core route in ONE launch (T <= MHC_TC_FUSED_MAX_TOKENS):
 * the same outputs as K1 + K2 (proj_tc.cuh, epilogue.cuh), without K1's per-chunk
 * DRAM round trips on the projection's path and without K2's second pass over the layer
 * input.
 *
 * Why. At T = 512, K1 streams the residual through 2 CTAs per SM of 128 registers, one
 * chunk's loads in flight at a time (~20 us for 52 MB), and K2 (gates + the norm pass,
 * ~7 us) follows after a launch boundary. Here the DRAM traffic is done by row CTAs that
 * each own one token's whole row, so the RMSNorm needs no cross-CTA sum and the layer
 * input is written once; the projection reads the rows they stored back from L2 (32 x 40
 * KB per token block) while later row CTAs stream.
 *
 * Grid: one dimension, 256 threads, in this order (nblk = ceil(T / 32) token blocks,
 * S = the plan's split count, LAG = MHC_TC_FUSED_LAG):
 *   segments j = 0 .. nblk + LAG - 1 of 32 + S CTAs:
 *     32 row CTAs of block j (j < nblk; CTAs past T exit): mhc_row_token, the small-T
 *       kernel's V4.1 row CTA (R_new stored, collapse with the incoming pre-mix, aux,
 *       RMSNorm), then the token's row flag;
 *     S projection CTAs of block j - LAG (when it exists): wait for the block's row
 *       flags, then K1's CTA in RES mode over R_new (tc_proj_cta<RES, 0, FUSED>: L2
 *       loads), its partials (raw, sq), then one flag per gate CTA of the block;
 *   ceil(T / 4) gate CTAs: wait for their S flags, reset them and the row flags of their
 *     4 tokens, then K2's gate warps (mhc_gate_warps, L2 loads only).
 * Every wait is on CTAs with lower block indices, dispatched before the waiter
 * (prim/grid_flag.cuh), so the grid cannot deadlock; every flag is reset by the one CTA
 * that reads it last (a row flag by its gate CTA, which has seen every projection CTA of
 * the block finish waiting on it), so each call leaves the flags at 0.
 *
 * Numerics. R_new, aux and the un-normed collapse are the shared per-channel functions
 * (bit-exact with the standalone ops and with K1 + K2). The projection multiplies the same
 * bf16 rows in the same chunk and k-step order as K1 in POST mode, and the gate warps are
 * K2's: mix, gates and Sinkhorn have K1 + K2's bits. The layer input's sum of squares is
 * the row CTA's block tree (as on the small-T route) instead of K1's split partials: within
 * one bf16 ulp of either.
 *
 * Shared memory: one pool of K1's tiles (MHC_TC_SMEM_BYTES), which a row CTA uses for its
 * collapse row (2H bytes) and reductions and a gate CTA for its staged partials.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "mhc/epilogue.cuh"
#include "mhc/proj_tc.cuh"
#include "prim/grid_flag.cuh"

namespace {

constexpr int LAG = MHC_TC_FUSED_LAG, GPB = BM / MHC_EPI_TPC; /* gate CTAs per token block */
static_assert(BM % MHC_EPI_TPC == 0, "a gate CTA's tokens lie in one token block");
static_assert(256 + 2 * MHC_MAX_HIDDEN <= MHC_TC_SMEM_BYTES, "a row CTA's collapse row fits in the pool");
static_assert(MHC_EPI_SPLIT_SMEM(MHC_TC_MAX_SPLIT) <= MHC_TC_SMEM_BYTES, "a gate CTA's staging fits in the pool");
static_assert(MHC_TC_MAX_SPLIT <= NTHR && BM <= NTHR, "one waiting thread per flag");

/* Until every thread's flag (mine: it has one) reads set; then the results behind them
 * may be read with L2 loads. */
__device__ __forceinline__ void fused_wait(const unsigned *flag, bool mine) {
    bool done = !mine;
    while (!__syncthreads_and(done))
        if (!done) done = dsv4_grid_flag_is_set(flag);
    __threadfence();
}

} // namespace

__global__ void __launch_bounds__(MHC_TC_THREADS, MHC_TC_MIN_CTAS) mhc_seam_fused_kernel(const mhc_pipe_t p) {
    __shared__ __align__(16) unsigned char pool[MHC_TC_SMEM_BYTES];
    const int64_t T = p.T, S = p.plan.splits, nblk = (T + BM - 1) / BM, seg = BM + S, b = blockIdx.x;
    const int tid = threadIdx.x;
    unsigned *row_flag = p.flags, *gate_flag = p.flags + T;
    if (b < (nblk + LAG) * seg) {
        const int64_t j = b / seg, r = b % seg;
        if (r < BM) { /* row CTA */
            const int64_t t = j * BM + r;
            if (j >= nblk || t >= T) return;
            mhc_row_token<MHC_PROD_POST>(p, t, reinterpret_cast<uint4 *>(pool + 256), reinterpret_cast<float *>(pool));
            dsv4_grid_flag_publish(row_flag + t, tid == 0);
            return;
        }
        const int64_t pb = j - LAG, split = r - BM; /* projection CTA */
        if (pb < 0 || pb >= nblk) return;
        const int64_t rows = T - pb * BM < BM ? T - pb * BM : BM;
        fused_wait(row_flag + pb * BM + tid, tid < rows);
        uint16_t *sA = reinterpret_cast<uint16_t *>(pool), *sB = sA + BM * LDS;
        tc_proj_cta<MHC_PROD_RES, 0, true>(p, (unsigned)pb, split, sA, sB,
                                           reinterpret_cast<float(*)[MHC_TC_COEF_PITCH]>(sB + 48 * LDS));
        const int64_t gates = (rows + MHC_EPI_TPC - 1) / MHC_EPI_TPC;
        dsv4_grid_flag_publish(gate_flag + (pb * GPB + tid) * S + split, tid < gates);
        return;
    }
    const int64_t g = b - (nblk + LAG) * seg, t0 = g * MHC_EPI_TPC; /* gate CTA */
    fused_wait(gate_flag + g * S + tid, tid < S);
    if (tid < S) gate_flag[g * S + tid] = 0u;
    if (tid < MHC_EPI_TPC && t0 + tid < T) row_flag[t0 + tid] = 0u;
    if (tid < MHC_EPI_THREADS) mhc_gate_warps<true>(p, t0, reinterpret_cast<float *>(pool));
}

extern "C" int mhc_seam_fused(const mhc_pipe_t *p) {
    return p->plan.route == DSV4_MHC_ROUTE_TENSOR_CORE && p->prod == MHC_PROD_POST && p->epi == MHC_EPI_DELAYED &&
           p->T <= MHC_TC_FUSED_MAX_TOKENS;
}

extern "C" dsv4_status_t mhc_launch_seam_fused(const mhc_pipe_t *p, dsv4_stream_t stream) {
    static const char *op = "mhc_seam_fused";
    static int smem_cache;
    if (p->plan.splits < 1 || p->plan.splits > MHC_TC_MAX_SPLIT || (p->H / (KC / 4)) % p->plan.splits != 0)
        return dsv4_fail(DSV4_STATUS_INTERNAL, op, "split count %d does not divide %lld chunks",
                         (int)p->plan.splits, (long long)(p->H / (KC / 4)));
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mhc_seam_fused_kernel, 0, &smem_cache));
    const int64_t T = p->T, nblk = (T + BM - 1) / BM;
    const int64_t ctas = (nblk + LAG) * (BM + p->plan.splits) + (T + MHC_EPI_TPC - 1) / MHC_EPI_TPC;
    mhc_seam_fused_kernel<<<(unsigned)ctas, MHC_TC_THREADS, 0, (cudaStream_t)stream>>>(*p);
    return dsv4_launch_status(op);
}

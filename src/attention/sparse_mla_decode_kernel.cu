/*
 * Sparse MLA decode kernels: the attention CTA reading paged fp8_ds_mla caches (on the
 * engine of mla_tile.cuh, which documents the formula, decomposition and pipeline), and
 * the split merge.
 *
 * Producer (fp8 records, spec/kv-cache.md sections 2-3): per key, slot -> page, pos;
 * data = page + pos*576 (448 e4m3 + 64 bf16 = 36 chunks of 16 B), scales = the 16-byte
 * aligned chunk page + P*576 + (pos & ~1)*8, which holds this slot's 8 scale bytes in
 * half (pos & 1) (in bounds: the page is >= P*584 bytes and a multiple of 16). 37
 * cp.async chunks per row into a double-buffered raw stage (2 x 16 x 592 B); invalid
 * slots (outside [0, num_pages*P) of their own cache, padding, past the split) are
 * zero-filled and flagged. Rows PF tiles ahead are prefetched into L2 (the 5 lines of
 * the record and its scale line): the slots are random, so nearly every record is a
 * DRAM read. After the tile lands, one pass dequantizes it into the bf16 K tile, once
 * per CTA for all HC heads: per 16 codes one UE8M0 scale decoded by shift (prim/fp8.cuh,
 * exact); NaN lanes (codes 0x7F/0xFF, NaN RoPE values, 0 * inf at enc 255) read as 0 as
 * upstream (NaN codes are zeroed before decoding, the rest scrubbed only where they can
 * occur). Grid: T * S * H/HC CTAs.
 *
 * Merge (spec/sparse-mla.md section 5): one CTA of 128 threads per (token, head), 4
 * dims per thread; the S (m, l) pairs go through shared memory, the acc rows are read
 * 8 splits at a time (unrolled, so the loads overlap) and summed in split order; the
 * sink is added exactly once, through the same functions as the direct path
 * (mla_softmax.cuh). static_assert: S <= 32 <= 128 threads.
 */
#include <cuda_runtime.h>

#include "attention/mla_tile.cuh"
#include "common/error.h"
#include "dsv4/numerics.h"
#include "prim/fp8.cuh"

/* bf16 pairs whose lane is NaN -> +0 (upstream's tl.where(isnan(k), 0, k)). */
static __device__ __forceinline__ uint32_t mla_scrub_nan(uint32_t v) {
    return v & ~__vcmpgtu2(v & 0x7FFF7FFFu, 0x7F807F80u);
}

/* The e4m3 NaN codes 0x7F / 0xFF of a word of four -> 0x00, which dequantizes to +0:
 * the bits upstream's NaN scrub gives, at a third of prim/fp8.cuh's NaN patch + scrub.
 * y = ~b & 0x7F is 0 exactly for those bytes, and y + 0x7F sets bit 7 exactly when
 * y != 0 (no carry leaves a byte: y <= 0x7F). */
static __device__ __forceinline__ uint32_t mla_zero_nan_codes(uint32_t w) {
    const uint32_t y = ~w & 0x7F7F7F7Fu;
    const uint32_t nan = ~(y + 0x7F7F7F7Fu) & 0x80808080u; /* bit 7 of each NaN byte */
    return w & ~((nan >> 7) * 0xFFu);
}

struct MlaDecodeProd {
    static constexpr int PREFETCH_TILES = MLA_PREFETCH_TILES_DECODE;
    template <class C> struct SmemT {
        uint16_t k[MLA_N][MLA_KSTR];
        uint8_t raw[2][MLA_N][MLA_RAW_ROW];
        MlaSmemCommon<C> c;
    };

    /* Where a valid job's record lives: its 576 data bytes, its scale chunk, and which
     * half of the chunk holds its 8 scale bytes. */
    struct Rec {
        const uint8_t *data, *scales;
        int half;
    };
    static __device__ __forceinline__ Rec record(const mla_params_t &p, const MlaRowJob &r) {
        const mla_list_params_t &L = p.list[r.list];
        /* 32-bit division: ids are non-negative int32 and P <= 2^20 (checked on the host). */
        const uint32_t P = (uint32_t)L.page_tokens, page = (uint32_t)r.id / P, pos = (uint32_t)r.id - page * P;
        const uint8_t *base = L.base + (int64_t)page * L.row_bytes;
        Rec rec;
        rec.data = base + pos * 576u;
        rec.scales = base + P * 576u + (pos & ~1u) * 8u;
        rec.half = (int)(pos & 1u);
        return rec;
    }

    template <class C>
    static __device__ __forceinline__ void issue(const mla_params_t &p, const MlaRowJob &r, int buf, SmemT<C> &sm) {
        Rec rec = {p.list[r.list].base, p.list[r.list].base, 0}; /* zero-fill source: mapped, never read */
        if (r.valid) rec = record(p, r);
#pragma unroll
        for (int c = r.part; c < 37; c += C::TPR) {
            const uint8_t *src = c < 36 ? rec.data + 16 * c : rec.scales;
            dsv4_cp_async_16_zfill(&sm.raw[buf][r.row][16 * c], src, r.valid);
        }
        if (r.part == 0) sm.c.meta[buf][r.row] = (r.valid ? 1 : 0) | (rec.half << 1);
    }

    /* The record's lines into L2: data at pos*576 (64-byte aligned) spans at most 5
     * lines of 128 B, plus the scale line; one thread per line. */
    template <class C> static __device__ __forceinline__ void prefetch(const mla_params_t &p, const MlaRowJob &r) {
        static_assert(C::TPR >= 6, "one producer thread per record line");
        if (!r.valid || r.part > 5) return;
        const Rec rec = record(p, r);
        dsv4_prefetch_l2(r.part < 5 ? rec.data + 128 * r.part : rec.scales);
    }

    /* Dequantize raw[buf] into the bf16 tile; a barrier makes it visible to all warps.
     * The tile's 16 x 28 NoPE chunks (16 codes each) and 16 x 8 RoPE chunks (8 bf16 each)
     * are two flat job lists walked with stride THREADS: 448 and 128 are multiples of 32,
     * so every warp takes the same kind of job in each step (no divergent NoPE / RoPE
     * paths, which the per-row walk of v1-v4 executed both of in most warps). */
    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf) {
#pragma unroll 1 /* a rolled loop keeps the 8-warp config within 128 registers */
        for (int j = threadIdx.x; j < MLA_N * 28; j += C::THREADS) {
            const int row = j / 28, c = j - row * 28; /* 16 codes of dims 16c .. 16c+15 */
            const uint8_t *raw = sm.raw[buf][row];
            const uint4 v = *(const uint4 *)(raw + 16 * c);
            const uint32_t enc = raw[576 + ((sm.c.meta[buf][row] >> 1) & 1) * 8 + (c >> 2)];
            const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
            uint32_t d[8];
#pragma unroll
            for (int k = 0; k < 4; ++k) dsv4_e4m3x4_raw_bf16(mla_zero_nan_codes(w4[k]), d + 2 * k);
            /* The raw codes are the values times 2^-120. Fast path: one multiply by
             * 2^(enc-7), a normal bf16 for 1 <= enc <= 134 (every scale the writer makes for
             * amax <= 448 * 2^7). Otherwise by 2^120, then by the scale. Both round the
             * same exact product once: equal bits. The branch is warp-uniform so the rare
             * path costs nothing when no lane takes it (as a predicated path it did). */
            if (!__any_sync(0xffffffffu, enc - 1u >= 134u)) {
                const uint32_t s1 = dsv4_ue8m0_bf16x2(enc + 120u);
#pragma unroll
                for (int i = 0; i < 8; ++i) d[i] = dsv4_bf16x2_mul(d[i], s1);
            } else {
                const uint32_t sb = dsv4_ue8m0_bf16x2(enc);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    d[i] = dsv4_bf16x2_mul(dsv4_bf16x2_mul(d[i], DSV4_BF16X2_2POW120), sb);
                    /* exact and finite below enc 255; at 255 (scale +inf) a zero code
                     * gives 0 * inf = NaN, read as 0 like upstream */
                    if (enc == 255) d[i] = mla_scrub_nan(d[i]);
                }
            }
            uint16_t *dst = sm.k[row] + 16 * c;
            *(uint4 *)dst = make_uint4(d[0], d[1], d[2], d[3]);
            *(uint4 *)(dst + 8) = make_uint4(d[4], d[5], d[6], d[7]);
        }
#pragma unroll 1
        for (int j = threadIdx.x; j < MLA_N * 8; j += C::THREADS) { /* 8 RoPE bf16 of dims 448 + 8c .. */
            const int row = j >> 3, c = j & 7;
            const uint4 v = *(const uint4 *)(sm.raw[buf][row] + 448 + 16 * c);
            *(uint4 *)(sm.k[row] + 448 + 8 * c) =
                make_uint4(mla_scrub_nan(v.x), mla_scrub_nan(v.y), mla_scrub_nan(v.z), mla_scrub_nan(v.w));
        }
        __syncthreads();
        return &sm.k[0][0];
    }
};

template <class C> struct MlaDecodeBind : MlaDecodeProd {
    typedef SmemT<C> Smem;
};

extern "C" dsv4_status_t mla_launch_decode(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaDecodeBind>("sparse_mla_decode", config, p, ctas, stream);
}

/* ---- merge -------------------------------------------------------------------------- */
#define MLA_MERGE_THREADS 128
static_assert(DSV4_MLA_MAX_SPLITS <= MLA_MERGE_THREADS, "one thread per split loads (m, l)");

__global__ void __launch_bounds__(MLA_MERGE_THREADS) mla_merge_kernel(mla_params_t p) {
    __shared__ float sm_m[DSV4_MLA_MAX_SPLITS], sm_l[DSV4_MLA_MAX_SPLITS];
    const int H = p.num_heads, S = p.num_splits;
    const int t = (int)blockIdx.x / H, h = (int)blockIdx.x % H;
    const int64_t row0 = (int64_t)t * S * H + h; /* [t, s = 0, h]; split stride H */
    /* The S (m, l) pairs are loaded once, in parallel, then every thread combines them in
     * split order (the same bits in every thread). */
    if ((int)threadIdx.x < S) {
        sm_m[threadIdx.x] = p.part_m[row0 + (int64_t)threadIdx.x * H];
        sm_l[threadIdx.x] = p.part_l[row0 + (int64_t)threadIdx.x * H];
    }
    __syncthreads();
    float M = sm_m[0];
    for (int s = 1; s < S; ++s) M = fmaxf(M, sm_m[s]);
    M = mla_sink_max(M, p.sink, h);
    float w = mla_rescale(sm_m[0], M);
    float L = __fmul_rn(w, sm_l[0]);
    const float *pa = p.part_acc + row0 * 512 + 4 * threadIdx.x;
    float4 a = *(const float4 *)pa;
    float x0 = __fmul_rn(w, a.x), x1 = __fmul_rn(w, a.y), x2 = __fmul_rn(w, a.z), x3 = __fmul_rn(w, a.w);
#pragma unroll 8 /* independent loads of 8 splits in flight; the sums stay in split order */
    for (int s = 1; s < S; ++s) {
        w = mla_rescale(sm_m[s], M);
        L = __fadd_rn(L, __fmul_rn(w, sm_l[s]));
        a = *(const float4 *)(pa + (int64_t)s * H * 512);
        x0 = __fadd_rn(x0, __fmul_rn(w, a.x));
        x1 = __fadd_rn(x1, __fmul_rn(w, a.y));
        x2 = __fadd_rn(x2, __fmul_rn(w, a.z));
        x3 = __fadd_rn(x3, __fmul_rn(w, a.w));
    }
    L = mla_add_sink(L, p.sink, h, M);
    uint16_t *dst = p.out + (int64_t)t * p.o_st + (int64_t)h * p.o_sh + 4 * threadIdx.x;
    *(uint2 *)dst = make_uint2(dsv4_pack_bf16x2(mla_normalize(x0, L), mla_normalize(x1, L)),
                               dsv4_pack_bf16x2(mla_normalize(x2, L), mla_normalize(x3, L)));
}

extern "C" dsv4_status_t mla_launch_merge(const mla_params_t *p, dsv4_stream_t stream) {
    static const char *op = "sparse_mla_decode (merge)";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_merge_kernel, 0, &smem_cache));
    const int64_t ctas = (int64_t)p->num_tokens * p->num_heads;
    mla_merge_kernel<<<(unsigned)ctas, MLA_MERGE_THREADS, 0, (cudaStream_t)stream>>>(*p);
    return dsv4_launch_status(op);
}

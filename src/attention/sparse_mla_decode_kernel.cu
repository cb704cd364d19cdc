/*
 * Sparse MLA decode kernels: the attention CTA reading paged fp8_ds_mla caches (on the
 * engine of mla_tile.cuh, which documents the formula, decomposition and pipeline), and
 * the split merge.
 *
 * Producer (fp8 records, spec/kv-cache.md sections 2-3): per key, slot -> page, pos
 * (a multiply-high by the host's magic number for P: mla_page_magic); data = page +
 * pos*576 (448 e4m3 + 64 bf16 = 36 chunks of 16 B), the slot's 8 scale bytes at page +
 * P*576 + pos*8. Slice group wd (mla_tile.cuh) stages only what its dims need, into a
 * double-buffered raw stage (2 x 16 x 576 B): the record bytes of its dims (groups 0-2:
 * 128 e4m3 codes = 8 chunks; group 3: 64 codes + the 64 bf16 RoPE values = 12 chunks,
 * TPG threads per row taking adjacent chunks in each step) and the 4 scale bytes that
 * cover them (one 4-byte cp.async per row into the group's own word). Invalid slots (outside
 * [0, num_pages*P) of their own cache, padding, past the split) are zero-filled with a
 * neutral scale and flagged. The record addresses are converted once per CTA, AHEAD
 * tiles before their tile, and the record's lines and scale line prefetched into L2
 * then (mla_tile.cuh's row sources): the slots are random, so nearly every record is a
 * DRAM read. After the tile lands the group dequantizes its slice into
 * the bf16 K tile, once per CTA for all HC heads: per 16 codes one UE8M0 scale decoded by
 * shift (prim/fp8.cuh, exact); NaN lanes (codes 0x7F/0xFF, NaN RoPE values, 0 * inf at
 * enc 255) read as 0 as upstream (NaN codes are zeroed before decoding, the rest scrubbed
 * only where they can occur). Grid: T * S * H/HC attention CTAs (+ the merge CTAs of
 * plan.merge == 2, mla_merge.cuh).
 *
 * Merge (spec/sparse-mla.md section 5): mla_merge.cuh, either as CTAs appended to the
 * attention launch (plan.merge == 2) or as a second launch (plan.merge == 1).
 */
#include <cuda_runtime.h>

#include "attention/mla_merge.cuh"
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

struct MlaDecodeProd : MlaRingRows<MlaDecodeProd> {
    /* Rows are converted (and prefetched into L2) this many tiles before they are
     * computed: the slots are random, so nearly every record is a DRAM read. */
    static constexpr int AHEAD = MLA_AHEAD_DECODE;
    static constexpr bool MERGE_CTAS = true; /* plan.merge == 2 appends them */
    template <class C> struct SmemT {
        uint16_t k[MLA_N][MLA_KSTR];
        uint8_t raw[2][MLA_N][576];
        uint32_t scale[2][C::WD][MLA_N]; /* per group: the slot's scale bytes 4 * (wd / 2) .. + 3 */
        unsigned long long src[AHEAD + 1][MLA_N]; /* ring: record data address (mla_src)         */
        uint32_t scale_off[AHEAD + 1][MLA_N];     /*       its scale bytes, relative to the data   */
        int ids[2][MLA_N];                        /* ids of the tile converted next, by tile parity */
        MlaSmemCommon<C> c;
    };

    /* Ring slot `slot` of row `row` <- the record of valid slot id `id`: data = page +
     * pos*576, scales = page + P*576 + pos*8, page and pos from a multiply-high division
     * by P (32-bit: ids are non-negative int32, P <= 2^20, both checked on the host).
     * With `pf` its 5-6 data lines and its scale line go to L2. */
    template <class C>
    static __device__ __forceinline__ void convert(const mla_list_params_t &L, uint32_t id, SmemT<C> &sm, int slot,
                                                   int row, bool pf) {
        const uint32_t P = (uint32_t)L.page_tokens;
        const uint32_t page = (__umulhi(id, L.page_magic) + id) >> L.page_shift, pos = id - page * P;
        const uint8_t *data = L.base + (int64_t)page * L.row_bytes + pos * 576u;
        const uint32_t soff = (P - pos) * 576u + pos * 8u;
        sm.src[slot][row] = mla_src(data);
        sm.scale_off[slot][row] = soff;
        if (pf) {
            /* 576 bytes from a 64-byte aligned start: every line holds one of these */
#pragma unroll
            for (int c = 0; c < 576; c += 128) dsv4_prefetch_l2(data + c);
            dsv4_prefetch_l2(data + 575);
            dsv4_prefetch_l2(data + soff);
        }
    }

    /* Slice group wd's cp.async of ring slot `slot` into raw[buf]: group wd < 3 owns dims
     * [128 wd, 128 wd + 128), record bytes 128 wd .. (NoPE codes, one byte per dim: 8
     * chunks); group 3 owns codes 384..447 and the RoPE bf16 values, bytes 384..575 (12
     * chunks). Its 64-dim scale blocks are 2 wd and 2 wd + 1 (group 3: block 6), bytes
     * (2 wd) % 4 .. of the 4-byte word at 4 * (wd / 2). */
    template <class C> static __device__ __forceinline__ void issue(SmemT<C> &sm, int slot, int buf, int wd) {
        static_assert(C::WD == 4, "the slice table above is for 4 dim slices");
        const int gt = mla_group_thread<C>(), row = gt / C::TPG, part = gt % C::TPG;
        /* both ring words first: a load after a cp.async (a memory clobber) waits for it */
        const unsigned long long src = sm.src[slot][row];
        const uint32_t soff = sm.scale_off[slot][row];
        const bool valid = mla_src_valid(src);
        const uint8_t *data = mla_src_ptr(src);
        /* chunk part + TPG k of the slice: the row's threads read adjacent chunks in each
         * step, so an instruction's requests are whole 32-byte sectors. (Whole lines per
         * instruction, as in the prefill producer, measured 1% slower here: session 5.) */
        const int cpt = (wd == 3 ? 12 : 8) / C::TPG, off = 128 * wd + 16 * part;
#pragma unroll
        for (int k = 0; k < 12 / C::TPG; ++k)
            if (k < cpt)
                dsv4_cp_async_16_zfill(&sm.raw[buf][row][off + 16 * C::TPG * k], data + off + 16 * C::TPG * k, valid);
        if (part == 0) {
            /* an invalid row gets enc 127 (scale 1): its zero codes decode to 0 on the fast path */
            if (valid) dsv4_cp_async_4(&sm.scale[buf][wd][row], data + soff + 4 * (wd >> 1));
            else sm.scale[buf][wd][row] = 0x7F7F7F7Fu;
            if (wd == 0) sm.c.meta[buf][row] = valid ? 1 : 0;
        }
    }

    /* Dequantize the group's NoPE chunks (16 codes each, NC per row, the first at chunk
     * C0 = 8 wd) of raw[buf] into the bf16 tile. */
    template <class C, int NC>
    static __device__ __forceinline__ void dequant_nope(SmemT<C> &sm, int buf, int wd, int gl) {
        const uint8_t *raw = &sm.raw[buf][0][0] + 128 * wd;
        const uint8_t *sc = (const uint8_t *)&sm.scale[buf][wd][0];
        uint16_t *kt = &sm.k[0][0] + 128 * wd;
#pragma unroll 1 /* a rolled loop keeps the 8-warp config within 128 registers */
        for (int j = gl; j < MLA_N * NC; j += C::GT) {
            const int row = j / NC, c = j % NC; /* 16 codes of dims 128 wd + 16c .. */
            const uint4 v = *(const uint4 *)(raw + row * 576 + 16 * c);
            /* block 2 wd + c / 4 is byte (2 wd + c / 4) % 4 of the group's scale word */
            const uint32_t enc = sc[4 * row + ((2 * wd + (c >> 2)) & 3)];
            const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
            uint32_t d[8];
            /* The raw codes are the values times 2^-120. Fast path: no NaN code (0x7F /
             * 0xFF: bit 7 of (b & 0x7F) + 1) and a scale 2^(enc-7) that is a normal bf16,
             * 1 <= enc <= 134 (every scale the writer makes for amax <= 448 * 2^7): one
             * multiply per pair. Otherwise the NaN codes are zeroed first and the pairs are
             * multiplied by 2^120, then by the scale. Both round the same exact product
             * once: equal bits. The branch is warp-uniform so the rare path costs nothing
             * when no lane takes it (as a predicated path it did). */
            const uint32_t nan_bits = (((w4[0] & 0x7F7F7F7Fu) + 0x01010101u) | ((w4[1] & 0x7F7F7F7Fu) + 0x01010101u) |
                                       ((w4[2] & 0x7F7F7F7Fu) + 0x01010101u) | ((w4[3] & 0x7F7F7F7Fu) + 0x01010101u)) &
                                      0x80808080u;
            if (!__any_sync(0xffffffffu, (enc - 1u >= 134u) | (nan_bits != 0u))) {
                const uint32_t s1 = dsv4_ue8m0_bf16x2(enc + 120u);
#pragma unroll
                for (int k = 0; k < 4; ++k) dsv4_e4m3x4_raw_bf16(w4[k], d + 2 * k);
#pragma unroll
                for (int i = 0; i < 8; ++i) d[i] = dsv4_bf16x2_mul(d[i], s1);
            } else {
                const uint32_t sb = dsv4_ue8m0_bf16x2(enc);
#pragma unroll
                for (int k = 0; k < 4; ++k) dsv4_e4m3x4_raw_bf16(mla_zero_nan_codes(w4[k]), d + 2 * k);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    d[i] = dsv4_bf16x2_mul(dsv4_bf16x2_mul(d[i], DSV4_BF16X2_2POW120), sb);
                    /* exact and finite below enc 255; at 255 (scale +inf) a zero code
                     * gives 0 * inf = NaN, read as 0 like upstream */
                    if (enc == 255) d[i] = mla_scrub_nan(d[i]);
                }
            }
            uint16_t *dst = kt + row * MLA_KSTR + 16 * c;
            *(uint4 *)dst = make_uint4(d[0], d[1], d[2], d[3]);
            *(uint4 *)(dst + 8) = make_uint4(d[4], d[5], d[6], d[7]);
        }
    }

    /* Dequantize the group's slice of raw[buf] into the bf16 tile, then sync the group.
     * NoPE jobs: 8 chunks per row (group 3: 4); RoPE jobs (group 3): 8 chunks of 8 bf16
     * per row. Each count is a multiple of the group's threads, so every warp takes the
     * same kind of job in each step and the warp vote inside is uniform. */
    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf, int wd, int gl) {
        if (wd < 3) {
            dequant_nope<C, 8>(sm, buf, wd, gl);
        } else {
            dequant_nope<C, 4>(sm, buf, wd, gl);
#pragma unroll 1
            for (int j = gl; j < MLA_N * 8; j += C::GT) { /* 8 RoPE bf16 of dims 448 + 8c .. */
                const int row = j >> 3, c = j & 7;
                const uint4 v = *(const uint4 *)(sm.raw[buf][row] + 448 + 16 * c);
                *(uint4 *)(sm.k[row] + 448 + 8 * c) =
                    make_uint4(mla_scrub_nan(v.x), mla_scrub_nan(v.y), mla_scrub_nan(v.z), mla_scrub_nan(v.w));
            }
        }
        mla_slice_sync<C>(wd);
        return &sm.k[0][0];
    }
};

template <class C> struct MlaDecodeBind : MlaDecodeProd {
    typedef SmemT<C> Smem;
};

extern "C" dsv4_status_t mla_launch_decode(int config, const mla_params_t *p, int64_t ctas, dsv4_stream_t stream) {
    return mla_launch<MlaDecodeBind>("sparse_mla_decode", config, p, ctas, stream);
}

/* ---- merge (mla_merge.cuh): the second-launch form, one CTA per (token, head) ------- */
/* B splits in flight per batch. Its registers decide how many of these small CTAs are
 * resident: B = 8 takes 56-62, B = 2 36-40 (16 CTAs per SM on the H200 against 8), which
 * is what S <= 2 needs (T = 64, H = 64: S = 2, 4096 rows, B = 8 measured +1.5%). */
template <int B> __global__ void __launch_bounds__(MLA_MERGE_THREADS) mla_merge_kernel(mla_params_t p) {
    const int H = p.num_heads;
    mla_merge_row<false, B>(p, (int)blockIdx.x / H, (int)blockIdx.x % H, (int)threadIdx.x);
}

template <int B> static dsv4_status_t launch_merge(const mla_params_t *p, cudaStream_t stream) {
    static const char *op = "sparse_mla_decode (merge)";
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)mla_merge_kernel<B>, 0, &smem_cache));
    mla_merge_kernel<B><<<(unsigned)((int64_t)p->num_tokens * p->num_heads), MLA_MERGE_THREADS, 0, stream>>>(*p);
    return dsv4_launch_status(op);
}

extern "C" dsv4_status_t mla_launch_merge(const mla_params_t *p, dsv4_stream_t stream) {
    return p->num_splits <= 2 ? launch_merge<2>(p, (cudaStream_t)stream) : launch_merge<8>(p, (cudaStream_t)stream);
}

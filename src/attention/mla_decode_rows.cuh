/*
 * The fp8 record producer of sparse MLA decode (fp8_ds_mla caches, the record and page
 * of include/dsv4/kvcache.h): row sources, the staged copy of a slice group's record bytes and their
 * dequantization into a bf16 K tile. Used by the engine's decode kernel
 * (sparse_mla_decode_kernel.cu) and the warp-specialised decode kernel
 * (sparse_mla_decode_ws_kernel.cu, where the 4 or 8 PV warps are the slice groups).
 *
 * Per key, slot -> page, pos (a multiply-high by the host's magic number for P:
 * mla_page_magic); data = page + pos*576 (448 e4m3 + 64 bf16 = 36 chunks of 16 B), the
 * slot's 8 scale bytes at page + P*576 + pos*8. Slice group wd stages only what its dims
 * need, into a raw stage of 16 x 576 B: the record bytes of its dims (groups 0-2: 128
 * e4m3 codes = 8 chunks; group 3: 64 codes + the 64 bf16 RoPE values = 12 chunks, TPG
 * threads per row taking adjacent chunks in each step) and the 4 scale bytes that cover
 * them (one 4-byte cp.async per row into the group's own word). Invalid slots (outside
 * [0, num_pages*P) of their own cache, padding, past the split) are zero-filled with a
 * neutral scale and flagged. The record addresses are converted once per CTA, AHEAD
 * tiles before their tile (mla_tile.cuh's row sources; only the start prefetches the
 * record's lines and scale line into L2): the slots are random, so nearly every record
 * is a DRAM read. After the slice lands the group dequantizes it into a bf16 K tile, once
 * per CTA for all its heads: per 16 codes one UE8M0 scale decoded by shift
 * (prim/fp8.cuh, exact); NaN lanes (codes 0x7F/0xFF, NaN RoPE values, 0 * inf at enc
 * 255) read as 0 as upstream (NaN codes are zeroed before decoding, the rest scrubbed
 * only where they can occur).
 *
 * Smem needs raw[B][MLA_N][576], scale[B][WD][MLA_N] (B raw buffers), the ring src and
 * scale_off[AHEAD + 1][MLA_N], ids[2][MLA_N] and c.meta[][MLA_N]; the bf16 tile is the
 * caller's.
 */
#ifndef DSV4_ATTENTION_MLA_DECODE_ROWS_CUH
#define DSV4_ATTENTION_MLA_DECODE_ROWS_CUH

#include "attention/mla_tile.cuh"
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
    /* Rows are converted this many tiles before they are computed. */
    static constexpr int AHEAD = MLA_AHEAD_DECODE;
    static constexpr bool MERGE_CTAS = true; /* plan.merge == 2 appends them */
    static constexpr bool STAGE_OUT = false; /* one bf16 tile: too few rows to stage a CTA's output */
    template <class C> struct SmemT {
        uint16_t k[MLA_N][MLA_KSTR];
        uint8_t raw[2][MLA_N][DSV4_KV_DATA_BYTES];
        uint32_t scale[2][C::WD][MLA_N];          /* per group: the slot's scale bytes 4 * (wd / 2) .. + 3 */
        unsigned long long src[AHEAD + 1][MLA_N]; /* ring: record data address (mla_src)         */
        uint32_t scale_off[AHEAD + 1][MLA_N];     /*       its scale bytes, relative to the data   */
        int ids[2][MLA_N];                        /* ids of the tile converted next, by tile parity */
        MlaSmemCommon<C> c;
    };

    /* Ring slot `slot` of row `row` <- the record of valid slot id `id`: data = page +
     * pos*576, scales = page + P*576 + pos*8, page and pos from a multiply-high division
     * by P (32-bit: ids are non-negative int32, P <= 2^20, both checked on the host).
     * With `pf` its 5-6 data lines and its scale line go to L2. */
    template <class C, class Smem>
    static __device__ __forceinline__ void convert(const mla_list_params_t &L, uint32_t id, Smem &sm, int slot, int row,
                                                   bool pf) {
        const uint32_t P = (uint32_t)L.page_tokens;
        const uint32_t page = kv_page_div(id, L.page_div.magic, L.page_div.shift), pos = id - page * P;
        const uint8_t *data = L.base + (int64_t)page * L.row_bytes + pos * DSV4_KV_DATA_BYTES;
        const uint32_t soff = (P - pos) * DSV4_KV_DATA_BYTES + pos * DSV4_KV_SCALE_BYTES;
        sm.src[slot][row] = mla_src(data);
        sm.scale_off[slot][row] = soff;
        if (pf) {
            /* 576 bytes from a 64-byte aligned start: every line holds one of these */
#pragma unroll
            for (int c = 0; c < DSV4_KV_DATA_BYTES; c += 128) dsv4_prefetch_l2(data + c);
            dsv4_prefetch_l2(data + 575);
            dsv4_prefetch_l2(data + soff);
        }
    }

    /* The slice table. Group wd of WD owns dims [DW wd, DW wd + DW), DW = 512 / WD: the
     * record bytes from DW wd on, one per NoPE dim, and for the last group also the RoPE
     * bf16 values up to byte 576. WD = 4: groups 0-2 own 128 codes (8 chunks of 16 B),
     * group 3 codes 384..447 and the RoPE values, bytes 384..575 (12 chunks); WD = 8
     * (ws64): groups 0-6 own 64 codes (4 chunks), group 7 only the RoPE values,
     * bytes 448..575 (8 chunks). The group's 64-dim scale blocks start at block
     * DW wd / 64 and lie in one 4-byte word of the slot's 8 scale bytes, at 4 * (block /
     * 4). */
    template <class C> static __device__ __forceinline__ int slice_chunks(int wd) {
        if (C::WD == 4) return wd == 3 ? 12 : 8;
        return wd == C::WD - 1 ? (DSV4_KV_DATA_BYTES - C::DW * wd) / 16 : C::DW / 16;
    }
    template <class C> static __device__ __forceinline__ int scale_word_byte(int wd) {
        if (C::WD == 4) return 4 * (wd >> 1);
        return 4 * ((C::DW / 64 * wd) >> 2);
    }
    template <class C> struct MaxChunks { /* the last group's: the most of any group */
        static constexpr int value = (DSV4_KV_DATA_BYTES - C::DW * (C::WD - 1)) / 16;
    };

    /* Slice group wd's cp.async of ring slot `slot` into raw[buf] (the slice table above).
     * With FLAGS group 0 writes the key flags into c.meta[buf] (the engine; the ws32 and
     * ws64 producer writes them when the tile lands). */
    template <class C, bool FLAGS, class Smem>
    static __device__ __forceinline__ void issue(Smem &sm, int slot, int buf, int wd) {
        static_assert(C::WD == 4 || C::WD == 8, "the slice table is for 4 or 8 dim slices");
        const int gt = mla_group_thread<C>(), row = gt / C::TPG, part = gt % C::TPG;
        /* both ring words first: a load after a cp.async (a memory clobber) waits for it */
        const unsigned long long src = sm.src[slot][row];
        const uint32_t soff = sm.scale_off[slot][row];
        const bool valid = mla_src_valid(src);
        const uint8_t *data = mla_src_ptr(src);
        /* chunk part + TPG k of the slice: the row's threads read adjacent chunks in each
         * step, so an instruction's requests are whole 32-byte sectors. (Whole lines per
         * instruction, as in the prefill producer, measured slower here.) */
        const int cpt = slice_chunks<C>(wd) / C::TPG, off = C::DW * wd + 16 * part;
#pragma unroll
        for (int k = 0; k < MaxChunks<C>::value / C::TPG; ++k)
            if (k < cpt)
                dsv4_cp_async_16_zfill(&sm.raw[buf][row][off + 16 * C::TPG * k], data + off + 16 * C::TPG * k, valid);
        if (part == 0) {
            /* an invalid row gets enc 127 (scale 1): its zero codes decode to 0 on the fast path */
            if (valid) dsv4_cp_async_4(&sm.scale[buf][wd][row], data + soff + scale_word_byte<C>(wd));
            else sm.scale[buf][wd][row] = 0x7F7F7F7Fu;
            if (FLAGS && wd == 0) sm.c.meta[buf][row] = valid ? 1 : 0;
        }
    }

    /* Dequantize the group's NoPE chunks (16 codes each, NC per row, from dim DW wd on)
     * of raw[buf] into the bf16 tile at k, U chunks per thread at a time (their
     * loads, checks and decodes independent: U > 1 gives a thread's chain instruction-level
     * parallelism where registers allow; the engine keeps 1). */
    template <class C, int NC, int U, class Smem>
    static __device__ __forceinline__ void dequant_nope(Smem &sm, int buf, uint16_t *k, int wd, int gl) {
        const uint8_t *raw = &sm.raw[buf][0][0] + C::DW * wd;
        const uint8_t *sc = (const uint8_t *)&sm.scale[buf][wd][0];
        uint16_t *kt = k + C::DW * wd;
        static_assert((MLA_N * NC) % (U * C::GT) == 0, "whole blocks of U chunks per thread");
#pragma unroll 1 /* a rolled loop keeps the 8-warp config within 128 registers */
        for (int j0 = gl; j0 < MLA_N * NC; j0 += U * C::GT) {
            uint32_t w4[U][4], enc[U];
            bool slow = false;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int j = j0 + u * C::GT, row = j / NC, c = j % NC; /* 16 codes of dims DW wd + 16c .. */
                const uint4 v = *(const uint4 *)(raw + row * DSV4_KV_DATA_BYTES + 16 * c);
                /* block DW wd / 64 + c / 4 is byte (that) % 4 of the group's scale word */
                enc[u] = sc[4 * row + ((C::DW / 64 * wd + (c >> 2)) & 3)];
                w4[u][0] = v.x, w4[u][1] = v.y, w4[u][2] = v.z, w4[u][3] = v.w;
                /* The raw codes are the values times 2^-120. Fast path: no NaN code (0x7F /
                 * 0xFF: bit 7 of (b & 0x7F) + 1) and a scale 2^(enc-7) that is a normal
                 * bf16, 1 <= enc <= 134 (every scale the writer makes for amax <= 448 *
                 * 2^7): one multiply per pair. Otherwise the NaN codes are zeroed first and
                 * the pairs are multiplied by 2^120, then by the scale. Both round the same
                 * exact product once: equal bits. The branch is warp-uniform so the rare
                 * path costs nothing when no lane takes it (as a predicated path it did). */
                const uint32_t nan_bits = (((v.x & 0x7F7F7F7Fu) + 0x01010101u) | ((v.y & 0x7F7F7F7Fu) + 0x01010101u) |
                                           ((v.z & 0x7F7F7F7Fu) + 0x01010101u) | ((v.w & 0x7F7F7F7Fu) + 0x01010101u)) &
                                          0x80808080u;
                slow = slow || (enc[u] - 1u >= 134u) || nan_bits != 0u;
            }
            const bool fast = !__any_sync(0xffffffffu, slow);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int j = j0 + u * C::GT, row = j / NC, c = j % NC;
                uint32_t d[8];
                if (fast) {
                    const uint32_t s1 = dsv4_ue8m0_bf16x2(enc[u] + 120u);
#pragma unroll
                    for (int q = 0; q < 4; ++q) dsv4_e4m3x4_raw_bf16(w4[u][q], d + 2 * q);
#pragma unroll
                    for (int i = 0; i < 8; ++i) d[i] = dsv4_bf16x2_mul(d[i], s1);
                } else {
                    const uint32_t sb = dsv4_ue8m0_bf16x2(enc[u]);
#pragma unroll
                    for (int q = 0; q < 4; ++q) dsv4_e4m3x4_raw_bf16(mla_zero_nan_codes(w4[u][q]), d + 2 * q);
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        d[i] = dsv4_bf16x2_mul(dsv4_bf16x2_mul(d[i], DSV4_BF16X2_2POW120), sb);
                        /* exact and finite below enc 255; at 255 (scale +inf) a zero code
                         * gives 0 * inf = NaN, read as 0 like upstream */
                        if (enc[u] == 255) d[i] = mla_scrub_nan(d[i]);
                    }
                }
                uint16_t *dst = kt + row * MLA_KSTR + 16 * c;
                *(uint4 *)dst = make_uint4(d[0], d[1], d[2], d[3]);
                *(uint4 *)(dst + 8) = make_uint4(d[4], d[5], d[6], d[7]);
            }
        }
    }

    /* Dequantize the group's slice of raw[buf] into the bf16 tile at k (group gl's
     * threads; the caller syncs the group), U chunks per thread at a time. NoPE jobs:
     * DW / 16 chunks per row (the last group: what is left of the 448 codes, 4 for WD = 4,
     * none for WD = 8); RoPE jobs (the last group): 8 chunks of 8 bf16 per row. Each count
     * is a multiple of U times the group's threads, so every warp takes the same kind of
     * job in each step and the warp vote inside is uniform. */
    template <class C, int U, class Smem>
    static __device__ __forceinline__ void dequant(Smem &sm, int buf, uint16_t *k, int wd, int gl) {
        constexpr int NL = (DSV4_KV_NOPE_DIM - C::DW * (C::WD - 1)) / 16; /* NoPE chunks per row of the last group */
        if (wd < C::WD - 1) {
            dequant_nope<C, C::DW / 16, U>(sm, buf, k, wd, gl);
        } else {
            constexpr int UL = U < MLA_N * NL / C::GT ? U : MLA_N * NL / C::GT; /* fewer NoPE chunks */
            if constexpr (NL > 0) dequant_nope<C, NL, UL>(sm, buf, k, wd, gl);
#pragma unroll 1
            for (int j0 = gl; j0 < MLA_N * 8; j0 += U * C::GT) {
#pragma unroll
                for (int u = 0; u < U; ++u) { /* 8 RoPE bf16 of dims 448 + 8c .. */
                    const int j = j0 + u * C::GT, row = j >> 3, c = j & 7;
                    const uint4 v = *(const uint4 *)(sm.raw[buf][row] + DSV4_KV_NOPE_DIM + 16 * c);
                    *(uint4 *)(k + row * MLA_KSTR + DSV4_KV_NOPE_DIM + 8 * c) =
                        make_uint4(mla_scrub_nan(v.x), mla_scrub_nan(v.y), mla_scrub_nan(v.z), mla_scrub_nan(v.w));
                }
            }
        }
    }

    /* The engine's tile(): dequantize into its one bf16 tile, then sync the group. */
    template <class C> static __device__ __forceinline__ const uint16_t *tile(SmemT<C> &sm, int buf, int wd, int gl) {
        dequant<C, 1>(sm, buf, &sm.k[0][0], wd, gl);
        mla_slice_sync<C>(wd);
        return &sm.k[0][0];
    }
};

#endif /* DSV4_ATTENTION_MLA_DECODE_ROWS_CUH */

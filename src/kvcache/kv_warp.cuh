/*
 * Warp-level pieces the kvcache kernels share: a 512-element bf16 row in registers in the
 * lane layout of kv_record.h (lane l: chunk l in w[0..3], chunk l+32 in w[4..7]), and the
 * quantize+store of such a row as one fp8_ds_mla record (insert and the SWA writer's kv
 * side call the same function, so their bytes cannot drift apart).
 *
 * Memory access per row: two 16-byte loads per lane, each instruction covering 512
 * contiguous bytes; the record goes out as one 8-byte store per lane for the codes of
 * chunk l (256 contiguous bytes per instruction), one 8-byte store for chunk l+32 on
 * lanes 0..23 (192 bytes), one 16-byte store of RoPE bytes on lanes 24..31 (128 bytes),
 * 1-byte stores of scale bytes 0..3 from lanes 0, 8, 16, 24 and one 4-byte store of bytes
 * 4..7 from lane 24. Every address is aligned because the cache base is 16-byte aligned
 * and page strides are multiples of 16.
 *
 * Duplicate slots (include/dsv4/kvcache.h): before a writer's launch, kv_claim_kernel
 * stores KV_CLAIM_BIT | row into scale bytes 4..7 of the record of every row that will
 * write one, so that of several rows naming one slot the last claim stored stands. The
 * writer writes a record only for the row whose claim it finds there (kv_claim_held), and
 * writes those 4 bytes in one store whose value (the pad byte 0 on top) never reads as a
 * claim: a record is always exactly one row's 584 bytes.
 */
#ifndef DSV4_KVCACHE_KV_WARP_CUH
#define DSV4_KVCACHE_KV_WARP_CUH

#include <stdint.h>

#include "common/error.h"
#include "common/launch.h"
#include "kvcache/kv_record.h"
#include "prim/fp8.cuh"
#include "prim/store.cuh"

#define KV_FULL_MASK 0xFFFFFFFFu
#define KV_CLAIM_BIT 0x80000000u

/* Row in registers; NC = read-only for the kernel's lifetime (ld.global.nc). */
template <bool NC> static __device__ __forceinline__ void kv_row_load(const uint16_t *row, int lane, uint32_t w[8]) {
    const uint4 *p = reinterpret_cast<const uint4 *>(row);
    const uint4 a = NC ? __ldg(p + lane) : p[lane];
    const uint4 b = NC ? __ldg(p + 32 + lane) : p[32 + lane];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
    w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

static __device__ __forceinline__ void kv_row_store(uint16_t *row, int lane, const uint32_t w[8]) {
    uint4 *p = reinterpret_cast<uint4 *>(row);
    p[lane] = make_uint4(w[0], w[1], w[2], w[3]);
    p[32 + lane] = make_uint4(w[4], w[5], w[6], w[7]);
}

/* page = slot / P and p = slot % P for a slot in [0, num_pages * P); false for a slot to
 * skip (negative, past the cache). Slots below 2^31 (every cache a GPU holds) take the
 * format's multiply-high division instead of a 64-bit one (~15 SASS per row on the
 * insert path). */
static __device__ __forceinline__ bool kv_slot_locate(int64_t slot, int64_t P, kv_page_div_t div, int64_t num_pages,
                                                      int64_t *page, int64_t *p) {
    if (slot < 0) return false;
    *page = slot <= INT32_MAX ? (int64_t)kv_page_div((uint32_t)slot, div.magic, div.shift) : slot / P;
    *p = slot - *page * P;
    return *page < num_pages;
}

/* kv_group_closes (kv_record.h) with the multiply-high division for positions below 2^31
 * (every real one), as kv_slot_locate; div = kv_page_div_make(r). */
static __device__ __forceinline__ bool kv_group_closes_div(int64_t pos, int64_t r, kv_page_div_t div, int64_t *first) {
    if (pos < 0 || pos > INT32_MAX) return kv_group_closes(pos, r, first);
    *first = pos - (r - 1);
    return pos - (int64_t)kv_page_div((uint32_t)pos, div.magic, div.shift) * r == r - 1;
}

/* The claims of a writer's rows: positions is NULL unless a row writes only when its
 * position closes a group of `ratio` (kv_rope_insert). */
typedef struct {
    const int64_t *slot_mapping, *positions;
    uint8_t *cache;
    int64_t rows, P, page_stride_bytes, num_pages, ratio;
    kv_page_div_t page_div, ratio_div;
} kv_claim_params_t;

static __global__ void __launch_bounds__(256) kv_claim_kernel(const kv_claim_params_t c) {
    const int64_t t = (int64_t)blockIdx.x * 256 + threadIdx.x;
    if (t >= c.rows) return;
    int64_t page, p, first;
    if (c.positions && !kv_group_closes_div(__ldg(c.positions + t), c.ratio, c.ratio_div, &first)) return;
    if (!kv_slot_locate(__ldg(c.slot_mapping + t), c.P, c.page_div, c.num_pages, &page, &p)) return;
    *reinterpret_cast<volatile uint32_t *>(c.cache + kv_scale_offset(page, p, c.P, c.page_stride_bytes) + 4) =
        KV_CLAIM_BIT | (uint32_t)t;
}

/* Enqueue the claims ahead of the writer; the writer's dsv4_launch_status reports both. */
static inline dsv4_status_t kv_claim_launch(const char *op, const kv_claim_params_t &c, cudaStream_t stream) {
    static int smem_cache;
    if (c.rows == 0) return DSV4_STATUS_SUCCESS;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)kv_claim_kernel, 0, &smem_cache));
    dsv4_launch(kv_claim_kernel, (unsigned)((c.rows + 255) / 256), 256, 0, stream, c);
    return DSV4_STATUS_SUCCESS;
}

/* Row t holds the claim of the record whose scale bytes start at `scales`. Every lane
 * loads the word in the same instruction (one transaction: one value for the warp),
 * through L2: the claim kernel ran before, and a value stored meanwhile by this kernel is
 * the owner's final one, which matches no claim. */
static __device__ __forceinline__ bool kv_claim_held(const uint8_t *scales, int64_t t) {
    return __ldcg(reinterpret_cast<const unsigned *>(scales + 4)) == (KV_CLAIM_BIT | (uint32_t)t);
}

/* max on two bf16 lanes (sm_80 max.bf16x2): a NaN lane yields the other operand, as
 * fmaxf does, and two NaNs give NaN. Exact, like any max. */
static __device__ __forceinline__ uint32_t kv_bf16x2_max(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("max.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
static __device__ __forceinline__ uint32_t kv_bf16x2_min(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("min.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

/* Bit 15 and bit 31 of x, each replicated over its 16-bit lane: selector nibbles 0x9 /
 * 0xB (the signs of bytes 1 / 3; dsv4_prmt says why not __byte_perm, which the first H200
 * run of this code caught). */
static __device__ __forceinline__ uint32_t kv_sign_bytes(uint32_t x) { return dsv4_prmt<0xBB99>(x); }

/* kv_quant_elem (kv_record.h) of both halves of the bf16 pair w, in 16-bit lanes: the
 * codes land in bytes 0 and 2 (bytes 1 and 3 hold junk). inv2 = kv_inv_scale(enc) as a
 * bf16 pair. About 6.5 SASS per element against 11 for the fp32 form; tests/kvcache
 * checks it on the GPU against dsv4_e4m3_quantize for every bf16 x and every enc of a
 * block that can hold x.
 *   v = x * 2^-e in bf16 is exact wherever a nonzero code can come out (a bf16 times a
 *     power of two, normal range); below 2^-126 it only has to keep its sign, and the
 *     FMA's rounding does. min(v, 448) turns NaN and inf * 0 into 448, as kv_quant_elem.
 *   |v| >= 2^-6 (an e4m3 normal; bit 15 of |v| + 0x4380): the code is the bf16 pattern
 *     rebased by 120 exponents and rounded to nearest even at bit 4, i.e.
 *     (|v| - 0x3C00 + 7 + bit4) >> 4; the rebasing adds 0x8000 - 0x3C00 so that no lane
 *     borrows from its neighbour.
 *   |v| < 2^-6 (e4m3 subnormals, step 2^-9): 1/4 + |v| in one bf16 rounding lands on the
 *     bf16 grid of step 2^-9 above 1/4, so its mantissa field is the code (0..8, and 8 is
 *     the e4m3 minimum normal), ties to even included.
 *   The sign is bit 15 of v, moved to bit 7. */
static __device__ __forceinline__ uint32_t kv_quant_pair(uint32_t w, uint32_t inv2) {
    const uint32_t v = kv_bf16x2_min(dsv4_bf16x2_mul(w, inv2), 0x43E043E0u);
    const uint32_t mag = v & 0x7FFF7FFFu;
    const uint32_t u = mag + 0x43804380u; /* bit 15 of a lane set: an e4m3 normal */
    const uint32_t t = u + 0x00870087u + ((mag >> 4) & 0x00010001u);
    const uint32_t s = dsv4_bf16x2_fma(mag, 0x3F803F80u, 0x3E803E80u);
    const uint32_t normal = kv_sign_bytes(u); /* 0xFFFF in the lanes whose bit 15 is set */
    const uint32_t code = (normal & (t >> 4)) | (~normal & s);
    return (code & 0x007F007Fu) | ((v >> 8) & 0xFF80FF80u);
}

/* kv_inv_scale(enc) as the bf16 pair kv_quant_pair takes (a power of two or 0: exact). */
static __device__ __forceinline__ uint32_t kv_inv_scale_bf16x2(uint32_t enc) {
    return (dsv4_f32_bits(kv_inv_scale(enc)) >> 16) * 0x00010001u;
}

/* Four codes (little-endian order) of the bf16 pairs w0, w1. */
static __device__ __forceinline__ uint32_t kv_quant_word2(uint32_t w0, uint32_t w1, uint32_t inv2) {
    return __byte_perm(kv_quant_pair(w0, inv2), kv_quant_pair(w1, inv2), 0x6420u);
}

/* Quantize the bf16 row w (all 32 lanes) and write its record: `data` = the slot's 576
 * data bytes, `scales` = its 8 scale bytes.
 *
 * Block amax, on bf16 pairs, because every |x| is a bf16 value and max is exact in any
 * format: a lane folds each chunk's four words (sign bits cleared) into one pair, packs
 * the two chunks' pairs as (chunk 0, chunk 1) halves, and a butterfly over the 8 lanes of
 * a block (xor 1, 2, 4) leaves the block maxima in every lane of it. NaN drops out at each
 * max; an all-NaN block ends as NaN, which kv_enc_from_amax's floor test turns into the
 * floor, as the reference's amax 0 does. */
static __device__ __forceinline__ void kv_warp_store_record(const uint32_t w[8], int lane, uint8_t *data,
                                                            uint8_t *scales, int64_t row) {
    const uint32_t abs = 0x7FFF7FFFu;
    const uint32_t m0 = kv_bf16x2_max(kv_bf16x2_max(w[0] & abs, w[1] & abs), kv_bf16x2_max(w[2] & abs, w[3] & abs));
    const uint32_t m1 = kv_bf16x2_max(kv_bf16x2_max(w[4] & abs, w[5] & abs), kv_bf16x2_max(w[6] & abs, w[7] & abs));
    uint32_t m = kv_bf16x2_max(__byte_perm(m0, m1, 0x5410), __byte_perm(m0, m1, 0x7632)); /* (chunk 0, chunk 1) */
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) m = kv_bf16x2_max(m, __shfl_xor_sync(KV_FULL_MASK, m, o));
    /* Block lane/8 from the first chunk, block 4 + lane/8 from the second (lanes 24..31:
     * RoPE, their e1 is computed and never used). */
    const uint32_t e0 = kv_enc_from_amax(dsv4_bf16_to_f32((uint16_t)m));
    const uint32_t e1 = kv_enc_from_amax(dsv4_bf16_to_f32((uint16_t)(m >> 16)));
    const uint32_t inv0 = kv_inv_scale_bf16x2(e0), inv1 = kv_inv_scale_bf16x2(e1);

    /* only the row holding the record's claim stores it (duplicate slots); the stores are
     * predicated, not branched over, so the shuffles below stay converged */
    const bool own = kv_claim_held(scales, row);
    dsv4_st_v2_if(data + 8 * lane, kv_quant_word2(w[0], w[1], inv0), kv_quant_word2(w[2], w[3], inv0), own);
    if (lane < KV_LANE_ROPE_FIRST) {
        dsv4_st_v2_if(data + 256 + 8 * lane, kv_quant_word2(w[4], w[5], inv1), kv_quant_word2(w[6], w[7], inv1), own);
    } else { /* RoPE dims 448 + 8j .. +7 (j = lane - 24), bit for bit, at byte 448 + 16j */
        dsv4_st_v4_if(data + DSV4_KV_NOPE_DIM + 16 * (lane - KV_LANE_ROPE_FIRST), w[4], w[5], w[6], w[7], own);
    }
    /* bytes 4..7 of the scales (enc of blocks 4..6 from lanes 0, 8, 16, pad byte 0) meet on
     * lane 0 in two xor shuffles: one store of lane 0 writes them over the row's claim */
    uint32_t hi = (lane & 7) == 0 && lane < KV_LANE_ROPE_FIRST ? e1 << (8 * (lane >> 3)) : 0u;
    hi |= __shfl_xor_sync(KV_FULL_MASK, hi, 8);
    hi |= __shfl_xor_sync(KV_FULL_MASK, hi, 16);
    /* scale bytes 0..3: lane 8k writes enc of block k */
    if ((lane & 7) == 0) dsv4_st_u8_if(scales + (lane >> 3), e0, own);
    if (lane == 0) dsv4_st_u32_if(scales + 4, hi, own);
}

/* cos/sin of the four RoPE pairs 4j .. 4j+3 that lane 24 + j holds (c[m], s[m] for pair
 * 4j + m), at position pos; identity outside [0, max_position). Lanes below 24 get the
 * identity without loading. */
static __device__ __forceinline__ void kv_rope_coeffs(const float *cos_sin, int64_t pos, int64_t max_position, int lane,
                                                      float c[4], float s[4]) {
    float4 cv = make_float4(1.0f, 1.0f, 1.0f, 1.0f), sv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (lane >= KV_LANE_ROPE_FIRST && pos >= 0 && pos < max_position) {
        const float4 *row = reinterpret_cast<const float4 *>(cos_sin + pos * DSV4_KV_ROPE_DIM);
        const int j = lane - KV_LANE_ROPE_FIRST;
        cv = __ldg(row + j);     /* cos of pairs 4j .. 4j+3 (columns 0..31)  */
        sv = __ldg(row + 8 + j); /* sin of the same pairs (columns 32..63)   */
    }
    c[0] = cv.x, c[1] = cv.y, c[2] = cv.z, c[3] = cv.w;
    s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
}

#endif /* DSV4_KVCACHE_KV_WARP_CUH */

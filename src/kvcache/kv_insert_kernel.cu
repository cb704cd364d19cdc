/*
 * kv_insert kernel: quantize bf16 rows and insert them into the paged fp8_ds_mla cache.
 *
 * Formula (include/dsv4/kvcache.h): for token t with slot = slot_mapping[t] in
 * [0, num_pages*P): page = slot / P, p = slot % P; per 64-dim block k < 7 of k[t]:
 * enc_k from the block's NaN-free amax, codes e4m3(clamp(x * 2^-e)), written at
 * page*stride + p*576 + 64k; enc_k at page*stride + P*576 + p*8 + k, pad byte 0; dims
 * 448..511 copied bit for bit to p*576 + 448.
 *
 * Decomposition: a warp per token at a time, KV_INSERT_WARPS warps per CTA, the grid
 * capped at KV_INSERT_CTAS_PER_SM per multiprocessor; warp g takes tokens g, g + nw, ...
 * (nw = warps in the grid). Lane l holds elements 8l..8l+7 and 256+8l..256+8l+7
 * (kv_record.h). A token's row comes in with two 16-byte loads per lane, issued with its
 * slot load one token ahead: the next row is in flight while the current one is reduced
 * (block maxima over 8 lanes by shuffles), quantized and stored as 8/16-byte stores
 * (kv_warp.cuh). No shared memory. A claim kernel runs first; a warp stores its record
 * only when its token holds the record's claim, so duplicate slots leave one whole row
 * (kv_warp.cuh).
 *
 * Numerics: integer and exactly-rounded fp32 only (kv_record.h); bit-exact with the CPU
 * reference. Byte offsets are 64-bit (page * page_stride_bytes passes 2^31).
 *
 * dsv4_kv_rope_insert is the same kernel with ROPE = true: a token writes only when its
 * position closes a group of `ratio` positions; the writing warp loads the cos/sin of the
 * group's first position on lanes 24..31 (the RoPE lanes) before the next token's loads,
 * rotates its RoPE words in the form of kv_rope_word_t and stores the record as insert.
 * The ROPE = false instantiation is kv_insert's code unchanged.
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_insert_config.h"
#include "kvcache/kv_warp.cuh"

typedef struct {
    const uint16_t *k;
    const int64_t *slot_mapping;
    uint8_t *cache;
    int64_t k_stride_row, num_tokens, P, page_stride_bytes, num_pages;
    kv_page_div_t page_div; /* slot / P */
} kv_insert_params_t;

typedef struct {
    kv_insert_params_t ins; /* k = the latent */
    const int64_t *positions;
    const float *cos_sin;
    int64_t ratio, max_position;
    kv_page_div_t ratio_div; /* pos / ratio */
} kv_rope_insert_params_t;

template <bool ROPE> struct kv_params { typedef kv_insert_params_t type; };
template <> struct kv_params<true> { typedef kv_rope_insert_params_t type; };

/* kv_insert's fields of either parameter block. */
static __device__ __forceinline__ const kv_insert_params_t &kv_ins(const kv_insert_params_t &p) { return p; }
static __device__ __forceinline__ const kv_insert_params_t &kv_ins(const kv_rope_insert_params_t &p) { return p.ins; }

/* CTAs per SM that stay resident: the launch bound and the grid cap of each variant. */
template <bool ROPE> static constexpr int kv_ctas_per_sm() {
    return ROPE ? KV_ROPE_INSERT_MIN_BLOCKS : KV_INSERT_CTAS_PER_SM;
}

template <bool ROPE>
__global__ void __launch_bounds__(KV_INSERT_THREADS, ROPE ? KV_ROPE_INSERT_MIN_BLOCKS : KV_INSERT_MIN_BLOCKS)
    kv_insert_kernel(const typename kv_params<ROPE>::type rp) {
    const kv_insert_params_t &prm = kv_ins(rp);
    const int lane = threadIdx.x & 31;
    const int64_t nw = (int64_t)gridDim.x * KV_INSERT_WARPS;
    int64_t t = (int64_t)blockIdx.x * KV_INSERT_WARPS + (threadIdx.x >> 5);
    if (t >= prm.num_tokens) return; /* warp-uniform, as everything below */
    /* rows < num_tokens exist even when their slot is skipped: loads never need the slot */
    int64_t slot = __ldg(prm.slot_mapping + t);
    int64_t pos = 0;
    if constexpr (ROPE) pos = __ldg(rp.positions + t);
    uint32_t w[8];
    kv_row_load<true>(prm.k + t * prm.k_stride_row, lane, w);
    for (;;) {
        const int64_t next = t + nw;
        int64_t next_slot = -1, next_pos = 0;
        uint32_t nw8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t page, p;
        bool write;
        float c[4], s[4];
        if constexpr (ROPE) { /* the coefficients go out ahead of the next token's loads */
            int64_t first;
            write = kv_group_closes_div(pos, rp.ratio, rp.ratio_div, &first) &&
                    kv_slot_locate(slot, prm.P, prm.page_div, prm.num_pages, &page, &p);
            if (write) kv_rope_coeffs(rp.cos_sin, first, rp.max_position, lane, c, s);
        }
        if (next < prm.num_tokens) { /* the next token's loads go out before this one's math */
            next_slot = __ldg(prm.slot_mapping + next);
            if constexpr (ROPE) next_pos = __ldg(rp.positions + next);
            kv_row_load<true>(prm.k + next * prm.k_stride_row, lane, nw8);
        }
        if constexpr (!ROPE) write = kv_slot_locate(slot, prm.P, prm.page_div, prm.num_pages, &page, &p);
        if (write) {
            if constexpr (ROPE) {
                if (lane >= KV_LANE_ROPE_FIRST) {
#pragma unroll
                    for (int m = 0; m < 4; ++m) w[4 + m] = kv_rope_word_t(w[4 + m], c[m], s[m]);
                }
            }
            kv_warp_store_record(w, lane, prm.cache + kv_data_offset(page, p, prm.page_stride_bytes),
                                 prm.cache + kv_scale_offset(page, p, prm.P, prm.page_stride_bytes), t);
        }
        if (next >= prm.num_tokens) break;
        t = next;
        slot = next_slot;
        pos = next_pos;
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = nw8[i];
    }
}

/* The claims of the rows that write (kv_warp.cuh). */
static kv_claim_params_t kv_claims(const kv_insert_params_t &p) {
    return kv_claim_params_t{p.slot_mapping,      NULL,        p.cache, p.num_tokens, p.P,
                             p.page_stride_bytes, p.num_pages, 1,       p.page_div,   {}};
}
static kv_claim_params_t kv_claims(const kv_rope_insert_params_t &p) {
    kv_claim_params_t c = kv_claims(p.ins);
    c.positions = p.positions, c.ratio = p.ratio, c.ratio_div = p.ratio_div;
    return c;
}

/* Grid: one resident wave at most. */
template <bool ROPE>
static dsv4_status_t kv_insert_run(const char *op, const typename kv_params<ROPE>::type &prm, int64_t blocks,
                                   dsv4_stream_t stream) {
    static int smem_cache;
    DSV4_TRY(dsv4_launch_prepare(op, (const void *)kv_insert_kernel<ROPE>, KV_INSERT_SMEM_BYTES, &smem_cache));
    DSV4_TRY(kv_claim_launch(op, kv_claims(prm), (cudaStream_t)stream));
    int sms = 0;
    DSV4_TRY(kv_sm_count(op, &sms));
    const int64_t cap = (int64_t)sms * kv_ctas_per_sm<ROPE>();
    const unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
    dsv4_launch(kv_insert_kernel<ROPE>, grid, KV_INSERT_THREADS, KV_INSERT_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status(op);
}

static kv_insert_params_t kv_insert_params(const uint16_t *k, const int64_t *slot_mapping, uint8_t *cache,
                                           int64_t k_stride_row, int64_t num_tokens, int64_t P, int64_t stride,
                                           int64_t num_pages) {
    return kv_insert_params_t{k, slot_mapping, cache,     k_stride_row,       num_tokens,
                              P, stride,       num_pages, kv_page_div_make(P)};
}

extern "C" dsv4_status_t kv_insert_launch(const dsv4_kv_insert_desc_t *d, const kv_insert_plan_t *plan,
                                          const dsv4_kv_insert_args_t *a, dsv4_stream_t stream) {
    const kv_insert_params_t prm = kv_insert_params(a->k, a->slot_mapping, a->cache, plan->k_stride_row, d->num_tokens,
                                                    d->page_tokens, d->page_stride_bytes, d->num_pages);
    return kv_insert_run<false>("kv_insert", prm, plan->blocks, stream);
}

extern "C" dsv4_status_t kv_rope_insert_launch(const dsv4_kv_rope_insert_desc_t *d, const kv_insert_plan_t *plan,
                                               const dsv4_kv_rope_insert_args_t *a, dsv4_stream_t stream) {
    const kv_rope_insert_params_t prm = {kv_insert_params(a->latent, a->slot_mapping, a->cache, plan->k_stride_row,
                                                          d->num_tokens, d->page_tokens, d->page_stride_bytes,
                                                          d->num_pages),
                                         a->positions,
                                         a->cos_sin_cache,
                                         d->ratio,
                                         d->max_position,
                                         kv_page_div_make(d->ratio)};
    return kv_insert_run<true>("kv_rope_insert", prm, plan->blocks, stream);
}

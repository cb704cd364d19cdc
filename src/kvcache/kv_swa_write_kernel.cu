/*
 * kv_swa_write kernel: the fused SWA writer (include/dsv4/kvcache.h).
 *
 * Formula. Q side, token n, head h < Hq, x = q[n, h] (bf16, rewritten in place):
 *   rq = 1 / sqrt(sum(x^2) / 512 + eps); d < 448: bf16(x_d * rq); d >= 448: pairs
 *   (a, b) = (448 + 2i, a + 1) rotated at position_ids[n]: y_a = fmaf(xa, c, -(xb*s)),
 *   y_b = fmaf(xa, s, xb*c) on xa = x_a * rq, xb = x_b * rq, then bf16.
 *   Heads Hq .. Hpad-1 are written as zeros. With skip_q_norm (the SKIP_Q_NORM
 *   instantiation) there is no rq: lanes 24..31 rotate their RoPE chunk with scale 1 and
 *   store it back, the NoPE dims are neither loaded nor stored.
 * KV side, row t < N_insert with a valid slot: r = bf16(RoPE(kv[t]) at position_ids[t]),
 *   then the record of r exactly as kv_insert (the same kv_warp_store_record, after the
 *   same claim kernel: duplicate slots leave one whole row).
 *
 * Decomposition: the work of token n is Hpad + 1 warp tasks, numbered token-major
 * (task = n * (Hpad + 1) + j: j < Hq a q head, j < Hpad a padding head, j = Hpad the kv
 * row). One warp per task, KV_SWA_WARPS warps per CTA, a 1-D grid over the tasks, so
 * the load is even for any head count. A task is one 512-element row in registers in
 * the lane layout of kv_record.h: two 16-byte loads per lane, two 16-byte stores per
 * lane for a q head. No shared memory, no loop. q dominates the bytes (2 KB per head
 * against 1 KB + 584 B per kv row).
 *
 * Numerics: fp32, each product, sum, square root and division rounded on its own (no
 * FMA contraction: kv_record.h's KV_F* wrappers), the squares accumulated with fmaf in
 * the lane layout's order and reduced by a xor butterfly (16, 8, 4, 2, 1): exactly what
 * the CPU reference does, so q matches it bit for bit (the contract asks for 1 ulp).
 * The kv bytes are bit-exact by construction (the shared rules of kv_record.h).
 */
#include <cuda_runtime.h>

#include "common/error.h"
#include "common/launch.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_swa_write_config.h"
#include "kvcache/kv_warp.cuh"

typedef struct {
    uint16_t *q;
    const uint16_t *kv;
    const int64_t *position_ids, *slot_mapping;
    const float *cos_sin;
    uint8_t *cache;
    uint64_t tasks, tasks_per_token;
    int64_t num_insert, heads, heads_padded;
    int64_t q_stride_token, q_stride_head, kv_stride_row, max_position;
    int64_t P, page_stride_bytes, num_pages;
    float eps;
    kv_page_div_t page_div; /* slot / P */
} kv_swa_params_t;

/* q head: RMS factor over the whole row, then bf16(x * rq) or rotate-and-round. */
static __device__ __forceinline__ void swa_q_head(const kv_swa_params_t &prm, int64_t n, int64_t h, int lane) {
    uint16_t *row = prm.q + n * prm.q_stride_token + h * prm.q_stride_head;
    const int64_t pos = __ldg(prm.position_ids + n);
    uint32_t w[8];
    kv_row_load<false>(row, lane, w); /* written back below: not an nc load */
    float c[4], s[4];
    kv_rope_coeffs(prm.cos_sin, pos, prm.max_position, lane, c, s);

    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        ss = kv_sumsq_step(ss, dsv4_bf16_to_f32((uint16_t)w[i]));
        ss = kv_sumsq_step(ss, dsv4_bf16_to_f32((uint16_t)(w[i] >> 16)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss = KV_FADD(ss, __shfl_xor_sync(KV_FULL_MASK, ss, o));
    const float rq = kv_rms_inv(ss, prm.eps);

#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = kv_qnorm_word(w[i], rq);
    if (lane < KV_LANE_ROPE_FIRST) {
#pragma unroll
        for (int i = 4; i < 8; ++i) w[i] = kv_qnorm_word(w[i], rq);
    } else {
#pragma unroll
        for (int m = 0; m < 4; ++m) w[4 + m] = kv_rope_word(w[4 + m], rq, c[m], s[m]);
    }
    kv_row_store(row, lane, w);
}

/* q head without the RMS norm: only the RoPE chunk (lanes 24..31, chunk l + 32) moves. */
static __device__ __forceinline__ void swa_q_head_rope_only(const kv_swa_params_t &prm, int64_t n, int64_t h,
                                                            int lane) {
    if (lane < KV_LANE_ROPE_FIRST) return; /* NoPE dims keep their bits: no store */
    uint4 *p = reinterpret_cast<uint4 *>(prm.q + n * prm.q_stride_token + h * prm.q_stride_head) + 32 + lane;
    const int64_t pos = __ldg(prm.position_ids + n);
    const uint4 x = *p; /* written back below: not an nc load */
    float c[4], s[4];
    kv_rope_coeffs(prm.cos_sin, pos, prm.max_position, lane, c, s);
    *p = make_uint4(kv_rope_word(x.x, 1.0f, c[0], s[0]), kv_rope_word(x.y, 1.0f, c[1], s[1]),
                    kv_rope_word(x.z, 1.0f, c[2], s[2]), kv_rope_word(x.w, 1.0f, c[3], s[3]));
}

/* kv row t: rotate, round to bf16, quantize and insert. */
static __device__ __forceinline__ void swa_kv_row(const kv_swa_params_t &prm, int64_t t, int lane) {
    const int64_t slot = __ldg(prm.slot_mapping + t);
    const int64_t pos = __ldg(prm.position_ids + t);
    uint32_t w[8];
    kv_row_load<true>(prm.kv + t * prm.kv_stride_row, lane, w);
    float c[4], s[4];
    kv_rope_coeffs(prm.cos_sin, pos, prm.max_position, lane, c, s); /* all loads in flight together */
    int64_t page, p;
    if (!kv_slot_locate(slot, prm.P, prm.page_div, prm.num_pages, &page, &p)) return;
    if (lane >= KV_LANE_ROPE_FIRST) {
#pragma unroll
        for (int m = 0; m < 4; ++m) w[4 + m] = kv_rope_word(w[4 + m], 1.0f, c[m], s[m]);
    }
    kv_warp_store_record(w, lane, prm.cache + kv_data_offset(page, p, prm.page_stride_bytes),
                         prm.cache + kv_scale_offset(page, p, prm.P, prm.page_stride_bytes), t);
}

/* SKIP_Q_NORM is a template parameter so that the RMS-norm instantiation keeps its code. */
template <bool SKIP_Q_NORM>
__global__ void __launch_bounds__(KV_SWA_THREADS, KV_SWA_MIN_BLOCKS) kv_swa_write_kernel(const kv_swa_params_t prm) {
    const int lane = threadIdx.x & 31;
    const uint64_t task = (uint64_t)blockIdx.x * KV_SWA_WARPS + (threadIdx.x >> 5);
    if (task >= prm.tasks) return; /* everything below is warp-uniform */
    const int64_t n = (int64_t)(task / prm.tasks_per_token);
    const int64_t j = (int64_t)(task - (uint64_t)n * prm.tasks_per_token);
    if (j < prm.heads) {
        if (SKIP_Q_NORM) swa_q_head_rope_only(prm, n, j, lane);
        else swa_q_head(prm, n, j, lane);
    } else if (j < prm.heads_padded) {
        const uint32_t zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        kv_row_store(prm.q + n * prm.q_stride_token + j * prm.q_stride_head, lane, zero);
    } else if (n < prm.num_insert) {
        swa_kv_row(prm, n, lane);
    }
}

extern "C" dsv4_status_t kv_swa_launch(const dsv4_kv_swa_write_desc_t *d, const kv_swa_plan_t *plan,
                                       const dsv4_kv_swa_write_args_t *a, dsv4_stream_t stream) {
    static int smem_cache[2]; /* one per instantiation */
    const int skip = d->skip_q_norm != 0;
    void (*const kernel)(kv_swa_params_t) = skip ? kv_swa_write_kernel<true> : kv_swa_write_kernel<false>;
    DSV4_TRY(dsv4_launch_prepare("kv_swa_write", (const void *)kernel, KV_SWA_SMEM_BYTES, &smem_cache[skip]));
    kv_swa_params_t prm;
    prm.q = a->q;
    prm.kv = a->kv;
    prm.position_ids = a->position_ids;
    prm.slot_mapping = a->slot_mapping;
    prm.cos_sin = a->cos_sin_cache;
    prm.cache = a->cache;
    prm.tasks_per_token = (uint64_t)plan->tasks_per_token;
    prm.tasks = (uint64_t)d->num_tokens * prm.tasks_per_token;
    prm.num_insert = d->num_insert;
    prm.heads = d->num_heads;
    prm.heads_padded = plan->heads_padded;
    prm.q_stride_token = plan->q_stride_token;
    prm.q_stride_head = plan->q_stride_head;
    prm.kv_stride_row = plan->kv_stride_row;
    prm.max_position = d->max_position;
    prm.P = d->page_tokens;
    prm.page_stride_bytes = d->page_stride_bytes;
    prm.num_pages = d->num_pages;
    prm.eps = d->eps;
    prm.page_div = kv_page_div_make(d->page_tokens);
    const kv_claim_params_t claims = {a->slot_mapping,      NULL,         a->cache, d->num_insert, d->page_tokens,
                                      d->page_stride_bytes, d->num_pages, 1,        prm.page_div,  {}};
    DSV4_TRY(kv_claim_launch("kv_swa_write", claims, (cudaStream_t)stream));
    dsv4_launch(kernel, (unsigned)plan->blocks, KV_SWA_THREADS, KV_SWA_SMEM_BYTES, (cudaStream_t)stream, prm);
    return dsv4_launch_status("kv_swa_write");
}

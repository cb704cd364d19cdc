/* The kvcache test functions (test_kvcache_main.c lists them) and the gather case shared
 * by the CPU and GPU tests. */
#ifndef DSV4_TEST_KVCACHE_H
#define DSV4_TEST_KVCACHE_H

#include "kv_test_util.h"

/* A random gather problem: cache bytes, requests, block table, descriptor. */
typedef struct {
    kvt_geom_t g;
    dsv4_kv_gather_desc_t desc;
    uint8_t *cache;
    int32_t *seq, *glen, *table; /* glen may be NULL */
    int64_t width, sreq, srow;   /* resolved strides */
    size_t out_elems;            /* bf16 elements the output spans */
} kvt_gather_case_t;
void kvt_gather_case(th_rng_t *r, kvt_geom_t g, int64_t R, kvt_gather_case_t *c);
void kvt_gather_case_free(kvt_gather_case_t *c);
/* Poison everywhere, the model's rows where the contract writes. */
void kvt_gather_expected(const kvt_gather_case_t *c, uint16_t *want);
size_t kvt_cmp_gather(th_ctx_t *t, const char *what, const kvt_gather_case_t *c, const uint16_t *got,
                      const uint16_t *want);

/* Can a block produce the pair (bf16 x, enc)? (enc from an amax >= |x|, or 255.) */
int kvt_quant_pair_reachable(uint16_t h, uint32_t enc);
/* kv_quant_word2 of every bf16 x at every enc into dev_codes[enc * 65536 + x] (16 MiB of
 * device memory); returns the launch's cudaError_t. */
#ifdef __cplusplus
extern "C"
#endif
    int
    kvt_gpu_quant_all(uint8_t *dev_codes);

/* CPU */
void test_kv_quant_elem_all(th_ctx_t *t);
void test_kv_insert_known_answers(th_ctx_t *t);
void test_kv_insert_random_vs_model(th_ctx_t *t);
void test_kv_insert_gather_roundtrip(th_ctx_t *t);
void test_kv_swa_known_answers(th_ctx_t *t);
void test_kv_swa_kv_equals_insert(th_ctx_t *t);
void test_kv_swa_q_vs_fp64(th_ctx_t *t);
void test_kv_swa_skip_q_norm_known_answers(th_ctx_t *t);
void test_kv_swa_skip_q_norm_random(th_ctx_t *t);
void test_kv_gather_known_answers(th_ctx_t *t);
void test_kv_gather_random_vs_model(th_ctx_t *t);
void test_kv_plans(th_ctx_t *t);
void test_kv_bad_input_insert(th_ctx_t *t);
void test_kv_bad_input_swa(th_ctx_t *t);
void test_kv_bad_input_gather(th_ctx_t *t);
void test_kv_rope_insert_known_answers(th_ctx_t *t);
void test_kv_rope_insert_form_t(th_ctx_t *t);
void test_kv_rope_insert_random_vs_model(th_ctx_t *t);
void test_kv_bad_input_rope_insert(th_ctx_t *t);

/* GPU */
void test_kv_gpu_quant_all(th_ctx_t *t);
void test_kv_gpu_insert(th_ctx_t *t);
void test_kv_gpu_swa(th_ctx_t *t);
void test_kv_gpu_gather(th_ctx_t *t);
void test_kv_gpu_big_offset(th_ctx_t *t);
void test_kv_gpu_bad_input_writes_nothing(th_ctx_t *t);
void test_kv_gpu_graph_capture(th_ctx_t *t);
void test_kv_gpu_rope_insert(th_ctx_t *t);
void test_kv_duplicate_slots_ref(th_ctx_t *t);
void test_kv_gpu_duplicate_slots(th_ctx_t *t);

#endif

/*
 * Model-shaped geometry that the tests and dsv4_bench share, so that both exercise the
 * shapes a DeepSeek-V4.1 (and V4) deployment produces. Plain constants over the public
 * headers; each family's tests and benchmark cases build their inputs from these.
 */
#ifndef DSV4_TESTS_MODEL_CASES_H
#define DSV4_TESTS_MODEL_CASES_H

#include <stdint.h>

#include "dsv4/kvcache.h"

/* vLLM's page stride for P fp8_ds_mla slots: P * 584 bytes rounded up to a multiple of 576. */
#define MC_PAGE_STRIDE(P)                                                                                              \
    (((P)*DSV4_KV_RECORD_BYTES + DSV4_KV_DATA_BYTES - 1) / DSV4_KV_DATA_BYTES * DSV4_KV_DATA_BYTES)

#define MC_SWA_PAGE_TOKENS 32 /* V4.1's SWA cache: 32 slots per page (stride 19,008 B)         */
#define MC_V4_PAGE_TOKENS 64  /* V4's SWA and ratio-4 compressed pages (stride 37,440 B)       */
#define MC_C128_PAGE_TOKENS 2 /* V4's ratio-128 compressed page (stride 1,728 B)               */
#define MC_WINDOW 128         /* sliding window of every DeepSeek-V4 model                     */
#define MC_MHC_HIDDEN 5120    /* V4.1-Flash hidden size (the mHC residual width per stream)    */

#endif /* DSV4_TESTS_MODEL_CASES_H */

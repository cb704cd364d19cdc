/* Tests of the public API core (dsv4.h): CPU in test_api.c, GPU in test_api_gpu.cu. */
#ifndef DSV4_TEST_API_H
#define DSV4_TEST_API_H

#include "harness.h"

#ifdef __cplusplus
extern "C" {
#endif
void test_api_gpu_device_query(th_ctx_t *t);
void test_api_gpu_smem_gate(th_ctx_t *t);
void test_api_gpu_probes(th_ctx_t *t);
void test_api_gpu_launch_status(th_ctx_t *t);
#ifdef __cplusplus
}
#endif

#endif

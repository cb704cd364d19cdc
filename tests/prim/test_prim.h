/* Launchers of the prim test kernels (test_prim_kernels.cu); they return cudaError_t. */
#ifndef DSV4_TEST_PRIM_H
#define DSV4_TEST_PRIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
int prim_run_mma(int bf16, const uint16_t *A, const uint16_t *Bk, const uint16_t *Bn, float *D);
int prim_run_ldmatrix(const uint16_t *M, uint32_t *out);
int prim_run_zfill(const void *src, void *dst);
int prim_run_fp8(uint16_t *out);
int prim_run_div(const float *x, const float *d, float *fast, float *ref, int n);
#ifdef __cplusplus
}
#endif

#endif

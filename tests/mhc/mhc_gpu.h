/* Device-side seam fixture shared by the GPU tests: buffers for one dsv4_mhc_seam call
 * (inputs uploaded, outputs poisoned, guard bands), its run, and the downloaded outputs. */
#ifndef DSV4_TEST_MHC_GPU_H
#define DSV4_TEST_MHC_GPU_H

#include "mhc_test.h"

typedef struct {
    th_buf_t x, R, post, comb, fn, scale, base, premix, w;
    th_buf_t R_out, post_out, comb_out, pre_out, li, aux, mix, ws;
    dsv4_mhc_seam_args_t args;
    size_t ws_bytes;
} dseam_t;

typedef struct {
    uint16_t *R_out, *li, *aux;
    float *post, *comb, *pre, *mix;
} seam_host_t;

void dseam_make(dseam_t *d, const mt_seam_in_t *in, const dsv4_mhc_seam_desc_t *desc, int aux);
dsv4_status_t dseam_run(th_ctx_t *t, dseam_t *d, const dsv4_mhc_seam_desc_t *desc);
void dseam_download(th_ctx_t *t, const dseam_t *d, seam_host_t *o);
void dseam_inputs_unchanged(th_ctx_t *t, const dseam_t *d, const mt_seam_in_t *in);
void dseam_free(dseam_t *d);
void seam_host_free(seam_host_t *o);

#endif

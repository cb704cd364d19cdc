/* The descriptor fuzzer's reference calls: small accepted descriptors, buffers sized from
 * them, guard bands that must stay intact. */
#ifndef DSV4_TESTS_FUZZ_REF_H
#define DSV4_TESTS_FUZZ_REF_H

#include "fuzz_ops.h"
#include "harness.h"

/* _check, _workspace_size and _plan on d, which must agree; returns _check's status. */
dsv4_status_t fz_judge(th_ctx_t *t, const fz_op_t *op, const void *d, const char *log);

/* One reference call on a small mutated descriptor of a random op; 1 if it was accepted
 * and ran. */
int fz_ref_once(th_ctx_t *t, th_rng_t *r);

#endif /* DSV4_TESTS_FUZZ_REF_H */

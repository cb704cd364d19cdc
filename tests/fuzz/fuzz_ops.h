/*
 * The descriptor fuzzer's table of public operators: for each, a valid descriptor, its
 * fields (offset and type) and the host functions that judge it (_check,
 * _workspace_size and, where it exists, _plan).
 */
#ifndef DSV4_TESTS_FUZZ_OPS_H
#define DSV4_TESTS_FUZZ_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

enum { FZ_I64, FZ_I32, FZ_F32 };

typedef struct {
    const char *name;
    size_t off;
    int type;
} fz_field_t;

typedef struct {
    const char *op; /* the name the messages start with */
    size_t desc_bytes;
    const void *valid;
    const fz_field_t *fields;
    int num_fields;
    dsv4_status_t (*check)(const void *d);
    dsv4_status_t (*wsize)(const void *d, size_t *bytes);
    dsv4_status_t (*plan)(const void *d); /* NULL where the op has none */
    int plan_needs_device;                /* NO_DEVICE allowed from wsize/plan without a GPU */
    /* _ref where its args are pointers only and a rejected descriptor must fail it before
     * any is read; NULL elsewhere. */
    dsv4_status_t (*ref)(const void *d, const void *args);
} fz_op_t;

extern const fz_op_t fz_ops[];
extern const int fz_num_ops;

#endif /* DSV4_TESTS_FUZZ_OPS_H */

/*
 * The bad-input checks every operator's tests share: one macro that defines, for operator
 * OP with descriptor desc_t and args args_t,
 *   NAME(t, desc, args, desc_case, status, field, value)  a bad descriptor (desc_case = 1)
 *       fails _check, _workspace_size (leaving its output alone), the run call and _ref with
 *       `status` and a message naming op, field and value; bad args fail the run call and
 *       _ref;
 *   NAME##_null(t, good_desc, good_args)  the NULL descriptor, args, bytes and stream cases,
 *       and workspace_size 0 for a good descriptor.
 * For operators whose run call takes (desc, args, workspace, workspace_bytes, stream) and
 * needs no workspace. TH_EXPECT_FNS_WS is the same for an operator that needs one: its
 * NAME##_null_ws(t, good_desc, good_args, want) expects workspace_size `want`.
 */
#ifndef DSV4_TESTS_BAD_INPUT_H
#define DSV4_TESTS_BAD_INPUT_H

#include <stdio.h>

#include "harness.h"

#define TH_EXPECT_FNS_WS(NAME, OP, desc_t, args_t)                                                                     \
    static void NAME(th_ctx_t *t, const desc_t *d, const args_t *a, int desc_case, dsv4_status_t st,                   \
                     const char *field, const char *value) {                                                           \
        char call[96];                                                                                                 \
        if (desc_case) {                                                                                               \
            size_t ws = 99;                                                                                            \
            snprintf(call, sizeof call, #OP "_check [%s]", field);                                                     \
            TH_EXPECT_STATUS(t, dsv4_##OP##_check(d), st);                                                             \
            th_expect_error(t, call, #OP, field, value);                                                               \
            TH_EXPECT_STATUS(t, dsv4_##OP##_workspace_size(d, &ws), st);                                               \
            TH_CHECK(t, ws == 99, #OP "_workspace_size wrote %zu on failure", ws);                                     \
        }                                                                                                              \
        snprintf(call, sizeof call, #OP " [%s]", field);                                                               \
        TH_EXPECT_STATUS(t, dsv4_##OP(d, a, NULL, 0, NULL), st);                                                       \
        th_expect_error(t, call, #OP, field, value);                                                                   \
        snprintf(call, sizeof call, #OP "_ref [%s]", field);                                                           \
        TH_EXPECT_STATUS(t, dsv4_##OP##_ref(d, a), st);                                                                \
        th_expect_error(t, call, #OP, field, value);                                                                   \
    }                                                                                                                  \
    static void NAME##_null_ws(th_ctx_t *t, const desc_t *good, const args_t *ga, size_t want) {                       \
        size_t ws = want + 1;                                                                                          \
        NAME(t, NULL, ga, 1, DSV4_STATUS_NULL_POINTER, "desc", NULL);                                                  \
        NAME(t, good, NULL, 0, DSV4_STATUS_NULL_POINTER, "args", NULL);                                                \
        TH_EXPECT_STATUS(t, dsv4_##OP##_workspace_size(good, NULL), DSV4_STATUS_NULL_POINTER);                         \
        th_expect_error(t, "workspace_size(desc, NULL)", #OP, "bytes", NULL);                                          \
        TH_EXPECT_STATUS(t, dsv4_##OP(good, ga, NULL, 0, NULL), DSV4_STATUS_NULL_POINTER);                             \
        th_expect_error(t, "NULL stream", #OP, "stream", NULL);                                                        \
        TH_OK(t, dsv4_##OP##_workspace_size(good, &ws));                                                               \
        TH_CHECK(t, ws == want, #OP "_workspace_size says %zu, expected %zu", ws, want);                               \
    }
#define TH_EXPECT_FNS(NAME, OP, desc_t, args_t)                                                                        \
    TH_EXPECT_FNS_WS(NAME, OP, desc_t, args_t)                                                                         \
    static void NAME##_null(th_ctx_t *t, const desc_t *good, const args_t *ga) { NAME##_null_ws(t, good, ga, 0); }

#endif /* DSV4_TESTS_BAD_INPUT_H */

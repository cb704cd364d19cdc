/* Shared pieces of the indices family's tests (idx_test.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx_test.h"

static idx_dev_t dev_make(size_t bytes, size_t off, const void *host, const char *what) {
    idx_dev_t d;
    d.buf = th_buf_device(bytes + off);
    d.off = off;
    d.bytes = bytes;
    d.host = host;
    d.what = what;
    return d;
}

idx_dev_t idx_dev_in(const void *host, size_t bytes, size_t off, const char *what) {
    idx_dev_t d = dev_make(bytes, off, host, what);
    uint8_t *staging = malloc(bytes + off + 1);
    memset(staging, IDX_POISON, off);
    if (bytes) memcpy(staging + off, host, bytes);
    th_buf_upload(&d.buf, staging);
    free(staging);
    return d;
}

idx_dev_t idx_dev_out(size_t bytes, size_t off, const char *what) {
    idx_dev_t d = dev_make(bytes, off, NULL, what);
    th_buf_poison(&d.buf, IDX_POISON); /* returns after the memset completes */
    return d;
}

void *idx_dev_ptr(const idx_dev_t *d) { return (uint8_t *)th_ptr(&d->buf) + d->off; }

static uint8_t *download_all(const idx_dev_t *d) {
    uint8_t *all = malloc(d->bytes + d->off + 1);
    th_buf_download(&d->buf, all);
    return all;
}

int idx_dev_check_in(th_ctx_t *t, const idx_dev_t *d) {
    int ok = th_buf_guards_ok(t, &d->buf, d->what);
    uint8_t *all = download_all(d);
    if (d->host && d->bytes && memcmp(all + d->off, d->host, d->bytes) != 0) {
        th_fail(t, __FILE__, __LINE__, "input %s was modified by the call", d->what);
        ok = 0;
    }
    free(all);
    return ok;
}

void idx_dev_get(th_ctx_t *t, const idx_dev_t *d, void *host_out) {
    th_buf_guards_ok(t, &d->buf, d->what);
    uint8_t *all = download_all(d);
    for (size_t i = 0; i < d->off; ++i)
        if (all[i] != IDX_POISON) {
            th_fail(t, __FILE__, __LINE__, "%s: byte %zu before the pointer was written", d->what, i);
            break;
        }
    if (d->bytes) memcpy(host_out, all + d->off, d->bytes);
    free(all);
}

void idx_dev_free(idx_dev_t *d) { th_buf_free(&d->buf); }

void idx_dev_finish(th_ctx_t *t, idx_dev_t *const ins[], int n_in, idx_dev_t *const outs[], int n_out) {
    for (int i = 0; i < n_in; ++i) idx_dev_check_in(t, ins[i]);
    for (int i = 0; i < n_in; ++i) idx_dev_free(ins[i]);
    for (int i = 0; i < n_out; ++i) idx_dev_free(outs[i]);
}

int idx_sync_status(th_ctx_t *t, const char *name, dsv4_status_t st, void *stream) {
    if (st != DSV4_STATUS_SUCCESS) th_fail(t, __FILE__, __LINE__, "[%s] run: %s", name, dsv4_last_error());
    th_stream_sync_destroy(t, stream);
    return st == DSV4_STATUS_SUCCESS;
}

int32_t *idx_poisoned_i32(size_t n) {
    int32_t *p = malloc((n ? n : 1) * sizeof *p);
    memset(p, IDX_POISON, (n ? n : 1) * sizeof *p);
    return p;
}

size_t idx_cmp_i32(th_ctx_t *t, const char *case_name, const char *what, const int32_t *got, const int32_t *want,
                   size_t n, int64_t stride) {
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (got[i] == want[i]) continue;
        if (bad < 8) {
            if (stride > 0)
                th_fail(t, __FILE__, __LINE__, "[%s] %s(row %lld, col %lld) = %d, want %d", case_name, what,
                        (long long)(i / (size_t)stride), (long long)(i % (size_t)stride), got[i], want[i]);
            else th_fail(t, __FILE__, __LINE__, "[%s] %s[%zu] = %d, want %d", case_name, what, i, got[i], want[i]);
        }
        ++bad;
    }
    if (bad) th_fail(t, __FILE__, __LINE__, "[%s] %s: %zu of %zu elements differ", case_name, what, bad, n);
    return bad;
}

void idx_expect_fail(th_ctx_t *t, const char *call, dsv4_status_t st, dsv4_status_t want, const char *op,
                     const char *field) {
    if (st != want) {
        th_fail(t, __FILE__, __LINE__, "%s returned %s, expected %s (last error: %s)", call, dsv4_status_string(st),
                dsv4_status_string(want), dsv4_last_error());
        return;
    }
    const char *msg = dsv4_last_error();
    if (!strstr(msg, op) || (field && !strstr(msg, field)))
        th_fail(t, __FILE__, __LINE__, "%s: message should name '%s' and '%s': '%s'", call, op, field ? field : "",
                msg);
}

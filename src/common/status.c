/* Status names, the thread-local last-error text, and the shared argument checks. */
#include <stdarg.h>
#include <stdio.h>

#include "common/error.h"

static _Thread_local char last_error[512];

unsigned dsv4_version_number(void) { return DSV4_VERSION_NUMBER; }

#define DSV4_STR2(x) #x
#define DSV4_STR(x) DSV4_STR2(x)
const char *dsv4_version_string(void) {
    return DSV4_STR(DSV4_VERSION_MAJOR) "." DSV4_STR(DSV4_VERSION_MINOR) "." DSV4_STR(DSV4_VERSION_PATCH);
}

const char *dsv4_status_string(dsv4_status_t status) {
    switch (status) {
    case DSV4_STATUS_SUCCESS: return "DSV4_STATUS_SUCCESS";
    case DSV4_STATUS_NULL_POINTER: return "DSV4_STATUS_NULL_POINTER";
    case DSV4_STATUS_INVALID_VALUE: return "DSV4_STATUS_INVALID_VALUE";
    case DSV4_STATUS_MISALIGNED: return "DSV4_STATUS_MISALIGNED";
    case DSV4_STATUS_UNSUPPORTED: return "DSV4_STATUS_UNSUPPORTED";
    case DSV4_STATUS_WORKSPACE_TOO_SMALL: return "DSV4_STATUS_WORKSPACE_TOO_SMALL";
    case DSV4_STATUS_NO_DEVICE: return "DSV4_STATUS_NO_DEVICE";
    case DSV4_STATUS_CUDA_ERROR: return "DSV4_STATUS_CUDA_ERROR";
    case DSV4_STATUS_INTERNAL: return "DSV4_STATUS_INTERNAL";
    }
    return "unknown status";
}

const char *dsv4_last_error(void) { return last_error; }

dsv4_status_t dsv4_fail(dsv4_status_t status, const char *op, const char *fmt, ...) {
    int n = snprintf(last_error, sizeof last_error, "%s: ", op ? op : "dsv4");
    if (n < 0 || (size_t)n >= sizeof last_error) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

dsv4_status_t dsv4_check_ptr(const char *op, const char *what, const void *p) {
    if (p) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_NULL_POINTER, op, "%s is NULL", what);
}

dsv4_status_t dsv4_check_range(const char *op, const char *what, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld is outside [%lld, %lld]", what, (long long)v,
                     (long long)lo, (long long)hi);
}

dsv4_status_t dsv4_check_align(const char *op, const char *what, const void *p, int64_t align) {
    if (((uintptr_t)p % (uintptr_t)align) == 0) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_MISALIGNED, op, "%s = %p is not %lld-byte aligned", what, p, (long long)align);
}

dsv4_status_t dsv4_given_stride(const char *op, const char *what, int64_t stride, int64_t extent, int64_t unused,
                                int64_t *out) {
    if (stride == 0 && extent > 1)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "%s = 0 on a dimension of extent %lld: a stride of 0 is never a default (its rows would "
                         "alias); pass the tensor's real stride",
                         what, (long long)extent);
    *out = stride == 0 ? unused : stride;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_check_stream(const char *op, dsv4_stream_t stream) {
    if (stream) return DSV4_STATUS_SUCCESS;
    return dsv4_fail(DSV4_STATUS_NULL_POINTER, op,
                     "stream is NULL; pass a created stream, or DSV4_STREAM(cudaStreamLegacy) to ask for the "
                     "legacy default stream explicitly");
}

dsv4_status_t dsv4_check_workspace(const char *op, size_t need, const void *ws, size_t have) {
    if (need == 0) return DSV4_STATUS_SUCCESS;
    if (have < need)
        return dsv4_fail(DSV4_STATUS_WORKSPACE_TOO_SMALL, op, "workspace_bytes = %zu is below the %zu bytes needed",
                         have, need);
    return dsv4_check_ptr(op, "workspace", ws);
}

dsv4_status_t dsv4_check_pages(const char *op, int64_t P, int64_t stride, int64_t num_pages, int64_t slot_bytes) {
    DSV4_TRY(dsv4_check_range(op, "page_tokens", P, 1, INT64_C(1) << 24));
    const int64_t used = P * slot_bytes;
    if (stride < used)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op,
                         "page_stride_bytes = %lld is smaller than page_tokens*%lld = %lld (page_tokens = %lld)",
                         (long long)stride, (long long)slot_bytes, (long long)used, (long long)P);
    if (stride % 16 != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op,
                         "page_stride_bytes = %lld is not a multiple of 16 (the kernels move 16-byte pieces)",
                         (long long)stride);
    return dsv4_check_range(op, "num_pages", num_pages, 1, INT64_MAX / stride);
}

dsv4_status_t dsv4_check_row_stride(const char *op, const char *what, int64_t stride, int64_t min_elems, int64_t rows,
                                    int64_t elem_bytes, int64_t multiple) {
    if (stride < min_elems)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld is below its minimum %lld", what, (long long)stride,
                         (long long)min_elems);
    /* rows * stride elements must have a 64-bit byte offset. */
    if (rows > 1 && stride > INT64_MAX / elem_bytes / rows)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld over %lld rows overflows a 64-bit byte offset", what,
                         (long long)stride, (long long)rows);
    if (stride % multiple != 0)
        return dsv4_fail(DSV4_STATUS_MISALIGNED, op, "%s = %lld is not a multiple of %lld elements (row alignment)",
                         what, (long long)stride, (long long)multiple);
    return DSV4_STATUS_SUCCESS;
}

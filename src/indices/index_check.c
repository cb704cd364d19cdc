/* Host-side argument checks shared by the indices family (index_check.h). */
#include "indices/index_check.h"

int dsv4_idx_grid_cap = 0;

dsv4_status_t dsv4_idx_check_i32(const char *op, const char *what, const void *p) {
    DSV4_TRY(dsv4_check_ptr(op, what, p));
    return dsv4_check_align(op, what, p, 4);
}

dsv4_status_t dsv4_idx_check_stride(const char *op, const char *what, int64_t stride, int64_t width, int64_t rows,
                                    int64_t *out) {
    int64_t s;
    DSV4_TRY(dsv4_given_stride(op, what, stride, width > 0 ? rows : 0, width, &s));
    if (s < width)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld is below the row width %lld", what,
                         (long long)stride, (long long)width);
    const int64_t max_elems = (INT64_C(1) << 60); /* * 4 bytes = 2^62 */
    if (rows > 0 && s > max_elems / rows)
        return dsv4_fail(DSV4_STATUS_INVALID_VALUE, op, "%s = %lld times %lld rows overflows the address range", what,
                         (long long)s, (long long)rows);
    *out = s;
    return DSV4_STATUS_SUCCESS;
}

int dsv4_idx_vec16(const void *p, int64_t stride, int64_t width) {
    return ((uintptr_t)p % 16u) == 0 && stride % 4 == 0 && width % 4 == 0;
}

dsv4_status_t dsv4_idx_check_i32_all(const char *op, int n, const char *const names[], const void *const ptrs[]) {
    for (int i = 0; i < n; ++i) DSV4_TRY(dsv4_idx_check_i32(op, names[i], ptrs[i]));
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_idx_no_workspace(const char *op, dsv4_status_t desc_status, size_t *bytes) {
    DSV4_TRY(desc_status);
    DSV4_TRY(dsv4_check_ptr(op, "bytes", bytes));
    *bytes = 0;
    return DSV4_STATUS_SUCCESS;
}

dsv4_status_t dsv4_idx_check_launch(const char *op, size_t need, const void *ws, size_t ws_bytes,
                                    dsv4_stream_t stream) {
    DSV4_TRY(dsv4_check_workspace(op, need, ws, ws_bytes));
    if (need > 0) DSV4_TRY(dsv4_check_align(op, "workspace", ws, 4));
    return dsv4_check_stream(op, stream);
}

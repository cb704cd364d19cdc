/* Helpers of the kvcache tests (kv_test_util.h). The record model here is written from
 * include/dsv4/kvcache.h and dsv4/numerics.h's contracts with double arithmetic and numerics.h's
 * converters only, so a mistake in src/kvcache cannot be mirrored by it. */
#include "kv_test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4/numerics.h"

static const char *const kind_names[KVT_ROW_KINDS] = {"logmag", "zero", "below-floor", "ties", "normal", "nan/inf"};
const char *kvt_row_kind_name(kvt_row_kind_t k) { return (unsigned)k < KVT_ROW_KINDS ? kind_names[k] : "?"; }

static uint16_t bf16_of(double v) { return dsv4_f32_to_bf16((float)v); }

void kvt_fill_row(th_rng_t *r, kvt_row_kind_t kind, uint16_t *row) {
    switch (kind) {
    case KVT_ROW_LOGMAG:
        for (int k = 0; k < 8; ++k) {
            const double top = (double)th_rng_range(r, -30, 39);
            for (int i = 0; i < 64; ++i)
                row[64 * k + i] = th_rng_range(r, 0, 19) == 0 ? 0 : bf16_of(th_rng_logmag(r, top - 12, top + 1));
        }
        break;
    case KVT_ROW_ZERO:
        for (int d = 0; d < 512; ++d) row[d] = th_rng_range(r, 0, 3) == 0 ? 0x8000 : 0x0000;
        break;
    case KVT_ROW_BELOW_FLOOR:
        for (int d = 0; d < 512; ++d) row[d] = bf16_of(th_rng_logmag(r, -30, -13.5)); /* 2^-13.5 < 1e-4 */
        if (th_rng_range(r, 0, 1)) row[th_rng_range(r, 0, 447)] = 0x3728; /* bf16(1e-5): below the amax floor */
        break;
    case KVT_ROW_TIES:
        /* Block amax exactly 448 * 2^e pins e; the other elements sit halfway between two
         * e4m3 neighbours (normal: (8 + m + 1/2) 2^(E-10); subnormal: (j + 1/2) 2^-9). */
        for (int k = 0; k < 8; ++k) {
            const int e = (int)th_rng_range(r, -20, 100);
            for (int i = 0; i < 64; ++i) {
                double v;
                if (th_rng_range(r, 0, 3) == 0) v = (th_rng_range(r, 0, 7) + 0.5) * ldexp(1.0, -9);
                else v = (8 + th_rng_range(r, 0, 7) + 0.5) * ldexp(1.0, (int)th_rng_range(r, 1, 14) - 10);
                v = ldexp(v, e);
                row[64 * k + i] = bf16_of(th_rng_range(r, 0, 1) ? -v : v);
            }
            row[64 * k + th_rng_range(r, 0, 63)] = bf16_of(ldexp(448.0, e));
        }
        break;
    case KVT_ROW_NORMAL: th_fill_bf16_normal(r, row, 512, 1.0); break;
    case KVT_ROW_SPECIAL:
    default: {
        static const uint16_t special[6] = {0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x7FFF};
        for (int d = 0; d < 512; ++d) row[d] = bf16_of(th_rng_logmag(r, -8, 8));
        for (int n = 0; n < 12; ++n) row[th_rng_range(r, 0, 511)] = special[th_rng_range(r, 0, 5)];
        if (th_rng_range(r, 0, 1)) /* a block whose elements are all NaN: amax floor, codes 0x7E */
            for (int i = 0; i < 64; ++i) row[64 * th_rng_range(r, 0, 6) + i] = 0x7FC0;
        break;
    }
    }
}

void kvt_fill_rows(th_rng_t *r, uint16_t *rows, int64_t n, int64_t stride, int kinds, int *kinds_out) {
    for (int64_t i = 0; i < n; ++i) {
        const int kind = (int)((i + th_rng_range(r, 0, kinds - 1)) % kinds);
        kvt_fill_row(r, (kvt_row_kind_t)kind, rows + i * stride);
        /* fill the stride gap with junk that must never be read into a record */
        for (int64_t d = 512; d < stride; ++d) rows[i * stride + d] = (uint16_t)th_rng_u32(r);
        if (kinds_out) kinds_out[i] = kind;
    }
}

void kvt_make_slots(th_rng_t *r, kvt_geom_t g, int64_t n, int with_skips, int64_t *slots) {
    const int64_t total = g.num_pages * g.P;
    int64_t *perm = malloc((size_t)total * sizeof *perm);
    for (int64_t i = 0; i < total; ++i) perm[i] = i;
    for (int64_t i = total - 1; i > 0; --i) {
        int64_t j = th_rng_range(r, 0, i), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int64_t i = 0; i < n; ++i) {
        slots[i] = perm[i % total]; /* n <= total keeps them distinct */
        if (with_skips && th_rng_range(r, 0, 7) == 0) {
            static const int64_t skip[5] = {-1, -1, -7, INT64_MIN, INT64_MAX};
            int64_t pick = th_rng_range(r, 0, 5);
            slots[i] = pick < 5 ? skip[pick] : total + th_rng_range(r, 0, 3 * g.P);
        }
    }
    free(perm);
}

int kvt_model_enc(const uint16_t *x) {
    double amax = 0.0;
    for (int i = 0; i < 64; ++i) {
        double v = fabs((double)dsv4_bf16_to_f32(x[i]));
        if (!isnan(v) && v > amax) amax = v;
    }
    if (isinf(amax)) return 255;
    if (amax < (double)1e-4f) amax = (double)1e-4f;
    int e = -200;
    while (ldexp(448.0, e) < amax) ++e;
    e += 127;
    return e < 0 ? 0 : (e > 255 ? 255 : e);
}

void kvt_model_insert(kvt_geom_t g, uint8_t *cache, int64_t slot, const uint16_t *row) {
    const int64_t page = slot / g.P, p = slot % g.P;
    uint8_t *data = cache + page * g.stride + p * 576, *scales = cache + page * g.stride + g.P * 576 + p * 8;
    for (int k = 0; k < 7; ++k) {
        const int enc = kvt_model_enc(row + 64 * k);
        for (int i = 0; i < 64; ++i) {
            const float x = dsv4_bf16_to_f32(row[64 * k + i]);
            /* x / 2^e: at enc 255 that is x / inf (finite -> +-0, inf -> NaN), as upstream. */
            float v = enc == 255 ? x / INFINITY : (float)ldexp((double)x, 127 - enc);
            if (isnan(v)) v = 448.0f;
            v = v > 448.0f ? 448.0f : (v < -448.0f ? -448.0f : v);
            data[64 * k + i] = dsv4_f32_to_e4m3(v);
        }
        scales[k] = (uint8_t)enc;
    }
    scales[7] = 0;
    for (int i = 0; i < 64; ++i) {
        data[448 + 2 * i] = (uint8_t)(row[448 + i] & 0xFF);
        data[448 + 2 * i + 1] = (uint8_t)(row[448 + i] >> 8);
    }
}

uint16_t kvt_model_dequant(uint8_t code, uint8_t enc) {
    if ((code & 0x7F) == 0x7F) return 0x7FFF;
    const int E = (code >> 3) & 15, M = code & 7;
    double v = E == 0 ? ldexp((double)M, -9) : ldexp(8.0 + M, E - 10);
    const double scale = enc == 0 ? 0.0 : (enc == 255 ? INFINITY : ldexp(1.0, enc - 127));
    v *= scale; /* 0 * inf = NaN */
    if (code & 0x80) v = -v;
    return dsv4_f32_to_bf16((float)v); /* at most 4 significant bits: the float is exact */
}

/* ---- comparators ----------------------------------------------------------------------- */
static void describe(kvt_geom_t g, int64_t off, char *buf, size_t n) {
    const int64_t page = off / g.stride, in = off % g.stride;
    if (in < g.P * 576) {
        const int64_t p = in / 576, b = in % 576;
        if (b < 448)
            snprintf(buf, n, "page %lld slot %lld (id %lld) NoPE dim %lld (block %lld)", (long long)page, (long long)p,
                     (long long)(page * g.P + p), (long long)b, (long long)(b / 64));
        else
            snprintf(buf, n, "page %lld slot %lld (id %lld) RoPE dim %lld byte %lld", (long long)page, (long long)p,
                     (long long)(page * g.P + p), (long long)(448 + (b - 448) / 2), (long long)(b % 2));
    } else if (in < g.P * 584) {
        const int64_t p = (in - g.P * 576) / 8, k = (in - g.P * 576) % 8;
        snprintf(buf, n, "page %lld slot %lld (id %lld) %s %lld", (long long)page, (long long)p,
                 (long long)(page * g.P + p), k < 7 ? "scale of block" : "pad byte", (long long)k);
    } else {
        snprintf(buf, n, "page %lld padding byte %lld (must never be written)", (long long)page, (long long)in);
    }
}

size_t kvt_cmp_cache(th_ctx_t *t, const char *what, kvt_geom_t g, const uint8_t *got, const uint8_t *want) {
    const size_t n = kvt_cache_bytes(g);
    size_t bad = 0, first = 0;
    char where[160];
    for (size_t i = 0; i < n; ++i) {
        if (got[i] == want[i]) continue;
        if (bad == 0) first = i;
        if (bad < 8) {
            describe(g, (int64_t)i, where, sizeof where);
            th_fail(t, __FILE__, __LINE__, "%s: byte %zu (%s) is 0x%02x, expected 0x%02x", what, i, where, got[i],
                    want[i]);
        }
        ++bad;
    }
    if (bad) {
        describe(g, (int64_t)first, where, sizeof where);
        th_fail(t, __FILE__, __LINE__, "%s: %zu of %zu cache bytes differ (P=%lld stride=%lld pages=%lld; first at %s)",
                what, bad, n, (long long)g.P, (long long)g.stride, (long long)g.num_pages, where);
    }
    return bad;
}

size_t kvt_cmp_bf16_exact(th_ctx_t *t, const char *what, const uint16_t *got, const uint16_t *want, int64_t rows,
                          int64_t cols) {
    size_t bad = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
        if (got[i] == want[i]) continue;
        if (bad < 8)
            th_fail(t, __FILE__, __LINE__, "%s: row %lld col %lld is 0x%04x, expected 0x%04x", what,
                    (long long)(i / cols), (long long)(i % cols), got[i], want[i]);
        ++bad;
    }
    if (bad) th_fail(t, __FILE__, __LINE__, "%s: %zu of %lld elements differ", what, bad, (long long)(rows * cols));
    return bad;
}

uint32_t kvt_bf16_ulp_diff(uint16_t a, uint16_t b) {
    const int na = (a & 0x7FFF) > 0x7F80, nb = (b & 0x7FFF) > 0x7F80;
    if (na || nb) return na && nb ? 0 : 0xFFFFFFFFu;
    const int32_t oa = (a & 0x8000) ? 0x8000 - (a & 0x7FFF) : 0x8000 + a;
    const int32_t ob = (b & 0x8000) ? 0x8000 - (b & 0x7FFF) : 0x8000 + b;
    return (uint32_t)(oa > ob ? oa - ob : ob - oa);
}

void kvt_expect_message(th_ctx_t *t, const char *call, ...) {
    const char *msg = dsv4_last_error();
    va_list ap;
    va_start(ap, call);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        TH_CHECK(t, strstr(msg, s) != NULL, "%s: message '%s' should mention '%s'", call, msg, s);
    va_end(ap);
}

th_buf_t kvt_dev_from(const void *host, size_t n) {
    th_buf_t b = th_buf_device(n);
    th_buf_upload(&b, host);
    return b;
}

/* The token whose slot holds the first differing byte, with its row kind and encs. */
void kvt_explain_insert(th_ctx_t *t, kvt_geom_t g, const uint8_t *got, const uint8_t *want, const int64_t *slots,
                        int64_t T, const int *kinds, const uint16_t *k, int64_t kst) {
    size_t i = 0, n = kvt_cache_bytes(g);
    while (i < n && got[i] == want[i]) ++i;
    if (i == n) return;
    const int64_t page = (int64_t)i / g.stride, in = (int64_t)i % g.stride;
    const int64_t p = in < g.P * 576 ? in / 576 : (in < g.P * 584 ? (in - g.P * 576) / 8 : -1);
    for (int64_t tk = 0; tk < T && p >= 0; ++tk) {
        if (slots[tk] != page * g.P + p) continue;
        th_note(t,
                "first difference is in the record of token %lld (row kind %s), slot %lld; model encs %d %d %d %d "
                "%d %d %d",
                (long long)tk, kinds ? kvt_row_kind_name((kvt_row_kind_t)kinds[tk]) : "-", (long long)slots[tk],
                kvt_model_enc(k + tk * kst), kvt_model_enc(k + tk * kst + 64), kvt_model_enc(k + tk * kst + 128),
                kvt_model_enc(k + tk * kst + 192), kvt_model_enc(k + tk * kst + 256), kvt_model_enc(k + tk * kst + 320),
                kvt_model_enc(k + tk * kst + 384));
        if (in < g.P * 576 && in % 576 < 448) {
            const int64_t blk = (in % 576) / 64;
            char line[64 * 7 + 1];
            for (int j = 0; j < 64; ++j) snprintf(line + 7 * j, 8, " 0x%04x", k[tk * kst + 64 * blk + j]);
            th_note(t, "its block %lld (bf16 input):%s", (long long)blk, line);
        }
        return;
    }
    th_note(t, "first difference at cache byte %zu belongs to no inserted token (a stray write)", i);
}

void kvt_roundtrip_descs(kvt_geom_t g, int64_t T, dsv4_kv_insert_desc_t *di, dsv4_kv_gather_desc_t *dg) {
    *di = (dsv4_kv_insert_desc_t){.num_tokens = T,
                                  .page_tokens = g.P,
                                  .page_stride_bytes = g.stride,
                                  .num_pages = g.num_pages,
                                  .k_stride_row = 512};
    *dg = (dsv4_kv_gather_desc_t){.num_reqs = 1,
                                  .block_table_width = g.num_pages,
                                  .out_rows = T,
                                  .page_tokens = g.P,
                                  .page_stride_bytes = g.stride,
                                  .num_pages = g.num_pages,
                                  .block_table_stride = g.num_pages,
                                  .out_stride_req = T * 512,
                                  .out_stride_row = 512};
}

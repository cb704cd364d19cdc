/*
 * CPU tests of include/dsv4/numerics.h, exhaustive wherever the input domain allows it
 * (all 2^32 fp32 patterns, all 256 codes, all 65,536 (byte, enc) pairs).
 *
 * The references here are written independently of the library's integer algorithms:
 * they round in double arithmetic (frexp/ldexp/nearbyint), so an error in the bit
 * manipulation of numerics.h cannot be mirrored by the reference.
 */
#define _POSIX_C_SOURCE 200809L
#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dsv4/numerics.h"
#include "harness.h"
#include "test_numerics.h"

/* RNE rounding of x to a binary format with `p` significant bits and minimum normal
 * exponent `emin`, with an unbounded exponent above (the caller handles overflow). */
static double ref_round(double x, int p, int emin) {
    if (x == 0.0 || !isfinite(x)) return x;
    int k;
    frexp(fabs(x), &k);
    int e = k - 1;
    if (e < emin) e = emin;
    double quantum = ldexp(1.0, e - (p - 1));
    double n = nearbyint(fabs(x) / quantum); /* exact quotient; default mode is to-nearest-even */
    return copysign(n * quantum, x);
}

static uint16_t ref_bf16(uint32_t u) {
    float f = dsv4_bits_f32(u);
    if (isnan(f)) return 0x7FFF;
    double r = ref_round((double)f, 8, -126);
    if (fabs(r) >= 0x1p128) return (uint16_t)(signbit(r) ? 0xFF80 : 0x7F80);
    return (uint16_t)(dsv4_f32_bits((float)r) >> 16);
}

static uint8_t ref_e4m3(uint32_t u) {
    float f = dsv4_bits_f32(u);
    if (isnan(f)) return 0x7F;
    uint8_t sign = signbit(f) ? 0x80 : 0x00;
    double r = ref_round(fabs((double)f), 4, -6);
    if (r > 448.0) r = 448.0;
    if (r == 0.0) return sign;
    int k;
    frexp(r, &k);
    int e = k - 1;
    if (e < -6) return (uint8_t)(sign | (uint8_t)(r / 0x1p-9)); /* subnormal: M * 2^-9 */
    int M = (int)(r / ldexp(1.0, e - 3)) - 8;
    return (uint8_t)(sign | ((e + 7) << 3) | M);
}

static double ref_e4m3_value(uint8_t b) {
    int s = b >> 7, E = (b >> 3) & 15, M = b & 7;
    if ((b & 0x7F) == 0x7F) return NAN;
    double v = E == 0 ? ldexp((double)M, -9) : ldexp(8.0 + M, E - 10);
    return s ? -v : v;
}

/* ---- the 2^32 sweeps, split over threads -------------------------------------------- */
typedef struct {
    uint64_t lo, hi;
    uint64_t bad_bf16, bad_e4m3;
    uint32_t first_bf16, first_e4m3;
} sweep_part_t;

static void *sweep_worker(void *arg) {
    sweep_part_t *p = arg;
    fesetround(FE_TONEAREST);
    for (uint64_t i = p->lo; i < p->hi; ++i) {
        uint32_t u = (uint32_t)i;
        float f = dsv4_bits_f32(u);
        if (dsv4_f32_to_bf16(f) != ref_bf16(u) && p->bad_bf16++ == 0) p->first_bf16 = u;
        if (dsv4_f32_to_e4m3(f) != ref_e4m3(u) && p->bad_e4m3++ == 0) p->first_e4m3 = u;
    }
    return NULL;
}

void test_exhaustive_f32_sweep(th_ctx_t *t) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu < 1 ? 1 : (ncpu > 16 ? 16 : (int)ncpu);
    sweep_part_t parts[16];
    pthread_t th[16];
    uint64_t total = 1ull << 32, step = total / (uint64_t)nt;
    for (int i = 0; i < nt; ++i) {
        memset(&parts[i], 0, sizeof parts[i]);
        parts[i].lo = step * (uint64_t)i;
        parts[i].hi = i == nt - 1 ? total : step * (uint64_t)(i + 1);
        pthread_create(&th[i], NULL, sweep_worker, &parts[i]);
    }
    uint64_t bad_bf16 = 0, bad_e4m3 = 0;
    for (int i = 0; i < nt; ++i) {
        pthread_join(th[i], NULL);
        if (parts[i].bad_bf16 && !bad_bf16)
            th_fail(t, __FILE__, __LINE__, "bf16: first mismatch at fp32 0x%08x: got 0x%04x want 0x%04x",
                    parts[i].first_bf16, dsv4_f32_to_bf16(dsv4_bits_f32(parts[i].first_bf16)),
                    ref_bf16(parts[i].first_bf16));
        if (parts[i].bad_e4m3 && !bad_e4m3)
            th_fail(t, __FILE__, __LINE__, "e4m3: first mismatch at fp32 0x%08x: got 0x%02x want 0x%02x",
                    parts[i].first_e4m3, dsv4_f32_to_e4m3(dsv4_bits_f32(parts[i].first_e4m3)),
                    ref_e4m3(parts[i].first_e4m3));
        bad_bf16 += parts[i].bad_bf16;
        bad_e4m3 += parts[i].bad_e4m3;
    }
    th_note(t, "all 2^32 fp32 patterns on %d threads: %llu bf16 and %llu e4m3 mismatches", nt,
            (unsigned long long)bad_bf16, (unsigned long long)bad_e4m3);
    TH_CHECK(t, bad_bf16 == 0 && bad_e4m3 == 0, "converter sweep found mismatches");
}

void test_e4m3_known_answers(th_ctx_t *t) {
    static const struct {
        float x;
        uint8_t code;
    } kat[] = {{1.0f, 0x38},   {-1.0f, 0xB8},    {1.0625f, 0x38},    {1.1875f, 0x3A},  {3.0f, 0x44},
               {0.1f, 0x1D},   {0x1p-10f, 0x00}, {0x1.8p-10f, 0x01}, {240.0f, 0x77},   {448.0f, 0x7E},
               {464.0f, 0x7E}, {480.0f, 0x7E},   {1e9f, 0x7E},       {INFINITY, 0x7E}, {-INFINITY, 0xFE},
               {-0.0f, 0x80},  {0x1p-6f, 0x08},  {256.0f, 0x78},     {8.0f, 0x50},     {-448.0f, 0xFE}};
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; ++i)
        TH_CHECK(t, dsv4_f32_to_e4m3(kat[i].x) == kat[i].code, "encode(%a) = 0x%02x, expected 0x%02x", (double)kat[i].x,
                 dsv4_f32_to_e4m3(kat[i].x), kat[i].code);
    TH_CHECK(t, dsv4_f32_to_e4m3(NAN) == 0x7F && dsv4_f32_to_e4m3(-NAN) == 0x7F, "NaN must encode to 0x7F");
    /* What the quantizer sees: every bf16 pattern clamped to +-448. */
    for (uint32_t h = 0; h < 65536; ++h) {
        float f = dsv4_bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        float c = f < -448.0f ? -448.0f : (f > 448.0f ? 448.0f : f);
        uint8_t got = dsv4_f32_to_e4m3(c), want = ref_e4m3(dsv4_f32_bits(c));
        TH_CHECK(t, got == want, "clamped bf16 0x%04x: got 0x%02x want 0x%02x", h, got, want);
    }
}

void test_e4m3_decode_all(th_ctx_t *t) {
    for (int b = 0; b < 256; ++b) {
        float got = dsv4_e4m3_to_f32((uint8_t)b);
        double want = ref_e4m3_value((uint8_t)b);
        if (isnan(want)) {
            TH_CHECK(t, isnan(got), "decode(0x%02x) = %a, expected NaN", b, (double)got);
        } else {
            TH_CHECK(t, (double)got == want && !!signbit(got) == !!signbit(want), "decode(0x%02x) = %a, expected %a", b,
                     (double)got, want);
            /* Every finite code survives a round trip through the encoder. */
            TH_CHECK(t, dsv4_f32_to_e4m3(got) == b, "encode(decode(0x%02x)) = 0x%02x", b, dsv4_f32_to_e4m3(got));
        }
    }
    TH_CHECK(t,
             dsv4_e4m3_to_f32(0x01) == 0x1p-9f && dsv4_e4m3_to_f32(0x7E) == 448.0f &&
                 dsv4_e4m3_to_f32(0xFE) == -448.0f && dsv4_e4m3_to_f32(0x50) == 8.0f,
             "table values");
}

/* Smallest integer e with 448 * 2^e >= max(amax, 1e-4), found by counting in exact
 * double arithmetic, then biased and clamped. */
static int ref_ue8m0(float amax) {
    double a = amax < DSV4_UE8M0_AMAX_FLOOR ? (double)DSV4_UE8M0_AMAX_FLOOR : (double)amax;
    int e = -160;
    while (ldexp(448.0, e) < a) ++e;
    int enc = e + 127;
    return enc < 0 ? 0 : (enc > 255 ? 255 : enc);
}

void test_ue8m0_choice(th_ctx_t *t) {
    int checked = 0;
    for (uint32_t h = 0; h <= 0x7F7F; ++h) {
        float a = dsv4_bf16_to_f32((uint16_t)h);
        int got = dsv4_ue8m0_from_amax(a), want = ref_ue8m0(a);
        TH_CHECK(t, got == want, "amax bf16 0x%04x (%a): enc %d, expected %d", h, (double)a, got, want);
        ++checked;
    }
    TH_CHECK(t, dsv4_f32_bits(DSV4_UE8M0_AMAX_FLOOR) == 0x38D1B717u, "floor bit pattern");
    TH_CHECK(t, dsv4_ue8m0_from_amax(DSV4_UE8M0_AMAX_FLOOR) == ref_ue8m0(DSV4_UE8M0_AMAX_FLOOR), "floor itself");
    for (int k = -10; k <= 100; ++k) {
        float a = ldexpf(1.75f, k);
        int got = dsv4_ue8m0_from_amax(a);
        TH_CHECK(t, got == ref_ue8m0(a) && got == (k - 8 + 127 > 105 ? k - 8 + 127 : 105), "amax 1.75*2^%d: enc %d", k,
                 got);
    }
    static const struct {
        float amax;
        int enc;
    } kat[] = {{0.0f, 105},       {1e-5f, 105},  {4.0f, 121},   {300.0f, 127}, {1.0f, 119},        {1.75f, 119},
               {1.7578125f, 120}, {448.0f, 127}, {449.0f, 128}, {896.0f, 128}, {0x1.FEp127f, 247}, {INFINITY, 255}};
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; ++i)
        TH_CHECK(t, dsv4_ue8m0_from_amax(kat[i].amax) == kat[i].enc, "amax %a: enc %d, expected %d",
                 (double)kat[i].amax, dsv4_ue8m0_from_amax(kat[i].amax), kat[i].enc);
    th_note(t, "%d bf16 block maxima checked", checked);
}

void test_ue8m0_decode_all(th_ctx_t *t) {
    for (int enc = 0; enc < 256; ++enc) {
        float got = dsv4_ue8m0_to_f32((uint8_t)enc);
        float want = enc == 0 ? 0.0f : (enc == 255 ? INFINITY : ldexpf(1.0f, enc - 127));
        TH_CHECK(t, dsv4_f32_bits(got) == dsv4_f32_bits(want), "decode(%d) = %a, expected %a", enc, (double)got,
                 (double)want);
        if (enc == 0) continue;
        /* The writer's multiplier equals division by the decoded scale, bit for bit. */
        static const float xs[] = {1.0f, -3.5f, 448.0f, 0x1p-20f, -0x1.7p100f, 0.0f, -0.0f, 0x1.FEp127f, INFINITY};
        float inv = dsv4_ue8m0_inv_scale((uint8_t)enc);
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; ++i) {
            float a = xs[i] * inv, b = xs[i] / got;
            TH_CHECK(t, (isnan(a) && isnan(b)) || dsv4_f32_bits(a) == dsv4_f32_bits(b),
                     "enc %d: %a * inv = %a but %a / scale = %a", enc, (double)xs[i], (double)a, (double)xs[i],
                     (double)b);
        }
    }
}

void test_dequant_all_pairs(th_ctx_t *t) {
    int bad = 0;
    for (int enc = 0; enc < 256; ++enc) {
        for (int b = 0; b < 256; ++b) {
            uint16_t got = dsv4_dequant_e4m3((uint8_t)b, dsv4_ue8m0_to_f32((uint8_t)enc));
            double v = ref_e4m3_value((uint8_t)b);
            double s = enc == 0 ? 0.0 : (enc == 255 ? INFINITY : ldexp(1.0, enc - 127));
            double prod = v * s; /* exact in double: <= 4 significant bits */
            uint16_t want;
            if (isnan(prod)) {
                want = 0x7FFF;
            } else {
                double r = ref_round(prod, 8, -126);
                want = fabs(r) >= 0x1p128 ? (uint16_t)(signbit(r) ? 0xFF80 : 0x7F80)
                                          : (uint16_t)(dsv4_f32_bits((float)r) >> 16);
            }
            if (got != want && bad++ < 8)
                th_fail(t, __FILE__, __LINE__, "dequant(0x%02x, enc %d) = 0x%04x, expected 0x%04x", b, enc, got, want);
        }
    }
    TH_CHECK(t, bad == 0, "%d of 65536 (byte, enc) pairs differ", bad);
}

/* Quantizes one 64-block as the writers do (include/dsv4/kvcache.h, quantization of a row). */
static uint8_t quantize_block(const float *x, uint8_t *codes) {
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = fmaxf(amax, fabsf(x[i]));
    uint8_t enc = dsv4_ue8m0_from_amax(amax);
    float inv = dsv4_ue8m0_inv_scale(enc);
    for (int i = 0; i < 64; ++i) codes[i] = dsv4_e4m3_quantize(x[i], inv);
    return enc;
}

void test_block_known_answers(th_ctx_t *t) {
    float x[64];
    uint8_t c[64];
    for (int d = 0; d < 64; ++d) x[d] = (float)(d - 32) / 8.0f;
    TH_CHECK(t, quantize_block(x, c) == 121, "ramp block enc");
    TH_CHECK(t, c[0] == 0xF8 && c[33] == 0x50 && c[35] == 0x5C && c[49] == 0x70 && c[51] == 0x72 && c[63] == 0x78,
             "ramp codes %02x %02x %02x %02x %02x %02x", c[0], c[33], c[35], c[49], c[51], c[63]);
    memset(x, 0, sizeof x);
    x[0] = 300.0f;
    x[1] = dsv4_round_bf16(-0.7f);
    x[2] = 5.0f;
    TH_CHECK(t, quantize_block(x, c) == 127, "[300, -0.7, 5] enc");
    TH_CHECK(t, c[0] == 0x79 && c[1] == 0xB3 && c[2] == 0x4A && c[3] == 0x00, "[300,-0.7,5] codes %02x %02x %02x", c[0],
             c[1], c[2]);
    for (int d = 0; d < 64; ++d) x[d] = dsv4_bf16_to_f32(0x3728);
    TH_CHECK(t, quantize_block(x, c) == 105 && c[0] == 0x62, "below-floor block: enc/code");
    TH_CHECK(t, dsv4_e4m3_to_f32(0x62) * dsv4_ue8m0_to_f32(105) == 9.5367431640625e-06f, "below-floor dequant");
    for (int d = 0; d < 64; ++d) x[d] = d == 5 ? -0.0f : 0.0f;
    TH_CHECK(t, quantize_block(x, c) == 105 && c[0] == 0x00 && c[5] == 0x80, "zero block");
    /* NaN and inf behaviour (include/dsv4/numerics.h). */
    for (int d = 0; d < 64; ++d) x[d] = 1.0f;
    x[7] = NAN;
    TH_CHECK(t, quantize_block(x, c) == 119 && c[7] == 0x7E && c[0] == 0x78, "NaN element: enc %d code 0x%02x", 119,
             c[7]);
    x[7] = -INFINITY;
    x[8] = -2.0f;
    TH_CHECK(t, quantize_block(x, c) == 255 && c[7] == 0x7E && c[0] == 0x00 && c[8] == 0x80,
             "inf element: codes 0x%02x 0x%02x 0x%02x", c[7], c[0], c[8]);
}

void test_bf16_known_answers(th_ctx_t *t) {
    TH_CHECK(t, dsv4_f32_to_bf16(1.0f) == 0x3F80, "1.0");
    TH_CHECK(t, dsv4_f32_to_bf16(dsv4_bits_f32(0x3F808000u)) == 0x3F80, "tie to even (down)");
    TH_CHECK(t, dsv4_f32_to_bf16(dsv4_bits_f32(0x3F818000u)) == 0x3F82, "tie to even (up)");
    TH_CHECK(t, dsv4_f32_to_bf16(dsv4_bits_f32(0x7F7FFFFFu)) == 0x7F80, "overflow to inf");
    TH_CHECK(t, dsv4_f32_to_bf16(dsv4_bits_f32(0x00010000u)) == 0x0001, "subnormal kept");
    TH_CHECK(t, dsv4_f32_to_bf16(NAN) == 0x7FFF && dsv4_f32_to_bf16(-NAN) == 0x7FFF, "canonical NaN");
    for (uint32_t h = 0; h < 65536; ++h) {
        float f = dsv4_bf16_to_f32((uint16_t)h);
        if (!isnan(f)) TH_CHECK(t, dsv4_f32_to_bf16(f) == h, "bf16 0x%04x does not round-trip", h);
    }
}

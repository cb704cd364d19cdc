/* xoshiro256** seeded through splitmix64, plus the value generators tests use. */
#include <math.h>

#include "dsv4/numerics.h"
#include "harness.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void th_rng_seed(th_rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; ++i) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t th_rng_u64(th_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t th_rng_u32(th_rng_t *r) { return (uint32_t)(th_rng_u64(r) >> 32); }

int64_t th_rng_range(th_rng_t *r, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    if (span == 0) return (int64_t)th_rng_u64(r);
    return lo + (int64_t)(th_rng_u64(r) % span);
}

double th_rng_unit(th_rng_t *r) { return (double)(th_rng_u64(r) >> 11) * 0x1p-53; }

double th_rng_normal(th_rng_t *r) {
    double u1 = th_rng_unit(r), u2 = th_rng_unit(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double th_rng_logmag(th_rng_t *r, double lo_exp, double hi_exp) {
    double e = lo_exp + (hi_exp - lo_exp) * th_rng_unit(r);
    double v = exp2(e);
    return (th_rng_u64(r) & 1) ? -v : v;
}

void th_rng_shuffle_i32(th_rng_t *r, int32_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; --i) {
        int64_t j = th_rng_range(r, 0, i);
        int32_t tmp = a[i];
        a[i] = a[j];
        a[j] = tmp;
    }
}

void th_fill_bf16_logmag(th_rng_t *r, uint16_t *dst, size_t n, double lo_exp, double hi_exp) {
    for (size_t i = 0; i < n; ++i) dst[i] = dsv4_f32_to_bf16((float)th_rng_logmag(r, lo_exp, hi_exp));
}

void th_fill_bf16_normal(th_rng_t *r, uint16_t *dst, size_t n, double scale) {
    for (size_t i = 0; i < n; ++i) dst[i] = dsv4_f32_to_bf16((float)(scale * th_rng_normal(r)));
}

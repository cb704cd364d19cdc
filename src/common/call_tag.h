/*
 * Internal: the tag a call's cross-CTA completion flags carry (prim/grid_flag.cuh).
 *
 * A pure function of what identifies a call in flight (its output and workspace
 * pointers and its shape), computed on the host at every run call: no state per call,
 * and a CUDA graph replays the tag it captured, which is right because replays run one
 * after the other and each leaves its flags cleared. Two calls in flight at once on one
 * workspace have different outputs, hence different tags (up to a 2^-22 hash
 * collision), so neither takes the other's flags for its own. The value is a quiet-NaN
 * pattern 0x7FC00000 | 22 bits other than the canonical 0x7FFFFFFF: no fp32 result an
 * earlier call left in the workspace reads as a tag.
 */
#ifndef DSV4_COMMON_CALL_TAG_H
#define DSV4_COMMON_CALL_TAG_H

#include <stdint.h>

static inline unsigned dsv4_call_tag(const void *out, const void *workspace, int64_t a, int64_t b) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    const uint64_t v[4] = {(uint64_t)(uintptr_t)out, (uint64_t)(uintptr_t)workspace, (uint64_t)a, (uint64_t)b};
    for (int i = 0; i < 4; ++i) { /* splitmix64 steps */
        h ^= v[i];
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
        h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
        h ^= h >> 31;
    }
    unsigned tag = 0x7FC00000u | (unsigned)(h & 0x3FFFFFu);
    return tag == 0x7FFFFFFFu ? 0x7FFFFFFEu : tag;
}

#endif

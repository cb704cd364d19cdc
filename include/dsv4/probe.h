/*
 * Ceiling probes: tiny kernels the benchmark times to measure, on the GPU at hand and
 * in the same run, the ceilings every operator is compared with. They are part of the
 * library so that the benchmark times shipped code through the public API.
 */
#ifndef DSV4_PROBE_H
#define DSV4_PROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue a kernel that does nothing: its event-timed duration is the launch floor. */
dsv4_status_t dsv4_probe_empty(dsv4_stream_t stream);

/* Enqueue a kernel of `blocks` CTAs that reads all `bytes` of buf (device, 16-byte aligned,
 * a multiple of 16) once through L2 and xors its 32-bit words into *sink (device). After a
 * write that filled L2 with dirty lines, it leaves L2 holding clean lines instead: the
 * benchmark's "--flush clean" mode. */
dsv4_status_t dsv4_probe_read(const void *buf, size_t bytes, int blocks, unsigned *sink, dsv4_stream_t stream);

/* Enqueue the mma.sync bf16 throughput probe: `blocks` CTAs of DSV4_PROBE_MMA_WARPS warps,
 * each warp issuing `iters` rounds of DSV4_PROBE_MMA_CHAINS independent
 * mma.sync.m16n8k16 (bf16 in, fp32 accumulate). `sink` (device, >= blocks floats) keeps
 * the results alive. FLOPs = dsv4_probe_mma_flops(blocks, iters). */
#define DSV4_PROBE_MMA_WARPS 8
#define DSV4_PROBE_MMA_CHAINS 8
dsv4_status_t dsv4_probe_mma_bf16(int blocks, int iters, float *sink, dsv4_stream_t stream);
double dsv4_probe_mma_flops(int blocks, int iters);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_PROBE_H */

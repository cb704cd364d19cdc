/* Tuning constants of the standalone post kernel (one CTA per token). */
#ifndef DSV4_MHC_POST_CONFIG_H
#define DSV4_MHC_POST_CONFIG_H

/* 128 threads x 16-byte vectors: at H = 5120 each thread handles 5 vectors of 8 channels
 * in each of the 4 streams. The kernel uses < 256 bytes of static shared memory. */
#define MHC_POST_THREADS 128

#endif

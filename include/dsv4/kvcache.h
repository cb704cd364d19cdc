/*
 * The kvcache family: writers and reader of the paged fp8_ds_mla cache
 * (the format: below and src/common/kv_format.h; number formats: dsv4/numerics.h).
 *
 *   dsv4_kv_insert      quantize bf16 latent rows and insert them into the cache
 *   dsv4_kv_rope_insert compressed-cache writer: RoPE of a compressed latent + insert
 *   dsv4_kv_swa_write   fused SWA writer: q RMS norm (or not) + q RoPE (in place), kv RoPE, insert
 *   dsv4_kv_gather      dequantize cache rows into a bf16 workspace, per request
 *
 * Strides have no default: a stride of 0 is refused (INVALID_VALUE) on a dimension of
 * extent > 1 and accepted where it addresses nothing (dsv4.h).
 *
 * ---------------------------------------------------------------------------------
 * The record and the page (shared by the operators)
 * ---------------------------------------------------------------------------------
 * A token's 512-dim latent row takes 584 bytes, split over two regions of its page.
 * With P = page_tokens, a page at byte `page * page_stride_bytes` from the cache base,
 * and p = slot % P the slot's place in its page:
 *
 *   page + p*576 + 64k + i     e4m3 code of dim 64k + i, k = 0..6 (NoPE, 448 bytes)
 *   page + p*576 + 448 + 2i    dim 448 + i as little-endian bf16, i = 0..63 (RoPE, copied)
 *   page + P*576 + p*8 + k     UE8M0 scale byte of dims [64k, 64k+64), k = 0..6
 *   page + P*576 + p*8 + 7     pad byte, written as 0, never read
 *   page + P*584 ...           page padding up to page_stride_bytes: never read or written
 *
 * A slot is never addressed as slot*584. page = slot / P. All offsets are 64-bit.
 *
 * Cache rules checked by every call (status, and a message naming the field):
 *   page_tokens          P in [1, 2^24]                                  INVALID_VALUE
 *   page_stride_bytes    >= P*584                                        INVALID_VALUE
 *                        a multiple of 16 (this library's rule)          MISALIGNED
 *   num_pages            in [1, INT64_MAX / page_stride_bytes]          INVALID_VALUE
 *   cache pointer        16-byte aligned (the kernels' vector accesses) MISALIGNED
 *
 * Quantization of a row (the three writers): per
 * 64-dim block, amax = max |x| over its bf16 values with NaN left out, floored at 1e-4;
 * enc = the smallest e + 127 with 448 * 2^e >= amax, clamped to [0, 255]; each code is
 * e4m3(clamp(x * 2^-e, -448, 448)) with round-to-nearest-even, NaN -> 0x7E. Bit-exact.
 *
 * Dequantization (gather): bf16(decode_e4m3(code) *
 * 2^(enc-127)), the scale decoded by the integer shift enc << 23. Bit-exact.
 *
 * Every call: NULL descriptor, args or required pointer -> NULL_POINTER; a NULL stream
 * -> NULL_POINTER; workspace is never needed (size 0). On any failure nothing is
 * launched and nothing is written; dsv4_last_error() names the operator, field, value.
 * No call allocates, synchronizes or prints; all are CUDA-graph safe.
 */
#ifndef DSV4_KVCACHE_H
#define DSV4_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4/dsv4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4_KV_DIM 512          /* latent width (bf16 elements per row)            */
#define DSV4_KV_NOPE_DIM 448     /* dims stored as e4m3                             */
#define DSV4_KV_ROPE_DIM 64      /* dims stored as bf16, rotated by GPT-J RoPE       */
#define DSV4_KV_DATA_BYTES 576   /* per slot in the data region: 448 + 128          */
#define DSV4_KV_SCALE_BYTES 8    /* per slot in the scale region: 7 scales + pad    */
#define DSV4_KV_RECORD_BYTES 584 /* the whole record                                */

/* =================================================================================
 * dsv4_kv_insert: quantize + insert
 * =================================================================================
 * For t in [0, num_tokens): slot = slot_mapping[t]. A negative slot (-1 upstream) or a
 * slot >= num_pages * P is skipped: nothing is written for that row. Otherwise the 584
 * bytes of the slot's record are written from row k[t, 0:512]: codes and scales as
 * above, the pad byte 0, and k[t, 448:512] copied bit for bit. No other byte of the
 * cache changes. Duplicate slots: when several rows name one slot, the record holds
 * exactly one of those rows' 584 bytes (which one is unspecified; the CPU reference
 * keeps the last), never a mix. The run call first enqueues a claim kernel that stores
 * 2^31 | t into scale bytes 4..7 of every record a row t will write (the last claim
 * stored stands); the insert then writes a record only from the row whose claim it
 * finds, and ends with those 4 bytes in one store (pad byte 0 on top: never a claim).
 * The same holds for dsv4_kv_rope_insert and the kv side of dsv4_kv_swa_write.
 *
 *   k              bf16 [rows >= num_tokens, 512], row stride k_stride_row elements;
 *                  16-byte aligned, stride a multiple of 8 (the kernel loads 16 bytes)
 *   slot_mapping   int64 [num_tokens], 8-byte aligned. Its length is the row count: rows
 *                  of k beyond it (data-parallel padding) are ignored
 *   cache          uint8 [num_pages * page_stride_bytes], 16-byte aligned
 *
 * Errors: num_tokens outside [0, 2^31 - 1], k_stride_row < 512 -> INVALID_VALUE;
 * k_stride_row not a multiple of 8, misaligned k/slot_mapping/cache -> MISALIGNED.
 * num_tokens = 0 validates and launches nothing. */
typedef struct dsv4_kv_insert_desc {
    int64_t num_tokens;        /* rows to insert = entries of slot_mapping                 */
    int64_t k_stride_row;      /* elements between rows of k; dense: 512 (contiguous)       */
    int64_t page_tokens;       /* P: slots per page                                        */
    int64_t page_stride_bytes; /* bytes between pages, >= P*584, multiple of 16            */
    int64_t num_pages;         /* pages in the cache; slots >= num_pages*P are skipped     */
} dsv4_kv_insert_desc_t;

typedef struct dsv4_kv_insert_args {
    const uint16_t *k;           /* bf16 rows                                                */
    const int64_t *slot_mapping; /* slot per row, negative = skip                           */
    uint8_t *cache;              /* the paged cache                                          */
} dsv4_kv_insert_args_t;

dsv4_status_t dsv4_kv_insert_check(const dsv4_kv_insert_desc_t *desc);
dsv4_status_t dsv4_kv_insert_workspace_size(const dsv4_kv_insert_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_kv_insert(const dsv4_kv_insert_desc_t *desc, const dsv4_kv_insert_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_kv_insert_ref(const dsv4_kv_insert_desc_t *desc, const dsv4_kv_insert_args_t *args);

/* =================================================================================
 * dsv4_kv_rope_insert: compressed-cache writer (RoPE of the latent + quantize + insert)
 * =================================================================================
 * The compressor's latent rows go into the compressed cache: token t writes only when it
 * closes a group of r = ratio positions. For t in [0, num_tokens): pos = positions[t],
 * slot = slot_mapping[t]. The row is skipped (nothing written) when slot is negative or
 * >= num_pages * P, as for dsv4_kv_insert, or when pos + 1 is not a multiple of r (r = 1:
 * every token). Otherwise the group's first position p = pos + 1 - r (= floor(pos / r) * r)
 * rotates dims 448..511 of the latent, pair i in [0, 32) being dims a = 448 + 2i, b = a + 1:
 *     c = cos_sin_cache[p, i],  s = cos_sin_cache[p, 32 + i],  x = float(latent[t, .])
 *     y_a = bf16(fmaf(x_a, c, -(x_b * s))),   y_b = bf16(fmaf(x_b, c, x_a * s))
 * (inner products rounded fp32 products; y_b rounds x_a * s, where dsv4_kv_swa_write
 * rounds x_b * c: each matches the upstream writer it replaces). A p outside
 * [0, max_position) (a negative pos) rotates by the identity (c = 1, s = 0). Dims < 448
 * of y are the latent's bits. The 584 bytes of the slot's record are those dsv4_kv_insert
 * writes for the bf16 row y, bit for bit; no other byte of the cache changes. The latent
 * is not modified.
 *
 *   latent         bf16 [rows >= num_tokens, 512], row stride latent_stride_row elements;
 *                  16-byte aligned, stride a multiple of 8
 *   positions      int64 [num_tokens], 8-byte aligned
 *   slot_mapping   int64 [num_tokens], 8-byte aligned, negative = skip
 *   cos_sin_cache  fp32 [max_position, 64], contiguous, 16-byte aligned
 *   cache          as for dsv4_kv_insert (pages: P = 128 at r = 1, 64 at r = 2 on SM8x)
 *
 * Errors: num_tokens outside [0, 2^31 - 1], ratio outside [1, 2^31 - 1], max_position < 1,
 * latent_stride_row < 512 -> INVALID_VALUE; latent_stride_row not a multiple of 8,
 * misaligned pointers -> MISALIGNED. num_tokens = 0 validates and launches nothing. */
typedef struct dsv4_kv_rope_insert_desc {
    int64_t num_tokens;        /* rows = entries of positions and slot_mapping                */
    int64_t latent_stride_row; /* elements between rows of latent; dense: 512                */
    int64_t page_tokens;       /* P: slots per page                                           */
    int64_t page_stride_bytes; /* bytes between pages, >= P*584, multiple of 16               */
    int64_t num_pages;         /* pages in the cache; slots >= num_pages*P are skipped        */
    int64_t ratio;             /* r: positions per compressed state (1 or 2 in DeepSeek-V4.1) */
    int64_t max_position;      /* rows of cos_sin_cache                                       */
} dsv4_kv_rope_insert_desc_t;

typedef struct dsv4_kv_rope_insert_args {
    const uint16_t *latent;      /* bf16 compressed latent rows                               */
    const int64_t *positions;    /* position of each token                                     */
    const int64_t *slot_mapping; /* compressed-cache slot per row, negative = skip            */
    const float *cos_sin_cache;  /* [max_position, 64]: cos in 0..31, sin in 32..63           */
    uint8_t *cache;              /* the compressed cache                                       */
} dsv4_kv_rope_insert_args_t;

dsv4_status_t dsv4_kv_rope_insert_check(const dsv4_kv_rope_insert_desc_t *desc);
dsv4_status_t dsv4_kv_rope_insert_workspace_size(const dsv4_kv_rope_insert_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_kv_rope_insert(const dsv4_kv_rope_insert_desc_t *desc, const dsv4_kv_rope_insert_args_t *args,
                                  void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_kv_rope_insert_ref(const dsv4_kv_rope_insert_desc_t *desc, const dsv4_kv_rope_insert_args_t *args);

/* =================================================================================
 * dsv4_kv_swa_write: fused q-norm + q RoPE + kv RoPE + quantize + insert
 * =================================================================================
 * GPT-J RoPE on dims 448..511 at position pos: pair i in [0, 32) is dims a = 448 + 2i,
 * b = a + 1; c = cos_sin_cache[pos, i], s = cos_sin_cache[pos, 32 + i]; in fp32,
 *     y_a = fmaf(x_a, c, -(x_b * s)),   y_b = fmaf(x_a, s, x_b * c)
 * (the inner products are rounded fp32 products). A position outside [0, max_position)
 * rotates by the identity (c = 1, s = 0): a library choice, valid inputs never reach it.
 *
 * Q side, for every token n < num_tokens and head h < num_heads, x = q[n, h, :] (bf16):
 *     rq = 1 / sqrt(sum_d(x_d^2) / 512 + eps)           (fp32)
 *     d < 448:   q[n, h, d] = bf16(x_d * rq)
 *     d >= 448:  q[n, h, d] = bf16(RoPE(x * rq) at position_ids[n])
 * Heads num_heads .. num_heads_padded - 1 of every token are written as zeros (vLLM's
 * head padding). The q output is checked within 1 bf16 ulp (the fp32 sum order is not
 * part of the contract).
 *
 * skip_q_norm = 1 (DeepSeek-V4.1, whose q is normalised before its projection): no RMS
 * factor. For h < num_heads, dims d < 448 of q[n, h] are not written at all (they keep
 * their bits), and
 *     d >= 448:  q[n, h, d] = bf16(RoPE(x) at position_ids[n])
 * (the form above with rq = 1, the same rotation as the kv side): bit-exact, no sum is
 * involved. Padding heads are still written as zeros. eps plays no part but is still
 * validated. skip_q_norm = 0 (zero-initialised descriptors) is the RMS-norm mode above.
 *
 * KV side, for every t < num_insert whose slot_mapping[t] is in [0, num_pages * P):
 * r = bf16(RoPE(kv[t, :]) at position_ids[t]) (NoPE dims unchanged, rotated dims rounded),
 * then r is quantized and inserted exactly as dsv4_kv_insert: the bytes written equal
 * dsv4_kv_insert of r, bit for bit. Other slots are skipped; kv is not modified.
 *
 *   q              bf16 [num_tokens, num_heads_padded, 512] in place, strides
 *                  q_stride_token, q_stride_head (elements): head rows never overlap,
 *                  q_stride_head >= 512, q_stride_token >= num_heads_padded * q_stride_head
 *                  (unless num_tokens = 1); 16-byte aligned, strides multiples of 8
 *   kv             bf16 [num_insert, 512], row stride kv_stride_row; 16-byte aligned,
 *                  stride a multiple of 8 and >= 512
 *   position_ids   int64 [num_tokens], 8-byte aligned
 *   slot_mapping   int64 [num_insert], 8-byte aligned, negative = skip
 *   cos_sin_cache  fp32 [max_position, 64], contiguous, 16-byte aligned
 *   cache          as for dsv4_kv_insert
 *
 * Errors: num_tokens outside [0, 2^31-1], num_insert outside [0, num_tokens], num_heads
 * outside [1, 1024], num_heads_padded outside [num_heads, 1024], eps negative or not
 * finite, max_position < 1, skip_q_norm other than 0 or 1, strides below the minimum ->
 * INVALID_VALUE; strides not multiples of 8, misaligned pointers -> MISALIGNED. */
typedef struct dsv4_kv_swa_write_desc {
    int64_t num_tokens;        /* N: tokens of q and of position_ids                        */
    int64_t num_insert;        /* N_insert <= N: kv rows and slot_mapping entries           */
    int64_t num_heads;         /* Hq: heads normalised and rotated                           */
    int64_t num_heads_padded;  /* heads in q's head dimension (>= Hq); 0 means num_heads      */
    int64_t q_stride_token;    /* elements; dense: num_heads_padded * q_stride_head         */
    int64_t q_stride_head;     /* elements; dense: 512                                      */
    int64_t kv_stride_row;     /* elements; dense: 512                                      */
    int64_t max_position;      /* rows of cos_sin_cache                                      */
    int64_t page_tokens;       /* P                                                          */
    int64_t page_stride_bytes; /* >= P*584, multiple of 16                                   */
    int64_t num_pages;         /* pages in the SWA cache                                     */
    float eps;                 /* added to the mean of squares, >= 0 (e.g. 1e-6)             */
    int32_t skip_q_norm;       /* 0: q RMS norm + RoPE (V4); 1: q RoPE only (V4.1)           */
} dsv4_kv_swa_write_desc_t;

typedef struct dsv4_kv_swa_write_args {
    uint16_t *q;                 /* bf16, normalised (unless skip_q_norm) and rotated in place */
    const uint16_t *kv;          /* bf16 latent rows (already RMS-normalised with weight)   */
    const int64_t *position_ids; /* [num_tokens]                                            */
    const int64_t *slot_mapping; /* [num_insert]                                            */
    const float *cos_sin_cache;  /* [max_position, 64]: cos in 0..31, sin in 32..63         */
    uint8_t *cache;              /* the SWA cache                                           */
} dsv4_kv_swa_write_args_t;

dsv4_status_t dsv4_kv_swa_write_check(const dsv4_kv_swa_write_desc_t *desc);
dsv4_status_t dsv4_kv_swa_write_workspace_size(const dsv4_kv_swa_write_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_kv_swa_write(const dsv4_kv_swa_write_desc_t *desc, const dsv4_kv_swa_write_args_t *args,
                                void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_kv_swa_write_ref(const dsv4_kv_swa_write_desc_t *desc, const dsv4_kv_swa_write_args_t *args);

/* =================================================================================
 * dsv4_kv_gather: dequantize + gather into the bf16 workspace
 * =================================================================================
 * For each request b < num_reqs: L = seq_lens[b]; G = gather_lens[b] if gather_lens is
 * given, else L; start = L - G. For i in [0, G) with offset + i < out_rows:
 *     pos = start + i;   page = block_table[b * block_table_stride + pos / P];  p = pos % P
 *     out[b, offset + i, 64k + j] = bf16(decode_e4m3(code) * 2^(enc_k - 127))  (k = 0..6)
 *     out[b, offset + i, 448 + j] = the stored bf16, bit for bit                (j = 0..63)
 * where out[b, r, d] is out + b * out_stride_req + r * out_stride_row + d. A position
 * that is negative (G > L), whose logical page pos / P is >= block_table_width, or whose
 * page id is outside [0, num_pages) gets an all-zero row (a library choice; valid inputs
 * never reach it). G <= 0 writes nothing. Rows before offset, rows from offset + G on,
 * rows at or past out_rows and requests >= num_reqs are never written (stale workspace).
 * Codes 0x7F/0xFF give NaN; enc 255 gives inf (NaN for a zero code); enc 0 gives zeros.
 *
 *   cache          as for dsv4_kv_insert (read only)
 *   seq_lens       int32 [num_reqs], 4-byte aligned
 *   gather_lens    int32 [num_reqs] or NULL (then G = L)
 *   block_table    int32 [num_reqs, block_table_stride], 4-byte aligned
 *   out            bf16, 16-byte aligned; out_stride_row >= 512 and out_stride_req >=
 *                  out_rows * out_stride_row (when num_reqs > 1), both multiples of 8
 *
 * max_gather_len is a scheduling hint (the largest G, as upstream): it sizes the grid.
 * The result never depends on it; 0 means unknown (the grid is sized from out_rows).
 *
 * Errors: num_reqs outside [0, 2^31-1], block_table_width outside [0, 2^31-1],
 * block_table_stride < width, out_rows outside [0, 2^31-1], offset outside [0, out_rows],
 * max_gather_len < 0, strides below their minimum -> INVALID_VALUE; strides not multiples
 * of 8, misaligned pointers -> MISALIGNED. num_reqs = 0 or offset = out_rows launches
 * nothing. */
typedef struct dsv4_kv_gather_desc {
    int64_t num_reqs;           /* R                                                         */
    int64_t block_table_width;  /* logical pages per request row (max_pages_per_seq)         */
    int64_t block_table_stride; /* elements between request rows; dense: block_table_width  */
    int64_t out_rows;           /* M: rows of each request's slab                            */
    int64_t out_stride_req;     /* elements between slabs; dense: out_rows * out_stride_row  */
    int64_t out_stride_row;     /* elements between rows; dense: 512                        */
    int64_t offset;             /* slab row of the first gathered position                   */
    int64_t max_gather_len;     /* hint: largest G over the requests, 0 = unknown            */
    int64_t page_tokens;        /* P                                                         */
    int64_t page_stride_bytes;  /* >= P*584, multiple of 16                                  */
    int64_t num_pages;          /* pages in the cache                                        */
} dsv4_kv_gather_desc_t;

typedef struct dsv4_kv_gather_args {
    const uint8_t *cache;       /* the paged cache                                           */
    const int32_t *seq_lens;    /* [R]                                                       */
    const int32_t *gather_lens; /* [R] or NULL                                               */
    const int32_t *block_table; /* [R, block_table_stride]                                   */
    uint16_t *out;              /* bf16 workspace                                            */
} dsv4_kv_gather_args_t;

dsv4_status_t dsv4_kv_gather_check(const dsv4_kv_gather_desc_t *desc);
dsv4_status_t dsv4_kv_gather_workspace_size(const dsv4_kv_gather_desc_t *desc, size_t *bytes);
dsv4_status_t dsv4_kv_gather(const dsv4_kv_gather_desc_t *desc, const dsv4_kv_gather_args_t *args, void *workspace,
                             size_t workspace_bytes, dsv4_stream_t stream);
dsv4_status_t dsv4_kv_gather_ref(const dsv4_kv_gather_desc_t *desc, const dsv4_kv_gather_args_t *args);

#ifdef __cplusplus
}
#endif

#endif /* DSV4_KVCACHE_H */

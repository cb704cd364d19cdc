/*
 * libdsv4: DeepSeek-V4 / V4.1 inference operators for NVIDIA Ampere (SM80, SM86).
 *
 * This header is the manual. It defines the status codes, the version, the opaque
 * stream type, the device query, and the call shape every operator follows. Each
 * operator family has its own header (included at the end) with its contracts.
 *
 * ---------------------------------------------------------------------------------
 * The call shape (every operator <op> of every family)
 * ---------------------------------------------------------------------------------
 *
 *   dsv4_<op>_desc_t   plain struct of sizes, strides (int64_t, in elements unless the
 *                      name says _bytes) and scalars. Zero means "default" only where
 *                      the field's comment says so, and never for a stride (below).
 *   dsv4_<op>_args_t   plain struct of pointers (device pointers for the run call,
 *                      host pointers for the reference call).
 *
 *   dsv4_status_t dsv4_<op>_check(const dsv4_<op>_desc_t *desc);
 *       Host only, touches no memory. Says whether the descriptor is supported and,
 *       if not, why (status + dsv4_last_error()).
 *   dsv4_status_t dsv4_<op>_workspace_size(const dsv4_<op>_desc_t *desc, size_t *bytes);
 *       Scratch bytes the run call needs (0 for most operators). The caller allocates.
 *   dsv4_status_t dsv4_<op>(const dsv4_<op>_desc_t *desc, const dsv4_<op>_args_t *args,
 *                           void *workspace, size_t workspace_bytes, dsv4_stream_t stream);
 *       Validates (descriptor, pointers, alignment, workspace) and enqueues the kernels
 *       on `stream`. It never allocates, never synchronizes and never prints, so it can
 *       be captured in a CUDA graph. On any validation failure nothing is enqueued and
 *       nothing is written.
 *   dsv4_status_t dsv4_<op>_ref(const dsv4_<op>_desc_t *desc, const dsv4_<op>_args_t *args);
 *       The CPU reference on host pointers: plain loops that round exactly where the
 *       specification says. It is the truth the kernels are tested against.
 *
 * Strides: every stride is the caller's, and none has a default. A stride of 0 on a
 * dimension of extent > 1 would make its rows alias (a broadcast view), so it fails
 * the check with DSV4_STATUS_INVALID_VALUE and a message naming the field. On a
 * dimension of extent <= 1 a stride addresses nothing and 0 is accepted. A field comment
 * "dense: X" names the stride of a dense tensor for reference only. A stride field of an
 * optional tensor left NULL still needs a valid value (descriptors are checked without
 * their pointers), unless its comment says the field is unused then.
 *
 * Streams: pass a stream you created, cast with DSV4_STREAM(s). A NULL stream is
 * rejected, because the library never uses the legacy default stream implicitly; pass
 * DSV4_STREAM(cudaStreamLegacy) or DSV4_STREAM(cudaStreamPerThread) to ask for one of
 * CUDA's special streams explicitly.
 *
 * Errors: every call returns a dsv4_status_t. On failure, dsv4_last_error() holds a
 * sentence for this thread naming the operator and the offending value. The text is
 * kept until the next failing call on the same thread. The library never prints,
 * exits or aborts.
 */
#ifndef DSV4_DSV4_H
#define DSV4_DSV4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------------- */
#define DSV4_VERSION_MAJOR 0
#define DSV4_VERSION_MINOR 1
#define DSV4_VERSION_PATCH 0
#define DSV4_VERSION_NUMBER (DSV4_VERSION_MAJOR * 10000 + DSV4_VERSION_MINOR * 100 + DSV4_VERSION_PATCH)

/* The version of the library actually loaded (may differ from the header's macros). */
unsigned dsv4_version_number(void);
const char *dsv4_version_string(void);

/* ---- status codes (values are pinned: never renumber) --------------------------- */
typedef enum dsv4_status {
    DSV4_STATUS_SUCCESS = 0,
    DSV4_STATUS_NULL_POINTER = 1,        /* a required descriptor, args or pointer is NULL   */
    DSV4_STATUS_INVALID_VALUE = 2,       /* a size, stride or scalar is out of its range     */
    DSV4_STATUS_MISALIGNED = 3,          /* a pointer or stride breaks an alignment rule     */
    DSV4_STATUS_UNSUPPORTED = 4,         /* valid input this build or device cannot run      */
    DSV4_STATUS_WORKSPACE_TOO_SMALL = 5, /* workspace_bytes below dsv4_<op>_workspace_size   */
    DSV4_STATUS_NO_DEVICE = 6,           /* no CUDA device, or a build without CUDA          */
    DSV4_STATUS_CUDA_ERROR = 7,          /* the CUDA runtime reported an error               */
    DSV4_STATUS_INTERNAL = 8             /* a bug in the library                             */
} dsv4_status_t;

/* Static name of a status ("DSV4_STATUS_MISALIGNED"); "unknown status" otherwise. */
const char *dsv4_status_string(dsv4_status_t status);

/* The message of the most recent failing call on this thread ("" if none). */
const char *dsv4_last_error(void);

/* ---- streams ---------------------------------------------------------------------- */
/* Opaque handle; a cudaStream_t cast with DSV4_STREAM. */
typedef struct dsv4_stream_opaque *dsv4_stream_t;
#define DSV4_STREAM(s) ((dsv4_stream_t)(s))

/* ---- device query ------------------------------------------------------------------ */
typedef struct dsv4_device_info {
    int device;                   /* CUDA ordinal queried                              */
    int arch;                     /* major*10 + minor: 80, 86, 89, 90 ...              */
    int sm_count;                 /* multiprocessors                                   */
    int64_t smem_per_block;       /* default shared-memory limit per block (bytes)     */
    int64_t smem_per_block_optin; /* opt-in maximum (bytes); the library never opts in */
    int64_t l2_bytes;             /* L2 cache size                                     */
    int64_t global_mem_bytes;     /* device memory                                     */
    int supported;                /* 1 if arch >= 80 (this library's kernels run)      */
    char name[256];               /* marketing name, NUL-terminated                    */
} dsv4_device_info_t;

/* Number of CUDA devices; 0 (and DSV4_STATUS_SUCCESS) where none exists. */
dsv4_status_t dsv4_device_count(int *count);

/* Properties of device `device`. DSV4_STATUS_NO_DEVICE where it does not exist. */
dsv4_status_t dsv4_device_query(int device, dsv4_device_info_t *info);

/* Largest shared memory (static + dynamic) any kernel of this library uses per CTA. */
#define DSV4_MAX_SMEM_PER_CTA (48 * 1024)

#ifdef __cplusplus
}
#endif

#include "dsv4/probe.h"

/* Operator families. */
#include "dsv4/attention.h"
#include "dsv4/compress.h"
#include "dsv4/indexer.h"
#include "dsv4/indices.h"
#include "dsv4/kvcache.h"
#include "dsv4/mhc.h"
#include "dsv4/plan.h"

#endif /* DSV4_DSV4_H */

"""GPU float semantics for Triton's interpreter (TRITON_INTERPRET=1), so vLLM's kernels run on CPU
tensors give the bits an NVIDIA GPU gives.

What the interpreter of Triton 3.8 does on its own, and what this module changes:
  fp32 -> bf16    truncates (its _convert_float ignores the rounding mode for bf16). A GPU rounds
                  to nearest even (cvt.rn.bf16.f32), NaN -> 0x7FFF. Replaced by that integer form.
  fp32 -> e4m3    rounds half up on the first cut bit only (no ties-to-even, no sticky bits),
                  carries into the exponent field by OR, truncates subnormals, and lets values above
                  448 reach the NaN code. A GPU (cvt.rn.satfinite.e4m3x2.f32) rounds to nearest
                  even and saturates to +-448, NaN -> 0x7F. Replaced by that integer form.
  e4m3 -> fp32    decodes 0x7F/0xFF as +-480 (no NaN). Replaced by the exact 256-entry table.
  bf16 op bf16    adds/multiplies the raw uint16 bit patterns. A GPU computes in fp32 and rounds
                  the result to bf16 (RNE). Replaced by that (double rounding of fp32 sums of two
                  bf16 values can differ from a single rounding only when their exponents are more
                  than 16 apart; no kernel compared here adds bf16 values directly).
Not changed: fp32 arithmetic and math functions are numpy's (IEEE, correctly rounded division
and sqrt), where a GPU uses div.full / rsqrt.approx / ex2.approx; the conformance tests bound
the differences this causes (documented at each test) instead of emulating them.
"""
import numpy as np

_E4M3_TABLE = None
_ARITH = (np.add, np.subtract, np.multiply, np.divide)


def bf16_rne(f32):
    """fp32 array -> uint16 bf16 bits, round to nearest even, NaN -> 0x7FFF."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FFF), r).astype(np.uint16)


def e4m3_rne_satfinite(f32):
    """fp32 array -> e4m3 bytes: RNE, saturating to +-448, every NaN -> 0x7F."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (u >> 31) & 1
    mag = u & 0x7FFFFFFF
    exp_field = (mag >> 23) & 0xFF
    E = exp_field - 127
    m24 = (mag & 0x7FFFFF) | 0x800000
    shift = np.minimum(20 + np.maximum(-6 - E, 0), 30)
    keep = m24 >> shift
    rest = m24 & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    keep = keep + ((rest > half) | ((rest == half) & ((keep & 1) == 1)))
    code = np.where(E >= -6, ((E + 6) << 3) + keep, keep)
    code = np.where(exp_field == 0, 0, code)
    code = np.minimum(code, 0x7E) | (sign << 7)
    code = np.where(mag > 0x7F800000, 0x7F, code)
    return code.astype(np.uint8)


def e4m3_decode(codes):
    global _E4M3_TABLE
    if _E4M3_TABLE is None:
        t = np.zeros(256, dtype=np.float32)
        for b in range(256):
            s, e, m = b >> 7, (b >> 3) & 15, b & 7
            v = m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10)
            t[b] = np.nan if (b & 0x7F) == 0x7F else (-v if s else v)
        _E4M3_TABLE = t
    return _E4M3_TABLE[np.asarray(codes, dtype=np.uint8)]


def install():
    """Patch the interpreter (before any kernel runs); idempotent."""
    import triton.language as tl
    from triton.runtime import interpreter as it

    if getattr(it, "_dsv4_gpu_semantics", False):
        return
    original = it._convert_float

    def convert(data, src, dst, rounding_mode):
        if src == tl.float32 and dst == tl.bfloat16:
            return bf16_rne(data.reshape(-1).view(np.float32)).reshape(data.shape)
        if src == tl.float32 and dst == tl.float8e4nv:
            return e4m3_rne_satfinite(data.reshape(-1).view(np.float32)).reshape(data.shape)
        if src == tl.float8e4nv and dst == tl.float32:
            return e4m3_decode(data.reshape(-1).view(np.uint8)).view(np.uint32).reshape(data.shape)
        if src == tl.bfloat16 and dst == tl.float32:
            return (data.reshape(-1).view(np.uint16).astype(np.uint32) << 16).reshape(data.shape)
        return original(data, src, dst, rounding_mode)

    it._dsv4_original_convert = original
    it._convert_float = convert

    builder = it.InterpreterBuilder
    binary = builder.binary_op

    def binary_op(self, lhs, rhs, op):
        if (op in _ARITH and lhs.dtype.scalar == tl.bfloat16 and rhs.dtype.scalar == tl.bfloat16):
            a = (np.asarray(lhs.data).astype(np.uint32) << 16).view(np.float32)
            b = (np.asarray(rhs.data).astype(np.uint32) << 16).view(np.float32)
            out = np.asarray(op(a, b), dtype=np.float32)
            return it.TensorHandle(bf16_rne(out).reshape(out.shape), tl.bfloat16)
        return binary(self, lhs, rhs, op)

    builder.binary_op = binary_op
    it._dsv4_gpu_semantics = True

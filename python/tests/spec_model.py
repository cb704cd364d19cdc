"""Independent numpy models of the operator contracts (include/dsv4/*.h) where the C suites in
tests/ leave a check to them (indices and attention on random input, the fp32 order of mHC post
and collapse, the mHC gates of the GPU tests), and the random model-shaped inputs the tests feed
both them and the binding.

Written from the contracts, not from the C code: e4m3 decoded from the code's fields, fp32 fmaf
as an exact float64 product + sum rounded once to float32 (exact for the magnitudes used here:
the sum of a 32-bit product and a 24-bit addend spans < 53 bits unless their exponents are ~2^21
apart, and then a double rounding needs a tie, about 2^-29 per element), attention and gates in
float64.
"""
import numpy as np

RECORD, DATA, DIM, NOPE = 584, 576, 512, 448


# ---- number formats ----------------------------------------------------------------------
def f32_to_bf16(x):
    """fp32 -> bf16 bits, round to nearest even, NaN -> 0x7FFF."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FFF), r)


def bf16_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def fmaf(a, b, c):
    """fp32 fused multiply-add, as float64 arithmetic rounded once (see the module note)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def _e4m3_table():
    vals = np.zeros(256)
    for b in range(256):
        e, m = (b >> 3) & 15, b & 7
        v = np.nan if (b & 0x7F) == 0x7F else (m * 2.0**-9 if e == 0 else (8 + m) * 2.0 ** (e - 10))
        vals[b] = -v if b & 0x80 else v
    return vals


E4M3 = _e4m3_table()


def ue8m0_decode(enc):
    """2^(enc-127) by the shift into the exponent field: 0 -> +0.0, 255 -> +inf."""
    return (np.asarray(enc, np.uint32) << 23).view(np.float32)


# ---- caches --------------------------------------------------------------------------------
def page_stride(P):
    """vLLM's page size: P * 584 rounded up to a multiple of 576."""
    return (P * RECORD + 575) // 576 * 576


def dequant_slot(cache, P, slot):
    """The bf16 row [512] of one slot (pages x stride byte cache)."""
    page, p = divmod(int(slot), P)
    pg = cache[page]
    codes = pg[p * DATA:p * DATA + NOPE]
    enc = pg[P * DATA + p * 8:P * DATA + p * 8 + 7]
    with np.errstate(invalid="ignore", over="ignore"):
        nope = E4M3[codes].astype(np.float32) * np.repeat(ue8m0_decode(enc), 64)
    return np.concatenate([f32_to_bf16(nope), pg[p * DATA + NOPE:p * DATA + DATA].view(np.uint16)])


def random_cache(rng, pages, P, stride=None, scales=(115, 135)):
    """Random records: finite codes, UE8M0 scales in `scales` (inclusive), pad bytes and page
    padding arbitrary. Attention cases use 118..122 (|K| up to ~3.5, as an RMS-normed latent)."""
    stride = stride or page_stride(P)
    c = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)
    data = c[:, :P * DATA].reshape(pages, P, DATA)
    nope = data[:, :, :NOPE]
    nope[(nope & 0x7F) == 0x7F] ^= 1
    rope = rng_bf16(rng, (pages, P, 64), -4, 4)
    data[:, :, NOPE:] = rope.view(np.uint8).reshape(pages, P, 128)
    c[:, :P * DATA] = data.reshape(pages, P * DATA)
    c[:, P * DATA:P * RECORD] = rng.integers(scales[0], scales[1] + 1, size=(pages, P * 8)).astype(np.uint8)
    return c


def rng_bf16(rng, shape, lo_exp=-4, hi_exp=4, zero_every=0):
    """Model-like bf16 bits: random sign and mantissa, exponent in [lo_exp, hi_exp]."""
    n = int(np.prod(shape))
    sign = rng.integers(0, 2, n).astype(np.uint16) << 15
    e = rng.integers(lo_exp, hi_exp + 1, n) + 127
    m = rng.integers(0, 128, n)
    out = (sign | (e.astype(np.uint16) << 7) | m.astype(np.uint16)).astype(np.uint16)
    if zero_every:  # signed zeros (+0 and -0) every ~zero_every elements
        zero = rng.integers(0, zero_every, n) == 0
        out[zero] = sign[zero]
    return out.reshape(shape)


def rope_table(rng, max_pos):
    ang = rng.uniform(0, 2 * np.pi, size=(max_pos, 32))
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)


def assert_attention_close(got_bf16, ref64, maxk, what, nan_positions=False):
    """The attention header's tolerance: max abs <= 1e-2 max|K|, relative L2 <= 5e-3;
    nan_positions: the NaN positions must match as well."""
    g = bf16_to_f32(got_bf16).astype(np.float64)
    if nan_positions:
        assert np.array_equal(np.isnan(g), np.isnan(ref64)), f"{what}: NaN positions differ"
    err = np.abs(g - ref64)
    rel = np.linalg.norm(g - ref64) / max(np.linalg.norm(ref64), 1e-300)
    i = np.unravel_index(np.argmax(err), err.shape)
    assert err.max() <= 1e-2 * maxk and rel <= 5e-3, (
        f"{what}: max abs {err.max():.3e} at (t, h, d) {i} (got {g[i]:.6g}, ref {ref64[i]:.6g}, tolerance "
        f"{1e-2 * maxk:.3e} = 1e-2 max|K|), rel L2 {rel:.3e} (tolerance 5e-3)")


def ulp_diff_bf16(a, b):
    """|a - b| in bf16 ulps (ordered integer distance of the bit patterns)."""
    def ordered(x):
        x = np.asarray(x, np.uint16).astype(np.int32)
        return np.where(x & 0x8000, 0x8000 - x, x)
    return np.abs(ordered(a) - ordered(b))


# ---- indices --------------------------------------------------------------------------------
def translate_model(topk, t2r, table, valid, bs):
    T, K = topk.shape
    R, W = table.shape
    g = np.full((T, K), -1, np.int32)
    lens = np.zeros(T, np.int32)
    for t in range(T):
        req, cnt = int(t2r[t]), 0
        for j in range(K):
            v = int(topk[t, j])
            if 0 <= req < R and v >= 0 and v // bs < W:
                g[t, j] = np.int32(np.int64(table[req, v // bs]) * bs + v % bs)
                cnt += 1
        lens[t] = cnt if (valid[t] and 0 <= req < R) else 0
    return g, lens


def combine_model(topk, qsl, seq, gat, T, TOPK, W, r, M, N, v4=False):
    C = (TOPK + W + 127) // 128 * 128
    out = np.full((T, C), -1, np.int32)
    lens = np.zeros(T, np.int32)
    q_base = int(qsl[0])
    for b in range(len(seq)):
        q0, q1 = int(qsl[b]) - q_base, int(qsl[b + 1]) - q_base
        L, G = int(seq[b]), int(gat[b])
        gs = L - G
        for t in range(q0, min(q1, T)):
            pos = L - (q1 - q0) + (t - q0)
            tl = 0 if r == 0 else min(max(pos + 1, 0) // r, TOPK)
            if v4:
                sl = min(max(pos + 1, 0), W)
                ss = pos - sl + 1
            else:
                ss = max(pos - W + 1, 0, gs)
                sl = max(pos - ss + 1, 0)
            for j in range(tl):
                v = int(topk[t, j])
                out[t, j] = v + M * b if (v4 or 0 <= v < N) else -1
            for j in range(sl):
                out[t, tl + j] = M * b + N + (ss - gs) + j
            lens[t] = tl + sl
    return out, lens


def decode_swa_model(t2r, pos, valid, table, W, P):
    T = len(t2r)
    R, width = table.shape
    out = np.full((T, W), -1, np.int32)
    lens = np.zeros(T, np.int32)
    for t in range(T):
        req, p = int(t2r[t]), int(pos[t])
        n = min(p + 1, W) if (0 <= req < R and p >= 0) else 0
        for j in range(n):
            q = p - n + 1 + j
            if q // P < width:
                out[t, j] = table[req, q // P] * P + q % P
        lens[t] = n if valid[t] else 0
    return out, lens


# ---- attention ------------------------------------------------------------------------------
def attention_model(q_bf16, rows_per_token, scale, sink):
    """fp64 out[t, h] = sum_j e^{s_j} K_j / (sum_j e^{s_j} + e^{sink[h]}); rows_per_token[t] is a
    [n, 512] float64 array of K rows (NaN lanes already zeroed where the op says so)."""
    q = bf16_to_f32(q_bf16).astype(np.float64)
    T, H, _ = q.shape
    out = np.zeros((T, H, DIM))
    for t in range(T):
        K = rows_per_token[t]
        if len(K) == 0:
            continue
        s = float(np.float32(scale)) * (q[t] @ K.T)  # [H, n]
        m = s.max(axis=1, keepdims=True)
        if sink is not None:
            m = np.maximum(m, sink.astype(np.float64)[:, None])
        p = np.exp(s - m)
        den = p.sum(axis=1, keepdims=True)
        if sink is not None:
            den = den + np.exp(sink.astype(np.float64)[:, None] - m)
        out[t] = (p @ K) / den
    return out


def decode_rows(cache, P, ids, lens):
    """K rows [n, 512] (float64, NaN lanes -> 0) of one token's valid slots, in list order."""
    n = min(max(int(lens), 0), len(ids))
    rows = [bf16_to_f32(dequant_slot(cache, P, s)).astype(np.float64) for s in ids[:n]
            if 0 <= s < cache.shape[0] * P]
    rows = np.array(rows).reshape(-1, DIM)
    return np.nan_to_num(rows, nan=0.0)


# ---- mHC ------------------------------------------------------------------------------------
def post_model(x, R, post, comb):
    """R_new[k] = bf16(fmaf chain): acc = post[k]*x, acc = fmaf(comb[j][k], R[j], acc), j = 0..3."""
    xf, Rf = bf16_to_f32(x), bf16_to_f32(R)
    T, _, H = R.shape
    out = np.zeros((T, 4, H), np.uint16)
    for k in range(4):
        acc = (post[:, k:k + 1].astype(np.float64) * xf).astype(np.float32)
        for j in range(4):
            acc = fmaf(comb[:, j, k:k + 1], Rf[:, j], acc)
        out[:, k] = f32_to_bf16(acc)
    return out


def collapse_model(R, p, w, eps, v4=False):
    """(yb bf16, normed float64 or None, aux bf16): y = p0*R0, fmaf(p_j, R_j, y); aux = mean."""
    Rf = bf16_to_f32(R)
    if p is None:
        y = Rf[:, 0].copy()
    else:
        y = (p[:, 0:1].astype(np.float64) * Rf[:, 0]).astype(np.float32)
        for j in range(1, 4):
            y = fmaf(p[:, j:j + 1], Rf[:, j], y)
    yb = f32_to_bf16(y)
    normed = None
    if w is not None:
        v = (y if v4 else bf16_to_f32(yb)).astype(np.float64)
        rn = 1.0 / np.sqrt((v * v).sum(-1, keepdims=True) / R.shape[2] + eps)
        normed = bf16_to_f32(yb).astype(np.float64) * rn * bf16_to_f32(w).astype(np.float64)
    aux = f32_to_bf16((((Rf[:, 0] + Rf[:, 1]) + Rf[:, 2]) + Rf[:, 3]) * np.float32(0.25))
    return yb, normed, aux


def projection_model(X, fn, rms_eps, sqrsum=None):
    """(mix fp64 [T, 24], bound [T, 24] = rms * sum_k |X fn|): raw = X fn^T, rms from sum X^2."""
    Xd = bf16_to_f32(X).reshape(X.shape[0], -1).astype(np.float64)
    F = fn.astype(np.float64)
    sq = (Xd * Xd).sum(1) if sqrsum is None else sqrsum.astype(np.float64)
    rms = 1.0 / np.sqrt(sq / Xd.shape[1] + rms_eps)
    return (Xd @ F.T) * rms[:, None], (np.abs(Xd) @ np.abs(F).T) * rms[:, None]


def gates_epilogue(mix, scale, base, pre_eps=1e-6, sk_eps=1e-6, post_mult=2.0, iters=20):
    """fp64 pre [T,4], post [T,4], comb [T,4,4] from mix (include/dsv4/mhc.h, the gates)."""
    mix = mix.astype(np.float64)
    sc, b = scale.astype(np.float64), base.astype(np.float64)
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    pre = sig(mix[:, 0:4] * sc[0] + b[0:4]) + pre_eps
    post = sig(mix[:, 4:8] * sc[1] + b[4:8]) * post_mult
    L = (mix[:, 8:24] * sc[2] + b[8:24]).reshape(-1, 4, 4)
    C = np.exp(L - L.max(axis=2, keepdims=True))
    C = C / C.sum(axis=2, keepdims=True) + sk_eps
    C = C / (C.sum(axis=1, keepdims=True) + sk_eps)
    for _ in range(iters - 1):
        C = C / (C.sum(axis=2, keepdims=True) + sk_eps)
        C = C / (C.sum(axis=1, keepdims=True) + sk_eps)
    return pre, post, C


def check_gates(res, X, fn, scale, base, gate, sqrsum=None, what="gates"):
    """mix within 1e-5 * rms * sum|X fn| of the float64 projection, pre/post/comb within 1e-5 of
    the float64 epilogue fed the op's own mix; gate: the dsv4_mhc_gate_params_t fields."""
    mix_want, bound = projection_model(X, fn, gate["rms_eps"], sqrsum)
    mix = res["mix"]
    assert (np.abs(mix - mix_want) <= 1e-5 * bound + 1e-30).all(), (
        f"{what}: mix off by {np.abs(mix - mix_want).max():.3e} (bound {1e-5 * bound.min():.3e})")
    pre, post, comb = gates_epilogue(mix, scale, base, gate["pre_eps"], gate["sinkhorn_eps"], gate["post_mult"],
                                     gate["sinkhorn_iters"])
    for name, want in (("pre", pre), ("post", post), ("comb", comb)):
        err = np.abs(res[name].reshape(want.shape) - want).max()
        assert err <= 1e-5, f"{what}: {name} off by {err:.3e} from the float64 epilogue (tolerance 1e-5)"


def mhc_params(rng, H, K=None):
    """fn [24, K] ~ N(0, 1/K), scale [3] in [0.5, 1.5], base [24] ~ N(0, 0.25)."""
    K = K or 4 * H
    fn = (rng.standard_normal((24, K)) / np.sqrt(K)).astype(np.float32)
    return fn, rng.uniform(0.5, 1.5, 3).astype(np.float32), (0.5 * rng.standard_normal(24)).astype(np.float32)

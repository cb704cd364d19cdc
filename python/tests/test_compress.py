"""compress family on the host path: what the binding adds to the C reference (descriptors from
tensor shapes and strides, outputs written in place, numpy and torch alike), bit for bit against
dsv4_<op>_ref called directly on dense arrays. The formulas themselves are checked by
tests/compress against fp64 models and known answers."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm


def _ratio2_rows(rng):
    """Two requests: one continuing at an odd position (its first row pools with the ring), one
    starting at 0; ring blocks of 8 rows, random ring contents."""
    pos = np.array([5, 6, 7, 0, 1, 2, 3], np.int64)
    qsl = np.array([0, 3, 7], np.int32)
    cap, blocks = 8, 2
    ring_slot = np.array([(0 if t < 3 else 1) * cap + p % cap for t, p in enumerate(pos)], np.int64)
    ring_slot[4] = -1  # a row without ring: read nothing from the ring, store nothing
    ring = rng.standard_normal((blocks * cap, 1024)).astype(np.float32)
    return pos, qsl, ring_slot, ring, cap


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_compress(be, rng, ratio, layout):
    T = 7
    kv = (rng.standard_normal((T, 512 * ratio)) * 3).astype(np.float32)
    gamma = sm.rng_bf16(rng, (512,), -2, 1)
    latent = oracle.poison(rng, (T, 512), np.uint16)
    want = latent.copy()
    desc = dict(num_tokens=T, ratio=ratio, kv_stride=512 * ratio, eps=1e-6)
    if ratio == 1:
        slot = rng.integers(-1, 50, size=T).astype(np.int64)
        slot[2] = -1
        arrays = dict(slot=slot)
        kw = dict(slot=be.put(slot))
    else:
        pos, qsl, ring_slot, ring, cap = _ratio2_rows(rng)
        desc.update(num_reqs=2, ring_cap=cap, ring_rows=ring.shape[0], ring_stride=1024)
        want_ring = ring.copy()
        arrays = dict(positions=pos, ring_slot=ring_slot, query_start_loc=qsl, ring=want_ring)
    oracle.ref("compress", desc, kv_score=kv, gamma=gamma, latent=want, **arrays)
    assert not np.array_equal(want, latent), "the reference wrote nothing"
    kvt = oracle.embed(be, kv, 16, np.float32(np.nan))[0] if layout == "padded" else be.put(kv)
    lt = be.put(latent)
    if ratio == 2:
        ring_t, ring_whole = (oracle.embed(be, ring, 16, np.float32(-7.0)) if layout == "padded"
                              else (be.put(ring), None))
        kw = dict(positions=be.put(pos), ring_slot=be.put(ring_slot), query_start_loc=be.put(qsl), ring=ring_t,
                  ring_cap=cap)
    assert d.compress(kvt, be.put(gamma), lt, ratio=ratio, eps=1e-6, **kw) is lt
    oracle.assert_bits(be.get(lt), want, f"compress latent (r={ratio}, {layout})")
    if ratio == 2:
        oracle.assert_bits(be.get(ring_t), want_ring, f"compress ring ({layout})")
        if ring_whole is not None:
            assert (be.get(ring_whole)[:, 1024:] == -7.0).all(), "ring padding was written"


def test_compress_errors(be, rng):
    kv = be.put(np.zeros((4, 512), np.float32))
    gamma, latent = be.put(np.zeros(512, np.uint16)), be.put(np.zeros((4, 512), np.uint16))
    with pytest.raises(ValueError, match="ratio"):
        d.compress(kv, gamma, latent, ratio=3, eps=1e-6, slot=be.put(np.zeros(4, np.int64)))
    with pytest.raises(ValueError, match="slot"):
        d.compress(kv, gamma, latent, ratio=1, eps=1e-6)
    with pytest.raises(ValueError, match="latent"):
        d.compress(kv, gamma, be.put(np.zeros((3, 512), np.uint16)), ratio=1, eps=1e-6,
                   slot=be.put(np.zeros(4, np.int64)))
    with pytest.raises(d.Dsv4Error, match="eps"):  # the library's own check, its message
        d.compress(kv, gamma, latent, ratio=1, eps=-1.0, slot=be.put(np.zeros(4, np.int64)))


@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_inv_rope(be, rng, layout):
    T, H, Hpad, max_pos = 9, 5, 8, 40
    o = sm.rng_bf16(rng, (T, Hpad, 512), -6, 4)
    pos = rng.integers(-1, max_pos + 2, size=T).astype(np.int64)
    cs = rng.standard_normal((max_pos, 64)).astype(np.float32)
    want = o.copy()
    oracle.ref("inv_rope", dict(num_tokens=T, num_heads=H, num_heads_padded=Hpad, o_stride_token=Hpad * 512,
                                o_stride_head=512, max_position=max_pos),
               o=want, position_ids=pos, cos_sin_cache=cs)
    assert not np.array_equal(want, o), "the reference wrote nothing"
    if layout == "padded":  # head rows 520 elements apart
        ot, whole = oracle.embed(be, o, 8, 0x7E7E)
    else:
        ot, whole = be.put(o), None
    assert d.inv_rope(ot, be.put(pos), be.put(cs), num_heads=H) is ot
    oracle.assert_bits(be.get(ot), want, f"inv_rope ({layout})")
    if whole is not None:
        assert (be.get(whole)[..., 512:] == 0x7E7E).all(), "elements between head rows were written"


@pytest.mark.parametrize("head_start", [0, 2])
def test_engram_lookup(be, rng, head_start):
    T, n_cols, local, D, rows, v0 = 6, 4, 3, 64, 20, 100
    values = rng.integers(0, 256, size=(rows, D), dtype=np.uint8)
    scales = rng.integers(110, 140, size=(rows, D // 32), dtype=np.uint8)
    ids = rng.integers(v0 - 3, v0 + rows + 3, size=(T, n_cols)).astype(np.int32)
    ids[0, :] = -1
    out = oracle.poison(rng, (T, local, D), np.uint16)
    want = out.copy()
    oracle.ref("engram_lookup", dict(num_tokens=T, n_cols=n_cols, head_start=head_start, local_heads=local,
                                     head_dim=D, ids_stride_token=n_cols, ids_stride_head=1, vocab_start=v0,
                                     vocab_end=v0 + rows, values_stride_bytes=D, scales_stride_bytes=D // 32),
               values=values, scales=scales, ids=ids, out=want)
    ot = be.put(out)
    idt = be.put(np.ascontiguousarray(ids.T)).T  # column-major ids: the binding passes both strides
    assert d.engram_lookup(be.put(values), be.put(scales), idt, ot, head_start=head_start, vocab_start=v0) is ot
    oracle.assert_bits(be.get(ot), want, f"engram_lookup (head_start {head_start})")
    with pytest.raises(ValueError, match="vocab"):
        d.engram_lookup(be.put(values), be.put(scales), idt, ot, vocab_start=v0, vocab_end=v0 + rows + 1)


# ---- compress_v4 ----------------------------------------------------------------------------------
# Per ratio: state rows a block, cache slots a page, pages, rotary rows, and the requests as (first
# position of this call, rows): every window a record reads starts inside this call or in state rows
# an earlier call left. The same slots serve both caches (head 512: fp8_ds_mla records, head 128:
# indexer states).
_V4_SHAPES = {
    4: dict(B=4, P=64, pages=2, max_pos=64, reqs=[(10, 7), (0, 6), (29, 3)]),
    128: dict(B=8, P=2, pages=16, max_pos=300, reqs=[(120, 14), (250, 8), (0, 5)]),
}
STATE = 132  # an indexer state: 128 e4m3 codes, then its fp32 scale (at the page's end)


def v4_page_stride(P, head_dim):
    """vLLM's page size of the cache a head writes: P records or states rounded up to 576 bytes."""
    return sm.page_stride(P) if head_dim == 512 else (P * STATE + 575) // 576 * 576


def v4_case(rng, ratio, head_dim=512):
    """A random dsv4_compress_v4 call as dense numpy arrays: three requests (one starting at
    position 0, whose first window at ratio 4 reaches below 0), two padded rows at a closing
    position (slot -1 in both mappings), a block table of distinct state blocks, random earlier
    state rows, a poisoned cache (compressed at head 512, indexer at head 128) with a distinct
    slot for every live row."""
    sh = _V4_SHAPES[ratio]
    B, P, pages = sh["B"], sh["P"], sh["pages"]
    width = (2 if ratio == 4 else 1) * head_dim
    max_blocks = max(s + n for s, n in sh["reqs"]) // B + 1
    R = len(sh["reqs"])
    blocks = R * max_blocks + 3
    table = rng.permutation(blocks)[:R * max_blocks].astype(np.int32).reshape(R, max_blocks)
    pos, req = [], []
    for b, (s, n) in enumerate(sh["reqs"]):
        pos += list(range(s, s + n))
        req += [b] * n
    pad_at = [2, len(pos) // 2 + 1]
    for i in pad_at:  # a padded row takes a closing position: it must still write nothing
        pos.insert(i, ratio - 1)
        req.insert(i, 0)
    pos, req = np.array(pos, np.int64), np.array(req, np.int32)
    T = len(pos)
    state_slot = (table[req, pos // B].astype(np.int64) * B + pos % B).astype(np.int64)
    slot_mapping = rng.permutation(pages * P)[:T].astype(np.int64)
    state_slot[pad_at], slot_mapping[pad_at] = -1, -1
    kv = np.concatenate([rng.standard_normal((T, width)) * 2, rng.standard_normal((T, width)) * 1.5], 1)
    state = np.concatenate([rng.standard_normal((blocks, B, width)) * 2,
                            rng.standard_normal((blocks, B, width)) * 1.5], 2).astype(np.float32)
    return dict(kv_score=kv.astype(np.float32), ape=rng.standard_normal((ratio, width)).astype(np.float32),
                positions=pos, state_slot=state_slot, req_idx=req, block_table=table,
                gamma=sm.rng_bf16(rng, (head_dim,), -2, 1), cos_sin_cache=sm.rope_table(rng, sh["max_pos"]),
                slot_mapping=slot_mapping, state=state,
                cache=oracle.poison(rng, (pages, v4_page_stride(P, head_dim)), np.uint8)), P


def v4_desc(c, ratio, P, eps=1e-6):
    """The descriptor of a dense v4_case."""
    st, cache = c["state"], c["cache"]
    return dict(num_tokens=len(c["positions"]), ratio=ratio, head_dim=len(c["gamma"]),
                kv_stride=c["kv_score"].shape[1], state_block_rows=st.shape[1], state_blocks=st.shape[0],
                state_stride_block=st.shape[1] * st.shape[2], state_stride_row=st.shape[2],
                num_reqs=c["block_table"].shape[0], max_blocks=c["block_table"].shape[1],
                block_table_stride=c["block_table"].shape[1], page_tokens=P, page_stride_bytes=cache.shape[1],
                num_pages=cache.shape[0], max_position=c["cos_sin_cache"].shape[0], eps=eps)


def v4_model(c, ratio, eps=1e-6):
    """Independent float64 model of the contract: the state after the save step (exact), and per
    written slot the normalized latent n (float64 [N], N = head_dim) with its last 64 dims
    rotated."""
    N, width = len(c["gamma"]), c["ape"].shape[1]
    state = c["state"].copy()
    B = state.shape[1]
    for t, (p, s) in enumerate(zip(c["positions"], c["state_slot"])):
        if p >= 0 and 0 <= s < state.shape[0] * B:
            state[s // B, s % B, :width] = c["kv_score"][t, :width]
            state[s // B, s % B, width:] = c["kv_score"][t, width:] + c["ape"][p % ratio]  # one fp32 add
    W = width // N * ratio
    gamma = sm.bf16_to_f32(c["gamma"]).astype(np.float64)
    out = {}
    for t, (p, slot) in enumerate(zip(c["positions"], c["slot_mapping"])):
        if slot < 0 or (p + 1) % ratio:
            continue
        kvs, scores = [], []
        for j in range(W):
            q = p - W + 1 + j
            if q < 0:
                continue
            row = state[c["block_table"][c["req_idx"][t], q // B], q % B].astype(np.float64)
            o = N if j >= ratio else 0
            kvs.append(row[o:o + N]), scores.append(row[width + o:width + o + N])
        kvs, scores = np.array(kvs), np.array(scores)
        w = np.exp(scores - scores.max(0))
        x = (w * kvs).sum(0) / w.sum(0)
        n = x / np.sqrt((x * x).mean() + eps) * gamma
        cs = c["cos_sin_cache"][p + 1 - ratio].astype(np.float64)
        a, b = n[N - 64::2].copy(), n[N - 63::2].copy()
        n[N - 64::2], n[N - 63::2] = a * cs[:32] - b * cs[32:], b * cs[:32] + a * cs[32:]
        out[int(slot)] = n
    return state, out


def _e4m3_step(v):
    """The e4m3 spacing at magnitude |v| (scaled units): 2^-9 below 2^-6, else 2^(e - 3)."""
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0**-6)))
    return np.where(np.abs(v) < 2.0**-6, 2.0**-9, 2.0 ** (e - 3))


def _bf16_ulp(v):
    """The bf16 spacing at magnitude |v| (normal range)."""
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(v), 2.0**-126))) - 7)


def _scale_fits(amax, scale):
    """The power-of-two scale of a block with absmax amax (floored at 1e-4): the smallest with
    448 * scale >= amax, allowing the bf16 rounding of the quantized values (2^-8 relative)."""
    amax = np.maximum(amax, 1e-4)
    return bool(np.all((amax <= 448 * scale * (1 + 2**-7)) & (amax > 224 * scale * (1 - 2**-7))))


def _deviation(got, n, tol, what):
    """|got - n| in units of tol per dim, each at most 1."""
    err = np.abs(got - n) / tol
    i = int(np.argmax(err))
    assert err[i] <= 1, f"{what} dim {i}: decoded {got[i]:.6g}, model {n[i]:.6g}, bound {tol[i]:.3g}"
    return err


def check_v4_records(cache, poison, P, want, what):
    """Each record of `want` (slot -> float64 latent) decodes within its two roundings: a nope dim
    within half an e4m3 step (of its block's scale, at its magnitude) plus one bf16 ulp, the block
    scale the power of two of the block's absmax / 448; a RoPE dim within half a bf16 ulp plus
    2^-16 of its pair's magnitude (the fp32 evaluation). Every other byte keeps its poison.
    Returns the largest deviation of the nope and of the RoPE dims, in units of their bounds."""
    touched = np.zeros(cache.shape, bool)
    worst = np.zeros(2)
    for slot, n in want.items():
        page, p = divmod(slot, P)
        touched[page, p * sm.DATA:(p + 1) * sm.DATA] = True
        touched[page, P * sm.DATA + p * 8:P * sm.DATA + p * 8 + 8] = True
        got = sm.bf16_to_f32(sm.dequant_slot(cache, P, slot)).astype(np.float64)
        assert np.isfinite(got).all(), f"{what}: slot {slot} decodes to non-finite values"
        scale = sm.ue8m0_decode(cache[page, P * sm.DATA + p * 8:P * sm.DATA + p * 8 + 7]).astype(np.float64)
        amax = np.abs(n[:448]).reshape(7, 64).max(1)
        assert _scale_fits(amax, scale), f"{what}: slot {slot} block scales {scale} for absmax {amax}"
        s = np.repeat(scale, 64)
        pair = np.repeat(np.abs(n[448::2]) + np.abs(n[449::2]), 2)
        tol = np.concatenate([0.5 * s * _e4m3_step(n[:448] / s) + _bf16_ulp(n[:448]),
                              0.5 * _bf16_ulp(n[448:]) + 2.0**-16 * pair])
        err = _deviation(got, n, tol, f"{what}: slot {slot}")
        worst = np.maximum(worst, [err[:448].max(), err[448:].max()])
    assert (cache[~touched] == poison[~touched]).all(), f"{what}: bytes outside the records changed"
    return worst


def check_v4_states(cache, poison, P, want, what):
    """Each indexer state of `want` (slot -> float64 latent [128]) decodes within its two
    roundings: one power-of-two scale for the whole row (from the row's absmax / 448), every dim
    within half an e4m3 step of that scale at its magnitude plus one bf16 ulp, a RoPE dim (64..127)
    also 2^-16 of its pair's magnitude (the fp32 rotation). Every other byte keeps its poison.
    Returns the largest deviation of the NoPE and of the RoPE dims, in units of their bounds."""
    touched = np.zeros(cache.shape, bool)
    worst = np.zeros(2)
    for slot, n in want.items():
        page, q = divmod(slot, P)
        touched[page, q * 128:(q + 1) * 128] = True
        touched[page, P * 128 + q * 4:P * 128 + q * 4 + 4] = True
        bits = cache[page, P * 128 + q * 4:P * 128 + q * 4 + 4].copy().view(np.uint32)[0]
        assert bits & 0x807FFFFF == 0, f"{what}: slot {slot} scale bits {bits:#x} are not a power of two"
        scale = float(bits.view(np.float32))
        assert _scale_fits(np.abs(n).max(), scale), f"{what}: slot {slot} scale {scale} for absmax {np.abs(n).max()}"
        got = sm.E4M3[cache[page, q * 128:(q + 1) * 128]] * scale
        assert np.isfinite(got).all(), f"{what}: slot {slot} decodes to non-finite values"
        pair = np.repeat(np.abs(n[64::2]) + np.abs(n[65::2]), 2)
        tol = 0.5 * scale * _e4m3_step(n / scale) + _bf16_ulp(n) + np.concatenate([np.zeros(64), 2.0**-16 * pair])
        err = _deviation(got, n, tol, f"{what}: slot {slot}")
        worst = np.maximum(worst, [err[:64].max(), err[64:].max()])
    assert (cache[~touched] == poison[~touched]).all(), f"{what}: bytes outside the states changed"
    return worst


@pytest.mark.parametrize("ratio", [4, 128])
@pytest.mark.parametrize("head_dim", [512, 128])
@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_compress_v4(be, rng, ratio, head_dim, layout):
    """The reference against the float64 model (state rows exact, records or indexer states within
    their rounding, nothing else written), then the binding bit for bit against the reference;
    padded: kv_score and state rows 4 floats wider (the padding must stay), and at head 512 a flat
    cache with an explicit page stride, at head 128 cache pages inside wider rows (as vLLM's
    padded indexer pages; the bytes between pages must stay)."""
    c, P = v4_case(rng, ratio, head_dim)
    want = {k: v.copy() for k, v in c.items()}
    oracle.ref("compress_v4", v4_desc(c, ratio, P), **want)
    model_state, records = v4_model(c, ratio)
    closing = [(p + 1) % ratio == 0 and s >= 0 for p, s in zip(c["positions"], c["slot_mapping"])]
    assert len(records) == sum(closing) >= 2
    oracle.assert_bits(want["state"], model_state, f"compress_v4 state (r={ratio}, N={head_dim})")
    saved = c["state_slot"] >= 0
    assert not np.array_equal(model_state, c["state"]) and saved.sum() == len(set(c["state_slot"][saved]))
    what = f"compress_v4 reference (r={ratio}, N={head_dim})"
    check = check_v4_records if head_dim == 512 else check_v4_states
    worst = check(want["cache"], c["cache"], P, records, what)
    print(f"compress_v4 r={ratio} N={head_dim}: {len(records)} latents, worst deviation {worst[0]:.3f} (nope), "
          f"{worst[1]:.3f} (rope) of the bound")

    kw = {k: be.put(v) for k, v in c.items() if k not in ("kv_score", "state", "cache")}
    cache_whole = None
    if layout == "padded":
        kv, _ = oracle.embed(be, c["kv_score"], 4, np.float32(np.nan))
        state, state_whole = oracle.embed(be, c["state"], 4, np.float32(-7.0))
        if head_dim == 512:
            cache, stride = be.put(c["cache"].reshape(-1)), c["cache"].shape[1]
        else:
            (cache, cache_whole), stride = oracle.embed(be, c["cache"], 48, np.uint8(0xA5)), None
    else:
        kv, state, cache = be.put(c["kv_score"]), be.put(c["state"]), be.put(c["cache"])
        state_whole = stride = None
    got = d.compress_v4(kv, kw["ape"], kw["positions"], kw["state_slot"], kw["req_idx"], kw["block_table"],
                        kw["gamma"], kw["cos_sin_cache"], kw["slot_mapping"], state, cache, ratio=ratio, eps=1e-6,
                        page_tokens=P, head_dim=head_dim, page_stride_bytes=stride)
    assert got[0] is state and got[1] is cache
    oracle.assert_bits(be.get(state), want["state"], f"compress_v4 state (r={ratio}, N={head_dim}, {layout})")
    oracle.assert_bits(be.get(cache).reshape(want["cache"].shape), want["cache"],
                       f"compress_v4 cache (r={ratio}, N={head_dim}, {layout})")
    if state_whole is not None:
        assert (be.get(state_whole)[..., 2 * c["ape"].shape[1]:] == -7.0).all(), "state row padding was written"
    if cache_whole is not None:
        assert (be.get(cache_whole)[:, c["cache"].shape[1]:] == 0xA5).all(), "bytes between pages were written"


def test_compress_v4_errors(be, rng):
    c, P = v4_case(rng, 4)
    t = {k: be.put(v) for k, v in c.items()}
    a = [t[k] for k in ("kv_score", "ape", "positions", "state_slot", "req_idx", "block_table", "gamma",
                        "cos_sin_cache", "slot_mapping", "state", "cache")]
    with pytest.raises(ValueError, match="ratio"):
        d.compress_v4(*a, ratio=8, eps=1e-6, page_tokens=P)
    with pytest.raises(ValueError, match="ape"):  # half the width ratio 4 needs
        d.compress_v4(*a[:1], be.put(c["ape"][:, :512]), *a[2:], ratio=4, eps=1e-6, page_tokens=P)
    with pytest.raises(ValueError, match="state"):
        d.compress_v4(*a[:9], be.put(c["state"][..., :1024]), a[10], ratio=4, eps=1e-6, page_tokens=P)
    with pytest.raises(d.Dsv4Error, match="eps"):  # the library's own check, its message
        d.compress_v4(*a, ratio=4, eps=-1.0, page_tokens=P)
    with pytest.raises(ValueError, match="head_dim"):
        d.compress_v4(*a, ratio=4, eps=1e-6, page_tokens=P, head_dim=256)
    with pytest.raises(ValueError, match="kv_score"):  # head 512's widths at head 128
        d.compress_v4(*a, ratio=4, eps=1e-6, page_tokens=P, head_dim=128)
    assert (be.get(t["cache"]) == c["cache"]).all() and (be.get(t["state"]) == c["state"]).all()
    c, P = v4_case(rng, 4, 128)
    t = {k: be.put(v) for k, v in c.items()}
    a = [t[k] for k in ("kv_score", "ape", "positions", "state_slot", "req_idx", "block_table", "gamma",
                        "cos_sin_cache", "slot_mapping", "state", "cache")]
    with pytest.raises(ValueError, match="gamma"):  # head 512's weight at head 128
        d.compress_v4(*a[:6], be.put(np.zeros(512, np.uint16)), *a[7:], ratio=4, eps=1e-6, page_tokens=P,
                      head_dim=128)
    with pytest.raises(ValueError, match="132"):  # pages too small for P indexer states
        d.compress_v4(*a, ratio=4, eps=1e-6, page_tokens=2 * P, head_dim=128)
    assert (be.get(t["cache"]) == c["cache"]).all() and (be.get(t["state"]) == c["state"]).all()

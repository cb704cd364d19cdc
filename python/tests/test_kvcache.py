"""kvcache on the host path (C references) against the numpy model of include/dsv4/kvcache.h."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import spec_model as sm


def _insert_case(rng, T=96, P=64, pages=5):
    """V4 page (P = 64): T rows into shuffled slots, some skipped (-1, past the cache)."""
    stride = sm.page_stride(P)
    cache = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)  # poison
    k = sm.rng_bf16(rng, (T + 3, 512), -8, 6, zero_every=50)  # 3 padding rows past slot_mapping
    k[0, :64] = 0  # an all-zero block: the 1e-4 amax floor
    k[1, 64:128] = sm.f32_to_bf16(np.full(64, 3e-6, np.float32))  # a block below the floor
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    slots[5], slots[9] = -1, pages * P + 7
    return cache, k, slots, P


def test_kv_insert_matches_numpy_quantizer(be, rng):
    cache, k, slots, P = _insert_case(rng)
    want = sm.insert_model(cache, k, slots, P)
    c = be.put(cache)
    kt = be.put(k)
    ret = d.kv_insert(kt, be.put(slots), c, page_tokens=P)
    assert ret is c
    got = be.get(c)
    diff = np.argwhere(got != want)
    assert diff.size == 0, f"{len(diff)} cache bytes differ, first (page, byte) {diff[:5].tolist()}"
    assert np.array_equal(be.get(kt), k), "kv_insert modified its input"


def test_kv_insert_strided_rows_and_flat_cache(rng):
    cache, k, slots, P = _insert_case(rng, T=40, pages=2)
    wide = np.zeros((k.shape[0], 520), np.uint16)
    wide[:, :512] = k
    want = sm.insert_model(cache, k, slots, P)
    flat = cache.reshape(-1).copy()
    d.kv_insert(wide[:, :512], slots, flat, page_tokens=P, page_stride_bytes=cache.shape[1])
    assert np.array_equal(flat.reshape(cache.shape), want)


@pytest.mark.parametrize("heads,padded", [(16, 16), (8, 16)])
def test_kv_swa_write(be, rng, heads, padded):
    """V4.1 SWA page (P = 32): q within 1 bf16 ulp of float64, cache bytes = insert(bf16(RoPE(kv)))."""
    P, pages, N, n_ins, max_pos, eps = 32, 3, 12, 10, 300, 1e-6
    cache = rng.integers(0, 256, size=(pages, sm.page_stride(P)), dtype=np.uint8)
    q = sm.rng_bf16(rng, (N, padded, 512), -6, 3)
    kv = sm.rng_bf16(rng, (N, 512), -6, 3)
    pos = rng.integers(0, max_pos, N).astype(np.int64)
    slots = rng.permutation(pages * P)[:n_ins].astype(np.int64)
    slots[3] = -1
    cs = sm.rope_table(rng, max_pos)
    roped = np.stack([sm.rope_kv_row(kv[t], cs[pos[t]]) for t in range(n_ins)])
    want_cache = sm.insert_model(cache, roped, slots, P)
    want_q = sm.swa_q_model(q[:, :heads], cs[pos], eps)

    qt, ct = be.put(q), be.put(cache)
    d.kv_swa_write(qt, be.put(kv), be.put(pos), be.put(slots), be.put(cs), ct, page_tokens=P, eps=eps,
                   num_heads=heads)
    got_q = be.get(qt)
    assert np.array_equal(be.get(ct), want_cache), "SWA cache bytes differ from insert(bf16(RoPE(kv)))"
    ulps = sm.ulp_diff_bf16(got_q[:, :heads], sm.f32_to_bf16(want_q.astype(np.float32)))
    assert ulps.max() <= 1, f"q differs by {ulps.max()} bf16 ulps from the float64 model"
    assert not got_q[:, heads:].any(), "padded heads must be written as zeros"


@pytest.mark.parametrize("reqs,P,with_gather_lens", [(1, 64, False), (3, 32, True), (4, 256, False)])
def test_kv_gather_is_dequantize_then_index(be, rng, reqs, P, with_gather_lens):
    width = 4
    pages = reqs * width + 1
    cache = sm.random_cache(rng, pages, P)
    table = (1 + rng.permutation(pages - 1)[:reqs * width]).reshape(reqs, width).astype(np.int32)
    seq = rng.integers(1, width * P, reqs).astype(np.int32)
    glen = np.minimum(seq, rng.integers(0, 3 * P, reqs)).astype(np.int32) if with_gather_lens else None
    M, offset = width * P + 8, 5
    out = rng.integers(0, 65536, size=(reqs + 1, M, 512), dtype=np.uint64).astype(np.uint16)  # poison
    want = sm.gather_model(out, cache, P, seq, table, offset, glen)
    ot = be.put(out)
    d.kv_gather(be.put(cache), be.put(seq), be.put(table), ot, page_tokens=P, offset=offset,
                gather_lens=None if glen is None else be.put(glen), max_gather_len=int(seq.max()))
    got = be.get(ot)
    bad = np.argwhere((got != want).any(-1))
    assert bad.size == 0, f"rows (req, row) differ: {bad[:5].tolist()} (written rows bit-exact, others untouched)"


def test_kv_gather_strided_slab_and_out_of_range_pages(rng):
    """Out-of-range page ids give zero rows; a padded row stride leaves the padding alone."""
    P, pages = 64, 3
    cache = sm.random_cache(rng, pages, P)
    table = np.array([[2, 7, -3, 1]], np.int32)
    seq = np.array([4 * P], np.int32)
    buf = np.full((1, 4 * P, 520), 0x7E7E, np.uint16)
    want = sm.gather_model(buf[:, :, :512], cache, P, seq, table, 0)
    d.kv_gather(cache, seq, table, buf[:, :, :512], page_tokens=P)
    assert np.array_equal(buf[:, :, :512], want)
    assert not buf[0, P:3 * P, :512].any(), "rows of invalid pages must be zero"
    assert (buf[:, :, 512:] == 0x7E7E).all(), "row padding was written"


def test_insert_then_gather_roundtrip(rng):
    """The RoPE half comes back bit for bit; NoPE within the e4m3 step of its block scale."""
    P, T = 32, 64
    cache = np.zeros((3, sm.page_stride(P)), np.uint8)
    k = sm.rng_bf16(rng, (T, 512), -3, 3)
    d.kv_insert(k, np.arange(T, dtype=np.int64) + P, cache, page_tokens=P)
    out = np.zeros((1, T, 512), np.uint16)
    d.kv_gather(cache, np.array([T + P], np.int32), np.array([[0, 1, 2]], np.int32), out, page_tokens=P,
                gather_lens=np.array([T], np.int32))
    assert np.array_equal(out[0, :, 448:], k[:, 448:])
    x, y = sm.bf16_to_f32(k[:, :448]), sm.bf16_to_f32(out[0, :, :448])
    amax = np.abs(x).reshape(T, 7, 64).max(-1, keepdims=True)
    assert (np.abs(x - y).reshape(T, 7, 64) <= amax / 8).all()

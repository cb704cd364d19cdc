"""indexer family on the host path: what the binding adds to the C reference (descriptors from
tensor shapes and strides, page geometry from the cache tensor, outputs written in place, numpy
and torch alike), bit for bit against dsv4_<op>_ref called directly on dense arrays. The formulas
are checked by tests/indexer against fp64 models and known answers."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm

STATE = 132


def _page_stride(P):
    return (P * STATE + 575) // 576 * 576


@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_indexer_q(be, rng, layout):
    T, H, max_pos = 5, 32, 30
    q = sm.rng_bf16(rng, (T, H, 128), -12, 8)
    q[1, 3] = 0  # an all-zero head: the smallest scale
    w_raw = sm.rng_bf16(rng, (T, H), -3, 2)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    cs = rng.standard_normal((max_pos, 64)).astype(np.float32)
    q8, w = oracle.poison(rng, (T, H, 128), np.uint8), oracle.poison(rng, (T, H), np.float32)
    want_q8, want_w = q8.copy(), w.copy()
    oracle.ref("indexer_q", dict(num_tokens=T, num_heads=H, q_stride_token=H * 128, q_stride_head=128,
                                 w_stride_token=H, max_position=max_pos),
               q=q, w_raw=w_raw, positions=pos, cos_sin=cs, q8=want_q8, w=want_w)
    qt = oracle.embed(be, q, 8, 0x7FC0)[0] if layout == "padded" else be.put(q)
    wt = oracle.embed(be, w_raw, 3, 0x7FC0)[0] if layout == "padded" else be.put(w_raw)
    q8t, w_t = be.put(q8), be.put(w)
    got = d.indexer_q(qt, wt, be.put(pos), be.put(cs), q8t, w_t)
    assert got[0] is q8t and got[1] is w_t
    oracle.assert_bits(be.get(q8t), want_q8, f"indexer_q codes ({layout})")
    oracle.assert_bits(be.get(w_t), want_w, f"indexer_q weights ({layout})")


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("P", [64, 128])
def test_indexer_k_store(be, rng, ratio, P):
    T, pages, max_pos = 40, 3, 64
    stride = _page_stride(P)
    cache = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)
    k = sm.rng_bf16(rng, (T, 128), -6, 5)
    gamma = sm.rng_bf16(rng, (128,), -1, 1)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    slots[3], slots[7] = -1, pages * P + 5
    want = cache.copy()
    oracle.ref("indexer_k_store", dict(num_tokens=T, k_stride_row=128, ratio=ratio, max_position=max_pos,
                                       page_tokens=P, page_stride_bytes=stride, num_pages=pages, eps=1e-6),
               k_pre=k, gamma=gamma, positions=pos, slot_mapping=slots, cos_sin=(cs := rng.standard_normal(
                   (max_pos, 64)).astype(np.float32)), cache=want)
    assert not np.array_equal(want, cache), "the reference wrote nothing"
    view, whole = oracle.embed(be, cache, 48, 0xA5)  # pages inside wider rows
    kt = oracle.embed(be, k, 8, 0x7FC0)[0]
    assert d.indexer_k_store(kt, be.put(gamma), be.put(pos), be.put(slots), be.put(cs), view, page_tokens=P,
                             ratio=ratio, eps=1e-6) is view
    w = be.get(whole)
    assert (w[:, stride:] == 0xA5).all(), "bytes between pages were written"
    oracle.assert_bits(w[:, :stride], want, f"indexer_k_store cache (r={ratio}, P={P})")


def test_indexer_k_store_small_page_is_refused(be, rng):
    cache = be.put(np.zeros((2, 64 * STATE - 16), np.uint8))
    z = be.put(np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="132"):
        d.indexer_k_store(be.put(np.zeros((4, 128), np.uint16)), be.put(np.zeros(128, np.uint16)), z, z,
                          be.put(np.zeros((8, 64), np.float32)), cache, page_tokens=64, ratio=1, eps=1e-6)

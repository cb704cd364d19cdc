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

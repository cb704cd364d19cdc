"""Error mapping: bad input raises Dsv4Error carrying the library's own message (which names
the operator and the field), Python-visible mistakes raise TypeError/ValueError before any
call, and the stream handed to the library is never NULL."""
import ctypes
import types

import numpy as np
import pytest

import deepinfer_sm80 as d
import spec_model as sm
from deepinfer_sm80 import tensors
from deepinfer_sm80._lib import lib


def raises_lib(status_name, *words):
    """Context manager: a Dsv4Error with this status whose text is dsv4_last_error() and names `words`."""
    class _Ctx:
        def __enter__(self):
            self.cm = pytest.raises(d.Dsv4Error)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.cm.__exit__(*exc)
            e = self.info.value
            last = lib.dsv4_last_error().decode()
            assert e.status_name == status_name, f"expected {status_name}, got {e.status_name}: {e}"
            assert last and last in str(e), f"message {str(e)!r} does not carry the library's {last!r}"
            for w in words:
                assert w in last, f"library message {last!r} does not name {w!r}"
            return handled
    return _Ctx()


def gather_args(P=64, reqs=1, width=2):
    cache = np.zeros((3, sm.page_stride(P)), np.uint8)
    return cache, np.array([10] * reqs, np.int32), np.ones((reqs, width), np.int32), np.zeros((reqs, 16, 512),
                                                                                                np.uint16)


def test_invalid_value_names_the_field():
    cache, seq, table, out = gather_args()
    with raises_lib("INVALID_VALUE", "kv_gather", "offset"):
        d.kv_gather(cache, seq, table, out, page_tokens=64, offset=17)
    with raises_lib("INVALID_VALUE", "kv_insert", "page_tokens"):
        d.kv_insert(np.zeros((1, 512), np.uint16), np.zeros(1, np.int64), cache, page_tokens=0)
    with raises_lib("INVALID_VALUE", "mode"):
        d.combine_topk_swa(np.zeros((1, 4), np.int32), np.array([0, 1], np.int32), np.ones(1, np.int32),
                           np.ones(1, np.int32), topk=4, window=4, ratio=1, slab_rows=64, swa_row0=16, mode=7)
    with raises_lib("INVALID_VALUE", "hidden"):
        d.mhc_post(np.zeros((1, 100), np.uint16), np.zeros((1, 4, 100), np.uint16), np.zeros((1, 4), np.float32),
                   np.zeros((1, 4, 4), np.float32))
    with raises_lib("INVALID_VALUE", "sinkhorn_iters"):
        fn = np.zeros((24, 4 * 128), np.float32)
        d.mhc_gates(np.zeros((1, 4, 128), np.uint16), fn, np.ones(3, np.float32), np.zeros(24, np.float32),
                    gate={"sinkhorn_iters": 0})


def test_unsupported_heads():
    q = np.zeros((1, 8, 512), np.uint16)
    cache = np.zeros((1, sm.page_stride(32)), np.uint8)
    with pytest.raises(d.Dsv4Error) as e:
        d.sparse_mla_decode(q, cache, np.zeros((1, 4), np.int32), np.zeros(1, np.int32), main_page_tokens=32)
    assert "num_heads" in str(e.value) and e.value.status in (2, 4)


def test_misaligned_pointer():
    cache, seq, table, out = gather_args()
    buf = np.zeros(cache.size + 16, np.uint8)
    shifted = buf[1:1 + cache.size].reshape(cache.shape)  # 1 byte off a 16-byte boundary
    with raises_lib("MISALIGNED", "cache"):
        d.kv_gather(shifted, seq, table, out, page_tokens=64)


def test_python_side_checks_name_the_tensor():
    cache, seq, table, out = gather_args()
    with pytest.raises(TypeError, match="seq_lens.*int64.*int32"):
        d.kv_gather(cache, seq.astype(np.int64), table, out, page_tokens=64)
    with pytest.raises(ValueError, match="out.*3 dimensions"):
        d.kv_gather(cache, seq, table, out[0], page_tokens=64)
    with pytest.raises(ValueError, match="page of cache holds 100 bytes"):
        d.kv_gather(cache[:, :100], seq, table, out, page_tokens=64)
    with pytest.raises(TypeError, match="torch tensor or numpy array"):
        d.kv_gather(cache, [10], table, out, page_tokens=64)
    with pytest.raises(TypeError, match="out has dtype float16, expected float32"):
        d.mhc_fn_bcast(np.zeros((24, 512), np.float32), out=np.zeros((24, 128), np.float16))
    with pytest.raises(ValueError, match="fn_split has shape \\(48, 256\\), expected \\(48, 512\\)"):
        d.mhc_gates(np.zeros((1, 4, 128), np.uint16), np.zeros((24, 512), np.float32), np.zeros(3, np.float32),
                    np.zeros(24, np.float32), fn_split=np.zeros((48, 256), np.uint16))
    with pytest.raises(ValueError, match="fn has 510 columns"):
        d.mhc_fn_split(np.zeros((24, 510), np.float32))
    with pytest.raises(TypeError, match="x has dtype float32, expected bf16"):
        d.mhc_post(np.zeros((1, 128), np.float32), np.zeros((1, 4, 128), np.uint16), np.zeros((1, 4), np.float32),
                   np.zeros((1, 4, 4), np.float32))
    ro = np.zeros((2, 128), np.int32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        d.decode_swa_indices(np.zeros(2, np.int32), np.zeros(2, np.int32), np.ones(2, bool), np.zeros((1, 2), np.int32),
                             window=128, page_tokens=64, swa_indices=ro)


def test_broadcast_views_are_refused(be):
    """A stride of 0 (expand, broadcast_to) reads as "dense" in the C API: the binding refuses it
    before the call, and the memory behind the view stays as it was."""
    cache, seq, table, _ = gather_args(reqs=4)
    one = be.put(np.full((1, 16, 512), 0x7777, np.uint16))
    wide = np.broadcast_to(one, (4, 16, 512)) if be.name == "numpy" else one.expand(4, 16, 512)
    with pytest.raises(ValueError, match="out has a zero stride"):
        d.kv_gather(be.put(cache), be.put(seq), be.put(table), wide, page_tokens=64)
    assert (be.get(one) == 0x7777).all()
    seq_wide = np.broadcast_to(np.int32(10), (4,)) if be.name == "numpy" else be.put(seq[:1]).expand(4)
    with pytest.raises(ValueError, match="seq_lens"):
        d.kv_gather(be.put(cache), seq_wide, be.put(table), be.put(np.zeros((4, 16, 512), np.uint16)), page_tokens=64)


def test_error_object_carries_status():
    with pytest.raises(d.Dsv4Error) as e:
        d.mhc_plan(6, 100)
    assert e.value.status == 2 and e.value.status_name == "INVALID_VALUE"
    assert str(e.value).startswith("INVALID_VALUE: ")


def test_stream_is_never_null(monkeypatch):
    """torch reports its default stream as 0; the binding passes cudaStreamLegacy (0x1) instead."""
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda device: types.SimpleNamespace(cuda_stream=0)))
    monkeypatch.setattr(tensors, "torch", fake_torch)
    s = tensors.current_stream(types.SimpleNamespace(device="cuda:0"))
    assert isinstance(s, ctypes.c_void_p) and s.value == tensors.CUDA_STREAM_LEGACY
    fake_torch.cuda.current_stream = lambda device: types.SimpleNamespace(cuda_stream=0xABC0)
    assert tensors.current_stream(types.SimpleNamespace(device="cuda:0")).value == 0xABC0
    # torch's raw query, used where it exists: same rule, and it is asked for the tensor's device.
    asked = []
    fake_torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: asked.append(index) or 0)
    dev = types.SimpleNamespace(device=types.SimpleNamespace(index=3))
    assert tensors.current_stream(dev).value == tensors.CUDA_STREAM_LEGACY and asked == [3]
    fake_torch._C._cuda_getCurrentRawStream = lambda index: 0xDEF0
    assert tensors.current_stream(dev).value == 0xDEF0


def test_library_rejects_a_null_stream():
    """What the binding protects against: the run call refuses NULL (checked before any device work)."""
    cache, seq, table, out = gather_args()
    from deepinfer_sm80._ops import op, struct, addr

    desc = struct("dsv4_kv_gather_desc_t", num_reqs=1, block_table_width=2, out_rows=16, out_stride_row=512,
                  page_tokens=64, page_stride_bytes=cache.shape[1], num_pages=3)
    args = struct("dsv4_kv_gather_args_t", cache=addr(cache), seq_lens=addr(seq), block_table=addr(table),
                  out=addr(out))
    status = op("kv_gather").run(ctypes.byref(desc), ctypes.byref(args), None, 0, None)
    assert status in (1, 6), f"a NULL stream must be refused (NULL_POINTER, or NO_DEVICE here), got {status}"


def test_unknown_struct_field_is_an_error():
    from deepinfer_sm80._ops import struct

    with pytest.raises(AttributeError, match="no field"):
        struct("dsv4_kv_gather_desc_t", num_requests=1)


def test_zero_tokens_is_a_no_op(be):
    """T = 0 validates and does nothing (torch gives empty tensors the address 0)."""
    P = 64
    cache = np.zeros((2, sm.page_stride(P)), np.uint8)
    c = be.put(cache)
    d.kv_insert(be.put(np.zeros((0, 512), np.uint16)), be.put(np.zeros(0, np.int64)), c, page_tokens=P)
    assert not be.get(c).any()
    g, lens = d.topk_translate(*(be.put(np.zeros(s, np.int32)) for s in ((0, 8), (0,), (1, 4))),
                               be.put(np.zeros(0, bool)), page_tokens=4)
    assert be.get(g).shape == (0, 8) and be.get(lens).shape == (0,)
    lens, indptr, packed = d.topk_translate_packed(*(be.put(np.zeros(s, np.int32)) for s in ((0, 8), (0,), (1, 4))),
                                                   be.put(np.zeros(0, bool)), page_tokens=4)
    assert be.get(indptr).tolist() == [0]
    out = d.mhc_post(*(be.put(np.zeros(s, t)) for s, t in (((0, 128), np.uint16), ((0, 4, 128), np.uint16),
                                                             ((0, 4), np.float32), ((0, 4, 4), np.float32))))
    assert be.get(out).shape == (0, 4, 128)

"""The interpreter's GPU float semantics (gpu_semantics.py): the emulated casts against torch's
(RNE) conversions and known answers, and the interpreter's own casts shown to differ."""
import numpy as np
import torch
from conftest import mode

import gpu_semantics as gs

pytestmark = mode("interpret")


def test_bf16_rne_matches_torch(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1 << 16, generator=g) * torch.exp2(torch.randint(-60, 60, (1 << 16,), generator=g).float())
    x[:4] = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -0.0, float("inf")])  # ties to even
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(gs.bf16_rne(x.numpy()), want)
    assert gs.bf16_rne(np.array([np.nan], np.float32))[0] == 0x7FFF


def test_e4m3_known_answers_and_torch(seed):
    kat = {1.0: 0x38, -1.0: 0xB8, 1.0625: 0x38, 1.1875: 0x3A, 3.0: 0x44, 0.1: 0x1D, 2 ** -10: 0x00,
           1.5 * 2 ** -10: 0x01, 240.0: 0x77, 448.0: 0x7E, 464.0: 0x7E, 480.0: 0x7E, 1e9: 0x7E,
           float("inf"): 0x7E, float("-inf"): 0xFE, -0.0: 0x80, float("nan"): 0x7F}
    got = gs.e4m3_rne_satfinite(np.array(list(kat), np.float32))
    assert got.tolist() == list(kat.values())
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(1 << 16, generator=g) * 100).clamp(-448, 448)
    want = x.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(gs.e4m3_rne_satfinite(x.numpy()), want)
    codes = np.arange(256, dtype=np.uint8)
    dec = torch.from_numpy(codes.copy()).view(torch.float8_e4m3fn).float().numpy()
    assert np.array_equal(np.isnan(gs.e4m3_decode(codes)), np.isnan(dec))
    ok = ~np.isnan(dec)
    assert np.array_equal(gs.e4m3_decode(codes)[ok], dec[ok])


def test_interpreter_alone_rounds_differently():
    """Why the emulation exists: the interpreter's own fp32 -> bf16 truncates, fp32 -> e4m3 ignores ties."""
    import triton.language as tl
    from triton.runtime import interpreter as it

    raw = it._dsv4_original_convert
    x = np.array([1.0 + 3 * 2 ** -9], np.float32)  # bf16 RNE rounds up
    assert raw(x, tl.float32, tl.bfloat16, None)[0] != gs.bf16_rne(x)[0]
    y = np.array([1.0625], np.float32)  # e4m3 tie, even is down
    assert raw(y, tl.float32, tl.float8e4nv, it._ir.ROUNDING_MODE.RTNE)[0] != gs.e4m3_rne_satfinite(y)[0]

"""libdsv4's mHC in place of the TileLang/Triton functions the NVIDIA DeepSeek-V4.1 model calls by
module-global name (same parameters and results as vLLM 0.33.0's functions of the same name).

The hyper-connection count must be 4 (every DeepSeek-V4 model). The SM100-only features of
mhc_shifted_post_pre (a coefficient stream, the fused all-reduce, an unfinalized MoE output)
fall through to vLLM's function.
"""
import torch

from .. import mhc as _mhc
from . import _snapshot as S

MODEL_GLOBALS = ("mhc_pre_delayed_tilelang", "mhc_shifted_post_pre", "mhc_post_tilelang", "hc_collapse_triton")
DSPARK_GLOBALS = ("mhc_post_tilelang", "hc_collapse_triton")
OPS = {"mhc_pre_delayed_tilelang": "mhc_pre", "mhc_shifted_post_pre": "mhc_seam", "mhc_post_tilelang": "mhc_post",
       "hc_collapse_triton": "mhc_collapse"}

_ORIGINAL = {}


def _original(name):
    if name not in _ORIGINAL:
        # The functions' own modules still hold vLLM's versions.
        if name == "mhc_shifted_post_pre":
            from vllm.models.deepseek_v41.nvidia.ops.mhc import mhc_shifted_post_pre as fn
        else:
            fn = S.resolve(f"vllm.model_executor.kernels.mhc.{'triton' if name == 'hc_collapse_triton' else 'tilelang'}"
                           f".{name}")
        _ORIGINAL[name] = fn
    return _ORIGINAL[name]


def _gate(rms_eps, hc_pre_eps, hc_sinkhorn_eps, hc_post_mult_value, sinkhorn_repeat):
    return dict(rms_eps=float(rms_eps), pre_eps=float(hc_pre_eps), sinkhorn_eps=float(hc_sinkhorn_eps),
                post_mult=float(hc_post_mult_value), sinkhorn_iters=int(sinkhorn_repeat))


def _streams(residual):
    if residual.shape[1] != 4:
        raise NotImplementedError(f"deepinfer_sm80: mHC with hc_mult {residual.shape[1]} (libdsv4 has 4)")


def mhc_pre_delayed_tilelang(residual, fn, hc_scale, hc_base, rms_eps, hc_pre_eps, hc_sinkhorn_eps,
                             hc_post_mult_value, sinkhorn_repeat, pre_mix=None, x=None, norm_weight=None,
                             norm_eps=1e-6):
    """-> (post [T, 4, 1], comb [T, 4, 4], layer_input [T, H], next pre-mix [T, 4]). With x (the
    first layer's embedding) the projection reads x with the broadcast fn, as vLLM's does."""
    _streams(residual)
    gate = _gate(rms_eps, hc_pre_eps, hc_sinkhorn_eps, hc_post_mult_value, sinkhorn_repeat)
    source = residual
    extra = {}
    if x is not None:
        source = x
        extra["residual_out"] = torch.empty_like(residual)  # vLLM built the broadcast copy already
    r = _mhc.mhc_pre(source, fn, hc_scale, hc_base, variant=_mhc.V41, gate=gate, norm_eps=float(norm_eps),
                     pre_mix=pre_mix, norm_weight=norm_weight, **extra)
    return r["post"].unsqueeze(-1), r["comb"], r["layer_input"], r["pre"]


def mhc_shifted_post_pre(x, residual, post_layer_mix, comb_res_mix, fn, hc_scale, hc_base, rms_eps, hc_pre_eps,
                         hc_sinkhorn_eps, hc_post_mult_value, sinkhorn_repeat, pre_mix=None, norm_weight=None,
                         norm_eps=1e-6, capture_aux=False, *, stream=None, reduce_results=False):
    """-> (residual, post [T, 4, 1], comb, layer_input, next pre-mix, aux [T, H] or [0, H])."""
    if stream is not None or reduce_results or not isinstance(x, torch.Tensor):
        return _original("mhc_shifted_post_pre")(
            x, residual, post_layer_mix, comb_res_mix, fn, hc_scale, hc_base, rms_eps, hc_pre_eps, hc_sinkhorn_eps,
            hc_post_mult_value, sinkhorn_repeat, pre_mix=pre_mix, norm_weight=norm_weight, norm_eps=norm_eps,
            capture_aux=capture_aux, stream=stream, reduce_results=reduce_results)
    _streams(residual)
    gate = _gate(rms_eps, hc_pre_eps, hc_sinkhorn_eps, hc_post_mult_value, sinkhorn_repeat)
    r = _mhc.mhc_seam(x, residual, post_layer_mix, comb_res_mix, fn, hc_scale, hc_base, variant=_mhc.V41, gate=gate,
                      norm_eps=float(norm_eps), pre_mix=pre_mix, norm_weight=norm_weight, with_aux=capture_aux)
    aux = r["aux"] if capture_aux else x.new_empty(0, x.shape[-1])
    return r["residual_out"], r["post"].unsqueeze(-1), r["comb"], r["layer_input"], r["pre"], aux


def mhc_post_tilelang(x, residual, post_layer_mix, comb_res_mix):
    """-> the new residual [T, 4, H] bf16."""
    _streams(residual)
    return _mhc.mhc_post(x, residual, post_layer_mix, comb_res_mix)


def hc_collapse_triton(x, pre_mix):
    """x: the residual streams [T, 4, H]; -> bf16(sum_j pre_mix[j] x[j]) [T, H]."""
    _streams(x)
    return _mhc.mhc_collapse(x, pre_mix)

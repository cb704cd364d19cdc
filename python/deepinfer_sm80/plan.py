"""Capacity planning for serving DeepSeek-V4-Flash, V4-Pro and V4.1-Flash with vLLM on Ampere
GPUs: the library's dsv4_plan (include/dsv4/plan.h; the memory model is docs/planner.md).

    >>> from deepinfer_sm80 import plan
    >>> p = plan("v4.1-flash", "64GiB", tp=2, pp=3, stage_layers=[14, 14, 12],
    ...          allow_group_cuts=True, num_speculative_tokens=5)
    >>> [s["kv_bytes_per_token"] for s in p["stages"]], p["resident_tokens"]

Host arithmetic only (no GPU, no torch). The command-line program `dsv4_plan` prints the same
plan as a table or JSON.
"""
import ctypes
import re

from . import _structs as S
from ._lib import check, proto
from ._ops import struct

MODELS = {
    "v4-flash": S.DSV4_PLAN_V4_FLASH,
    "v4-pro": S.DSV4_PLAN_V4_PRO,
    "v4.1-flash": S.DSV4_PLAN_V41_FLASH,
}
INDEXER_FORMATS = {"fp8": S.DSV4_PLAN_INDEXER_FP8, "mxfp4": S.DSV4_PLAN_INDEXER_MXFP4}
_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "kb": 10**3, "m": 2**20, "mib": 2**20, "mb": 10**6,
          "g": 2**30, "gib": 2**30, "gb": 10**9, "t": 2**40, "tib": 2**40, "tb": 10**12}


def parse_bytes(value):
    """A byte count: an int, or a string such as "64GiB", "80GB", "24G" (G and GiB are 2^30, GB 10^9)."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"plan: cannot read the byte count {value!r}")
    return int(round(float(m.group(1)) * _UNITS[m.group(2).lower()]))


def _fixed(values, name):
    values = list(values or [])
    if len(values) > S.DSV4_PLAN_MAX_STAGES:
        raise ValueError(f"plan: {name} has {len(values)} entries, at most {S.DSV4_PLAN_MAX_STAGES}")
    return (ctypes.c_int32 * S.DSV4_PLAN_MAX_STAGES)(*values)


def _fields(obj):
    return {name: getattr(obj, name) for name, _ in obj._fields_ if not name.startswith("reserved")}


def plan(model, gpu_memory, *, tp=1, pp=None, stage_tp=None, stage_layers=None, num_gpus=0,
         max_model_len=1048576, gpu_memory_utilization=0.9, max_num_batched_tokens=8192,
         num_speculative_tokens=0, allow_group_cuts=False, indexer="fp8", max_concurrent_batches=0,
         prefill_slabs=0, indexer_splits=0, expert_pad=0, activation_bytes=0, cudagraph_bytes=0,
         kv_cache_memory_bytes=0):
    """Plan a deployment; returns a dict of the result (include/dsv4/plan.h, dsv4_plan_result_t).

    model: "v4.1-flash", "v4-flash", "v4-pro" (or a DSV4_PLAN_* value). gpu_memory: bytes per
    GPU (int or "64GiB"). tp: TP of every stage; stage_tp: a TP per stage ([2, 4] is TP2+TP4
    over 6 GPUs); pp: stages (default: len(stage_tp) or len(stage_layers), else 1).
    stage_layers: backbone layers per stage (default: the best split at valid cuts);
    allow_group_cuts plans cuts inside a V4.1 sharing group as replicated sources (vLLM refuses
    them; the result says upstream_ok = 0). max_model_len, max_num_batched_tokens in tokens;
    num_speculative_tokens > 0 puts the draft blocks on the last stage. indexer: "fp8" or
    "mxfp4". The remaining arguments override the planner's defaults (0 = default); all byte
    counts are per GPU and accept strings like gpu_memory.

    Keys: every field of dsv4_plan_result_t; "valid_cuts" is the list of layers a stage may
    begin at, "stages" a list of num_stages dicts (dsv4_plan_stage_t: bytes are per GPU,
    kv_bytes_per_token in B/token, resident_tokens in tokens). Raises Dsv4Error with the
    library's message for input it rejects (UNSUPPORTED for TP 3 or 6, or a cut inside a
    sharing group without allow_group_cuts).
    """
    if isinstance(model, str):
        key = model.lower()
        if key not in MODELS:
            raise ValueError(f"plan: unknown model {model!r}; one of {', '.join(MODELS)}")
        model = MODELS[key]
    if indexer not in INDEXER_FORMATS:
        raise ValueError(f"plan: indexer must be one of {', '.join(INDEXER_FORMATS)}, not {indexer!r}")
    if pp is None:
        pp = len(stage_tp or []) or len(stage_layers or []) or 1
    desc = struct("dsv4_plan_desc_t", model=model, num_gpus=num_gpus, gpu_memory_bytes=parse_bytes(gpu_memory),
                  tp_size=tp, pp_size=pp, stage_tp=_fixed(stage_tp, "stage_tp"),
                  stage_layers=_fixed(stage_layers, "stage_layers"), allow_group_cuts=int(bool(allow_group_cuts)),
                  indexer_format=INDEXER_FORMATS[indexer], max_model_len=max_model_len,
                  gpu_memory_utilization=gpu_memory_utilization, max_num_batched_tokens=max_num_batched_tokens,
                  num_speculative_tokens=num_speculative_tokens, max_concurrent_batches=max_concurrent_batches,
                  prefill_slabs=prefill_slabs, indexer_splits=indexer_splits, expert_pad=expert_pad,
                  activation_bytes=parse_bytes(activation_bytes), cudagraph_bytes=parse_bytes(cudagraph_bytes),
                  kv_cache_memory_bytes=parse_bytes(kv_cache_memory_bytes))
    result = struct("dsv4_plan_result_t")
    check(proto("dsv4_plan")(ctypes.byref(desc), ctypes.byref(result)))
    out = _fields(result)
    out["valid_cuts"] = list(result.valid_cuts[:result.num_valid_cuts])
    out["stages"] = [_fields(result.stages[s]) for s in range(result.num_stages)]
    return out

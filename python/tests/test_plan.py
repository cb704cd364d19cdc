"""The capacity planner through the binding: the worked 6 x 64 GB V4.1-Flash example, the
library's errors, and the invariants (more memory never fewer tokens; the chosen split never
cuts a sharing group), on random inputs from the printed seed."""
import random

import pytest

import deepinfer_sm80 as d
from conftest import SEED

GIB = 2**30


def example(**kw):
    args = dict(max_model_len=1048576, num_speculative_tokens=5)
    args.update(kw)
    return d.plan("v4.1-flash", "64GiB", **args)


def test_worked_example():
    p = example(tp=2, stage_layers=[14, 14, 12], allow_group_cuts=True)
    assert [s["kv_bytes_per_token"] for s in p["stages"]] == [720, 1080, 720]
    assert [s["cut_ok"] for s in p["stages"]] == [1, 1, 0] and p["upstream_ok"] == 0
    assert p["bottleneck_stage"] == 1 and p["valid_cuts"] == [1, 2, 8, 14, 20]
    assert p["model_kv_bytes_per_token"] == 1800
    assert abs(p["stages"][1]["expert_bytes"] / 1e9 - 7.2194 * 14 / 2) < 0.01
    assert p["stages"][1]["swa_bytes_per_request"] == 14 * 773 * 19008
    assert 0 < p["resident_tokens"] == min(s["resident_tokens"] for s in p["stages"])
    p6 = example(stage_layers=[7, 7, 7, 7, 6, 6], allow_group_cuts=True)
    assert [s["kv_bytes_per_token"] for s in p6["stages"]] == [360, 652.5, 1080, 720, 720, 720]
    mixed = example(stage_tp=[2, 4], num_gpus=6)
    assert mixed["stages"][1]["first_layer"] == 14 and mixed["upstream_ok"] == 1
    assert [s["tp_size"] for s in mixed["stages"]] == [2, 4]


def test_errors():
    with pytest.raises(d.Dsv4Error) as e:
        example(tp=2, stage_layers=[14, 14, 12])
    assert e.value.status_name == "UNSUPPORTED" and "layer 28" in str(e.value)
    with pytest.raises(d.Dsv4Error) as e:
        example(tp=6)
    assert e.value.status_name == "UNSUPPORTED" and "64 attention heads" in str(e.value)
    with pytest.raises(d.Dsv4Error) as e:
        example(tp=2, max_model_len=0)
    assert e.value.status_name == "INVALID_VALUE" and "max_model_len" in str(e.value)
    with pytest.raises(ValueError):
        d.plan("v5", "64GiB")
    with pytest.raises(ValueError):
        d.plan("v4-flash", "64 parsecs")


def test_bytes_units():
    a = d.plan("v4-flash", "80GiB", tp=8, max_model_len=65536)
    b = d.plan("v4-flash", 80 * GIB, tp=8, max_model_len=65536)
    assert a == b and a["stages"][0]["usable_bytes"] == -(-80 * GIB * 9 // 10)


def test_invariants():
    rng = random.Random(SEED)
    for _ in range(40):
        model = rng.choice(["v4-flash", "v4-pro", "v4.1-flash"])
        kw = dict(tp=rng.choice([2, 4, 8]), pp=rng.randint(1, 3), max_model_len=rng.randint(1024, 1048576),
                  num_speculative_tokens=rng.randint(0, 5), indexer=rng.choice(["fp8", "mxfp4"]))
        mem = rng.randint(24, 96) * GIB
        p = d.plan(model, mem, **kw)
        q = d.plan(model, mem + rng.randint(1, 32) * GIB, **kw)
        assert q["resident_tokens"] >= p["resident_tokens"], (SEED, model, kw, mem)
        for r in (p, q):
            assert all(s["cut_ok"] for s in r["stages"]) and r["upstream_ok"] == 1
            assert sum(s["num_layers"] for s in r["stages"]) == r["num_layers"]

#!/usr/bin/env python3
"""The V4.1 attention block (deepinfer_sm80.layer) timed on a GPU: per-stage breakdown and
layer totals for layers 2 (ratio-2 source), 20 (ratio-1 source, candidate writer) and 21
(consumer), plus 0, 3 and 24 for the 40-layer projection; YOCO build counts and the time they save.

    python3 benchmarks/layer_bench.py --out DIR [--reps 30] [--heads 64] [--case NAME ...]

Cases: a 4,096-token prefill chunk at 16K and 64K context; a decode step of 4 requests x 6
tokens (1 + 5 speculative) at 64K and 1M; 64 requests x 1 token at 16K. Decode: each stage is
captured alone in a CUDA graph and timed by replays, the layer total is one graph of every
stage. Prefill: eager, CUDA events around each stage and around the whole layer. Median, p10,
p90 of --reps samples.

Writes DIR/layer-<device>.jsonl (ops: layer_stage, layer, layer_yoco, layer_projection_40) and
the stacked-bar chart DIR/layer-<device>.png (benchmarks/layer_chart.py). Without a CUDA device
it prints a note and exits 0.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

LAYERS = [0, 2, 3, 20, 21, 24]  # one layer of each role; 2, 20, 21 are the reported ones
METADATA_STAGES = ("swa_metadata", "kv_metadata", "topk_translate", "combine_topk_swa", "kv_gather_compressed")
CASES = {
    "prefill-16k": dict(requests=[(16384 - 4096, 4096)], num_decodes=0),
    "prefill-64k": dict(requests=[(65536 - 4096, 4096)], num_decodes=0),
    "decode-4x6-64k": dict(requests=[(65536 - 6, 6)] * 4, num_decodes=4),
    "decode-4x6-1m": dict(requests=[(1048576 - 6, 6)] * 4, num_decodes=4),
    "decode-64x1-16k": dict(requests=[(16384 - 1, 1)] * 64, num_decodes=64),
}


def _stats(samples):
    s = sorted(samples)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    return dict(median_us=round(statistics.median(s), 3), p10_us=round(q(0.1), 3), p90_us=round(q(0.9), 3))


def _time(fn, reps, warmup=2):
    """Median/p10/p90 microseconds of fn() on the current stream (CUDA events; host clock on
    the CPU dry run)."""
    for _ in range(warmup):
        fn()
    out = []
    if not torch.cuda.is_available():
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e6)
        return _stats(out)
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1000.0)
    return _stats(out)


class _Eager:
    """The CPU dry run's stand-in for a captured graph."""

    def __init__(self, stages):
        self.stages = stages

    def replay(self):
        for st in self.stages:
            st.run()


def _graph(stages):
    if not torch.cuda.is_available():
        return _Eager(stages)
    from deepinfer_sm80.layer import capture_graph
    return capture_graph(stages)


def _setup(cfg, spec, dev, seed):
    from deepinfer_sm80.layer import (AttentionBlock, BlockIO, LayerPlan, StepState, random_caches, random_weights,
                                      synthetic_step)
    gen = torch.Generator(device=dev).manual_seed(seed)
    sm = dict(sm_count=108) if dev.type == "cpu" else {}
    reqs = spec["requests"]
    meta, sizes = synthetic_step(cfg, reqs, num_decodes=spec["num_decodes"], device=dev)
    T = meta.num_tokens
    max_pos = max(c + q for c, q in reqs) + 1
    caches = {x: random_caches(cfg, cfg.role(x), sizes, device=dev, gen=gen) for x in LAYERS}
    weights = {x: random_weights(cfg, cfg.role(x), max_position=max_pos, device=dev, gen=gen) for x in LAYERS}
    io = {x: BlockIO.random(T, cfg.hidden, device=dev) for x in LAYERS}
    plan = LayerPlan(cfg, device=dev, max_tokens=T, max_decode_tokens=max(meta.num_decode_tokens, 1),
                     max_reqs=len(reqs), max_model_len=max_pos, slab_rows=max_pos + cfg.window + T, decode_tokens=[meta.num_decode_tokens]
                     if meta.num_decode_tokens else [], **sm)
    blocks = {x: AttentionBlock(cfg, x, weights[x], caches, plan) for x in LAYERS}
    return meta, io, plan, blocks, StepState


def _case_name(layer, meta, spec, name):
    reqs = spec["requests"]
    ctx = max(c + q for c, q in reqs)
    if spec["num_decodes"]:
        return f"layer={layer} T={meta.num_tokens} R={len(reqs)} next_n={reqs[0][1]} ctx={ctx} decode"
    return f"layer={layer} T={meta.num_tokens} R={len(reqs)} ctx={ctx} prefill"


def run_case(cfg, name, spec, reps, base, dev):
    meta, io, plan, blocks, StepState = _setup(cfg, spec, dev, seed=7)
    decode = spec["num_decodes"] > 0
    state = StepState(meta)
    rows, per_layer = [], {}
    for layer in LAYERS:
        stages = blocks[layer].stages(io[layer], meta, state)
        for st in stages:  # the first run builds what later layers reuse
            st.run()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        case = _case_name(layer, meta, spec, name)
        breakdown = {}
        for st in stages:
            t = _time(_graph([st]).replay, reps) if decode else _time(st.run, reps)
            breakdown[st.name] = breakdown.get(st.name, 0.0) + t["median_us"]
            rows.append(dict(base, op="layer_stage", case=case, stage=st.name, kind=st.kind,
                             timing="graph replay" if decode else "eager", **t))
        run_all = lambda: [st.run() for st in stages]  # noqa: E731
        total = _time(_graph(stages).replay, reps) if decode else _time(run_all, max(3, reps // 3))
        meta_us = sum(v for k, v in breakdown.items() if any(s.name == k and s.kind == "metadata" for s in stages))
        per_layer[layer] = dict(total=total["median_us"], metadata=meta_us, stages=breakdown)
        rows.append(dict(base, op="layer", case=case, role=blocks[layer].role.kind, **total,
                         timing="one CUDA graph" if decode else "eager", breakdown_us=breakdown,
                         metadata_built_us=round(meta_us, 3)))
        print(f"{case:60s} {total['median_us']:12.1f} us", flush=True)
    rows += _yoco_and_projection(cfg, name, spec, meta, blocks, per_layer, base, StepState)
    return rows


def _representative(cfg, layer):
    role = cfg.role(layer)
    if role.ratio == 0:
        return 0
    if role.ratio == 2:
        return 2 if role.owns_kv else 3
    return 20 if role.owns_kv else 24 if role.owns_indexer else 21


def _simulate(cfg, meta, blocks, io, StepState, reuse):
    """The metadata stages each of the 40 layers would build in one step."""
    from deepinfer_sm80.layer import AttentionBlock
    state = StepState(meta, reuse=reuse)
    built = {}
    for layer in range(cfg.num_layers):
        rep = blocks[_representative(cfg, layer)]
        shadow = AttentionBlock.__new__(AttentionBlock)
        shadow.__dict__.update(rep.__dict__, role=cfg.role(layer))
        built[layer] = [s.name for s in shadow.stages(io, meta, state) if s.kind == "metadata"]
    return built, dict(state.builds)


def _yoco_and_projection(cfg, name, spec, meta, blocks, per_layer, base, StepState):
    from deepinfer_sm80.layer import BlockIO
    T = meta.num_tokens
    dummy = BlockIO(*([None] * 10))  # stages() reads the tensors only when a stage runs
    out = {}
    # A metadata stage costs what it cost where the measured layers built it (same ratio).
    cost = {}
    for layer, d in per_layer.items():
        for k, v in d["stages"].items():
            if k in METADATA_STAGES:
                cost.setdefault(_kind_key(cfg, layer, k), v)
    for reuse in (True, False):
        built, counts = _simulate(cfg, meta, blocks, dummy, StepState, reuse)
        us = sum(cost.get(_kind_key(cfg, layer, k), 0.0) for layer, names in built.items() for k in names)
        out[reuse] = (counts, us)
    ctx = max(c + q for c, q in spec["requests"])
    phase = "decode" if spec["num_decodes"] else "prefill"
    case = f"T={T} R={len(spec['requests'])} ctx={ctx} {phase}"
    rows = [dict(base, op="layer_yoco", case=case, builds_yoco=out[True][0], builds_per_layer=out[False][0],
                 metadata_us_yoco=round(out[True][1], 3), metadata_us_per_layer=round(out[False][1], 3),
                 saved_us=round(out[False][1] - out[True][1], 3))]
    nonmeta = {x: d["total"] - d["metadata"] for x, d in per_layer.items()}
    total = sum(nonmeta[_representative(cfg, x)] for x in range(cfg.num_layers)) + out[True][1]
    indexer = sum(per_layer[_representative(cfg, x)]["stages"].get("indexer_topk", 0.0)
                  for x in range(cfg.num_layers) if cfg.role(x).owns_indexer)
    rows.append(dict(base, op="layer_projection_40", case=case, scope="attention + mHC seam only (MoE excluded)",
                     per_step_us=round(total, 3), indexer_topk_us=round(indexer, 3),
                     note="sum over the 40 layers of the measured layer of the same role; metadata counted as YOCO "
                          "builds it"))
    print(f"{case}: 40-layer attention + mHC {total / 1000:.2f} ms (indexer top-k {indexer / 1000:.2f} ms); "
          f"YOCO saves {(out[False][1] - out[True][1]):.1f} us of metadata builds ({out[True][0]} vs {out[False][0]})")
    return rows


def _kind_key(cfg, layer, stage):
    """Which measured build a metadata stage of `layer` costs like: same stage, same ratio."""
    return (stage, cfg.role(layer).ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--heads", type=int, default=64, help="attention heads per rank (64 = TP1, 32 = TP2)")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="cases to run (default all)")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="check the script on the CPU (C references, small shapes, contexts / 64); times mean nothing")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from deepinfer_sm80 import version
    from deepinfer_sm80.layer import ModelConfig
    cases = {k: CASES[k] for k in (args.case or CASES)}
    if args.cpu_dry_run:
        cfg, dev, name = ModelConfig().small(), torch.device("cpu"), "cpu-dry-run"
        cases = {k: dict(v, requests=[(c // 64, max(1, q // 64) if not v["num_decodes"] else q)
                                      for c, q in v["requests"][:8]], num_decodes=min(v["num_decodes"], 8))
                 for k, v in cases.items()}
        sm_count = 0
    elif not torch.cuda.is_available():
        print("layer_bench: no CUDA device; nothing measured")
        return 0
    else:
        cfg, dev = ModelConfig(num_heads=args.heads, o_groups=args.heads // 8), torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        props = torch.cuda.get_device_properties(0)
        name, sm_count = props.name, props.multi_processor_count
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    import os
    commit = os.environ.get("DSV4_COMMIT", commit)
    base = dict(lib=version(), commit=commit, device=name, sm_count=sm_count,
                torch=torch.__version__, heads=cfg.num_heads,
                date=time.strftime("%Y-%m-%d"), command="python3 benchmarks/layer_bench.py --out DIR")
    path = out / f"layer-{name.replace(' ', '-')}.jsonl"
    rows = []
    for case, spec in cases.items():
        rows += run_case(cfg, case, spec, args.reps, base, dev)
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    print(f"wrote {path}")
    try:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "layer_chart.py"), str(path),
                        "--out", str(path.with_suffix(".png"))], check=False)
    except OSError as e:  # the chart is optional (matplotlib)
        print(f"layer chart skipped: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

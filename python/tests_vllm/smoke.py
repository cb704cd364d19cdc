"""GPU smoke test of the plugin (scripts/vllm_smoke.sh runs it): a shrunken DeepSeek-V4.1 with dummy
weights through vllm.LLM, greedy generation, logprobs compared with a reference run.

  smoke.py shrink --config CONFIG.json --out DIR     write DIR/model/config.json (no GPU needed)
  smoke.py run --out DIR --tag TAG                   one LLM run -> DIR/TAG.json (needs a GPU)
  smoke.py compare --out DIR A B [--tol X]           greedy tokens equal, top logprobs within X

The shrunken model keeps 7 layers covering every V4.1 layer role (SWA-only; ratio-2 kv+index source
and its consumer; ratio-1 kv+index source that writes the candidate blocks and its consumer; a
ratio-1 index source that reads the candidates; its consumer), 64 heads (so the plugin and vLLM's
FlashMLA layer have the same padded head count and dummy weights), 8 routed experts, no Engram, no
draft blocks, max_model_len 512 with index_topk 64 and 16 candidate blocks of 8, so that the
indexer's scoring op, the candidate write and the candidate restriction all run.
"""
import argparse
import json
import pathlib
import sys

RATIOS = [0, 2, 2, 1, 1, 1, 1]
MAX_LEN = 512
INDEX_TOPK = 64        # well below MAX_LEN: long rows go through the scoring op
CANDIDATE_BLOCKS = 16  # 128 candidate columns of up to 512: the restriction drops columns


def shrink(text):
    """The smoke model's text config from a DeepSeek-V4.1 one (fields vLLM 0.33.0's model reads)."""
    t = dict(text)
    t.update(num_hidden_layers=len(RATIOS), compress_ratios=RATIOS, kv_source_layer_ids=[1, 3],
             index_source_layer_ids=[1, 3, 5], candidate_source_layer_id=3, num_attention_heads=64,
             n_routed_experts=8, num_experts_per_tok=2, engram_layer_ids=[], max_position_embeddings=4096)
    for key in ("dspark_n_routed_experts", "dspark_num_experts_per_tok", "num_nextn_predict_layers"):
        if key in t:
            t[key] = 0
    t.update(index_topk=INDEX_TOPK, candidate_topk_blocks=CANDIDATE_BLOCKS, candidate_block_size=8)
    return t


def roles(t):
    kv, ix = t["kv_source_layer_ids"], t["index_source_layer_ids"]
    cand = t["candidate_source_layer_id"]
    out = []
    for layer, r in enumerate(t["compress_ratios"][:t["num_hidden_layers"]]):
        if r == 0:
            role = "SWA-only"
        else:
            src = max(s for s in kv if s <= layer)
            isrc = max(s for s in ix if s <= layer)
            role = f"ratio {r}, reads layer {src}'s cache, top-k of layer {isrc}"
            if layer in ix:
                role += ", index source" + (" (candidate writer)" if layer == cand else
                                            " (reads candidates)" if 0 <= cand < layer else "")
        out.append(role)
    return out


def cmd_shrink(a):
    cfg = json.loads(pathlib.Path(a.config).read_text())
    if "text_config" in cfg:
        cfg["text_config"] = shrink(cfg["text_config"])
        text = cfg["text_config"]
    else:
        cfg = shrink(cfg)
        text = cfg
    cfg.pop("vision_config", None)
    model = pathlib.Path(a.out) / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(cfg, indent=1))
    for layer, role in enumerate(roles(text)):
        print(f"layer {layer}: {role}")
    print(f"wrote {model / 'config.json'}")


def prompts():
    # Token ids (no tokenizer): four requests of different lengths, one longer than the window.
    import random

    rng = random.Random(1234)
    return [[rng.randrange(1000, 20000) for _ in range(n)] for n in (7, 40, 150, 300)]


def cmd_run(a):
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(pathlib.Path(a.out) / "model"), load_format="dummy", skip_tokenizer_init=True, seed=0,
              enforce_eager=True, max_model_len=MAX_LEN, max_num_seqs=4, gpu_memory_utilization=0.5,
              trust_remote_code=True)
    params = SamplingParams(temperature=0.0, max_tokens=16, logprobs=5, detokenize=False)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts()], params)
    res = []
    for o in outs:
        c = o.outputs[0]
        res.append({"tokens": list(c.token_ids),
                    "logprobs": [{str(k): v.logprob for k, v in step.items()} for step in c.logprobs]})
    path = pathlib.Path(a.out) / f"{a.tag}.json"
    path.write_text(json.dumps(res))
    import deepinfer_sm80.vllm as plugin

    print(f"{a.tag}: wrote {path}; plugin replacements: {plugin.replacements() or 'none'}")


def cmd_compare(a):
    A = json.loads((pathlib.Path(a.out) / f"{a.a}.json").read_text())
    B = json.loads((pathlib.Path(a.out) / f"{a.b}.json").read_text())
    worst, ok = 0.0, True
    for i, (x, y) in enumerate(zip(A, B)):
        same = 0
        for tx, ty, lx, ly in zip(x["tokens"], y["tokens"], x["logprobs"], y["logprobs"]):
            common = set(lx) & set(ly)
            if common:
                worst = max(worst, max(abs(lx[k] - ly[k]) for k in common))
            if tx != ty:
                break
            same += 1
        print(f"request {i}: {same} of {len(x['tokens'])} greedy tokens agree")
        ok &= same >= min(4, len(x["tokens"]))  # dummy weights give flat logits: near-ties may swap later
    print(f"max |logprob difference| over shared top-5 entries before divergence: {worst:.4f} (tol {a.tol})")
    ok &= worst <= a.tol
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shrink")
    s.add_argument("--config", required=True)
    s.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--tag", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--out", required=True)
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tol", type=float, default=0.05)
    a = p.parse_args(argv)
    return {"shrink": cmd_shrink, "run": cmd_run, "compare": cmd_compare}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())

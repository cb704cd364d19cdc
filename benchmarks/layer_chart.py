#!/usr/bin/env python3
"""The stacked-bar chart of layer_bench.py's results: per measured layer and case, the time of
each stage (library ops, torch GEMMs, YOCO metadata builds).

    python3 benchmarks/layer_chart.py RESULTS.jsonl --out CHART.png   (or .svg)
"""
import argparse
import json
import pathlib

COLORS = {"dense": "#4c72b0", "op": "#55a868", "metadata": "#dd8452"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", default="2,20,21", help="layers to draw")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keep = {int(x) for x in args.layers.split(",")}
    rows = [json.loads(line) for line in pathlib.Path(args.results).read_text().splitlines() if line.strip()]
    layers = [r for r in rows if r["op"] == "layer" and int(r["case"].split()[0].split("=")[1]) in keep]
    kinds = {(r["case"], r["stage"]): r["kind"] for r in rows if r["op"] == "layer_stage"}
    phases = [p for p in ("prefill", "decode") if any(r["case"].endswith(p) for r in layers)]
    fig, axes = plt.subplots(len(phases), 1, figsize=(11, 1.2 + 0.45 * len(layers)), squeeze=False)
    for ax, phase in zip(axes[:, 0], phases):
        sel = [r for r in layers if r["case"].endswith(phase)]
        for i, r in enumerate(sel):
            left = 0.0
            for stage, us in r["breakdown_us"].items():
                kind = kinds.get((r["case"], stage), "op")
                ax.barh(i, us, left=left, color=COLORS[kind], edgecolor="white", linewidth=0.5)
                if us > 0.06 * max(x["median_us"] for x in sel):
                    ax.text(left + us / 2, i, stage, ha="center", va="center", fontsize=6, color="white")
                left += us
            ax.text(left, i, f" {r['median_us']:.0f} us ({r['timing']})", va="center", fontsize=7)
        ax.set_yticks(range(len(sel)), [r["case"] for r in sel], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("microseconds (median; stages timed one by one)")
        ax.set_title(f"V4.1 attention block, {phase}", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    fig.legend(handles, ["torch GEMM", "library op", "YOCO metadata"], loc="lower right", fontsize=7, ncol=3)
    dev = layers[0]["device"] if layers else "?"
    fig.suptitle(f"{dev}, commit {layers[0]['commit'] if layers else '?'}", fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(args.out, dpi=130)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

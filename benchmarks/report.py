#!/usr/bin/env python3
"""Charts and the README results table, rendered from the committed benchmark results.

    python3 benchmarks/report.py            # charts next to each results file + README table
    python3 benchmarks/report.py --check    # exit 1 if the README table is out of date

Reads benchmarks/results/*.jsonl (one JSON object per line, as dsv4_bench --json writes
them). Only GPU result files (those with a "ceilings" line) go into the table and charts.
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def load(path):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ceil = next((r for r in rows if r.get("op") == "ceilings"), None)
    cases = [r for r in rows if r.get("op") != "ceilings" and "median_us" in r]
    return ceil, cases


def case_label(r):
    """The case name, marked when its run left L2 holding clean lines (dsv4_bench --flush clean)."""
    return r["case"] + (" (clean L2 flush)" if r.get("flush") == "clean" else "")


def ceiling_text(r):
    if r["ceiling"] == "mma":
        return f'{r["tflops"]:.1f} TFLOP/s', "mma.sync"
    if r["ceiling"] == "launch":
        return f'{r["median_us"]:.2f} us vs {r["empty_launch_us"]:.2f} us empty launch', "launch"
    return f'{r["gbps"]:.0f} GB/s', "copy"


def table(path, ceil, cases):
    out = [
        f"**{ceil['device']}** (sm_{ceil['arch']}, {ceil['sm_count']} SMs), commit `{ceil['commit']}`, "
        f"file `{path.relative_to(ROOT)}`. Ceilings measured in the same run: copy "
        f"{ceil['copy_gbps']:.0f} GB/s (read + write), mma.sync bf16 {ceil['mma_bf16_tflops']:.0f} TFLOP/s, "
        f"empty kernel {ceil['empty_launch_us']:.2f} us.",
        "",
        "| op | case | median us | p10 / p90 us | throughput | fraction of ceiling | check |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in cases:
        thr, kind = ceiling_text(r)
        frac = f'{100 * r["fraction_of_ceiling"]:.1f}% of {kind}'
        if kind == "launch":
            frac = f'launch / time = {100 * r["fraction_of_ceiling"]:.0f}%'
        out.append(
            f'| {r["op"]} | {case_label(r)} | {r["median_us"]:.2f} | {r["p10_us"]:.2f} / {r["p90_us"]:.2f} | '
            f'{thr} | {frac} | {r["check"]} |'
        )
    return "\n".join(out)


def compare_table(path, rows):
    head = rows[0]
    out = [
        f"**PyTorch comparison** on {head['device']} (torch {head['torch']}), commit `{head['commit']}`, file "
        f"`{path.relative_to(ROOT)}`: the same contract written as plain PyTorch ops, both called eagerly from "
        f"Python and timed with CUDA events around each call ({head['timing']}).",
        "",
        "| op | case | torch us | libdsv4 us | speed-up | check | torch implementation |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        out.append(f'| {r["op"]} | {r["case"]} | {r["torch_us"]:.1f} | {r["dsv4_us"]:.1f} | {r["speedup"]:.1f}x | '
                   f'{r["check"]}: {r["check_detail"]} | {r["torch_impl"]} |')
    return "\n".join(out)


def chart(path, ceil, cases):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in cases if r["ceiling"] in ("copy", "mma")]
    if not rows:
        return None
    labels = [f'{r["op"]}: {case_label(r)}' for r in rows]
    fracs = [100 * r["fraction_of_ceiling"] for r in rows]
    colors = ["tab:blue" if r["ceiling"] == "copy" else "tab:orange" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.6))
    ax.barh(range(len(rows)), fracs, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of ceiling measured in the same run (blue: copy bandwidth, orange: mma.sync bf16)")
    ax.set_title(f'{ceil["device"]}: libdsv4 {ceil["lib"]} @ {ceil["commit"]}', fontsize=9)
    for i, f in enumerate(fracs):
        ax.text(f + 0.5, i, f"{f:.0f}%", va="center", fontsize=7)
    fig.tight_layout()
    png = path.with_suffix(".png")
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-charts", action="store_true")
    args = ap.parse_args()
    sections = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        ceil, cases = load(path)
        if not ceil:
            rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            if rows and "torch_us" in rows[0]:
                sections.append(compare_table(path, rows))
            continue
        sections.append(table(path, ceil, cases))
        if not args.no_charts:
            # --check compares the text only: it links the committed chart without redrawing it.
            png = path.with_suffix(".png") if args.check else chart(path, ceil, cases)
            if png and png.exists():
                sections.append(f"\n![{ceil['device']} results]({png.relative_to(ROOT)})")
    body = "\n\n".join(sections) if sections else "No GPU results committed yet."
    text = README.read_text()
    if BEGIN not in text:
        sys.exit("README has no results markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{body}\n{END}{tail}"
    if args.check:
        sys.exit(0 if new == text else 1)
    README.write_text(new)
    print(f"README table: {len(sections)} section(s)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Builds bench/RESULTS.md from the JSON lines of bench/compare_torch.sh: the newest
bench/results/all_*.jsonl (one run with every row), else the newest sdpa_*.jsonl and models_*.jsonl.
Usage: make_results.py bench/results > RESULTS.md
       make_results.py --readme bench/results   (the README's compact table of the same rows)
Rows of ours come from `attn bench --json` (or the older bench_sdpa program), PyTorch's from
../shared/bench/bench_torch.py; every row's ratio is taken between figures of the same run."""
import glob
import json
import os
import platform
import subprocess
import sys


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def machine_line(stamp):
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    dnnl = sh("dpkg-query -W -f='${Version}' libdnnl2")
    openblas = sh("dpkg-query -W -f='${Version}' libopenblas0-pthread")
    torch = sh("dpkg-query -W -f='${Version}' python3-torch")
    return "\n".join([
        f"cpu: {cpu}, {sh('nproc')} cores; kernel {platform.release()}",
        f"gcc: {sh('gcc -dumpfullversion')}; onednn: {dnnl or '-'}; openblas: {openblas or '-'}; "
        f"python3-torch: {torch}",
        f"runs: {stamp}",
    ])


def normalise(rec):
    """(key, tag, {ms: (min, med, max), rss, gflops?, rate?}) or None."""
    tag, res = rec["tag"], rec.get("result")
    if not res:
        return None
    if "workload" in res:  # attn bench --json
        mask = "causal" if res.get("causal") else "none"
        key = (res["workload"], res["L"], mask, res["mode"])
        t = (res["t_min"], res["t_med"], res["t_max"])
        extra = {"rate": res.get("items_per_s_med"), "unit": res.get("unit"), "gflops": res["gflops_med"]}
    elif "impl" in res:  # the older bench_sdpa program
        key = ("sdpa", res["L"], "causal" if res["causal"] else "none", "fwdbwd" if res["pass"] == "fwd+bwd" else "fwd")
        t = (res["ms_min"] / 1e3, res["ms_med"] / 1e3, res["ms_max"] / 1e3)
        extra = {}
        tag = "attn" if res["impl"] == "fused" else "attn ref"
    else:  # bench_torch.py
        if res.get("status", "ok") != "ok":
            key = (res["what"], res["L"], res.get("mask", "none"), res["mode"])
            return key, tag, {"error": res["status"]}
        key = (res["what"], res["L"], res.get("mask", "none"), res["mode"])
        t = (res["t_min"], res["t_med"], res["t_max"])
        extra = {"rate": res.get("tok_s_med") or res.get("samples_s_med")}
    return key, tag, dict(ms=tuple(1e3 * x for x in t), rss=rec["rss_kib"] / 1024.0, **extra)


def load(path):
    rows = {}
    for line in open(path):
        n = normalise(json.loads(line))
        if n:
            rows.setdefault(n[0], {})[n[1]] = n[2]
    return rows


def fmt(m):
    if not m:
        return "-"
    if "error" in m:
        return m["error"]
    lo, med, hi = m["ms"]
    return f"{med:.1f} ({lo:.1f}–{hi:.1f})"


def ratio(a, b):
    return f"{b['ms'][1] / a['ms'][1]:.2f}×" if a and b and "ms" in a and "ms" in b else "-"


def sdpa_flop(L, causal, fwdbwd, B=8, H=8, d=64):
    return 4.0 * B * H * L * L * d * (0.5 if causal else 1.0) * (3.5 if fwdbwd else 1.0)


def sdpa_section(rows):
    print("## Scaled dot-product attention (B=8, H=8, d=64)\n")
    print("GFLOP/s from one count for both sides: 4·B·H·L²·d forward (half for causal: our kernel "
          "skips the masked half, PyTorch's math path computes it), 3.5× that for forward+backward. "
          "`sgemm QK^T` = the build's GEMM library on the (L, 64) @ (64, L) shape, B·H times, 2 threads, "
          "same run.\n")
    peak = rows.get(("peak", 1024, "none", "fma"), {})
    p2, p1 = peak.get("attn peak"), peak.get("attn peak 1 thread")
    if p2 and p1:
        print(f"Float32 ceiling (`attn bench peak` rows of the run file: fused multiply-adds from registers, "
              f"the widest vectors the build targets, no memory traffic): {p2['gflops']:.1f} GFLOP/s on 2 "
              f"threads, {p1['gflops']:.1f} on 1. No kernel can pass it; `% of peak` below is against the "
              f"2-thread figure.\n")
    print("| L | mask | pass | attn fused ms | GFLOP/s | % of peak | % of sgemm QK^T | 1 thread ms (scaling) | attn ref ms | "
          "PyTorch ms | PyTorch tunables ms | vs PyTorch | vs tunables | peak RSS attn / PyTorch MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted((k for k in rows if k[0] == "sdpa"), key=lambda k: (k[1], k[2] != "none", k[3] != "fwd"))
    for k in keys:
        r = rows[k]
        a, one, ref = r.get("attn"), r.get("attn 1 thread"), r.get("attn ref")
        t, tt = r.get("torch"), r.get("torch tunables")
        g = sdpa_flop(k[1], k[2] == "causal", k[3] == "fwdbwd") / (a["ms"][1] * 1e-3) * 1e-9 if a else None
        gemm = rows.get(("sgemm", k[1], "none", "fwd"), {}).get("attn sgemm")
        pct = f"{100 * g / gemm['gflops']:.0f}%" if g and gemm and k[3] == "fwd" else "-"
        of_peak = f"{100 * g / p2['gflops']:.0f}%" if g and p2 else "-"
        scale = f"{fmt(one)} ({one['ms'][1] / a['ms'][1]:.2f}×)" if a and one and "ms" in one else "-"
        rss = f"{a['rss']:.0f} / {t['rss']:.0f}" if a and t and "rss" in t else "-"
        print(f"| {k[1]} | {k[2]} | {k[3]} | {fmt(a)} | {g:.1f} | {of_peak} | {pct} | {scale} | {fmt(ref)} | {fmt(t)} | "
              f"{fmt(tt)} | {ratio(a, t)} | {ratio(a, tt)} | {rss} |" if g else f"| {k[1]} | {k[2]} | {k[3]} | - |")
    gemms = sorted(k for k in rows if k[0] == "sgemm")
    if gemms:
        print("\nsgemm QK^T shape, 2 threads: " + ", ".join(
            f"L={k[1]} {rows[k]['attn sgemm']['gflops']:.1f} GFLOP/s" for k in gemms))
    print()


MODEL_NAMES = {"mha": "nn.MultiheadAttention(512, 8), B=8, L=512: forward + backward",
               "encoder": "nn.TransformerEncoderLayer(512, 8, 2048), B=8, L=256: train step with Adam",
               "classifier": "seed 002's classifier, batch 32, L=512: train step with Adam"}


def models_section(rows):
    keys = [k for k in rows if k[0] in MODEL_NAMES]
    if not keys:
        return
    print("## Training steps\n")
    print("| workload | attn ms | attn rate | 1 thread ms (scaling) | PyTorch ms | PyTorch tunables ms | "
          "vs PyTorch | vs tunables | peak RSS attn / PyTorch MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in sorted(keys):
        r = rows[k]
        a, one, t, tt = r.get("attn"), r.get("attn 1 thread"), r.get("torch"), r.get("torch tunables")
        rate = f"{a['rate']:.1f} {a['unit']}" if a and a.get("rate") else "-"
        scale = f"{fmt(one)} ({one['ms'][1] / a['ms'][1]:.2f}×)" if a and one and "ms" in one else "-"
        rss = f"{a['rss']:.0f} / {t['rss']:.0f}" if a and t and "rss" in t else "-"
        print(f"| {MODEL_NAMES[k[0]]} | {fmt(a)} | {rate} | {scale} | {fmt(t)} | {fmt(tt)} | {ratio(a, t)} | "
              f"{ratio(a, tt)} | {rss} |")
    print()


def short(m):
    """median only: '48.6 ms', '5.26 s'"""
    if not m:
        return "-"
    if "error" in m:
        return "out of memory" if m["error"] == "oom" else m["error"]
    med = m["ms"][1]
    return f"{med / 1e3:.2f} s" if med >= 1e4 else f"{med:.1f} ms" if med < 100 else f"{med:.0f} ms"


def readme_table(rows):
    print("| workload | attn | PyTorch 1.13 | ratio | PyTorch tunables | ratio | 2 threads vs 1 | "
          "peak RSS attn / PyTorch MiB |")
    print("|---|---|---|---|---|---|---|---|")
    sdpa = sorted((k for k in rows if k[0] == "sdpa"), key=lambda k: (k[3] != "fwd", k[2] != "none", k[1]))
    named = [(k, f"SDPA {'fwd' if k[3] == 'fwd' else 'fwd+bwd'} L={k[1]}{' causal' if k[2] == 'causal' else ''}")
             for k in sdpa]
    named += [(k, MODEL_NAMES[k[0]]) for k in sorted(k for k in rows if k[0] in MODEL_NAMES)]
    for k, name in named:
        r = rows[k]
        a, one, t, tt = r.get("attn"), r.get("attn 1 thread"), r.get("torch"), r.get("torch tunables")
        attn = short(a)
        if k[0] == "sdpa" and a and "ms" in a:
            attn += f" ({sdpa_flop(k[1], k[2] == 'causal', k[3] == 'fwdbwd') / (a['ms'][1] * 1e-3) * 1e-9:.0f} GFLOP/s)"
        elif a and a.get("rate"):
            attn += f" ({a['rate']:.0f} {a['unit']})"
        scale = f"{one['ms'][1] / a['ms'][1]:.2f}×" if a and one and "ms" in one else "-"
        rss = f"{a['rss']:.0f} / {t['rss']:.0f}" if a and t and "rss" in t else "-"
        print(f"| {name} | {attn} | {short(t)} | {ratio(a, t)} | {short(tt)} | {ratio(a, tt)} | {scale} | {rss} |")


def newest(folder, group):
    files = sorted(glob.glob(os.path.join(folder, f"{group}_*.jsonl")))
    return files[-1] if files else None


def main():
    readme = sys.argv[1] == "--readme"
    folder = sys.argv[-1]
    files = [newest(folder, "all")] if newest(folder, "all") else [
        f for f in (newest(folder, "sdpa"), newest(folder, "models")) if f]
    rows = {}
    for f in files:
        rows.update(load(f))
    if readme:
        readme_table(rows)
        return
    print("# Benchmarks: attn against PyTorch 1.13 on the same machine, in the same run\n")
    print("Generated by `bench/make_results.py` from `bench/compare_torch.sh` runs (raw JSON lines in "
          "`bench/results/`). Times: median (min–max) ms of >= 5 runs after warm-up, each row in its own "
          "process, ours and PyTorch's alternating. 2 threads unless said. PyTorch = Debian's python3-torch "
          "running the seeds' code; `tunables` = the same with "
          "GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=64G. Peak RSS from "
          "/usr/bin/time -v.\n")
    print("```\n" + machine_line(", ".join(os.path.basename(f) for f in files)) + "\n```\n")
    sdpa_section(rows)
    models_section(rows)


main()

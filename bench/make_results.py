#!/usr/bin/env python3
"""Builds bench/RESULTS.md from the JSON lines of bench/compare_torch.sh: the newest
bench/results/all_*.jsonl (one run with every row), unless the newest sdpa_*.jsonl and models_*.jsonl
(the two groups run apart) are both newer: then those two.
Usage: make_results.py bench/results > RESULTS.md
       make_results.py --out bench/RESULTS.md bench/results   (written whole or not at all: the
                                                 old file stays as it was when a results file is bad)
       make_results.py --readme bench/results   (the README's compact table of the same rows)
       make_results.py --ort bench/results      (the ONNX Runtime section alone, from the newest
                                                 ort_*.jsonl of bench/compare_ort.sh)
Rows of ours come from `attn bench --json` (or the older bench_sdpa program), PyTorch's from
../shared/bench/bench_torch.py; every row's ratio is taken between figures of the same run."""
import contextlib
import glob
import io
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


def host_of(path):
    """The CPU a results file was measured on (compare_torch.sh's "host" record; older files lack it)."""
    for rec in json_lines(path):
        if rec.get("tag") == "host":
            return (f"{rec.get('cpu', '?')} (family {rec.get('family', '?')}, model {rec.get('model', '?')}), "
                    f"{rec.get('cores', '?')} cores")
    return "CPU not recorded (the file predates the host record)"


def machine_line(files):
    dnnl = sh("dpkg-query -W -f='${Version}' libdnnl2")
    openblas = sh("dpkg-query -W -f='${Version}' libopenblas0-pthread")
    torch = sh("dpkg-query -W -f='${Version}' python3-torch")
    return "\n".join([f"run {os.path.basename(f)}: {host_of(f)}" for f in files] + [
        f"packages where this file was made (kernel {platform.release()}): gcc {sh('gcc -dumpfullversion')}; "
        f"onednn {dnnl or '-'}; openblas {openblas or '-'}; python3-torch {torch}",
    ])


def normalise(rec):
    """(key, tag, {ms: (min, med, max), rss, gflops?, rate?}) or None."""
    tag, res = rec["tag"], rec.get("result")
    if not res:
        return None
    if "workload" in res:  # attn bench --json
        mask = "causal" if res.get("causal") else "none"
        # peak: one row per kernel level (older files: one, without "isa")
        mode = f"fma:{res['isa']}" if res["workload"] == "peak" and "isa" in res else res["mode"]
        key = (res["workload"], res["L"], mask, mode)
        t = (res["t_min"], res["t_med"], res["t_max"])
        extra = {"rate": res.get("items_per_s_med"), "unit": res.get("unit"), "gflops": res["gflops_med"],
                 "isa": res.get("isa")}
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


def fail(msg):
    sys.exit(f"make_results.py: {msg}")


def json_lines(path):
    """The records of a results file; a line that is not JSON stops the script (nothing written)."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{number}: not a JSON line ({e})")


def torch_setup(files):
    """How PyTorch ran in these files (compare_torch.sh's "torch blas" and "torch threads" records)."""
    setup = []
    for path in files:
        for rec in json_lines(path):
            if rec.get("tag") == "torch blas":
                setup.append(f"PyTorch's BLAS: {rec['blas']}")
            elif rec.get("tag") == "torch threads":
                setup.append(f"PyTorch intra-op threads: {rec['threads']} (the faster of 1 and 2 on an encoder "
                             f"training step + SDPA L=1024 fwdbwd: {rec['ms_1']:.0f} ms on 1, {rec['ms_2']:.0f} on 2)")
    return setup


def load(path):
    rows = {}
    for rec in json_lines(path):
        n = normalise(rec)
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
    # the ceiling of the level our rows ran at (older files: the one peak row)
    level = next((c["isa"] for k, r in rows.items() if k[0] == "sdpa" for t, c in r.items()
                  if t == "attn" and c.get("isa")), None)
    peak = rows.get(("peak", 1024, "none", f"fma:{level}" if level else "fma"), {})
    p2, p1 = peak.get("attn peak"), peak.get("attn peak 1 thread")
    if p2 and p1:
        print(f"Float32 ceiling (`attn bench peak` rows of the run file: fused multiply-adds from registers, "
              f"the vectors of the kernels' level{' (' + level + ')' if level else ''}, no memory traffic): "
              f"{p2['gflops']:.1f} GFLOP/s on 2 threads, {p1['gflops']:.1f} on 1. No kernel can pass it; "
              f"`% of peak` below is against the 2-thread figure.\n")
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
    for k in sorted(keys):  # bf16: ours at --matmul-precision medium, PyTorch under autocast to bf16
        a, t = rows[k].get("attn medium"), rows[k].get("torch bf16")
        if a or t:
            rate = f"{a['rate']:.1f} {a['unit']}" if a and a.get("rate") else "-"
            rss = f"{a['rss']:.0f} / {t['rss']:.0f}" if a and t and "rss" in t else "-"
            print(f"| {MODEL_NAMES[k[0]]}, bf16 (ours: `--matmul-precision medium`; PyTorch: `torch.autocast` bf16) | "
                  f"{fmt(a)} | {rate} | - | {fmt(t)} | - | {ratio(a, t)} | - | {rss} |")
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


ORT_VARIANTS = [("ort mha", "ORT MultiHeadAttention"), ("ort attention23", "ORT Attention (opset 23)"),
                ("ort math", "ORT math graph")]


def ort_section(path):
    """bench/compare_ort.sh's rows: ours and ONNX Runtime's on the same inputs, same run."""
    rows, peak = {}, None
    for rec in json_lines(path):
        r = rec["result"]
        if rec["tag"] == "attn peak":  # measured first and last: the higher one
            peak = max(peak or 0.0, r["gflops_med"])
            continue
        rows.setdefault((r["what"], r["L"], r["causal"]), {}).setdefault(rec["tag"], []).append(r)
    # a row measured in several rounds: the median of the rounds' medians, the extremes of all runs
    for cells in rows.values():
        for tag, rounds in cells.items():
            meds = sorted(x["t_med"] for x in rounds)
            merged = dict(rounds[0], t_med=meds[(len(meds) - 1) // 2], t_min=min(x["t_min"] for x in rounds),
                          t_max=max(x["t_max"] for x in rounds), rounds=len(rounds))
            if "max_abs_diff" in rounds[0]:
                merged["max_abs_diff"] = max(x["max_abs_diff"] for x in rounds)
            cells[tag] = merged
    rounds = max((c["rounds"] for cells in rows.values() for c in cells.values()), default=1)
    ms = lambda r: f"{1e3 * r['t_med']:.1f} ({1e3 * r['t_min']:.1f}–{1e3 * r['t_max']:.1f})" if r else "-"
    print("## ONNX Runtime 1.30 (float32, CPU), same inputs, same run\n")
    print(f"From `bench/compare_ort.sh` (`{os.path.basename(path)}`). Median (min–max) ms; 2 threads on both "
          "sides (ORT: 2 intra-op threads, sequential execution, all graph optimisations). Each row ran ours and "
          f"each ORT variant in turns, {rounds} round(s): the median of the rounds' medians, min–max over every run. "
          "ORT's time is its "
          "native session run (its profiler's `model_run`), not the Node.js call; ours is `bench_ort` "
          "(bench/bench_ort.c) on the same inputs. `vs fastest ORT` = the fastest ORT variant's median over "
          "ours; `max diff` = the largest |ORT - ours| over every output, all variants.")
    if peak:
        print(f" Float32 ceiling of the run (`attn bench peak`): {peak:.1f} GFLOP/s.")
    print("\n### Scaled dot-product attention forward (B=8, H=8, d=64)\n")
    print("| L | mask | attn ms | GFLOP/s | % of peak | " + " | ".join(n + " ms" for _, n in ORT_VARIANTS) +
          " | vs fastest ORT | max diff |")
    print("|---|---|---|---|---|" + "---|" * len(ORT_VARIANTS) + "---|---|")
    for key in sorted(k for k in rows if k[0] == "sdpa"):
        r = rows[key]
        a = r.get("attn")
        theirs = [r[t] for t, _ in ORT_VARIANTS if t in r]
        g = sdpa_flop(key[1], key[2], False) / a["t_med"] * 1e-9 if a else None
        best = min((t["t_med"] for t in theirs), default=None)
        cells = [str(key[1]), "causal" if key[2] else "none", ms(a), f"{g:.1f}" if g else "-",
                 f"{100 * g / peak:.0f}%" if g and peak else "-"]
        cells += [ms(r.get(t)) for t, _ in ORT_VARIANTS]
        cells.append(f"{best / a['t_med']:.2f}×" if a and best else "-")
        cells.append(f"{max(t['max_abs_diff'] for t in theirs):.1e}" if theirs else "-")
        print("| " + " | ".join(cells) + " |")
    enc = [k for k in rows if k[0] == "encoder"]
    if enc:
        print("\n### nn.TransformerEncoderLayer(512, 8, 2048) forward, B=8, L=256 (exported from PyTorch 1.13)\n")
        print("| attn ms | ORT ms | vs ORT | max diff |")
        print("|---|---|---|---|")
        for key in enc:
            a, o = rows[key].get("attn"), rows[key].get("ort encoder")
            vs = f"{o['t_med'] / a['t_med']:.2f}×" if a and o else "-"
            print(f"| {ms(a)} | {ms(o)} | {vs} | {o['max_abs_diff']:.1e} |" if o else f"| {ms(a)} | - | - | - |")
    print()


def newest(folder, group):
    files = sorted(glob.glob(os.path.join(folder, f"{group}_*.jsonl")))
    return files[-1] if files else None


def main():
    if len(sys.argv) < 2:
        fail("usage: make_results.py [--readme | --ort] bench/results")
    readme = sys.argv[1] == "--readme"
    folder = sys.argv[-1]
    if not os.path.isdir(folder):
        fail(f"{folder}: not a folder of results")
    ort = newest(folder, "ort")
    if sys.argv[1] == "--ort":
        if ort:
            ort_section(ort)
        return
    whole, groups = newest(folder, "all"), [newest(folder, "sdpa"), newest(folder, "models")]
    # names end in the run's UTC time, so a later run sorts after an earlier one
    newer = all(groups) and (not whole or all(os.path.basename(g).split("_", 1)[1] > os.path.basename(whole).split("_", 1)[1] for g in groups))
    files = groups if newer else [whole] if whole else [g for g in groups if g]
    if not files:
        fail(f"{folder}: no all_, sdpa_ or models_ results of bench/compare_torch.sh")
    rows = {}
    # the SDPA section's ceiling is its own run's: the sdpa file is read last, its peak rows win
    for f in sorted(files, key=lambda f: os.path.basename(f).startswith("sdpa_")):
        rows.update(load(f))
    if readme:
        readme_table(rows)
        return
    print("# Benchmarks: attn against PyTorch 1.13 and ONNX Runtime 1.30, each side by side in one run on one machine\n")
    print("Generated by `bench/make_results.py` from `bench/compare_torch.sh` runs (raw JSON lines in "
          "`bench/results/`). Times: median (min–max) ms of >= 5 runs after warm-up, each row in its own "
          "process, ours and PyTorch's alternating. 2 threads unless said. PyTorch = Debian's python3-torch "
          "running the seeds' code; `tunables` = the same with "
          "GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=64G. Peak RSS from "
          "/usr/bin/time -v.\n")
    print("```\n" + "\n".join([machine_line(files)] + torch_setup(files)) +
          "\n```\n")
    sdpa_section(rows)
    models_section(rows)
    if ort:
        ort_section(ort)


if len(sys.argv) > 2 and sys.argv[1] == "--out":
    target = sys.argv[2]
    del sys.argv[1:3]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        main()  # exits on a bad results file before anything is written
    try:
        with open(target + ".tmp", "w") as f:
            f.write(text.getvalue())
        os.replace(target + ".tmp", target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(target + ".tmp")
        fail(f"{target}: cannot write: {e.strerror}")
else:
    main()

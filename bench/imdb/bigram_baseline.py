#!/usr/bin/env python3
"""Bigram linear baselines on IMDB (issue 42): fastText (-wordNgrams 2) and liblinear (L2
logistic regression and L2 SVM on binary uni+bigram features, NBSVM's features without the NB
weights), on the reviews tokenised as torchtext's basic_english, which attn classify uses.

Protocol, as for attn classify's recipe: every choice on the validation split (the last 10% of
each label folder of train, by review id, as attn classify --validate holds out); the chosen
setting is retrained on the whole train split and scores test once.

    python3 bench/imdb/bigram_baseline.py /tmp/imdb/aclImdb [--out DIR]

Needs Debian's fasttext and liblinear-tools. Prints one JSON line per fit, a table at the end."""
import argparse, json, os, random, re, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data"))
from make_tokenizer_cases import basic_english  # the reference attn's tokenizer is tested against


def review_key(name):  # <id>_<rating>.txt, sorted by id as attn_imdb_load does
    stem = name[:-4]
    i, _, r = stem.partition("_")
    return (int(i), int(r), name)


def load(root, split):
    rows = {}
    for label, folder in ((0, "neg"), (1, "pos")):
        d = os.path.join(root, split, folder)
        names = sorted((n for n in os.listdir(d) if re.fullmatch(r"\d+_\d+\.txt", n)), key=review_key)
        rows[label] = [basic_english(open(os.path.join(d, n), encoding="utf-8", errors="replace").read())
                       for n in names]
    return rows


def flat(rows):
    return [(l, t) for l in (0, 1) for t in rows[l]]


def holdout(rows):  # the last 10% of each label folder: (fit, validation)
    fit, val = [], []
    for l in (0, 1):
        k = len(rows[l]) - len(rows[l]) // 10
        fit += [(l, t) for t in rows[l][:k]]
        val += [(l, t) for t in rows[l][k:]]
    return fit, val


def write_fasttext(path, data):
    with open(path, "w") as f:
        for l, t in data:
            f.write("__label__%d %s\n" % (l, " ".join(t)))


def fasttext_fit(work, fit, evals, epoch, lr, dim, seed):
    fit = list(fit)
    random.Random(seed).shuffle(fit)  # fastText reads its file in order: one label after the other learns nothing
    write_fasttext(work + "/fit.txt", fit)
    cmd = ["fasttext", "supervised", "-input", work + "/fit.txt", "-output", work + "/ft", "-wordNgrams", "2",
           "-epoch", str(epoch), "-lr", str(lr), "-dim", str(dim), "-thread", "2", "-seed", str(seed),
           "-bucket", "2000000", "-verbose", "0"]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    secs = time.time() - t0
    accs = []
    for data in evals:
        write_fasttext(work + "/eval.txt", data)
        out = subprocess.run(["fasttext", "test", work + "/ft.bin", work + "/eval.txt"], check=True,
                             capture_output=True, text=True).stdout
        accs.append(100.0 * float(re.search(r"P@1\s+([0-9.]+)", out).group(1)))
    return secs, accs


def features(data, index, grow):
    rows = []
    for l, t in data:
        grams = set(t) | {a + " " + b for a, b in zip(t, t[1:])}
        ids = set()
        for g in grams:
            i = index.get(g)
            if i is None and grow:
                i = index[g] = len(index) + 1
            if i is not None:
                ids.add(i)
        rows.append((l, sorted(ids)))
    return rows


def write_svm(path, rows):
    with open(path, "w") as f:
        for l, ids in rows:
            f.write("%d %s\n" % (2 * l - 1, " ".join("%d:1" % i for i in ids)))


def liblinear_fit(work, fit, evals, solver, c):
    index = {}
    write_svm(work + "/fit.svm", features(fit, index, True))
    t0 = time.time()
    subprocess.run(["liblinear-train", "-q", "-s", str(solver), "-c", str(c), work + "/fit.svm", work + "/ll.model"],
                   check=True)
    secs = time.time() - t0
    accs = []
    for data in evals:
        write_svm(work + "/eval.svm", features(data, index, False))
        out = subprocess.run(["liblinear-predict", work + "/eval.svm", work + "/ll.model", work + "/pred"],
                             check=True, capture_output=True, text=True).stdout
        accs.append(float(re.search(r"Accuracy = ([0-9.]+)%", out).group(1)))
    return secs, accs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    a = ap.parse_args()
    missing = [t for t in ("fasttext", "liblinear-train", "liblinear-predict") if not shutil.which(t)]
    if missing:
        sys.exit("bigram_baseline: %s not found (apt-get install fasttext liblinear-tools)" % ", ".join(missing))
    t0 = time.time()
    train, test = load(a.root, "train"), load(a.root, "test")
    fit, val = holdout(train)
    full, test = flat(train), flat(test)
    print("data: %d fit / %d validation / %d test reviews (%.0f s)" % (len(fit), len(val), len(test),
                                                                        time.time() - t0), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        grids = [("fasttext", dict(epoch=e, lr=lr, dim=d), lambda fit_, ev, s, e=e, lr=lr, d=d:
                  fasttext_fit(work, fit_, ev, e, lr, d, s))
                 for e in (5, 10, 20) for lr in (0.05, 0.1, 0.25) for d in (10, 50)]
        grids += [("liblinear", dict(solver=s_, c=c), lambda fit_, ev, s, s_=s_, c=c:
                   liblinear_fit(work, fit_, ev, s_, c))
                  for s_ in (0, 2) for c in (0.03, 0.1, 0.3, 1.0)]
        best = {}
        for name, setting, run in grids:
            secs, (acc,) = run(fit, [val], 0)
            print(json.dumps({"model": name, **setting, "validation_acc": acc, "fit_s": round(secs, 1)}), flush=True)
            if name not in best or acc > best[name][0]:
                best[name] = (acc, setting, run)
        for name, (vacc, setting, run) in best.items():
            seeds = (0, 1, 2) if name == "fasttext" else (0,)  # liblinear is deterministic
            for s in seeds:
                secs, (acc,) = run(full, [test], s)
                row = {"model": name, **setting, "seed": s, "validation_acc": vacc, "test_acc": acc,
                       "train_s": round(secs, 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| baseline | chosen on validation | validation acc | test acc | training s |")
    print("|---|---|---|---|---|")
    for r in rows:
        setting = ", ".join("%s %s" % (k, r[k]) for k in r if k in ("epoch", "lr", "dim", "solver", "c"))
        print("| %s (seed %d) | %s | %.2f%% | %.2f%% | %.1f |" % (r["model"], r["seed"], setting,
                                                                 r["validation_acc"], r["test_acc"], r["train_s"]))


if __name__ == "__main__":
    main()

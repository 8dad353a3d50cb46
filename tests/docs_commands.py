#!/usr/bin/env python3
"""Every command README.md and docs/*.md show, run as a reader pastes it, in the order a reader
meets them, after the README's first command (bash scripts/run.sh).

Usage: tests/docs_commands.py ATTN_BIN [--list]   (ctest runs it from the repository's root)

What counts as a command:
  - every line of a code block (indented by 4 spaces, or fenced with ``` but not ```c), a line
    ending in a backslash joined with the next; in a block that has lines starting with "$ ",
    only those are commands (the other lines are what they print);
  - every inline `attn ...`, `build/attn ...` and `mpirun ...` span that is not a synopsis (no
    [ ] | < > ... or UPPER-case placeholder such as NAME or FILE).
The table between "<!-- the rows: ..." and "<!-- end of the rows -->" (docs/robustness.md: the
messages the bad-input matrix expects) holds patterns, not commands. A block after
"<!-- not run: REASON -->" is listed with its reason and not run (the whole test
suite, an install into /usr/local, a record of a one-hour run, other hosts). A command that is
met again is not run again.

How: in a scratch folder laid out like the repository (README.md, docs/, scripts/ copied; data/
and tests/ linked), with `attn` on the PATH and build/attn both a wrapper that runs ATTN_BIN with
the arguments as given and, to keep the run to a few minutes, caps what a training command costs
when the command does not set it itself: `classify train` gets --max-steps 2 --max-len 64
--batch-size 8, `translate train` --max-steps 2 --batch-size 8 --eval-limit 8 --beam 1,
`translate eval` --eval-limit 8, `lm train` --max-steps 2 --val-tokens 4096, `lm eval`
--val-tokens 4096. The
README's first command runs with ATTN_BIN=build/attn (run.sh then skips the Debian packages, the
build and the install: the build is the one under test) and ATTN_RUN_MAX_STEPS=2. mpirun gets the
environment docs/mpi.md names for root in a container. Every command must exit 0. The output a
block shows must be what the command prints now for the blocks the docs' scripts generate
(<!-- run: ... --> in README.md, <!-- tour STEP --> in the tutorials): the same text, a number
apart by at most 1.5 units of its last digit. Also: `attn tour --save` writes a non-empty
safetensors file for every step. Ends with "docs_commands: N passed, N failed".
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.getcwd()
DOCS = ["README.md"] + sorted("docs/" + f for f in os.listdir("docs") if f.endswith(".md"))
TIMEOUT = 600

WRAPPER = r'''#!/usr/bin/env bash
# attn for tests/docs_commands.py: the program under test, with a training command's cost capped
args=("$@")
has() { local a; for a in "${args[@]}"; do [[ $a == "$1" || $a == "$1="* ]] && return 0; done; return 1; }
add() { has "$1" || args+=("$1" "$2"); }
case "${1:-} ${2:-}" in
  "classify train") add --max-steps 2; add --max-len 64; add --batch-size 8 ;;
  "translate train") add --max-steps 2; add --batch-size 8; add --eval-limit 8; add --beam 1 ;;
  "translate eval") add --eval-limit 8 ;;
  "lm train") add --max-steps 2; add --val-tokens 4096 ;;
  "lm eval") add --val-tokens 4096 ;;
esac
exec "$ATTN_REAL_BIN" "${args[@]}"
'''

SYNOPSIS = re.compile(r"[\[\]|<>…]|\.\.\.|\b[A-Z]{2,}\b")
INLINE = re.compile(r"`((?:build/)?attn [^`]+|mpirun [^`]+)`")


class Command:
    def __init__(self, doc, line, text, shown=None, generated=False, not_run=None):
        self.doc, self.line, self.text = doc, line, text
        self.shown = shown          # the output the block shows, or None
        self.generated = generated  # the shown output is written by a script: compare it
        self.not_run = not_run      # the reason, when the docs say it is not run


def join_continued(lines):
    """(line number, text) pairs with backslash continuations joined."""
    out, cur, start = [], None, 0
    for n, text in lines:
        if cur is None:
            cur, start = text, n
        else:
            cur += "\n" + text
        if not text.rstrip().endswith("\\"):
            out.append((start, cur))
            cur = None
    if cur is not None:
        out.append((start, cur))
    return out


def block_commands(doc, lines, marker, not_run):
    """Commands of one code block: lines = [(line number, text without the indent)]."""
    generated = bool(marker)
    if any(t.startswith("$ ") for _, t in lines):
        cmds, i = [], 0
        while i < len(lines):
            n, t = lines[i]
            if not t.startswith("$ "):
                i += 1
                continue
            parts = [t[2:]]
            while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                parts.append(lines[i][1])
            i += 1
            out = []
            while i < len(lines) and not lines[i][1].startswith("$ "):
                out.append(lines[i][1])
                i += 1
            while out and not out[-1].strip():
                out.pop()
            cmds.append(Command(doc, n, "\n".join(parts), "\n".join(out), generated, not_run))
        return cmds
    return [Command(doc, n, t, None, False, not_run)
            for n, t in join_continued([(n, t) for n, t in lines if t.strip()])]


def extract(doc):
    text = open(doc, encoding="utf-8").read().split("\n")
    cmds = []
    i, marker, not_run, prev_blank = 0, None, None, True
    while i < len(text):
        line = text[i]
        m = re.match(r"^<!-- not run: (.*) -->$", line)
        if m:
            not_run, i, prev_blank = m.group(1), i + 1, True
            continue
        if line.startswith("<!-- the rows: "):  # robustness.md's table: its spans are patterns
            while i < len(text) and text[i] != "<!-- end of the rows -->":
                i += 1
            i, prev_blank = i + 1, True
            continue
        if re.match(r"^<!-- (run: .*|tour \S+) -->$", line):
            marker, i, prev_blank = line, i + 1, True
            continue
        fence = re.match(r"^```(\w*)", line)
        if fence:
            lang, body, i = fence.group(1), [], i + 1
            while i < len(text) and not text[i].startswith("```"):
                body.append((i + 1, text[i]))
                i += 1
            i += 1
            if lang != "c":
                cmds += block_commands(doc, body, marker, not_run)
            marker, not_run, prev_blank = None, None, False
            continue
        if line.startswith("    ") and prev_blank:
            body = []
            while i < len(text) and (text[i].startswith("    ") or
                                     (not text[i].strip() and i + 1 < len(text) and text[i + 1].startswith("    "))):
                body.append((i + 1, text[i][4:]))
                i += 1
            cmds += block_commands(doc, body, marker, not_run)
            marker, not_run, prev_blank = None, None, False
            continue
        if line.strip() and not line.startswith("<!--"):
            marker = None if not line.startswith("<!-- end") else marker
            for m in INLINE.finditer(line):
                span = m.group(1)
                if not SYNOPSIS.search(span):
                    cmds.append(Command(doc, i + 1, span))
        prev_blank = not line.strip()
        i += 1
    return cmds


NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def same_text(expected, actual):
    """None when actual reads as expected (numbers within 1.5 units of expected's last digit),
    else the first line that differs."""
    e_lines = [l.rstrip() for l in expected.rstrip("\n").split("\n")]
    a_lines = [l.rstrip() for l in actual.rstrip("\n").split("\n")]
    for k in range(max(len(e_lines), len(a_lines))):
        e = e_lines[k] if k < len(e_lines) else "(no line)"
        a = a_lines[k] if k < len(a_lines) else "(no line)"
        if e == a:
            continue
        if NUMBER.split(e) == NUMBER.split(a):
            ok = True
            for x, y in zip(NUMBER.findall(e), NUMBER.findall(a)):
                if "." not in x:
                    ok = ok and x == y
                else:
                    unit = 10.0 ** -len(x.split(".")[1])
                    ok = ok and abs(float(x) - float(y)) <= 1.5 * unit + 1e-12
            if ok and len(NUMBER.findall(e)) == len(NUMBER.findall(a)):
                continue
        return "line %d\n    shown: %s\n    now  : %s" % (k + 1, e, a)
    return None


def safetensors_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return [k for k in header if k != "__metadata__"]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    real = os.path.abspath(sys.argv[1])
    for var in ("ATTN_CPU_ISA", "ONEDNN_MAX_CPU_ISA"):
        if os.environ.get(var) and "--list" not in sys.argv:
            print("docs_commands: skipped under %s=%s: the docs' commands run once, at the default level"
                  % (var, os.environ[var]))
            return 77
    cmds = [c for doc in DOCS for c in extract(doc)]
    if "--list" in sys.argv:
        for c in cmds:
            print("%s:%d: %s%s" % (c.doc, c.line, c.text, "  [not run: %s]" % c.not_run if c.not_run else ""))
        return 0
    work = tempfile.mkdtemp(prefix="attn_docs_")
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("FAIL " + what)
        return ok

    try:
        shutil.copy("README.md", work)
        for d in ("docs", "scripts"):
            shutil.copytree(d, os.path.join(work, d))
        for d in ("data", "tests", "cli", "src", "include", "examples"):
            os.symlink(os.path.join(ROOT, d), os.path.join(work, d))
        for d in ("bin", "build"):
            os.mkdir(os.path.join(work, d))
            with open(os.path.join(work, d, "attn"), "w") as f:
                f.write(WRAPPER)
            os.chmod(os.path.join(work, d, "attn"), 0o755)
        env = dict(os.environ)
        env.update({"PATH": os.path.join(work, "bin") + ":" + env.get("PATH", ""), "ATTN_REAL_BIN": real,
                    "ATTN_BIN": os.path.join(work, "build", "attn"), "ATTN_RUN_MAX_STEPS": "2",
                    "ATTN_PREFIX": "none", "LC_ALL": "C.UTF-8", "OMPI_ALLOW_RUN_AS_ROOT": "1",
                    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1"})
        env.pop("ATTN_DATA_DIR", None)
        seen, skipped = set(), []
        for c in cmds:
            where = "%s:%d: %s" % (c.doc, c.line, c.text)
            if c.not_run:
                skipped.append("%s  (%s)" % (where, c.not_run))
                continue
            if c.text in seen and not c.generated:
                continue
            seen.add(c.text)
            t0 = time.time()
            try:
                r = subprocess.run(["bash", "-c", c.text], cwd=work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=TIMEOUT)
                out, err, rc = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"), r.returncode
            except subprocess.TimeoutExpired:
                out, err, rc = "", "timed out after %d s" % TIMEOUT, -1
            ok = check(rc == 0, "%s\n  exit %d: %s" % (where, rc, "\n  ".join(err.strip().split("\n")[-5:])))
            if ok and c.generated and c.shown is not None:
                diff = same_text(c.shown, out)
                ok = check(diff is None, "%s\n  prints other than the docs show (bash docs/make_readme.sh or "
                                         "docs/make_tutorial.sh regenerates them): %s" % (where, diff))
            print("%s %5.1f s  %s" % ("ok  " if ok else "FAIL", time.time() - t0, where.split("\n")[0]))
        # --save: every step's tensors
        save = os.path.join(work, "save_all")
        r = subprocess.run([real, "tour", "--save", save, "--out-dir", os.path.join(work, "pics_all")],
                           cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        check(r.returncode == 0, "attn tour --save: %s" % r.stderr.decode())
        steps = subprocess.run([real, "tour", "--list"], env=env, stdout=subprocess.PIPE).stdout.decode().split("\n")
        for step in [s.split()[0] for s in steps if s.strip()]:
            path = os.path.join(save, re.sub(r"[/.-]", "_", step) + ".safetensors")
            names = safetensors_names(path) if os.path.exists(path) else []
            check(len(names) > 0, "attn tour --save: %s holds no tensor" % path)
        print("not run (the docs say why):")
        for s in skipped:
            print("  " + s)
        print("commands: %d found, %d run (once each), %d not run" %
              (len(cmds), len(seen), len(skipped)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("docs_commands: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""No cycle among the files of src/ and of cli/: file A depends on file B when A's object uses a
symbol (a function or a variable) that B's object defines, read off the objects of a build by nm.
A cycle means neither file can be read, changed or tested without the other; each one found is
printed with the symbols that close it. Exit 0: none; 1: cycles; 77: nm missing (skipped).
    python3 tests/file_cycles.py BUILD_DIR
    python3 tests/file_cycles.py --self-test     (a planted cycle must be found)
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile


def symbols(objs):
    """{object: (defined, used)} global symbols of the object files, from one nm"""
    out = subprocess.run(["nm", "-A"] + objs, capture_output=True, text=True, check=True).stdout
    table = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        obj, _, rest = line.partition(":")  # "path:value type name"
        parts = rest.split()
        if obj not in table:
            continue
        if len(parts) == 3 and parts[1] in "TDBRC":
            table[obj][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            table[obj][1].add(parts[1])
    return table


def cycles(defs, uses):
    """Strongly connected components of more than one file, each with its edges' symbols"""
    owner = {}
    for name, d in defs.items():
        for s in d:
            owner.setdefault(s, name)
    edges = {n: {} for n in defs}
    for n, u in uses.items():
        for s in u:
            if s in owner and owner[s] != n:
                edges[n].setdefault(owner[s], []).append(s)
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append([(a, b, sorted(edges[a][b])) for a in sorted(comp) for b in sorted(edges[a]) if b in comp])

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def check(groups):
    bad = 0
    for label, objs in groups:
        defs, uses = {}, {}
        for o, (d, u) in symbols(objs).items():
            name = os.path.basename(o)[: -len(".c.o")]
            defs[name], uses[name] = d, u
        for comp in cycles(defs, uses):
            bad += 1
            print(f"file_cycles: {label}: a cycle of {len({a for a, _, _ in comp})} files:")
            for a, b, syms in comp:
                print(f"    {a}.c uses {b}.c's {', '.join(syms[:4])}{' ...' if len(syms) > 4 else ''}")
        print(f"file_cycles: {label}: {len(objs)} files")
    return bad


def self_test():
    defs = {"a": {"fa"}, "b": {"fb"}, "c": {"fc"}}
    uses = {"a": {"fb"}, "b": {"fc"}, "c": {"fa", "printf"}}
    found = cycles(defs, uses)
    ok = len(found) == 1 and {a for a, _, _ in found[0]} == {"a", "b", "c"}
    ok = ok and not cycles(defs, {"a": {"fb"}, "b": {"fc"}, "c": set()})
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc and shutil.which("nm"):  # and read off real objects: two files that call each other
        with tempfile.TemporaryDirectory() as tmp:
            sources = {"a": "int b_fn(void); int a_fn(void) { return b_fn() + 1; }\n",
                       "b": "int a_fn(void); int b_fn(void) { return 2; } int b_more(void) { return a_fn(); }\n"}
            objs = []
            for name, text in sources.items():
                with open(f"{tmp}/{name}.c", "w") as f:
                    f.write(text)
                subprocess.run([cc, "-c", f"{tmp}/{name}.c", "-o", f"{tmp}/{name}.c.o"], check=True)
                objs.append(f"{tmp}/{name}.c.o")
            table = symbols(objs)
            d = {os.path.basename(o)[:-4]: v[0] for o, v in table.items()}
            u = {os.path.basename(o)[:-4]: v[1] for o, v in table.items()}
            ok = ok and len(cycles(d, u)) == 1
    print("file_cycles --self-test:", "a planted cycle found, none where there is none" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    if os.environ.get("ATTN_CPU_ISA") or os.environ.get("ONEDNN_MAX_CPU_ISA"):
        print("file_cycles: run once, without ATTN_CPU_ISA: skipped")  # the objects are the same at every level
        return 77
    if not shutil.which("nm"):
        print("file_cycles: nm not found: skipped")
        return 77
    build = sys.argv[1]
    lib = sorted(glob.glob(f"{build}/CMakeFiles/attn_objects.dir/src/*/*.o"))
    lib += sorted(glob.glob(f"{build}/CMakeFiles/attn_kernels_baseline.dir/src/kernels/*.o"))
    groups = [("src/ (the core)", lib)]
    for part in ("data", "plot"):
        objs = sorted(glob.glob(f"{build}/CMakeFiles/attn_{part}_objects.dir/src/{part}/*.o"))
        if objs:
            groups.append((f"src/{part}/", objs))
    cli = sorted(glob.glob(f"{build}/cli/CMakeFiles/attn_cli.dir/*.o"))
    if cli:
        groups.append(("cli/", cli))
    if not lib:
        print(f"file_cycles: no objects under {build}/CMakeFiles/attn_objects.dir")
        return 1
    return 1 if check(groups) else 0


if __name__ == "__main__":
    sys.exit(main())

"""bench/torch_side.py - the PyTorch reference of scripts/bench, one process per thread setting.

    /usr/bin/python3 bench/torch_side.py THREADS TARGET REPS < requests

Prints "VERSION v" (or "NOTORCH message" and exits when torch cannot be imported), then serves
one request per input line, a JSON object {"key": k, "setup": python code, "body": python code},
until end of input: setup runs once (its names are visible to body), body is timed as
bench/timing.lua times dle's side, and the answer is the line "key median min max iterations"
(seconds per iteration) or "key ERROR message". Serving requests one at a time lets the caller
measure each PyTorch figure right after dle's, so both see the same load on a shared machine.
"""
import json
import sys
import time

try:
    import torch
except Exception as ex:  # torch is optional: the caller prints a note and skips the reference
    print("NOTORCH", ex)
    sys.exit(0)


def measure(run, target, reps):
    n, t = 1, run(1)  # first call: lazy initialisation
    while t < target / 4:
        n *= 4
        t = run(n)
    last = n
    if t < target:
        n = max(1, int(n * target / t + 0.999))
    if n != last:
        run(n)  # warm-up repetition at the final count
    per = sorted(run(n) / n for _ in range(reps))
    m = len(per)
    med = per[m // 2] if m % 2 else (per[m // 2 - 1] + per[m // 2]) / 2
    return med, per[0], per[-1], n


def bench(entry, target, reps):
    env = {"torch": torch}
    exec(entry["setup"], env)
    loop = "for _ in range(_n):\n" + "\n".join("    " + line for line in entry["body"].split("\n"))
    code = compile(loop, entry["key"], "exec")

    def run(n):
        env["_n"] = n
        t0 = time.perf_counter()
        exec(code, env)
        return time.perf_counter() - t0

    return measure(run, target, reps)


def main():
    threads, target, reps = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    print("VERSION", torch.__version__, flush=True)
    for line in iter(sys.stdin.readline, ""):
        if not line.strip():
            continue
        key = "?"
        try:
            entry = json.loads(line)
            key = entry["key"]
            med, lo, hi, n = bench(entry, target, reps)
            print(key, med, lo, hi, n, flush=True)
        except Exception as ex:
            print(key, "ERROR", str(ex).replace("\n", " ")[:200], flush=True)


main()

"""Tables of hierarchical_bench.sh's runs: median time per mode and the ratio.

    python3 hierarchical_report.py RESULTS_DIR

RESULTS_DIR holds distbench --json files named MODE.N.TURN.json (MODE auto
or off, N ranks per host). Prints, per layout, each operation and size with
the median over turns of flat (off) and hierarchical (auto) time in
microseconds and hierarchical/flat (below 1: the hierarchy is faster; 0.67
is 1.5x), then one summary table of the ratios (docs/performance.md).
"""
import collections
import glob
import json
import os
import statistics
import sys


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def main(results_dir):
    # (n, op, size) -> mode -> [time_us]
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    wrong = collections.Counter()
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        mode, n, _, _ = os.path.basename(path).split(".")
        with open(path) as f:
            run = json.load(f)
        for row in run["results"]:
            times[(int(n), row["op"], row["size"])][mode].append(row["time_us"])
            wrong[int(n)] += row.get("wrong") or 0
    ratios = {}
    for n in sorted({key[0] for key in times}):
        print("\n2 hosts x %d ranks (%d wrong results)\n" % (n, wrong[n]))
        print("| op | size | flat (us) | hierarchical (us) | hierarchical / flat |")
        print("|---|---:|---:|---:|---:|")
        for (layout, op, size), modes in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if layout != n or "auto" not in modes or "off" not in modes:
                continue
            flat = statistics.median(modes["off"])
            hier = statistics.median(modes["auto"])
            ratios[(op, n, size)] = hier / flat
            print("| %s | %s | %.0f | %.0f | %.2f |" % (op, human(size) if op != "barrier" else "-",
                                                   flat, hier, hier / flat))
    sizes = sorted({size for (op, _, size) in ratios if op != "barrier"})
    print("\nhierarchical / flat\n")
    print("| op | hosts x ranks | " + " | ".join(human(s) for s in sizes) + " |")
    print("|---|---|" + "---:|" * len(sizes))
    for op in sorted({op for (op, _, _) in ratios}):
        for n in sorted({n for (o, n, _) in ratios if o == op}):
            if op == "barrier":
                cells = ["%.2f" % ratios[(op, n, 0)]] + [""] * (len(sizes) - 1)
            else:
                cells = ["%.2f" % ratios[(op, n, s)] if (op, n, s) in ratios else "" for s in sizes]
            print("| %s | 2 x %d | %s |" % (op, n, " | ".join(cells)))


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/python3
"""Two builds of one plugin against each other, in one run.

Runs distbench for build A and build B in turns (A B, B A, A B, ...), the
same world sizes, operations and sizes each time, so that load on a noisy
machine falls on both alike. For every (operation, world size, size) it
prints each build's median time over its runs and the median of the
per-pair ratios B / A (< 1: B is faster), as a Markdown table.

  bazel build -c opt //tools/distbench //plugins/backends/gloo:all
  mkdir -m 755 ~/ab && cp bazel-bin/plugins/backends/gloo/libdist-backend-gloo.so ~/ab/new.so   # and the old build to ~/ab/old.so (dist refuses plugins in world-writable folders)
  tools/distbench/compare_builds.py --a ~/ab/old.so --b ~/ab/new.so -n 2,4 -- \\
      --op all_reduce,broadcast,all_gather,barrier -b 8 -e 256K -f 8 --rounds 7 --iters 20 --check

Everything after `--` goes to distbench as it is.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_distbench(distbench, plugin, world_size, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [distbench, "-n", str(world_size), "--backend", plugin, "--json", out.name] + extra
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"compare_builds: {' '.join(command)} failed ({done.returncode}):\n{done.stdout}")
        with open(out.name) as f:
            run = json.load(f)
    wrong = [r for r in run["results"] if r.get("wrong")]
    if wrong:
        sys.exit(f"compare_builds: {plugin} gave wrong results: {wrong[0]}")
    return {(r["op"], r["size"]): r["time_us"] for r in run["results"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="build A: path to the plugin .so (the old one)")
    parser.add_argument("--b", required=True, help="build B: path to the plugin .so (the new one)")
    parser.add_argument("-n", default="2", help="comma-separated world sizes")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each build per world size")
    parser.add_argument("--distbench", default="bazel-bin/tools/distbench/distbench")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="-- then distbench flags")
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    for path in (args.a, args.b, args.distbench):
        if not os.path.exists(path):
            sys.exit(f"compare_builds: {path} does not exist; build it first (see --help)")

    print(f"# A = {args.a}\n# B = {args.b}\n# distbench {' '.join(extra)}; {args.pairs} runs each, alternating")
    print("\n| op | N | size (B) | A µs | B µs | B / A |\n|---|---|---|---|---|---|")
    for world_size in [int(n) for n in args.n.split(",")]:
        runs = {"a": [], "b": []}
        for pair in range(args.pairs):
            order = ("a", "b") if pair % 2 == 0 else ("b", "a")
            for side in order:
                plugin = args.a if side == "a" else args.b
                runs[side].append(run_distbench(args.distbench, plugin, world_size, extra))
        for key in runs["a"][0]:
            a = [run[key] for run in runs["a"] if key in run]
            b = [run[key] for run in runs["b"] if key in run]
            ratios = [y / x for x, y in zip(a, b) if x > 0]
            if not a or not b or not ratios:
                continue
            print(f"| {key[0]} | {world_size} | {key[1]} | {statistics.median(a):.1f} | "
                  f"{statistics.median(b):.1f} | {statistics.median(ratios):.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

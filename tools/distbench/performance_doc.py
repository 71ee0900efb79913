#!/usr/bin/env python3
"""Regenerates the measured tables of docs/performance.md from distbench --json.

Each table lives in the document between

    <!-- generated: NAME (tools/distbench/performance_doc.py) -->
    ...
    <!-- end generated: NAME -->

and is rebuilt from the JSON files of the distbench runs that NAME defines
(SECTIONS below), together with the command that made them and when. The
prose around the tables is the document's own.

    bazel build -c opt //tools/distbench:distbench
    python3 tools/distbench/performance_doc.py              # run every section, then render
    python3 tools/distbench/performance_doc.py --only gloo_raw
    python3 tools/distbench/performance_doc.py --render_only --json_dir DIR   # from kept JSON

--json_dir keeps the JSON files (default: a temporary folder). Runs are
sequential: this machine has 2 cores, and the tables are ratios measured in
the same processes and rounds (distbench --baseline), so noise moves both
sides alike.
"""

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import tempfile

def human(size_bytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return "%d %s" % (size_bytes // scale, unit)
    return "%d B" % size_bytes


def powers(first, last, factor):
    sizes = [first]
    while sizes[-1] * factor <= last:
        sizes.append(sizes[-1] * factor)
    return sizes


def column_of(nominal):
    """distbench rounds each size asked for to whole elements per rank (60 B
    of all_gather at N=3): a result goes to the nearest size asked for."""
    return lambda size: min(nominal, key=lambda n: abs(math.log(max(size, 1)) - math.log(n)))


def ratio_text(value):
    return "-" if value is None else "%.2f" % value


def micros(value):
    if value is None:
        return "-"
    return "%.2f" % value if value < 10 else "%.3g" % value if value < 1000 else "%.0f" % value


# What each section runs. A run is (label, argv, json name); "{distbench}"
# and "{json}" are filled in.
SECTIONS = {
    "gloo_raw": {
        "sizes": powers(8, 256 << 10, 8),
        "runs": [
            ("N=%d" % n,
             ["{distbench}", "-n", str(n), "--backend", "gloo", "--op",
              "all_reduce,broadcast,all_gather,barrier", "-b", "8", "-e", "256K", "-f", "8",
              "--rounds", "7", "--iters", "20", "--check", "--baseline", "--json", "{json}"],
             "gloo_n%d.json" % n)
            for n in (2, 3, 4)
        ],
    },
    # Large messages: the pipelined ring against every raw variant, and
    # against what loopback TCP itself carries between the same ranks in the
    # same rounds (--ceiling: loopback_tcp). N=3 stops at 16 MiB and N=4 at
    # 4 MiB: above, some raw variants on 4 ranks stalled for seconds a call
    # in their waits (4 MiB took 94 s, 16 MiB did not finish in 200 s;
    # 2026-12-07), the pacing of "Known limits" in the gloo README.
    "gloo_raw_large": {
        "sizes": powers(1 << 20, 64 << 20, 4),
        "runs": [
            ("N=%d" % n,
             ["{distbench}", "-n", str(n), "--backend", "gloo", "--op",
              "all_reduce,broadcast,all_gather", "-b", "1M", "-e", last, "-f", "4",
              "--rounds", "5", "--iters", "4", "--timeout", "60s", "--check", "--baseline",
              "--ceiling", "--json", "{json}"],
             "gloo_large_n%d.json" % n)
            for n, last in ((2, "64M"), (3, "16M"), (4, "4M"))
        ],
    },
    "shm_mpi": {
        "sizes": powers(8, 16 << 20, 8),
        "runs": [
            ("N=%d" % n,
             ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n),
              "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=%d" % (29600 + n),
              "{distbench}", "--backend", "shm", "--baseline", "--baseline_library", "mpi",
              "--op", "all_reduce", "-b", "8", "-e", "16M", "-f", "8", "--rounds", "5",
              "--iters", "50", "--check", "--json", "{json}"],
             "shm_mpi_n%d.json" % n)
            for n in (2, 4)
        ],
    },
}


def command_text(argv):
    shown = [a.replace("{distbench}", "distbench").replace("{json}", "OUT.json") for a in argv]
    return " ".join(shown)


def load(json_dir, name):
    with open(os.path.join(json_dir, name)) as f:
        return json.load(f)


def wrong_total(runs):
    total = 0
    for run in runs:
        for row in run["results"]:
            total += row.get("wrong") or 0
    return total


def render_gloo_raw(runs, labels, sizes):
    """all_reduce, broadcast, all_gather, barrier: plugin / fastest raw Gloo."""
    column = column_of(sizes)
    lines = ["| op | N | " + " | ".join(human(s) for s in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    for op in ("all_reduce", "broadcast", "all_gather"):
        for run, label in zip(runs, labels):
            cells = {column(row["size"]): row.get("raw", {}).get("time_ratio")
                     for row in run["results"] if row["op"] == op}
            lines.append("| %s | %s | %s |" % (op, label[2:], " | ".join(
                ratio_text(cells.get(s)) for s in sizes)))
    barrier = []
    for run, label in zip(runs, labels):
        for row in run["results"]:
            if row["op"] == "barrier":
                barrier.append("%s %s" % (label, ratio_text(row.get("raw", {}).get("time_ratio"))))
    if barrier:
        lines.append("")
        lines.append("barrier: " + ", ".join(barrier) + ".")
    return lines


def ceiling_text(row):
    """', 71% of loopback TCP's 4.60 GB/s in the same run' from a row of
    distbench --ceiling, or '' (JSON of a run without it). The percentage
    is distbench's fraction, the median of per-round ratios like time_ratio,
    so it can differ a little from the quotient of the two medians shown."""
    ceiling = row.get("ceiling") or {}
    if not ceiling.get("busbw_gbps"):
        return ""
    fraction = ceiling.get("fraction")
    share = "%.0f%% of " % (100 * fraction) if fraction else ""
    return ", %sloopback TCP's %.2f GB/s in the same run" % (share, ceiling["busbw_gbps"])


def render_gloo_raw_large(runs, labels, sizes):
    """The ratios as for gloo_raw, then all_reduce bus bandwidth at each run's
    largest size, against the loopback TCP ceiling where the run measured it."""
    lines = render_gloo_raw(runs, labels, sizes)
    lines.append("")
    for run, label in zip(runs, labels):
        rows = [row for row in run["results"] if row["op"] == "all_reduce"]
        if not rows:
            continue
        row = max(rows, key=lambda r: r["size"])
        raw = row.get("raw") or {}
        lines.append("all_reduce bus bandwidth, %s %s: %.2f GB/s%s; fastest raw (%s) %.2f GB/s." % (
            label, human(column_of(sizes)(row["size"])), row.get("busbw_gbps") or 0,
            ceiling_text(row), raw.get("variant", "?"), raw.get("busbw_gbps") or 0))
    return lines


def render_shm_mpi(runs, labels, sizes):
    """all_reduce: shm and Open MPI microseconds per call, and the ratio."""
    column = column_of(sizes)
    header = "| size |"
    rule = "|---:|"
    for label in labels:
        header += " %s shm µs | MPI µs | shm/MPI |" % label
        rule += "---:|---:|---:|"
    lines = [header, rule]
    for size in sizes:
        line = "| %s |" % human(size)
        for run in runs:
            row = next((r for r in run["results"] if column(r["size"]) == size), None)
            raw = (row or {}).get("raw") or {}
            line += " %s | %s | %s |" % (micros((row or {}).get("time_us")),
                                         micros(raw.get("time_us")),
                                         ratio_text(raw.get("time_ratio")))
        lines.append(line)
    return lines


RENDER = {"gloo_raw": render_gloo_raw, "gloo_raw_large": render_gloo_raw_large,
          "shm_mpi": render_shm_mpi}


def render_section(name, json_dir):
    spec = SECTIONS[name]
    runs = [load(json_dir, json_name) for _, _, json_name in spec["runs"]]
    labels = [label for label, _, _ in spec["runs"]]
    first = runs[0]
    lines = [
        "Made by `python3 tools/distbench/performance_doc.py --only %s` on %s, %s; "
        "%d wrong results (`--check`):" % (name, first.get("host", "?"),
                                          first.get("date", "?"), wrong_total(runs)),
        "",
        "```",
    ]
    lines += [command_text(argv) for _, argv, _ in spec["runs"]]
    lines += ["```", ""]
    lines += RENDER[name](runs, labels, spec["sizes"])
    return lines


def replace_block(text, name, lines):
    begin = "<!-- generated: %s (tools/distbench/performance_doc.py) -->" % name
    end = "<!-- end generated: %s -->" % name
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit("performance_doc: %s has no block for '%s'; add the two lines\n  %s\n  %s"
                         % ("the document", name, begin, end))
    return pattern.sub(lambda _: "\n".join([begin] + lines + [end]), text)


def run_section(name, distbench, json_dir):
    for label, argv, json_name in SECTIONS[name]["runs"]:
        out = os.path.join(json_dir, json_name)
        filled = [a.replace("{distbench}", distbench).replace("{json}", out) for a in argv]
        print("performance_doc: %s %s: %s" % (name, label, " ".join(filled)), flush=True)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        done = subprocess.run(filled, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, timeout=1800)
        if done.returncode != 0:
            raise SystemExit("performance_doc: %s %s failed (exit %d):\n%s" % (
                name, label, done.returncode, done.stderr.decode(errors="replace")[-2000:]))


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    parser.add_argument("--distbench", default=os.path.join(root, "bazel-bin/tools/distbench/distbench"))
    parser.add_argument("--json_dir", default="", help="keep the JSON files here")
    parser.add_argument("--render_only", action="store_true", help="render from --json_dir")
    parser.add_argument("--doc", default=os.path.join(root, "docs/performance.md"))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    for name in names:
        if name not in SECTIONS:
            raise SystemExit("performance_doc: unknown section '%s'; known: %s"
                             % (name, ", ".join(SECTIONS)))
    if args.render_only and not args.json_dir:
        raise SystemExit("performance_doc: --render_only needs --json_dir (where the JSON is)")
    json_dir = args.json_dir or tempfile.mkdtemp(prefix="performance_doc-")
    os.makedirs(json_dir, exist_ok=True)
    if not args.render_only:
        if not os.access(args.distbench, os.X_OK):
            raise SystemExit("performance_doc: no distbench at %s; run "
                             "bazel build -c opt //tools/distbench:distbench" % args.distbench)
        for name in names:
            run_section(name, args.distbench, json_dir)
    with open(args.doc) as f:
        text = f.read()
    for name in names:
        text = replace_block(text, name, render_section(name, json_dir))
    with open(args.doc, "w") as f:
        f.write(text)
    print("performance_doc: rewrote %s (%s); JSON in %s" % (args.doc, ", ".join(names), json_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())

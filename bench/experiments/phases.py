"""Summaries of a marked period (a load spike, CPU hogs) in bench/experiments' runs, server-only against adaptive.

    python3 phases.py spike|hogs OUT_DIR START_S DURATION_S

Reads OUT_DIR/runs.jsonl (one {"mode": ..., "run": <cell-bench's JSON>} per line; the runs were given
--window=START-5:START --window=START:END --window=END+2:<end>) for exact p99s before, during and after the period,
and OUT_DIR/<mode>.csv (the 100 ms time series) for throughput and the server-side fraction. Prints one JSON line;
for "spike" with "pass", issue 6's acceptance of experiment 3: adaptive's p99 during the spike within 3x of its p99
before, server-only's 10x or more, and adaptive's server-side fraction dropping within 1 s of the spike's start and
recovering after it. Experiment 4 ("hogs") has no acceptance bound: it only reports.
"""
import csv
import json
import sys


def rows(path):
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def within(rs, lo, hi):
    # Intervals ending in (lo, hi]: their operations completed within [lo, hi).
    return [r for r in rs if lo + 1e-9 < r["t_s"] <= hi + 1e-9]


def weighted_fraction(rs):
    # The server-side fraction over the intervals' searches (weighted by operations; empty intervals add nothing).
    ops = sum(r["ops"] for r in rs)
    return round(sum(r["server_fraction"] * r["ops"] for r in rs) / ops, 3) if ops > 0 else None


def main():
    kind, out, start, length = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    end = start + length
    runs = {}
    for line in open(f"{out}/runs.jsonl"):
        r = json.loads(line)
        runs[r["mode"]] = r["run"]
    summary = {"experiment": "3-spike" if kind == "spike" else "4-hogs"}
    for mode in ("server", "adaptive"):
        run, series = runs[mode], rows(f"{out}/{mode}.csv")
        if run["errors"] != 0:
            raise SystemExit(f"phases.py: {mode}: {run['errors']} errors")
        last = max(r["t_s"] for r in series)
        by_window = {(round(w["from_s"], 3), round(w["to_s"], 3)): w for w in run["windows"]}
        before = by_window[(round(start - 5, 3), round(start, 3))]
        during = by_window[(round(start, 3), round(end, 3))]
        after = by_window[(round(end + 2, 3), round(last, 3))]
        ops = lambda lo, hi: sum(r["ops"] for r in within(series, lo, hi)) / (hi - lo)
        summary[mode] = {
            "p99_us_before": before["p99_us"], "p99_us_during": during["p99_us"], "p99_us_after": after["p99_us"],
            "p99_growth": round(during["p99_us"] / before["p99_us"], 2) if before["p99_us"] > 0 else None,
            "ops_per_s_before": round(ops(start - 5, start)), "ops_per_s_during": round(ops(start, end)),
            "server_fraction_before": weighted_fraction(within(series, start - 5, start)),
            "server_fraction_during": weighted_fraction(within(series, start, end)),
            "server_fraction_after": weighted_fraction(within(series, end + 2, last)),
            "unissued": run["unissued"],
        }
    a = summary["adaptive"]
    # The fraction "drops" at the first interval of the period whose fraction is at least 0.1 below the fraction
    # before it; it has "recovered" if the fraction after the period (from 2 s after its end) is within 0.1 of it.
    drop_at = None
    if a["server_fraction_before"] is not None:
        drop_at = next((r["t_s"] for r in within(rows(f"{out}/adaptive.csv"), start, end)
                        if r["ops"] > 0 and r["server_fraction"] <= a["server_fraction_before"] - 0.1), None)
    a["fraction_drop_after_s"] = round(drop_at - start, 2) if drop_at is not None else None
    a["fraction_recovered"] = (a["server_fraction_after"] is not None and a["server_fraction_before"] is not None
                               and a["server_fraction_after"] >= a["server_fraction_before"] - 0.1)
    if kind == "spike":
        s = summary["server"]
        summary["pass"] = bool(
            a["p99_growth"] is not None and a["p99_growth"] <= 3 and s["p99_growth"] is not None
            and s["p99_growth"] >= 10 and a["fraction_drop_after_s"] is not None and a["fraction_drop_after_s"] <= 1
            and a["fraction_recovered"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

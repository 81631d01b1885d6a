"""Summaries of bench/experiments' time series (cell-bench --csv): medians of the 100 ms intervals' p99 before and
during a marked period (a spike, CPU hogs), and when the adaptive selector's server-side fraction moved.

    python3 phases.py spike|hogs OUT_DIR START_S DURATION_S

reads OUT_DIR/server.csv and OUT_DIR/adaptive.csv and prints one JSON line with "pass" (the acceptance of issue 6's
experiment 3 for "spike"; experiment 4 has no acceptance bound, so "hogs" only reports).
"""
import csv
import json
import statistics
import sys


def rows(path):
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def window(rs, lo, hi):
    # Intervals ending in (lo, hi]: their ops completed within [lo, hi).
    return [r for r in rs if lo < r["t_s"] <= hi + 1e-9]


def med(rs, key):
    vals = [r[key] for r in rs if r["ops"] > 0]
    return statistics.median(vals) if vals else 0.0


def main():
    kind, out, start, length = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    end = start + length
    summary = {"experiment": "3-spike" if kind == "spike" else "4-hogs"}
    series = {m: rows(f"{out}/{m}.csv") for m in ("server", "adaptive")}
    last = max(r["t_s"] for r in series["server"])
    for mode, rs in series.items():
        before, during, after = window(rs, start - 5, start), window(rs, start, end), window(rs, end + 2, last)
        p99_before, p99_during = med(before, "p99_us"), med(during, "p99_us")
        summary[mode] = {
            "p99_us_before": p99_before, "p99_us_during": p99_during, "p99_us_after": med(after, "p99_us"),
            "p99_during_max_us": max((r["p99_us"] for r in during), default=0),
            "p99_growth": round(p99_during / p99_before, 2) if p99_before > 0 else None,
            "ops_per_s_before": med(before, "ops_per_s"), "ops_per_s_during": med(during, "ops_per_s"),
            "server_fraction_before": round(statistics.mean(r["server_fraction"] for r in before), 3),
            "server_fraction_during": round(statistics.mean(r["server_fraction"] for r in during), 3),
            "server_fraction_after": round(statistics.mean(r["server_fraction"] for r in after), 3),
        }
    a = summary["adaptive"]
    # The fraction "drops" at the first interval of the period whose fraction is at least 0.1 below the mean before
    # it, and has "recovered" if the mean after the period (from 2 s after its end) is within 0.1 of the mean before.
    drop_at = next((r["t_s"] for r in window(series["adaptive"], start, end)
                    if r["server_fraction"] <= a["server_fraction_before"] - 0.1), None)
    a["fraction_drop_after_s"] = round(drop_at - start, 2) if drop_at is not None else None
    a["fraction_recovered"] = a["server_fraction_after"] >= a["server_fraction_before"] - 0.1
    if kind == "spike":
        s = summary["server"]
        summary["pass"] = bool(
            a["p99_growth"] is not None and a["p99_growth"] <= 3 and s["p99_growth"] is not None
            and s["p99_growth"] >= 10 and a["fraction_drop_after_s"] is not None and a["fraction_drop_after_s"] <= 1
            and a["fraction_recovered"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

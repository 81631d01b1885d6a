#!/usr/bin/env bash
# Experiment 9 (issue 21): SQL point SELECTs by primary key and range SELECTs of RANGE_ROWS rows per second, through
# SQLite on Cell (the virtual table module, sql/cell_vtab.h) against the same prepared queries on SQLite's own
# in-memory table and on a private PostgreSQL (cell-sql-bench, bench/sql_bench.cc). No models: the real machine.
#   cell      SQLite in cell-sql-bench's process, the table in one cell-server (one worker, CPU 0, tcp and shm
#             listeners, embedded membership, no --data-dir); the module's client reaches it over shm and searches
#             as its adaptive selector chooses (the module offers no search option)
#   sqlite    SQLite's own table in an in-memory database of cell-sql-bench's process: a function call, no server,
#             so it runs on the client's CPU alone
#   postgres  PostgreSQL 15 started by cell-sql-bench (bench/private_postgres.h) on CPU 0, as Cell's server is, with
#             durability off (fsync, synchronous_commit, full_page_writes off: Cell's server logs nothing either),
#             queried over its Unix socket
# cell-sql-bench runs on CPU 1, one client thread, and loads KEYS rows into each store; each round then runs the
# point and the range query on each store in turn, every answer checked (a wrong one stops the script).
#
#   bench/experiments/9-sql.sh [--keys=100000] [--rounds=5] [--seconds=4] [--warmup=1] [--range-rows=100]
#                              [--range-limit] (the range query ends with LIMIT RANGE_ROWS, every store)
# Writes OUT_DIR/runs.jsonl (cell-sql-bench's JSON lines: each store's load, each run) and OUT_DIR/summary.json;
# prints a table of the medians and the per-round ratios of Cell to SQLite and to PostgreSQL on stderr, and the
# summary last on stdout.
KEYS=${KEYS:-100000}  # before lib.sh, whose default is 200,000
source "$(dirname "$0")/lib.sh"
rounds=5 seconds=${SECONDS_PER_RUN:-4} warmup=1 range_rows=100 range_limit=()
for arg in "$@"; do
  case "$arg" in
    --keys=*) KEYS=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --warmup=*) warmup=${arg#*=} ;;
    --range-rows=*) range_rows=${arg#*=} ;;
    --range-limit) range_limit=(--range-limit) ;;
    *) die "unknown argument $arg" ;;
  esac
done
[ -x "$bin/cell-sql-bench" ] || die "$bin/cell-sql-bench not built (cmake --build build --target cell-sql-bench)"
exp_init 9-sql
NIC="" CPU=0  # the real machine: no models
trap 'exit 130' INT TERM  # through the EXIT trap: the server is stopped (PostgreSQL stops with cell-sql-bench)

start_server  # lib.sh: one worker on SERVER_CPU, 8 meganodes of 64 MiB, 1 GiB of records, no --data-dir
pressure() {
  local p
  p=$(sed -n 's/^some avg10=\([0-9.]*\) avg60=\([0-9.]*\).*/\2/p' /proc/pressure/cpu 2>/dev/null || true)
  echo "${p:--1}"  # -1: no PSI on this kernel
}
pressure_before=$(pressure)
log "cell-sql-bench: $KEYS rows, $rounds rounds of ${seconds} s per store and query (stderr in $OUT_DIR/bench.log)"
status=0
taskset -c "$CLIENT_CPU" "$bin/cell-sql-bench" --cluster="$CLUSTER" --keys="$KEYS" --rounds="$rounds" \
  --seconds="$seconds" --warmup="$warmup" --range-rows="$range_rows" ${range_limit[@]+"${range_limit[@]}"} \
  --postgres-durability=off --postgres-cpus="$SERVER_CPU" >"$OUT_DIR/runs.jsonl" 2>"$OUT_DIR/bench.log" || status=$?
pressure_after=$(pressure)
stop_server
[ "$status" = 0 ] || { tail -5 "$OUT_DIR/bench.log" >&2; die "cell-sql-bench failed (exit status $status)"; }

python3 - "$OUT_DIR" "$seconds" "$pressure_before" "$pressure_after" >"$OUT_DIR/summary.json" <<'PY'
import json, statistics, sys
out, seconds, pressure = sys.argv[1], float(sys.argv[2]), [float(sys.argv[3]), float(sys.argv[4])]
lines = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
loads = {l["store"]: l for l in lines if l["phase"] == "load"}
runs = [l for l in lines if l["phase"] == "run"]
stores = list(loads)
rounds = sorted({r["round"] for r in runs})
at = {(r["round"], r["store"], r["query"]): r for r in runs}
first = runs[0]
summary = {"experiment": "9-sql", "keys": first["keys"], "range_rows": first["range_rows"],
           "range_limit": first["range_limit"], "seconds": seconds, "rounds": len(rounds),
           "cpu_pressure_some_avg60": pressure,
           "load_s": {s: loads[s]["load_s"] for s in stores}, "median": {}, "cell_vs": {}, "cell_searches": {}}
for q in ("point", "range"):
    summary["median"][q] = {
        s: {f: round(statistics.median(at[(k, s, q)][f] for k in rounds), 2)
            for f in ("queries_per_s", "rows_per_s", "p50_us", "p99_us")} for s in stores}
    summary["cell_vs"][q] = {o: [round(at[(k, "cell", q)]["queries_per_s"] / at[(k, o, q)]["queries_per_s"], 4)
                                 for k in rounds] for o in stores if o != "cell"}
    # What the module's client did per query (its counters over each run): searches, and the server's share.
    c = [at[(k, "cell", q)]["counters"] for k in rounds]
    summary["cell_searches"][q] = {
        "per_query": [round((x["server_searches"] + x["client_searches"]) / at[(k, "cell", q)]["queries"], 3)
                      for k, x in zip(rounds, c)],
        "server_fraction": [round(x["server_searches"] / max(1, x["server_searches"] + x["client_searches"]), 4)
                            for x in c],
        "validations_per_query": [round(x["validations"] / at[(k, "cell", q)]["queries"], 3)
                                  for k, x in zip(rounds, c)]}
# The table, on stderr.
t = [f"9-sql: {summary['keys']:,} rows, range of {summary['range_rows']} rows"
     f"{' with LIMIT' if summary['range_limit'] else ''}, one client thread, {len(rounds)} rounds of "
     f"{summary['seconds']:g} s; load s: " + ", ".join(f"{s} {summary['load_s'][s]:.2f}" for s in stores),
     f"{'query':7} {'store':9} {'queries/s':>12} {'rows/s':>13} {'p50 us':>9} {'p99 us':>9}"]
for q in ("point", "range"):
    for s in stores:
        m = summary["median"][q][s]
        t.append(f"{q:7} {s:9} {m['queries_per_s']:>12,.0f} {m['rows_per_s']:>13,.0f} {m['p50_us']:>9.1f} "
                 f"{m['p99_us']:>9.1f}")
    for o, v in summary["cell_vs"][q].items():
        t.append(f"  {q}: cell / {o}, each round: " + " ".join(f"{x:.3f}x" for x in v))
    cs = summary["cell_searches"][q]
    t.append(f"  {q}: cell searches per query {cs['per_query']}, server-side {cs['server_fraction']}, "
             f"validations per query {cs['validations_per_query']}")
t.append(f"CPU pressure (some, avg60) before/after: {pressure[0]}% / {pressure[1]}%")
print("\n".join(t), file=sys.stderr)
print(json.dumps(summary))
PY
cat "$OUT_DIR/summary.json"

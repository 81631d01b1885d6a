#!/usr/bin/env bash
# PNG plots of cell-bench's output, drawn with gnuplot (deploy/install-deps.sh installs gnuplot-nox).
#
#   bench/plot.sh series OUT.png TITLE [--mark=start_s:duration_s[:label]] LABEL=run.csv [LABEL=run.csv ...]
#       The time series of one or more runs (cell-bench --csv): throughput (and the open loop's target rate, dashed),
#       p99 latency on a log scale, and the server-side fraction, one panel each, against time; the marked period
#       (a load spike, CPU hogs) is shaded.
#   bench/plot.sh curve OUT.png TITLE LABEL=points.dat [LABEL=points.dat ...]
#       Throughput-latency curves: each file has rows "ops_per_s p50_us p99_us" (one point per client count); p99 is
#       drawn solid, p50 dashed.
#   bench/plot.sh lines OUT.png TITLE XLABEL YLABEL LABEL=points.dat [LABEL=points.dat ...]
#       One line per file of rows "x y" (e.g. throughput against the read fraction).
#   bench/plot.sh bars OUT.png TITLE YLABEL values.dat
#       One bar per row "label value" (e.g. the fixed-ratio sweep's throughputs).
#   bench/plot.sh groups OUT.png TITLE YLABEL=values.dat [YLABEL=values.dat ...]
#       One panel per file, stacked: bars grouped by the first column and coloured by the others (a column's name has
#       the same colour in every panel), with a legend and each bar's value on it. The file's first row names the columns ("keys" "server-side" "client-side" ...;
#       names with spaces in double quotes), each further row is a group: its label, then one value per column.
set -euo pipefail

die() { echo "plot.sh: $*" >&2; exit 2; }
command -v gnuplot >/dev/null || die "gnuplot not found (deploy/install-deps.sh installs gnuplot-nox)"
[ $# -ge 3 ] || die "usage: plot.sh series|curve|lines|bars|groups OUT.png TITLE ... (see the header of bench/plot.sh)"
kind=$1 out=$2 title=$3
shift 3

# gnuplot string literal (single quotes doubled).
quote() { printf "'%s'" "${1//\'/\'\'}"; }

script=$(mktemp)
trap 'rm -f "$script"' EXIT
{
  height=600
  [ "$kind" != series ] || height=900
  [ "$kind" != groups ] || height=$((80 + 300 * ($# > 0 ? $# : 1)))
  echo "set terminal pngcairo size 1100,$height font ',11'"
  echo "set output $(quote "$out")"
  echo "set grid"
  echo "set key outside right top"
  echo "set lmargin 12"
  echo "set rmargin 24"
} >"$script"

case "$kind" in
  series)
    mark=""
    runs=()
    for arg in "$@"; do
      case "$arg" in
        --mark=*) mark=${arg#*=} ;;
        *=*) runs+=("$arg") ;;
        *) die "series: '$arg' is not LABEL=file.csv or --mark=start:duration[:label]" ;;
      esac
    done
    [ ${#runs[@]} -gt 0 ] || die "series: no LABEL=file.csv given"
    for run in "${runs[@]}"; do [ -r "${run#*=}" ] || die "series: cannot read ${run#*=}"; done
    {
      echo "set datafile separator ','"
      echo "set multiplot layout 3,1 title $(quote "$title")"
      if [ -n "$mark" ]; then
        IFS=: read -r m_start m_len m_label <<<"$mark"
        echo "set object 1 rect from $m_start, graph 0 to $m_start + $m_len, graph 1 behind fc rgb '#ffe0e0' fs solid noborder"
        [ -n "${m_label:-}" ] && echo "set label 1 $(quote "$m_label") at $m_start, graph 0.93 offset 0.5,0"
      fi
      echo "set xlabel 'time (s)'"
      # series_plots COLUMN: one line per run of that CSV column (or a gnuplot expression of the columns).
      series_plots() {
        plots=()
        local run
        for run in "${runs[@]}"; do
          plots+=("$(quote "${run#*=}") using 1:$1 skip 1 with lines lw 2 title $(quote "${run%%=*}")")
        done
      }
      targets=()
      series_plots 4
      first=${runs[0]#*=}
      # The target rate of an open-loop run (column 11; 0 in a closed loop, then not drawn).
      if awk -F, 'NR > 1 && $11 > 0 { found = 1 } END { exit !found }' "$first"; then
        targets+=("$(quote "$first") using 1:(\$11 > 0 ? \$11 : 1/0) skip 1 with lines dt 2 lc rgb 'gray40' title 'offered rate'")
      fi
      echo "set ylabel 'ops/s'"
      echo "set yrange [0:*]"
      (IFS=,; echo "plot ${plots[*]}${targets[*]:+, ${targets[*]}}")
      echo "set ylabel 'p99 latency (us)'"
      echo "set logscale y"
      echo "set yrange [*:*]"
      series_plots '($7 > 0 ? $7 : 1/0)'
      (IFS=,; echo "plot ${plots[*]}")
      echo "unset logscale y"
      echo "set ylabel 'server-side fraction'"
      echo "set yrange [0:1.05]"
      series_plots 9
      (IFS=,; echo "plot ${plots[*]}")
      echo "unset multiplot"
    } >>"$script"
    ;;
  curve)
    [ $# -gt 0 ] || die "curve: no LABEL=points.dat given"
    plots=()
    i=0
    for run in "$@"; do
      case "$run" in *=*) ;; *) die "curve: '$run' is not LABEL=points.dat" ;; esac
      label=${run%%=*} file=${run#*=}
      [ -r "$file" ] || die "curve: cannot read $file"
      i=$((i + 1))
      plots+=("$(quote "$file") using 1:3 with linespoints lw 2 pt 7 lc $i title $(quote "$label p99")")
      plots+=("$(quote "$file") using 1:2 with linespoints lw 1 dt 2 pt 6 lc $i title $(quote "$label p50")")
    done
    {
      echo "set title $(quote "$title")"
      echo "set xlabel 'throughput (ops/s)'"
      echo "set ylabel 'latency (us)'"
      echo "set logscale y"
      echo "set xrange [0:*]"
      (IFS=,; echo "plot ${plots[*]}")
    } >>"$script"
    ;;
  lines)
    [ $# -ge 3 ] || die "lines: usage: plot.sh lines OUT.png TITLE XLABEL YLABEL LABEL=points.dat ..."
    xlabel=$1 ylabel=$2
    shift 2
    plots=()
    for run in "$@"; do
      case "$run" in *=*) ;; *) die "lines: '$run' is not LABEL=points.dat" ;; esac
      [ -r "${run#*=}" ] || die "lines: cannot read ${run#*=}"
      plots+=("$(quote "${run#*=}") using 1:2 with linespoints lw 2 pt 7 title $(quote "${run%%=*}")")
    done
    {
      echo "set title $(quote "$title")"
      echo "set xlabel $(quote "$xlabel")"
      echo "set ylabel $(quote "$ylabel")"
      echo "set yrange [0:*]"
      (IFS=,; echo "plot ${plots[*]}")
    } >>"$script"
    ;;
  bars)
    [ $# -eq 2 ] || die "bars: usage: plot.sh bars OUT.png TITLE YLABEL values.dat"
    ylabel=$1 file=$2
    [ -r "$file" ] || die "bars: cannot read $file"
    {
      echo "set title $(quote "$title")"
      echo "set ylabel $(quote "$ylabel")"
      echo "set style fill solid 0.7 border -1"
      echo "set boxwidth 0.7"
      echo "set yrange [0:*]"
      echo "set xtics rotate by -30"
      echo "unset key"
      echo "plot $(quote "$file") using 0:2:xtic(1) with boxes lc rgb '#4080c0', '' using 0:2:(sprintf('%.0f', \$2)) with labels offset 0,0.7"
    } >>"$script"
    ;;
  groups)
    [ $# -gt 0 ] || die "groups: usage: plot.sh groups OUT.png TITLE YLABEL=values.dat [YLABEL=values.dat ...]"
    colours=() # a column's colour is its name's: the same name has the same colour in every panel
    {
      echo "set multiplot layout $#,1 title $(quote "$title")"
      echo "set style data histogram"
      echo "set style histogram clustered gap 1"
      echo "set style fill solid 0.8 border -1"
      echo "set yrange [0:*]"
      echo "set offsets 0, 0, graph 0.12, 0"
      echo "set key autotitle columnhead"  # every file's first row names its columns (and is not a group)
      # A bar's label: whole numbers from 100 up, else three significant digits.
      echo "fmt(v) = v >= 100 ? sprintf('%.0f', v) : sprintf('%.3g', v)"
      for panel in "$@"; do
        case "$panel" in *=*) ;; *) die "groups: '$panel' is not YLABEL=values.dat" ;; esac
        file=${panel#*=}
        [ -r "$file" ] || die "groups: cannot read $file"
        # The names of the columns after the group's (gnuplot reads a quoted name as one column).
        mapfile -t names < <(python3 -c 'import shlex, sys; print(*shlex.split(open(sys.argv[1]).readline())[1:], sep="\n")' "$file")
        n=${#names[@]}
        [ "$n" -gt 0 ] || die "groups: $file names no columns after the group's"
        f=$(quote "$file")
        plots=()
        for i in $(seq 0 $((n - 1))); do
          c=0
          while [ "$c" -lt ${#colours[@]} ] && [ "${colours[$c]}" != "${names[$i]}" ]; do c=$((c + 1)); done
          [ "$c" -lt ${#colours[@]} ] || colours+=("${names[$i]}")
          # Bar i of group g is centred at g + (i - (n-1)/2) / (n + 1) (n bars and a gap of one bar).
          plots+=("$f using $((i + 2)):xtic(1) lc $((c + 1))")
          plots+=("$f using (\$0 + ($i - ($n - 1) / 2.0) / ($n + 1.0)):$((i + 2)):(fmt(column($((i + 2))))) with labels offset 0,0.7 font ',9' notitle")
        done
        echo "set ylabel $(quote "${panel%%=*}")"
        (IFS=,; echo "plot ${plots[*]}")
      done
      echo "unset multiplot"
    } >>"$script"
    ;;
  *) die "unknown plot kind '$kind' (series, curve, lines, bars or groups)" ;;
esac

gnuplot "$script" || die "gnuplot failed on $out"
echo "plot.sh: wrote $out"

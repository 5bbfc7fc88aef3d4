#!/usr/bin/env bash
# Builds why-timely once (release) and runs every mode on the same generated input, printing the
# median throughput and the peak RSS of each whole process.
#
#   ./run.sh                      # 4M events, 1M items, 60 s windows, 10k-event epochs, 1 worker
#   RUNS=5 ./run.sh --events 8000000 --workers 2     # extra flags go to every run
#
# Needs GNU time on PATH (Debian: apt-get install time) for "Maximum resident set size".
set -euo pipefail
cd "$(dirname "$0")"

RUNS=${RUNS:-3}
MODES=${MODES:-"gen timely-count timely-topk dd-count-total dd-count dd-topk"}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
BIN="$CARGO_TARGET_DIR/release/why-timely"
TIME=$(type -P time || true)    # the GNU time binary, not the shell keyword

cargo build --release --quiet
[ -n "$TIME" ] && "$TIME" -v true 2>/dev/null || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }

echo "# machine: $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p'); $(free -g | awk '/^Mem:/{print $2}') GiB"
echo "# $(rustc --version); timely $(sed -n '/^name = "timely"$/{n;s/version = //p}' Cargo.lock | tr -d '"');" \
     "differential-dataflow $(sed -n '/^name = "differential-dataflow"$/{n;s/version = //p}' Cargo.lock | tr -d '"')"

# 1. Agreement: with nothing retired, each family's modes must report the same check.
echo "# check (--keep; 400k events unless flags say otherwise): count modes = sum of counts, top-K modes = hash of final lists"
for m in timely-count dd-count-total dd-count timely-topk dd-topk; do
  "$BIN" "$m" --events 400000 --keep "$@" | sed -n 's/.*mode=\([^ ]*\).*check=\([0-9]*\).*/  \1 \2/p'
done

# 2. Timing: RUNS rounds, each running every mode once (interleaved, so a change in the load of a
#    shared machine hits all modes alike). Per mode: median events/s over wall time, median
#    events per CPU-second (user + sys: less sensitive to other load), median peak RSS.
one() { # flags... -> "events_per_s rss_kib cpu_secs"
  local out err
  err=$(mktemp)
  out=$("$TIME" -v "$BIN" "$@" 2>"$err")
  local rss cpu
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$err")
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$err")
  rm -f "$err"
  echo "$(sed -n 's/.*events_per_s=\([0-9]*\).*/\1/p' <<<"$out") $rss $cpu"
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

declare -A RATE RSS CPU
EVENTS=$(sed -n 's/.* events=\([0-9]*\).*/\1/p' <<<"$("$BIN" gen "$@")")
for _ in $(seq "$RUNS"); do
  for state in retired kept; do
    for m in $MODES; do
      [ "$m" = gen ] && [ "$state" = kept ] && continue     # gen holds no state
      flags=(); [ "$state" = kept ] && flags=(--keep)
      read -r rate rss cpu < <(one "$m" "${flags[@]}" "$@")
      RATE[$m/$state]+="$rate "; RSS[$m/$state]+="$rss "; CPU[$m/$state]+="$cpu "
    done
  done
done

echo "# $EVENTS events per run, $RUNS runs per row; medians"
printf '%-16s %-8s %12s %14s %13s   %s\n' mode state "events/s" "events/CPU-s" "peak RSS MiB" "(events/s of each run)"
for state in retired kept; do
  for m in $MODES; do
    [ -n "${RATE[$m/$state]:-}" ] || continue
    cpu=$(tr ' ' '\n' <<<"${CPU[$m/$state]}" | grep . | median)
    printf '%-16s %-8s %12s %14s %13s   %s\n' "$m" "$state" \
      "$(tr ' ' '\n' <<<"${RATE[$m/$state]}" | grep . | median)" \
      "$(awk -v e="$EVENTS" -v c="$cpu" 'BEGIN {if (c > 0) printf "%.0f", e / c; else print "n/a"}')" \
      "$(( $(tr ' ' '\n' <<<"${RSS[$m/$state]}" | grep . | median) / 1024 ))" \
      "${RATE[$m/$state]}"
  done
done

#!/bin/bash
# Interleaved A/B of two ddscope builds on the same inputs (a refactor must not cost time):
#   bench/ab_builds.sh OLD_BIN NEW_BIN LAB_42S_RUN TRACED_RUN [REPEATS]
# LAB_42S_RUN: `ddscope lab run examples/lab/simple-robotic.toml --duration 42s --out DIR`;
# TRACED_RUN: `ddscope lab run bench/explain-bench.toml --tracing jazzy --out DIR`.
# Prints the median wall and CPU seconds and the peak RSS per command and build.
set -e
OLD=${1:?old binary}; NEW=${2:?new binary}; LAB=${3:?42 s lab run}; TRACED=${4:?traced lab run}; N=${5:-5}
ERR=$(mktemp); OUT=$(mktemp -d)
for i in $(seq $N); do
 for b in OLD NEW; do bin=${!b}
  /usr/bin/time -f "$b lat42-rows %e %U %S %M" $bin latency $LAB --level both --format parquet -o $OUT/$b.parquet >/dev/null 2>>$ERR
  /usr/bin/time -f "$b traced %e %U %S %M" $bin latency $TRACED >/dev/null 2>>$ERR
  /usr/bin/time -f "$b flows %e %U %S %M" $bin flows $TRACED/pc1.pcapng $TRACED/pc2.pcapng --all --format csv -o $OUT/$b.csv >/dev/null 2>>$ERR
  /usr/bin/time -f "$b topics %e %U %S %M" $bin topics $LAB/pc1.pcapng >/dev/null 2>>$ERR
 done
done
grep -E "^(OLD|NEW) " "$ERR" | python3 -c "
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in sys.stdin:
    b, k, e, u, s, m = l.split()
    d[(k, b)].append((float(e), float(u) + float(s), int(m)))
for key in sorted(d):
    v = d[key]
    print(*key, 'wall median %.2f s' % st.median(x[0] for x in v), 'cpu median %.2f s' % st.median(x[1] for x in v), 'peak RSS %d MB' % (max(x[2] for x in v) // 1024))
"
cmp "$OUT/OLD.parquet" "$OUT/NEW.parquet" && cmp "$OUT/OLD.csv" "$OUT/NEW.csv" && echo "rows identical (latency parquet, flows csv)"
rm -rf "$ERR" "$OUT"

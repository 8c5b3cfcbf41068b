#!/usr/bin/env bash
# Wavefronts per LDS.128 of chosen lane patterns, ncu against the bank model (on the GPU, from
# the repository root): bash matviz/bench/ncu_lds_patterns.sh; the table goes to stdout.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
NCU=${NCU:-$(command -v ncu || ls -1 /usr/local/cuda*/bin/ncu 2>/dev/null | tail -n 1)}
[ -x "$NCU" ] || { echo "ncu_lds_patterns: ncu not found (set NCU=/path/to/ncu)" >&2; exit 2; }
csv=$(mktemp --suffix=.csv)
"$NCU" --clock-control none --kernel-name lds_pattern --csv --metrics \
  "$(python3 -m matviz.bench.ncu_banks metrics)" \
  python3 -m matviz.bench.ncu_lds_patterns launch >"$csv" || exit 2
python3 -m matviz.bench.ncu_lds_patterns compare "$csv"

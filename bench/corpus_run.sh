#!/usr/bin/env bash
# trainlint over every .py file of the installed torch, transformers, peft, trl and accelerate packages:
# cold (empty cache) and warm (unchanged files, cache hits) wall time, files/s, and peak memory
# (/usr/bin/time -v: the largest resident set of trainlint and its worker processes).
# Usage: bench/corpus_run.sh [PYTHON]   (default: .venv/bin/python)
set -euo pipefail
py=$(cd "$(dirname "${1:-.venv/bin/python}")" && pwd)/$(basename "${1:-.venv/bin/python}")
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
roots=()
for p in torch transformers peft trl accelerate; do [ -d "$site/$p" ] && roots+=("$site/$p"); done
files=$(find "${roots[@]}" -name '*.py' | wc -l)
work=$(mktemp -d)
cd "$work"                                    # the cache goes to $work/.trainlint_cache
echo "corpus: $files .py files in ${roots[*]##*/}; $(nproc) CPUs; $("$py" -m trainlint --version)"
for run in cold warm; do
  /usr/bin/time -v -o "$work/time.txt" "$py" -m trainlint check --exit-zero --quiet --statistics "${roots[@]}" > "$work/$run.out"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
  secs=$(echo "$wall" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  printf '%-5s wall %8.1f s   %7.0f files/s   max RSS %6.0f MB   findings: %s\n' "$run" "$secs" \
    "$(echo "$files / $secs" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$(awk '{s+=$1} END {print s+0}' "$work/$run.out")"
done
rm -rf "$work"

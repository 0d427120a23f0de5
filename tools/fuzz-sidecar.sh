#!/usr/bin/env bash
# Fuzzes the LMDB sidecar decoder (provenance/lmdb_sidecar*.cc) with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Usage: tools/fuzz-sidecar.sh [--seconds N] [--runs N] [--seed S] [--out DIR]
#   --seconds N  stop after N seconds (default 300)
#   --runs N     stop after N inputs instead: the exactly reproducible mode
#   --seed S     libFuzzer's random seed (default 1)
#   --out DIR    build and work directory (default build-fuzz)
#
# Reproducibility: the seed corpus comes from a deterministic generator
# (tests/fuzz/make_seeds.cc), the working corpus starts empty on every run, and
# one process mutates with a fixed -seed, so the same --seed replays the same
# sequence of inputs. A --seconds run is a prefix of that sequence whose length
# depends on the machine's speed; --runs N fixes the length too.
#
# The fuzz build compiles the few sources it needs directly with clang++ rather
# than through meson: the meson build uses g++ (libFuzzer and its sanitizer
# runtime are clang's), and a second meson build directory with a different
# compiler and sanitizer flags for every target would be heavier than the few
# files this needs.
#
# Exit status: 0 when the run ends without a finding; otherwise libFuzzer's
# status, with the crashing input kept in DIR/crashes/ (rerun it with the
# command printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=300
runs=""
seed=1
out=build-fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "fuzz-sidecar.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Packages: clang 14 and its compiler-rt (libFuzzer, sanitizers), the two
# libraries the decoder uses. Installed only when missing.
packages=(clang-14 libclang-rt-14-dev libxxhash-dev libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz-sidecar.sh: missing packages ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "fuzz-sidecar.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cxx=clang++-14

mkdir -p "$out"
srcs=(provenance/lmdb_sidecar*.cc common/status.cc)
common_flags=(-std=c++20 -I. -g -O1 -Wall -Wextra)
echo "fuzz-sidecar.sh: building $out/sidecar_fuzz and $out/make_seeds"
"$cxx" "${common_flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  tests/fuzz/sidecar_fuzz.cc "${srcs[@]}" -lxxhash -lzstd -o "$out/sidecar_fuzz"
"$cxx" "${common_flags[@]}" tests/fuzz/make_seeds.cc "${srcs[@]}" -lxxhash -lzstd -o "$out/make_seeds"

rm -rf "$out/seeds" "$out/corpus"
mkdir -p "$out/seeds" "$out/corpus" "$out/crashes"
"$out/make_seeds" "$out/seeds"
echo "fuzz-sidecar.sh: $(ls "$out/seeds" | wc -l) seeds in $out/seeds"

limit=(-max_total_time="$seconds")
[ -n "$runs" ] && limit=(-runs="$runs")
cmd=("$out/sidecar_fuzz" -seed="$seed" "${limit[@]}" -max_len=8192 -rss_limit_mb=2048 -timeout=10
     -print_final_stats=1 -artifact_prefix="$out/crashes/" "$out/corpus" "$out/seeds")
echo "fuzz-sidecar.sh: ${cmd[*]}"
log="$out/fuzz.log"
set +e
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=abort_on_error=0 "${cmd[@]}" 2>&1 | tee "$log" |
  grep -E '^(#[0-9]+[[:space:]]+(INITED|pulse|DONE)|==|SUMMARY|stat::|Done |.*runtime error|sidecar_fuzz:|Test unit written|artifact_prefix)' || true
status=${PIPESTATUS[0]}
set -e

done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 | tr '\t' ' ' || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
echo "fuzz-sidecar.sh: executions ${execs:-?}; last status: ${done_line:-none}; corpus $(ls "$out/corpus" | wc -l) inputs"
if [ "$status" -ne 0 ]; then
  echo "fuzz-sidecar.sh: FAILED (libFuzzer exit $status); findings in $out/crashes/:" >&2
  ls -l "$out/crashes/" >&2
  echo "fuzz-sidecar.sh: reproduce with: $out/sidecar_fuzz $out/crashes/<file>" >&2
  exit "$status"
fi
if [ -n "$runs" ]; then budget="$runs runs"; else budget="$seconds s"; fi
echo "fuzz-sidecar.sh: no crash in $budget (seed $seed)"

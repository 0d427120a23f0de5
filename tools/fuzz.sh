#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of tests/fuzz/ (docs/fuzzing.md) with
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Usage: tools/fuzz.sh TARGET|all|list [--seconds N] [--runs N] [--seed S] [--out DIR] [--jobs N]
#   TARGET       one of `tools/fuzz.sh list` (tests/fuzz/TARGET_fuzz.cc); all: each in turn
#   --seconds N  stop each target after N seconds (default 300)
#   --runs N     stop after N inputs instead: the exactly reproducible mode
#   --seed S     libFuzzer's random seed (default 1)
#   --out DIR    build and work directory (default build-fuzz)
#   --jobs N     parallel compile jobs (default: ninja's)
#
# Reproducibility: each target writes its own seed corpus from code
# (fuzz::seeds(), DLFS_FUZZ_WRITE_SEEDS), the working corpus starts empty on
# every run, and one process mutates with a fixed -seed, so the same --seed
# replays the same sequence of inputs. A --seconds run is a prefix of that
# sequence whose length depends on the machine's speed; --runs N fixes it.
#
# The build is a second meson build directory configured with clang (libFuzzer
# and its sanitizer runtimes are clang's; the main build uses g++), ASan,
# UBSan and -fsanitize=fuzzer-no-link on every source, and -Dfuzz=true, which
# makes tests/fuzz/meson.build link each target with libFuzzer's main. Only the
# targets asked for and the libraries they use are compiled.
#
# Exit status: 0 when every run ends without a finding; otherwise 1, with the
# crashing input kept in DIR/crashes/TARGET/ (rerun it with the command printed
# at the end; the ordinary build's DIR/tests/fuzz/TARGET_fuzz replays it too).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,27p' "$0"; }
targets_available() { ls tests/fuzz/*_fuzz.cc | sed 's|.*/||; s|_fuzz\.cc$||'; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
what=$1; shift
seconds=300
runs=""
seed=1
out=build-fuzz
jobs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --jobs) jobs=(-j "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$what" in
  -h|--help) usage; exit 0 ;;
  list) targets_available; exit 0 ;;
  all) mapfile -t targets < <(targets_available) ;;
  *)
    targets_available | grep -qx -- "$what" ||
      { echo "fuzz.sh: no fuzz target '$what' (available: $(targets_available | tr '\n' ' '))" >&2; exit 2; }
    targets=("$what") ;;
esac

# Packages: clang 14 and its compiler-rt (libFuzzer, sanitizers); the
# libraries come from tools/install-deps.sh. Installed only when missing.
packages=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz.sh: missing packages ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "fuzz.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$out/build.ninja" ]; then
  echo "fuzz.sh: configuring $out (clang, ASan, UBSan, libFuzzer)"
  CXX=clang++-14 meson setup "$out" -Dfuzz=true --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=all' \
    -Dcpp_link_args='-fno-sanitize-recover=all' >"$out.setup.log" 2>&1 ||
    { cat "$out.setup.log" >&2; echo "fuzz.sh: meson setup failed" >&2; exit 1; }
  rm -f "$out.setup.log"
fi

# fuzz_one TARGET: builds it, writes its seeds, runs it; returns libFuzzer's status.
fuzz_one() {
  local t=$1 bin="$out/tests/fuzz/$1_fuzz"
  echo "fuzz.sh: building $bin"
  ninja -C "$out" "${jobs[@]}" "tests/fuzz/${t}_fuzz" >/dev/null || { echo "fuzz.sh: $t: build failed" >&2; return 1; }
  local seeds="$out/seeds/$t" corpus="$out/corpus/$t" crashes="$out/crashes/$t/" log="$out/logs/$t.log"
  rm -rf "$seeds" "$corpus"
  mkdir -p "$seeds" "$corpus" "$crashes" "$out/logs"
  DLFS_FUZZ_WRITE_SEEDS="$seeds" "$bin" >"$out/logs/$t.seeds.log" 2>&1 ||
    { cat "$out/logs/$t.seeds.log" >&2; echo "fuzz.sh: $t: cannot write its seeds" >&2; return 1; }
  echo "fuzz.sh: $t: $(ls "$seeds" | wc -l) seeds in $seeds"

  local limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  local cmd=("$bin" -seed="$seed" "${limit[@]}" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1
             -artifact_prefix="$crashes" "$corpus" "$seeds")
  echo "fuzz.sh: ${cmd[*]}"
  local status
  set +e
  # No `|| true` after the pipeline: PIPESTATUS would then be true's.
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=abort_on_error=0 "${cmd[@]}" 2>&1 | tee "$log" |
    grep -E "^(#[0-9]+[[:space:]]+(INITED|pulse|DONE)|==|SUMMARY|stat::|Done |.*runtime error|${t}_fuzz:|Test unit written|artifact_prefix)"
  status=${PIPESTATUS[0]}
  set -e

  local last execs
  last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 | tr '\t' ' ' || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz.sh: $t: executions ${execs:-?}; last status: ${last:-none}; corpus $(ls "$corpus" | wc -l) inputs"
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: $t: FAILED (libFuzzer exit $status); findings in $crashes:" >&2
    ls -l "$crashes" >&2
    echo "fuzz.sh: reproduce with: $bin $crashes<file>" >&2
    return 1
  fi
  local budget="$seconds s"
  [ -n "$runs" ] && budget="$runs runs"
  echo "fuzz.sh: $t: no crash in $budget (seed $seed)"
}

failed=()
for t in "${targets[@]}"; do
  fuzz_one "$t" || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings or failures in: ${failed[*]}" >&2
  exit 1
fi
[ ${#targets[@]} -gt 1 ] && echo "fuzz.sh: all ${#targets[@]} targets ran without a finding"
exit 0

#!/usr/bin/env bash
# Runs one libFuzzer target for a while on a scratch copy of its seeds, and says what it found.
#
#   run_fuzzer.sh BINARY NAME FUZZ_SRC BUILD_DIR SECONDS [libFuzzer args...]
#
# FUZZ_SRC is tests/fuzz (seeds in corpus/NAME/, dictionary NAME.dict if present); BUILD_DIR the
# fuzz build. The corpus grows in BUILD_DIR/fuzz-corpus/NAME (copied afresh from the seeds each
# run, or kept with KF_FUZZ_RESUME=1), libFuzzer's log goes to BUILD_DIR/fuzz-logs/NAME.log, and a
# reproducer of anything found to BUILD_DIR/crashes/. Prints libFuzzer's final stats. Exit 0:
# nothing found; otherwise libFuzzer's exit code, with the reproducer named.
set -uo pipefail

if (($# < 5)); then
  echo "usage: $0 BINARY NAME FUZZ_SRC BUILD_DIR SECONDS [libFuzzer args...]" >&2
  exit 2
fi
bin="$1" name="$2" src="$3" build="$4" seconds="$5"
shift 5

corpus="$build/fuzz-corpus/$name"
crashes="$build/crashes"
log="$build/fuzz-logs/$name.log"
mkdir -p "$crashes" "$(dirname "$log")"
if [[ "${KF_FUZZ_RESUME:-0}" != 1 || ! -d "$corpus" ]]; then
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp "$src/corpus/$name"/* "$corpus"/
fi
args=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$crashes/$name-"
  # A unit slower than this is a hang (a finding); real inputs take milliseconds.
  -timeout=25 -rss_limit_mb=2048)
[[ -f "$src/$name.dict" ]] && args+=(-dict="$src/$name.dict")

# Sanitizer reports end the run (libFuzzer writes the input out first).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

marker="$(mktemp)"
trap 'rm -f "$marker"' EXIT
echo "fuzz $name: ${seconds}s on $(ls "$corpus" | wc -l) inputs; log $log"
"$bin" "${args[@]}" "$@" "$corpus" >"$log" 2>&1
rc=$?
# The last status line (#N DONE cov: ... ft: ... corp: ... exec/s: ...) and the final stats.
grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1
grep -E '^stat::' "$log"
if ((rc != 0)); then
  echo "fuzz $name: libFuzzer exited $rc; the end of its log:"
  tail -n 60 "$log"
  found=$(find "$crashes" -maxdepth 1 -type f -name "$name-*" -newer "$marker" | sort)
  if [[ -n "$found" ]]; then
    while read -r f; do
      echo "fuzz $name: FOUND a problem; reproducer: $f (rerun: $bin $f)"
    done <<<"$found"
  else
    echo "fuzz $name: FAILED with no reproducer written (see $log)"
  fi
  exit "$rc"
fi
echo "fuzz $name: nothing found"

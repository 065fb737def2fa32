#!/usr/bin/env bash
# Bad command lines get exit 2 and a message naming the flag, before anything starts.
#   cli_bad_input_test.sh KFRUN KFBENCH
set -uo pipefail
KFRUN="$1"
KFBENCH="$2"
fail=0

expect() {  # expect WANT_EXIT SUBSTRING -- COMMAND...
  local want="$1" text="$2"
  shift 3
  local out code
  out="$(timeout 20 "$@" 2>&1)"
  code=$?
  if [[ $code -ne $want || "$out" != *"$text"* ]]; then
    echo "FAIL: $* -> exit $code, want $want with '$text'; got: $out"
    fail=1
  else
    echo "ok: $* -> $code: ${out%%$'\n'*}"
  fi
}

expect 2 "-b 64M is larger than -e 1K" -- "$KFBENCH" allreduce -b 64M -e 1K
expect 2 "too large" -- "$KFBENCH" allreduce -b 20000000000G
expect 2 "-f 1: the factor" -- "$KFBENCH" allreduce -f 1
expect 2 "-duration nope: 'nope' is not a duration" -- "$KFBENCH" soak -duration nope
expect 2 "-duration -5s: must not be negative" -- "$KFBENCH" soak -duration -5s
expect 2 "-f -2: the factor" -- "$KFBENCH" allreduce -f -2
expect 2 "-f nan: the factor" -- "$KFBENCH" allreduce -f nan
expect 2 "--n: Value -1 not in range" -- "$KFBENCH" allreduce -n -1
expect 2 "-timeout -5s" -- "$KFBENCH" allreduce -timeout -5s
expect 2 "-r 3: the root must be a rank" -- "$KFBENCH" broadcast -r 3
expect 2 "-d half3: unknown dtype" -- "$KFBENCH" allreduce -d half3
expect 0 "" -- "$KFBENCH" allreduce -b 8 -e 64 -n 2 -w 1

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
expect 2 "-logdir /proc/nope: cannot write there" -- "$KFRUN" -q -logdir /proc/nope /bin/true
expect 2 "'garbage' is not an IPv4 address" -- "$KFRUN" -q -H garbage /bin/true
expect 2 "unknown flag --bogus" -- "$KFRUN" -q -bogus /bin/true
expect 2 "worker command nosuchprog: not found on PATH" -- "$KFRUN" -q nosuchprog
expect 2 "worker command ./nothere: No such file" -- "$KFRUN" -q ./nothere
expect 2 "-timeout -5s" -- "$KFRUN" -q -timeout -5s /bin/true
expect 2 "-runner-port 38080 is inside -port-range" -- "$KFRUN" -q -runner-port 38080 -port-range 38078-38090 /bin/true
expect 2 "-ssh-port 99999: expected a port" -- "$KFRUN" -q -ssh -ssh-port 99999 /bin/true
expect 2 "-ssh, -ssh-child and -ssh-check exclude each other" -- "$KFRUN" -q -ssh -ssh-check /bin/true
expect 2 "KUNGFU_SECRET: its value holds a newline" -- env KUNGFU_SECRET="$(printf 'a\nb')" "$KFRUN" -q -ssh -H 127.0.0.1:1 /bin/true
expect 0 "" -- "$KFRUN" -q -np 4 -port-range 38078-38090 /bin/true
expect 0 "" -- "$KFRUN" -q -logdir "$dir/logs" /bin/true
exit $fail

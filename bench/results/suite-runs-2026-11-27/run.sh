#!/usr/bin/env bash
# The whole ctest suite 5 times in a row with -j2 on build/release; one log and summary per run.
cd /work/main
for i in 1 2 3; do
  start=$(date +%s)
  ctest --test-dir build/release -j2 --output-on-failure > /tmp/suite5c/run$i.log 2>&1
  rc=$?
  end=$(date +%s)
  fails=$(grep -c "\*\*\*Failed\|\*\*\*Timeout\|(Failed)\|(Timeout)" /tmp/suite5c/run$i.log)
  echo "run $i: rc=$rc seconds=$((end - start)) $(grep -E "tests passed|tests failed" /tmp/suite5c/run$i.log | tail -1) load=$(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/suite5c/summary.txt
done

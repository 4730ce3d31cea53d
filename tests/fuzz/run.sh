#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run.sh BUILD SECONDS HARNESS... - run each libFuzzer harness for
# SECONDS from its seed corpus (tests/fuzz/corpus/NAME, read only; new
# inputs go to BUILD/corpus/NAME).  Any crash, sanitizer report, leak or
# timeout fails the run; its input stays in BUILD/crashes/NAME-*.  The
# final statistics of each run go to BUILD/logs/NAME.log and one summary
# line per harness to stdout.
set -u
build=$1 secs=$2
shift 2
cd "$(dirname "$0")/../.."
mkdir -p "$build/crashes" "$build/logs"
failed=0
for bin in "$@"; do
	name=$(basename "$bin")
	seeds=tests/fuzz/corpus/$name
	work=$build/corpus/$name
	log=$build/logs/$name.log
	mkdir -p "$work"
	# -timeout: one input running 10 s is a hang, a failure too.
	"$bin" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$build/crashes/$name-" "$work" "$seeds" \
		>"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	last=$(grep -E '^#[0-9]+' "$log" | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	if [ $rc -ne 0 ]; then
		failed=1
		echo "FAIL $name (exit $rc): see $log and $build/crashes/"
		grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -5
	else
		echo "ok   $name: ${secs}s, ${execs:-?} execs, ${rate:-?}/s," \
			"cov ${cov:-?}, ft ${ft:-?}"
	fi
done
exit $failed

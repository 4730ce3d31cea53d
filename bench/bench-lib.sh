# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# bench/bench-lib.sh - what the benchmark scripts share: logging and
# warnings, the record of the commands run, the noise probe, the RES rows
# of a pass, the statistics of the report (an awk library), the lines
# that describe the machine, and where a run's report goes: its section
# of the day's file under bench/results/ and its part of the summary,
# BENCHMARKS.md.  Sourced by bench/bench.sh, bench/bench-tcp.sh and
# bench/bench-rdma.sh; they set ROOT (the repository) and OUT (this run's
# directory, with raw/ in it) before calling anything here.

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
# A warning also goes into the report.
warn() { log "WARNING: $*"; echo "$*" >>"$OUT/raw/warnings.txt"; }

# note_command LINE: LINE into raw/commands.txt, once.
note_command() {
	grep -qxF -- "$1" "$OUT/raw/commands.txt" 2>/dev/null ||
		echo "$1" >>"$OUT/raw/commands.txt"
}

# waitrun OUT CMD...: CMD with its output to OUT, in the background while
# this shell waits: a trapped signal interrupts `wait` at once (not so a
# foreground command), and the cleanup then stops CMD too (FG_PID).
FG_PID=
waitrun() {
	local out=$1 rc
	shift
	"$@" >"$out" 2>&1 &
	FG_PID=$!
	wait "$FG_PID"
	rc=$?
	FG_PID=
	return $rc
}

# probe TAG [PID]: other tenants' load - the share of the CPUs busy or
# stolen during 1 s while the benchmark is idle, the load average (RES
# lines to raw/probe.res) and the top consumers (raw/load.txt), PID marked
# as this benchmark's xferd.  %CPU is over each process's lifetime; the
# benchmark's xferd only ran while measured, and sleeps during the probe.
probe() {
	local tag=$1 mark=${2:-} a b
	a=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6, $9}' /proc/stat)
	sleep 1
	b=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6, $9}' /proc/stat)
	awk -v a="$a" -v b="$b" -v t="$tag" -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		split(a, x, " "); split(b, y, " ");
		busy = y[1] - x[1]; idle = y[2] - x[2]; st = y[3] - x[3];
		tot = busy + idle + st; if (tot <= 0) tot = 1;
		printf "RES probe %s noise busy_pct %.0f %%\n", t, 100 * busy / tot;
		printf "RES probe %s noise steal_pct %.0f %%\n", t, 100 * st / tot;
		printf "RES probe %s noise loadavg1 %s load\n", t, l }' >>"$OUT/raw/probe.res"
	{ echo "=== $tag $(date -Is) loadavg: $(cat /proc/loadavg)"
	  ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6 |
		awk -v d="$mark" 'd != "" && $1 == d { $0 = $0 "   (this benchmark'"'"'s xferd)" } 1'; } >>"$OUT/raw/load.txt"
}

# ucx_results PASS TLS TEST SIZE CLOG RC METRIC...: ucx_perftest's
# "Final:" line in CLOG as RES lines "ucx TLS/TEST <size> METRIC value
# unit" in raw/passN.res, for each METRIC of lat_p50 lat_avg lat_overall
# (us) bw_avg bw_overall ("MB/s", which are MiB/s) rate_avg rate_overall
# (msg/s).  A warning and 1 if the client failed (RC) or printed none.
ucx_results() {
	local pass=$1 tls=$2 test=$3 size=$4 clog=$5 rc=$6
	shift 6
	if [ "$rc" -ne 0 ] || ! grep -q '^Final:' "$clog"; then
		warn "pass $pass: ucx_perftest $test $size failed (rc $rc): $(grep -m1 ERROR "$clog")"
		return 1
	fi
	# Final: iters lat_p50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall
	awk -v x="$tls" -v t="$test" -v s="$size" -v want="$*" '/^Final:/ {
		lbl = s >= 1048576 ? s / 1048576 "MiB" : s >= 1024 ? s / 1024 "KiB" : s "B"
		n = split("lat_p50 lat_avg lat_overall bw_avg bw_overall rate_avg rate_overall", name, " ")
		split("us us us MiB/s MiB/s msg/s msg/s", unit, " ")
		for (i = 1; i <= n; i++) { col[name[i]] = i + 2; u[name[i]] = unit[i] }
		m = split(want, w, " ")
		for (i = 1; i <= m; i++)
			printf "RES ucx %s/%s %s %s %s %s\n", x, t, lbl, w[i], $(col[w[i]]), u[w[i]] }' \
		"$clog" >>"$OUT/raw/pass$pass.res"
}

# res_rows PASS FILE...: the RES lines of FILE as rows of all.tsv: "pass
# bench variant param metric value unit".
res_rows() {
	local pass=$1
	shift
	awk -v p="$pass" '$1 == "RES" { print p, $2, $3, $4, $5, $6, $7 }' "$@" 2>/dev/null
}

# warnings_md: the run's warnings as a list for the report, if any.
warnings_md() {
	[ -s "$OUT/raw/warnings.txt" ] || return 0
	echo "**Problems in this run** (numbers may be missing):"
	echo
	sed 's/^/* /' "$OUT/raw/warnings.txt"
	echo
}

# BENCH_AWK: an awk library for the report's tables, to put before the
# report's own END rule.  It reads all.tsv into V[pass, "bench|variant|
# param|metric"] = value and needs P (the number of passes).  A cell is
# "median (min–max)" across the passes (pass 0: measured once); a ratio is
# taken within each pass, then the same.  Options (-v NAME=1):
#   fmt_int    whole numbers without decimals
#   fmt_tiny   below 0.01: two significant digits, not "0.00x"
#   lbl_bytes  a size without a unit is "<n>B" (as xferbench names it)
# shellcheck disable=SC2016,SC2034 # awk's $ fields; used by the sourcing scripts
BENCH_AWK='
function fmt(x,   a) {
	a = x < 0 ? -x : x
	if (fmt_int && x == int(x)) return sprintf("%d", x)
	if (a >= 100) return sprintf("%.0f", x)
	if (a >= 10) return sprintf("%.1f", x)
	if (a >= 1) return sprintf("%.2f", x)
	if (fmt_tiny && a < 0.01) return sprintf("%.2g", x)
	return sprintf("%.3f", x)
}
# "64K" -> "64KiB", as xferbench names sizes.
function lbl(s) {
	if (sub(/K$/, "KiB", s) || sub(/M$/, "MiB", s) || sub(/G$/, "GiB", s)) return s
	return lbl_bytes ? s "B" : s
}
# Sorts a[1..n]; sets lo, hi; returns the median.
function med(a, n,   i, j, v) {
	for (i = 2; i <= n; i++) {
		v = a[i]; j = i - 1
		while (j >= 1 && a[j] > v) { a[j + 1] = a[j]; j-- }
		a[j + 1] = v
	}
	lo = a[1]; hi = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# The values of key k (scaled) across passes into a[1..n]; returns n.
function vals(k, scale, a,   p, n) {
	n = 0
	for (p = 0; p <= P; p++)
		if ((p SUBSEP k) in V) a[++n] = V[p, k] * scale
	return n
}
# "median (min–max)" of key k across passes; sets gmed ("" if none).
function cell(k, scale,   a, n, m) {
	gmed = ""
	n = vals(k, scale, a)
	if (!n) return "–"
	m = med(a, n); gmed = m
	return n == 1 ? fmt(m) : fmt(m) " (" fmt(lo) "–" fmt(hi) ")"
}
# The median of key k across passes, "" if none.
function medof(k, scale,   a, n) {
	n = vals(k, scale, a)
	return n ? med(a, n) : ""
}
# Per-pass ratio (ka * sa) / (kb * sb), then median (min–max); sets gmed.
function ratio(ka, sa, kb, sb,   a, p, n, m) {
	n = 0
	for (p = 1; p <= P; p++)
		if ((p SUBSEP ka) in V && (p SUBSEP kb) in V && V[p, kb] > 0)
			a[++n] = V[p, ka] * sa / (V[p, kb] * sb)
	gmed = ""
	if (!n) return "–"
	m = med(a, n); gmed = m
	return sprintf("%.2f×", m) (n == 1 ? "" : sprintf(" (%.2f–%.2f)", lo, hi))
}
function goal(ok) { return ok ? "**met**" : "**not met**" }
{ V[$1, $2 "|" $3 "|" $4 "|" $5] = $6 }
'

# --- xferctl's view ----------------------------------------------------------

# xferctl_paths STATUS_JSON: "path:ops,..." ("none"; "?" unreadable).
xferctl_paths() {
	jq -r '[.paths[]? | "\(.path):\(.ops)"] | join(",") | if . == "" then "none" else . end' "$1" 2>/dev/null || echo "?"
}

# xferctl_failed STATUS_JSON: ops_failed ("?" unreadable).
xferctl_failed() { jq -r '.ops_failed // "?"' "$1" 2>/dev/null || echo "?"; }

# xferctl_table TSV: xferctl.tsv's rows ("pass node paths failed more")
# as the rows of a markdown table.
xferctl_table() {
	awk -F'\t' '{ gsub(/\|/, "\\|", $5); printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$1"
}

# --- the machine -------------------------------------------------------------

# port_listening PORT: something listens on TCP PORT here (from /proc, so
# that machines without iproute2's ss, as the GPU machines, work too).
port_listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

cpu_model() { lscpu | sed -n 's/^Model name: *//p'; }
# machine_cpu: "MODEL (N CPUs online, HYPERVISOR guest)".
machine_cpu() {
	echo "$(cpu_model) ($(nproc) CPUs online, $(lscpu | sed -n 's/^Hypervisor vendor: *//p') guest)"
}
os_name() { (. /etc/os-release && echo "$PRETTY_NAME"); }
tree_version() { git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown; }
# ucx_version: "not available" unless HAVE_UCX is 1.
ucx_version() {
	if [ "$HAVE_UCX" = 1 ]; then ucx_info -v | head -1 | sed 's/^# *//'; else echo "not available"; fi
}
# xferd_version XFERD: its -V line and the tree it was built from.
xferd_version() { echo "$("$1" -V 2>&1 | head -1), tree $(tree_version)"; }

# --- the report ----------------------------------------------------------------

# Where a run's report goes.  The full report is a section of the day's
# file, bench/results/YYYY-MM-DD.md (UTC), which keeps every run of that
# day's benchmarks and what was written beside them by hand; a run the
# same day replaces its own section there.  BENCHMARKS.md is the summary,
# the latest result of each benchmark: each script replaces only its own
# part of it, between two marker comments.  BENCH_REPORT=FILE and
# BENCH_SUMMARY=FILE send them elsewhere; NO_REPORT=1 writes neither.
RESULTS_DIR="bench/results"
# results_file: the day's file (or BENCH_REPORT).
results_file() { echo "${BENCH_REPORT:-$ROOT/$RESULTS_DIR/$(date -u +%F).md}"; }
# summary_file: BENCHMARKS.md (or BENCH_SUMMARY).
summary_file() { echo "${BENCH_SUMMARY:-$ROOT/BENCHMARKS.md}"; }

# put_section HEADING SECTION REPORT: SECTION (a file that starts with
# HEADING) replaces the part of REPORT from HEADING to the next "## "
# heading or marker comment, or is appended to REPORT (created, with a
# title, if missing); the rest of REPORT stays as it is.
put_section() {
	local heading=$1 section=$2 report=$3 tmp
	tmp=$(mktemp)
	if [ -f "$report" ] && grep -qxF "$heading" "$report"; then
		awk -v h="$heading" -v f="$section" '
			$0 == h { while ((getline l < f) > 0) print l; skip = 1; next }
			skip && (/^## / || /^<!-- /) { skip = 0; print "" }
			!skip' "$report" >"$tmp"
	elif [ -f "$report" ]; then
		{ cat "$report"; echo; cat "$section"; } >"$tmp"
	else
		{ report_title "$report"; echo; cat "$section"; } >"$tmp"
	fi
	mkdir -p "$(dirname "$report")"
	cp "$tmp" "$report"
	rm -f "$tmp"
}

# report_title REPORT: the first line of a new results file.
report_title() {
	local day
	day=$(basename "$1" .md)
	case $day in
	[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]) echo "# xferd benchmarks: $day" ;;
	*) echo "# xferd benchmarks" ;;
	esac
}

# put_between MARK BLOCK REPORT: BLOCK (a file) replaces what stands
# between the lines "<!-- MARK: begin ... -->" and "<!-- MARK: end -->"
# of REPORT, or goes at its end between two such lines (REPORT created,
# with a title, if missing); the rest of REPORT stays as it is.
put_between() {
	local mark=$1 block=$2 report=$3 tmp
	local begin="<!-- $mark: begin" end="<!-- $mark: end -->"
	tmp=$(mktemp)
	if [ -f "$report" ] && grep -qF -- "$begin" "$report"; then
		awk -v b="$begin" -v e="$end" -v f="$block" '
			index($0, b) == 1 { print; while ((getline l < f) > 0) print l; skip = 1; next }
			skip && $0 == e { skip = 0 }
			!skip' "$report" >"$tmp"
	else
		{
			if [ -f "$report" ]; then cat "$report"; echo; else report_title "$report"; echo; fi
			echo "$begin (written by $(basename "$0"); what stands between these lines is replaced) -->"
			cat "$block"
			echo "$end"
		} >"$tmp"
	fi
	mkdir -p "$(dirname "$report")"
	cp "$tmp" "$report"
	rm -f "$tmp"
}

# put_summary MARK TITLE RUNFILE SECTION HEADING MACHINE COMMAND: the
# part MARK of the summary: TITLE, when and where the run was, its
# command, a link to RUNFILE, and the table under HEADING (a line of
# SECTION, up to the next heading).
put_summary() {
	local mark=$1 title=$2 runfile=$3 section=$4 heading=$5 machine=$6 cmd=$7
	local summary rel day
	summary=$(summary_file)
	rel=$(realpath --relative-to="$(dirname "$summary")" "$runfile" 2>/dev/null || echo "$runfile")
	day=$(basename "$runfile" .md)
	{
		echo "## $title"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $machine; \`$cmd\`. The full run: [$rel]($rel#$(anchor "$(head -n 1 "$section")"))."
		echo
		awk -v h="$heading" '
			$0 == h { on = 1; next }
			on && /^#/ { exit }
			on { l[++n] = $0 }
			END {	# without the blank lines around it
				for (s = 1; s <= n && l[s] == ""; s++) ;
				for (e = n; e >= s && l[e] == ""; e--) ;
				for (i = s; i <= e; i++) print l[i]
			}' "$section"
	} >"$OUT/summary.md"
	put_between "$mark" "$OUT/summary.md" "$summary"
	log "wrote its part of $summary ($day)"
}

# anchor HEADING: the fragment a Markdown renderer gives "## HEADING".
anchor() {
	echo "$1" | sed -e 's/^#* *//' | tr '[:upper:]' '[:lower:]' |
		sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

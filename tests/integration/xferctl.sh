#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# xferctl.sh - what xferctl prints, checked against a private xferd whose
# state the test knows exactly: idle; one client (xferctl_holder) holding a
# 1.5 MiB memfd region, a 768 KiB cma region and an import of the first,
# after one 768 KiB write; the client gone again.  Text and --json must
# tell the same facts and JSON must parse (jq).  Client names come from
# other processes: the holder runs under a name with a quote, a backslash
# and non-ASCII, and (with python3) a fake xferd passes on control
# characters and invalid UTF-8.  Also: the default socket rule, "not
# running" (no socket, stale socket), "did not answer", permission denied
# (as root, through setpriv) and usage errors (exit 2).  peers and ping on
# a daemon without peers (no TCP listener): "no peers", a ping that fails
# with a reason, and (with python3) xferd's own checks of a ping target.
# What real peers look like is for the multi-node tests.  rails on a host
# without RDMA devices: "no RDMA devices"; real rails are checked in the
# Soft-RoCE guest (tests/rdma/guest_rails.sh).
#
# Env (from tests/run-tests.sh): XFERCTL_BIN, XFERD_BIN, XFER_BUILD,
# XFERD_SOCKET (the shared xferd).  Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck disable=SC2016 # $names in single quotes are jq's variables

XFERCTL=${XFERCTL_BIN:-}
XFERD=${XFERD_BIN:-}
HOLDER=${XFER_BUILD:-}/tests/xferctl_holder
ALLOC=1572864          # the memfd region: "1.5 MiB"
HALF=$((ALLOC / 2))    # the cma region and the bytes moved: "768.0 KiB"
# Quote, backslash and non-ASCII: JSON must escape the first two and keep
# the third, the table must show it as is.
NAME='hold"er\x-ü'

skip() { echo "skip: $*"; exit 77; }
[ -n "$XFERCTL" ] && [ -x "$XFERCTL" ] || skip "XFERCTL_BIN not set (run through make check)"
[ -n "$XFERD" ] && [ -x "$XFERD" ] || skip "XFERD_BIN not set (run through make check)"
[ -x "$HOLDER" ] || skip "$HOLDER not built"
command -v jq >/dev/null || skip "jq not installed (make deps)"

TMP=$(mktemp -d /tmp/xferctl-test.XXXXXX)
SOCK=$TMP/xferd.sock
daemon_pid='' holder_pid='' fake_pid='' conf_pid='' names_pid=''

cleanup() {
	for p in $holder_pid $fake_pid $conf_pid $names_pid $daemon_pid; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	echo "--- last xferctl stdout:"; printf '%s\n' "${out-}"
	echo "--- last xferctl stderr:"; printf '%s\n' "${err-}"
	if [ -f "$TMP/xferd.log" ]; then
		echo "--- private xferd log (tail):"; tail -n 20 "$TMP/xferd.log"
	fi
	exit 1
}

# run CMD...: sets out, err, rc.
run() {
	out=$("$@" 2>"$TMP/stderr")
	rc=$?
	err=$(cat "$TMP/stderr")
}
ctl() { run "$XFERCTL" -s "$SOCK" "$@"; }

expect_rc() { [ "$rc" -eq "$1" ] || fail "$2: exit $rc, want $1"; }
# A line of $out matching an extended regex.
expect_out() { grep -Eq -- "$1" <<<"$out" || fail "$2: no line /$1/"; }
expect_err() { grep -Eq -- "$1" <<<"$err" || fail "$2: stderr lacks /$1/"; }
# $out is exactly one JSON value and jq expression $1 (with args) holds.
expect_json() {
	local expr=$1 what=$2
	shift 2
	[ "$(jq -s length <<<"$out" 2>/dev/null)" = 1 ] ||
		fail "$what: not one JSON value"
	jq -e "$@" "$expr" >/dev/null <<<"$out" || fail "$what: $expr"
}
# A text table as tab-separated cells: columns are 2+ spaces apart.
cells() { sed -E 's/^ +//; s/ {2,}/\t/g' <<<"$out"; }

# --- usage ----------------------------------------------------------------

run "$XFERCTL"
expect_rc 2 "no command"; expect_err '^usage: xferctl' "no command"
run "$XFERCTL" frobnicate
expect_rc 2 "unknown command"
expect_err "unknown command 'frobnicate'" "unknown command"
expect_err '^usage: xferctl' "unknown command"
run "$XFERCTL" --no-such-option status
expect_rc 2 "unknown option"; expect_err '^usage: xferctl' "unknown option"
run "$XFERCTL" status clients
expect_rc 2 "two commands"
run "$XFERCTL" status -s
expect_rc 2 "-s without its path"
[ -z "$out" ] || fail "usage errors print nothing on stdout"
run "$XFERCTL" ping
expect_rc 2 "ping without a peer"
expect_err '^xferctl: ping needs one PEER$' "ping without a peer"
expect_err '^usage: xferctl' "ping without a peer"
[ -z "$out" ] || fail "ping without a peer: nothing on stdout"
run "$XFERCTL" ping a b
expect_rc 2 "ping with two peers"
run "$XFERCTL" ping ''
expect_rc 2 "ping ''"; expect_err '^xferctl: empty PEER$' "ping ''"
run "$XFERCTL" ping "$(printf 'n%.0s' $(seq 81))"
expect_rc 2 "ping of 81 characters"
expect_err '^xferctl: PEER longer than 80 characters$' "ping of 81 characters"
run "$XFERCTL" ping $'no\tde'
expect_rc 2 "ping of a control character"
expect_err "^xferctl: PEER 'no\?de' is not printable" "ping of a control character"
run "$XFERCTL" peers nowhere
expect_rc 2 "peers with an argument"
expect_err "^xferctl: 'peers' takes no argument$" "peers with an argument"
run "$XFERCTL" --help
expect_rc 0 "--help"; expect_out '^usage: xferctl' "--help"
expect_out '^  regions' "--help lists the commands"
expect_out '^  peers' "--help lists peers"
expect_out '^  ping PEER' "--help lists ping"
expect_out '^  rails' "--help lists rails"
run "$XFERCTL" --version
expect_rc 0 "--version"; expect_out '^xferctl [0-9]+\.[0-9]+\.[0-9]+' "--version"
version=$(awk '{print $2}' <<<"$out")

# --- no daemon ------------------------------------------------------------

ctl status
expect_rc 1 "no socket"
expect_err "^xferctl: xferd is not running \(no socket at $SOCK\)$" "no socket"
[ -z "$out" ] || fail "no socket: nothing on stdout"

# The default path: $XFERD_SOCKET (the shared xferd) when set...
if [ -n "${XFERD_SOCKET:-}" ] && [ -S "$XFERD_SOCKET" ]; then
	run "$XFERCTL" status
	expect_rc 0 "status via \$XFERD_SOCKET"
	expect_out "^ +socket: $XFERD_SOCKET$" "status via \$XFERD_SOCKET"
fi
# ...else $XDG_RUNTIME_DIR/xferd.sock, or /run/xferd/xferd.sock as root.
if [ "$(id -u)" -eq 0 ]; then want=/run/xferd/xferd.sock
else want=$TMP/rt/xferd.sock; fi
run env -u XFERD_SOCKET XDG_RUNTIME_DIR="$TMP/rt" "$XFERCTL" status
grep -qF -- "$want" <<<"$out$err" || fail "default socket is not $want"

# --- a private xferd, idle ------------------------------------------------

# No TCP listener: several private daemons may run at once, and this one
# has no peers.
"$XFERD" -s "$SOCK" -l debug -o listen=off >"$TMP/xferd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	ctl status
	[ "$rc" -eq 0 ] && break
	kill -0 "$daemon_pid" 2>/dev/null || fail "private xferd died"
	sleep 0.1
done
expect_rc 0 "status of the private xferd"

for key in version 'instance id' pid uptime socket workers clients regions \
	   imports 'ops completed' 'ops failed' 'bytes moved' rss staging \
	   rcache 'rcache lookups' 'rcache limits' registrations; do
	expect_out "^ *$key: [^ ]" "status has '$key'"
done
expect_out "^ *version: $version$" "status version"
expect_out "^ *pid: $daemon_pid$" "status pid"
expect_out "^ *socket: $SOCK$" "status socket"
expect_out '^ *instance id: [0-9a-f]{32}$' "status instance id"
expect_out '^ *clients: 0$' "idle clients"
expect_out '^ *regions: 0$' "idle regions"
expect_out '^ *imports: 0$' "idle imports"
expect_out '^ *ops completed: 0$' "idle ops"
expect_out '^ *bytes moved: 0 B$' "idle bytes"
expect_out '^ *rss: [0-9.]+ (KiB|MiB|GiB)$' "status rss"
# The registration cache: empty and idle, the default limits.
expect_out '^ *rcache: 0 entries \(0 unused\), 0 B$' "status rcache"
expect_out '^ *rcache lookups: 0 hits, 0 misses, 0 evictions$' "status rcache lookups"
expect_out '^ *rcache limits: 4096 entries, no byte limit$' "status rcache limits"
expect_out '^ *registrations: 0 pending$' "status registrations"
# The staging pool: none on a machine without GPUs, else its chunks.
if grep -q '^ *staging: none' <<<"$out"; then
	expect_out '^ *staging: none \((no GPUs|no memory)\)$' "status staging"
	staging_json='.staging == null and
		(.staging_none == "no GPUs" or .staging_none == "no memory")'
else
	expect_out '^ *staging: [0-9.]+ (KiB|MiB) chunks, 0 of [0-9]+ in use, 0 waiting$' \
		"status staging"
	expect_out '^ *staging send: 0 of [0-9]+ in use, 0 waiting$' "staging send"
	expect_out '^ *staging recv: 0 of [0-9]+ in use, 0 waiting$' "staging recv"
	expect_out '^ *staging waits: 0$' "staging waits"
	for k in d2h h2d send_idle recv_stall; do
		expect_out "^ *staging $k: 0 in 0.000 ms \\(0.0 us each\\)\$" "staging $k"
	done
	staging_json='.staging.chunk_bytes > 0 and .staging.in_use == 0 and
		.staging.clocks.d2h.count == 0 and .staging.clocks.h2d.ns == 0 and
		.staging.clocks.send_idle.count == 0 and
		.staging.clocks.recv_stall.count == 0 and
		.staging.waiting == 0 and .staging.waits == 0 and
		.staging.chunks == .staging.send.chunks + .staging.recv.chunks and
		.staging.send.in_use == 0 and .staging.recv.waiting == 0 and
		(has("staging_none") | not)'
fi
# Keys right-aligned: every colon in the same column.
[ "$(grep -o '^[^:]*:' <<<"$out" | awk '{print length}' | sort -u | wc -l)" = 1 ] ||
	fail "status keys are not aligned"
instance=$(sed -nE 's/^ *instance id: //p' <<<"$out")

ctl -j status
expect_rc 0 "status --json"
expect_json '.version == $v and .instance_id == $i and .pid == $p and
	.socket_path == $s and .clients == 0 and .regions == 0 and
	.imports == 0 and .ops_completed == 0 and .ops_failed == 0 and
	.bytes_moved == 0 and .rss_bytes > 0 and .workers >= 1 and
	(.uptime_ms | type) == "number" and .paths == []' "idle status --json" \
	--arg v "$version" --arg i "$instance" --argjson p "$daemon_pid" \
	--arg s "$SOCK"
expect_json "$staging_json" "staging in status --json"
expect_json '.rcache == {"entries": 0, "unused": 0, "bytes": 0, "hits": 0,
	"misses": 0, "evictions": 0, "max_entries": 4096, "max_bytes": 0,
	"pending": 0}' \
	"rcache in status --json"
ctl clients
expect_rc 0 clients; [ "$out" = "no clients" ] || fail "idle clients text"
ctl --json clients
expect_json '. == {"clients": []}' "idle clients --json"
ctl regions
expect_rc 0 regions; [ "$out" = "no regions" ] || fail "idle regions text"
ctl regions -j
expect_json '. == {"regions": []}' "idle regions --json"

# --- peers and ping without peers -------------------------------------------

ctl peers
expect_rc 0 peers; [ "$out" = "no peers" ] || fail "peers without peers"
ctl --json peers
expect_rc 0 "peers --json"
expect_json '. == {"peers": []}' "peers --json without peers"
ctl ping nowhere
expect_rc 1 "ping nowhere"
# The target, what went wrong, and the errno text.
expect_err '^xferctl: ping nowhere: [a-z].* \([A-Z][^)]*\)$' "ping nowhere"
[ "$(wc -l <<<"$err")" = 1 ] || fail "ping nowhere: one line of error"
[ -z "$out" ] || fail "ping nowhere: nothing on stdout"
ctl -j ping nowhere
expect_rc 1 "ping nowhere --json"
expect_err '^xferctl: ping nowhere: ' "ping nowhere --json"
[ -z "$out" ] || fail "ping nowhere --json: nothing on stdout"

# --- rails ----------------------------------------------------------------

ctl rails
expect_rc 0 rails
ctl_rails_text=$out
ctl -j rails
expect_rc 0 "rails --json"
if ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
	# No RDMA device on this host: TCP only, said so in both forms and
	# in the log.
	[ "$(printf '%s\n' "$ctl_rails_text" | head -n 1)" = "no RDMA devices" ] ||
		fail "rails without devices"
	printf '%s\n' "$ctl_rails_text" | grep -q '^GPU memory over RDMA: none' ||
		fail "rails without devices: the GPU memory probe"
	printf '%s\n' "$ctl_rails_text" | grep -q '^GPU-rail distances: none' ||
		fail "rails without devices: the empty distance table"
	expect_json '.["rails"] == [] and .["gpu_rdma"]["gpus"] == [] and .["gpu_rdma"]["gpu_mem"] == "none"' "rails --json without devices"
	grep -q 'no RDMA devices: TCP only' "$TMP/xferd.log" ||
		fail "xferd did not log 'no RDMA devices: TCP only'"
else
	# A host with real devices: whatever rails it has, one JSON row per
	# table row (the guest test checks the values).
	expect_json '.rails | type == "array"' "rails --json with devices"
	nrails=$(jq '.rails | length' <<<"$out")
	if [ "$nrails" = 0 ]; then
		[ "$ctl_rails_text" = "no RDMA devices" ] || fail "rails: no rails"
	else
		[ "$(wc -l <<<"$ctl_rails_text")" = $((nrails + 1)) ] ||
			fail "rails: want header + $nrails rows"
	fi
fi
run "$XFERCTL" rails mlx5_0
expect_rc 2 "rails with an argument"
expect_err "^xferctl: 'rails' takes no argument$" "rails with an argument"

if command -v python3 >/dev/null; then
	# What xferctl never sends: xferd must refuse a bad target with a
	# reason (EINVAL) and close, survive an asker that leaves before the
	# answer, and close on a second question before the answer to a ping.
	run python3 -c 'import errno, socket, sys
def varint(n):
    out = b""
    while n > 0x7f:
        out += bytes([n & 0x7f | 0x80]); n >>= 7
    return out + bytes([n])
def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload
def ping(target):
    return b"XFRT" + field(1, 1) + field(19, field(1, target))
status = b"XFRT" + field(1, 1) + field(10, b"")
def ask():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(15)
    s.connect(sys.argv[1])
    return s
# A reply: the tag, proto_version (2 bytes), then the field tag of the body:
# 16 (Error, whose first field is error: -EINVAL as a zigzag sint32) or
# 20 (PingReply).
error_tag, ping_reply_tag = b"\x82\x01", b"\xa2\x01"
for bad in [b"", b"n" * 81, b"a b", b"a\x01", "n\u00f6de".encode()]:
    s = ask(); s.send(ping(bad))
    r = s.recv(65536)
    if not (r[:4] == b"XFRT" and r[6:8] == error_tag and
            r[9:11] == field(1, 2 * errno.EINVAL - 1) and b"printable" in r):
        sys.exit("target %r: %r" % (bad, r))
    if s.recv(65536) != b"":
        sys.exit("target %r: connection not closed" % bad)
for _ in range(20):
    s = ask(); s.send(ping(b"nowhere")); s.close()
# A second question at once: answered in turn if the ping was answered
# first, else refused (EBUSY) and the connection closed.
s = ask(); s.send(ping(b"nowhere")); s.send(status)
r = s.recv(65536)
if r[6:8] == ping_reply_tag:
    r = s.recv(65536)
    ok = r[6:7] == b"\x5a" # field 11, StatusReply
else:
    ok = r[6:8] == error_tag and s.recv(65536) == b""
if r[:4] != b"XFRT" or not ok:
    sys.exit("two questions at once: %r" % r)
s = ask(); s.send(ping(b"n" * 80))
r = s.recv(65536)
if r[:4] != b"XFRT" or r[6:8] != ping_reply_tag:
    sys.exit("a target of 80 characters: %r" % r)
print("ok")' "$SOCK"
	expect_rc 0 "ping targets xferd refuses ($out$err)"
	ctl status
	expect_rc 0 "status after odd pings"
fi

# --- one client holding memory --------------------------------------------

: >"$TMP/holder.out"
# exec: the holder keeps the subshell's pid, and its argv[0] is the name
# libxfer sends.
(XFERD_SOCKET=$SOCK exec -a "$NAME" "$HOLDER" --hold 120 \
	--alloc "$ALLOC" >"$TMP/holder.out" 2>&1) &
holder_pid=$!
for _ in $(seq 100); do
	grep -q '^ready ' "$TMP/holder.out" && break
	kill -0 "$holder_pid" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q "^ready $holder_pid$" "$TMP/holder.out"; then
	wait "$holder_pid"; hrc=$?; holder_pid=
	[ $hrc -eq 77 ] && skip "holder: $(tail -n 1 "$TMP/holder.out")"
	cat "$TMP/holder.out"; fail "the holder did not get ready (exit $hrc)"
fi

ctl clients
expect_rc 0 "clients with a holder"
[ "$(cells | head -n 1)" = "$(printf 'ID\tPID\tUID\tNAME\tREGIONS\tIMPORTS\tOPS\tFAILED\tBYTES\tSQ\tAGE\tNOTIFY')" ] ||
	fail "clients header"
[ "$(wc -l <<<"$out")" = 2 ] || fail "clients: want header + 1 row"
IFS=$'\t' read -r cid pid uid name nreg nimp ops failed bytes sq age held \
	< <(cells | sed -n 2p)
[ "$pid" = "$holder_pid" ] || fail "clients PID $pid, want $holder_pid"
[ "$uid" = "$(id -u)" ] || fail "clients UID $uid"
[ "$name" = "$NAME" ] || fail "clients NAME '$name', want '$NAME'"
[ "$nreg/$nimp/$ops/$failed" = 2/1/1/0 ] ||
	fail "clients REGIONS/IMPORTS/OPS/FAILED $nreg/$nimp/$ops/$failed, want 2/1/1/0"
[ "$bytes" = "768.0 KiB" ] || fail "clients BYTES '$bytes'"
[[ $cid =~ ^[0-9]+$ && $sq =~ ^[1-9][0-9]*$ && $age =~ ^[0-9]+s$ ]] ||
	fail "clients ID '$cid' SQ '$sq' AGE '$age'"
[ "$held" = 0 ] || fail "clients NOTIFY '$held', want 0"

ctl --json clients
expect_rc 0 "clients --json"
expect_json '.clients | length == 1 and (.[0] | .id == $id and
	.pid == $pid and .uid == $uid and .name == $name and .regions == 2 and
	.imports == 1 and .ops_completed == 1 and .ops_failed == 0 and
	.bytes_moved == $half and .sq_entries == $sq and .connected_ms >= 0 and
	.notify_queued == 0 and .notify_refused == 0)' \
	"clients --json" --argjson id "$cid" --argjson pid "$holder_pid" \
	--argjson uid "$(id -u)" --arg name "$NAME" --argjson half "$HALF" \
	--argjson sq "$sq"
grep -qF 'hold\"er\\x-' <<<"$out" || fail "name not escaped as JSON"

ctl regions
expect_rc 0 "regions with a holder"
[ "$(cells | head -n 1)" = "$(printf 'HANDLE\tOWNER\tKIND\tLENGTH\tIMPORTS\tADDR')" ] ||
	fail "regions header"
[ "$(wc -l <<<"$out")" = 3 ] || fail "regions: want header + 2 rows"
IFS=$'\t' read -r mh mowner _ mlen mimp maddr < <(cells | awk -F'\t' '$3 == "memfd"')
IFS=$'\t' read -r ch cowner _ clen cimp caddr < <(cells | awk -F'\t' '$3 == "cma"')
[ "$mowner/$mlen/$mimp/$maddr" = "$cid/1.5 MiB/1/-" ] ||
	fail "memfd row: owner/length/imports/addr $mowner/$mlen/$mimp/$maddr"
[ "$cowner/$clen/$cimp" = "$cid/768.0 KiB/0" ] ||
	fail "cma row: owner/length/imports $cowner/$clen/$cimp"
[[ $caddr =~ ^0x[0-9a-f]+$ && $mh =~ ^[0-9]+$ && $ch =~ ^[0-9]+$ ]] ||
	fail "cma ADDR '$caddr', handles '$mh' '$ch'"
[ "$(cells | sed -n '2,$p' | cut -f1 | sort -n -c 2>&1)" = "" ] ||
	fail "regions not sorted by handle"
# Aligned: without the last (left-aligned, unpadded) ADDR column, every
# line ends in the same column.
[ "$(sed -E 's/  [^ ]+$//' <<<"$out" | awk '{print length}' | sort -u | wc -l)" = 1 ] ||
	fail "regions columns are not aligned"

ctl -j regions
expect_rc 0 "regions --json"
expect_json '.regions | length == 2 and
	(map(select(.kind == "memfd")) | length == 1 and (.[0] | .handle == $mh
	 and .owner == $cid and .length == $alloc and .imports == 1)) and
	(map(select(.kind == "cma")) | length == 1 and (.[0] | .handle == $ch
	 and .owner == $cid and .length == $half and .imports == 0 and
	 .addr == $caddr))' "regions --json" \
	--argjson mh "$mh" --argjson ch "$ch" --argjson cid "$cid" \
	--argjson alloc "$ALLOC" --argjson half "$HALF" \
	--argjson caddr "$(printf '%d' "$caddr")"

ctl status
expect_rc 0 "status with a holder"
expect_out '^ *clients: 1$' "busy clients"
expect_out '^ *regions: 2$' "busy regions"
expect_out '^ *imports: 1$' "busy imports"
expect_out '^ *ops completed: 1$' "busy ops"
expect_out '^ *ops failed: 0$' "busy failed"
expect_out '^ *bytes moved: 768.0 KiB$' "busy bytes"
# The per-path table after the keys: the write went by CMA.
expect_out '^PATH +OPS +BYTES$' "path table header"
expect_out '^cma +1 +768.0 KiB$' "path table row"

ctl --json status
expect_json '.clients == 1 and .regions == 2 and .imports == 1 and
	.ops_completed == 1 and .ops_failed == 0 and .bytes_moved == $half and
	.paths == [{"path": "cma", "ops": 1, "bytes": $half}] and
	.instance_id == $i' "busy status --json" \
	--argjson half "$HALF" --arg i "$instance"

# --- the client gone ------------------------------------------------------

kill -9 "$holder_pid"; wait "$holder_pid" 2>/dev/null; holder_pid=
for _ in $(seq 50); do
	ctl clients
	[ "$out" = "no clients" ] && break
	sleep 0.1
done
[ "$out" = "no clients" ] || fail "the killed holder is still listed"
ctl -j clients
expect_json '.clients == []' "clients --json after the holder"
ctl regions
[ "$out" = "no regions" ] || fail "the holder's regions are still listed"
ctl -j regions
expect_json '.regions == []' "regions --json after the holder"
ctl -j status
# Counters are the daemon's history: they stay.
expect_json '.clients == 0 and .regions == 0 and .imports == 0 and
	.ops_completed == 1 and .bytes_moved == $half' "status after the holder" \
	--argjson half "$HALF"

# --- errors on the way to xferd -------------------------------------------

# Permission denied: an unprivileged user cannot enter the 0700 temp dir.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups "$XFERCTL" --version \
	>/dev/null 2>&1; then
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$XFERCTL" -s "$SOCK" status
	expect_rc 1 "as nobody"
	expect_err "^xferctl: permission denied on $SOCK" "as nobody"
fi

# --- config -------------------------------------------------------------

# Every key of the table, in its order, with a value and a source; the
# flags given to the private xferd (-s, -l, -o listen) are overrides.
ctl config
expect_rc 0 "config"
expect_out '^config file: ' "config names its file"
keys=$("$XFERD" --list-keys | cut -f1)
[ "$(cells | sed -n '3,$p' | cut -f1)" = "$keys" ] ||
	fail "config: not every key of xferd --list-keys, in order"
expect_out "^socket +$SOCK +override$" "config socket"
expect_out '^log_level +debug +override$' "config log_level"
expect_out '^listen +off +override$' "config listen"
expect_out '^max_clients +1024 +default$' "config max_clients"
expect_out '^cluster_key_file +default$' "config cluster_key_file"
ctl -j config
expect_json '(.keys | length) == ($n | tonumber) and
	(.keys[] | select(.key == "log_level")) == {"key":"log_level","value":"debug","source":"override"} and
	all(.keys[]; .source | test("^(default|file|override|reload)$"))' \
	"config --json" --arg n "$(wc -l <<<"$keys")"
ctl --csv config
expect_rc 0 "config --csv"
[ "$(head -1 <<<"$out")" = "KEY,VALUE,SOURCE" ] || fail "config --csv header"
expect_out "^socket,$SOCK,override$" "config --csv"
[ "$(wc -l <<<"$out")" = $(($(wc -l <<<"$keys") + 1)) ] ||
	fail "config --csv: a line per key"
run "$XFERCTL" -s "$SOCK" --csv --json config
expect_rc 2 "--csv with --json"
run "$XFERCTL" -s "$SOCK" --csv status
expect_rc 2 "--csv status"; expect_err 'one table' "--csv status"

# A file, then a reload that changes one of its keys.
printf 'max_clients = 77\npeer = 10.9.9.9:7474\npeer = nodeb\n' >"$TMP/c.conf"
"$XFERD" -c "$TMP/c.conf" -s "$TMP/c.sock" -o listen=off -o spin_us=7 \
	>"$TMP/c.log" 2>&1 &
conf_pid=$!
for _ in $(seq 100); do
	run "$XFERCTL" -s "$TMP/c.sock" --csv config
	[ "$rc" -eq 0 ] && break; sleep 0.1
done
expect_out '^max_clients,77,file$' "config from the file"
expect_out '^peer,"10.9.9.9:7474,nodeb",file$' "config peers, CSV-quoted"
expect_out '^spin_us,7,override$' "config -o"
expect_out '^max_regions,65536,default$' "config default"
sed -i 's/^max_clients = 77/max_clients = 78/' "$TMP/c.conf"
kill -HUP "$conf_pid"
for _ in $(seq 50); do
	run "$XFERCTL" -s "$TMP/c.sock" --csv config
	grep -q '^max_clients,78,reload$' <<<"$out" && break; sleep 0.1
done
expect_out '^max_clients,78,reload$' "config after a reload"
expect_out '^peer,"10.9.9.9:7474,nodeb",file$' "unchanged by the reload"
kill -TERM "$conf_pid"; wait "$conf_pid"; conf_pid=

# --- names and lists, root's view and a user's ----------------------------

# A second private xferd whose socket group is nogroup, in a directory
# others may enter: uid 65534 (group nogroup) can ask it.
NTMP=$(mktemp -d /tmp/xferctl-names.XXXXXX); chmod 0711 "$NTMP"
NSOCK=$NTMP/xferd.sock
"$XFERD" -s "$NSOCK" -o listen=off -o socket_group=nogroup \
	>"$TMP/n.log" 2>&1 &
names_pid=$!
for _ in $(seq 100); do
	run "$XFERCTL" -s "$NSOCK" names; [ "$rc" -eq 0 ] && break; sleep 0.1
done
expect_rc 0 "names, nothing published"
[ "$out" = "no published names" ] || fail "names on an idle xferd"
run "$XFERCTL" -s "$NSOCK" lists
[ "$out" = "no prepared lists" ] || fail "lists on an idle xferd"
# holder: start one xferctl_holder publishing $1 (as the user setpriv
# args before it say), wait for "ready".
hold() {
	local name=$1; shift
	(XFERD_SOCKET=$NSOCK exec "$@" "$HOLDER" --hold 60 --alloc 65536 \
		--publish "$name" >"$TMP/h.$name" 2>&1) &
	for _ in $(seq 100); do
		grep -q '^ready' "$TMP/h.$name" 2>/dev/null && break
		grep -q '^skip' "$TMP/h.$name" 2>/dev/null && return 77
		sleep 0.1
	done
	grep -q '^ready' "$TMP/h.$name" || fail "holder $name: $(cat "$TMP/h.$name")"
}
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
can_setpriv=0
[ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
	"${nobody[@]}" "$XFERCTL" --version >/dev/null 2>&1 && can_setpriv=1
hold rootname; hrc=$?
if [ $hrc -eq 0 ]; then
	if [ $can_setpriv -eq 1 ]; then hold nobodyname "${nobody[@]}"; fi
	run "$XFERCTL" -s "$NSOCK" names
	expect_out '^ *0 +rootname +no +[0-9]+ +[0-9]+ +xferctl_holder +[0-9]+$' "root sees its name"
	expect_out '^ *0 +rootname\.shared +yes ' "root sees its shared name"
	run "$XFERCTL" -s "$NSOCK" --json names
	expect_json '.all_users and (.names | map(.name) | index("rootname")) != null and
		all(.names[]; has("token") | not)' "names --json as root"
	run "$XFERCTL" -s "$NSOCK" --csv lists
	[ "$(head -1 <<<"$out")" = "CLIENT,PID,UID,PROGRAM,LISTS,ENTRIES" ] ||
		fail "lists --csv header"
	expect_out '^[0-9]+,[0-9]+,0,xferctl_holder,1,4$' "root's list"
	if [ $can_setpriv -eq 1 ]; then
		expect_out '^[0-9]+,[0-9]+,65534,xferctl_holder,1,4$' "root sees nobody's list"
		run "$XFERCTL" -s "$NSOCK" --csv names
		expect_out '^65534,nobodyname,no,' "root sees nobody's name"
		# As nobody: its own names and lists only.
		run "${nobody[@]}" "$XFERCTL" -s "$NSOCK" --json names
		expect_rc 0 "names as nobody"
		expect_json '(.all_users | not) and (.names | length) == 2 and
			all(.names[]; .uid == 65534) and
			(.names | map(.name) | sort) == ["nobodyname","nobodyname.shared"]' \
			"nobody sees only its own names"
		run "${nobody[@]}" "$XFERCTL" -s "$NSOCK" --csv lists
		[ "$(wc -l <<<"$out")" = 2 ] || fail "nobody sees one list owner"
		expect_out '^[0-9]+,[0-9]+,65534,xferctl_holder,1,4$' "nobody's list"
		run "${nobody[@]}" "$XFERCTL" -s "$NSOCK" --csv config
		expect_rc 0 "config as nobody"
		expect_out '^socket_group,nogroup,override$' "config as nobody"
	fi
fi
kill -TERM "$names_pid"; wait "$names_pid"; names_pid=
rm -rf "$NTMP"

# A private xferd that stops cleanly after all those questions.
kill -TERM "$daemon_pid"; wait "$daemon_pid"; drc=$?; daemon_pid=
[ $drc -eq 0 ] || fail "private xferd exited $drc after SIGTERM"
! grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$TMP/xferd.log" ||
	fail "sanitizer report in the private xferd's log"
ctl status
expect_rc 1 "after xferd stopped"
expect_err "^xferctl: xferd is not running" "after xferd stopped"

if command -v python3 >/dev/null; then
	# A socket file nobody listens on: ECONNREFUSED.
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])' "$TMP/stale.sock"
	run "$XFERCTL" -s "$TMP/stale.sock" status
	expect_rc 1 "stale socket"
	expect_err "^xferctl: xferd is not running \(nothing listens on $TMP/stale.sock\)$" \
		"stale socket"

	# A hostile client name (as a daemon of another build might pass it
	# on): quote, backslash, control characters, invalid UTF-8.  JSON
	# must escape or replace each, text must stay on one line.
	python3 -c 'import socket, sys
def varint(n):
    out = b""
    while n > 0x7f:
        out += bytes([n & 0x7f | 0x80]); n >>= 7
    return out + bytes([n])
def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload
name = b"q\"b\\s\x01\x1f\x7f\t\n\xff\xc0\xafok\xe2\x82\xac"
client = field(1, 7) + field(2, 4242) + field(4, name)
reply = field(1, 1) + field(13, field(1, client))
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(4)
open(sys.argv[1] + ".up", "w").close()
for _ in range(2):
    c, _ = s.accept(); c.recv(65536); c.send(b"XFRT" + reply); c.close()
' "$TMP/fake.sock" &
	fake_pid=$!
	for _ in $(seq 50); do [ -e "$TMP/fake.sock.up" ] && break; sleep 0.1; done
	run "$XFERCTL" -s "$TMP/fake.sock" --json clients
	expect_rc 0 "hostile name --json"
	expect_json '.clients[0].pid == 4242 and .clients[0].name ==
		"q\"b\\s\u0001\u001f\u007f\t\n\ufffd\ufffd\ufffdok\u20ac"' \
		"hostile name --json"
	# jq itself forgives invalid UTF-8; JSON does not.
	iconv -f UTF-8 -t UTF-8 <<<"$out" >/dev/null 2>&1 ||
		fail "hostile name --json: output is not UTF-8"
	run "$XFERCTL" -s "$TMP/fake.sock" clients
	expect_rc 0 "hostile name text"
	[ "$(wc -l <<<"$out")" = 2 ] || fail "hostile name broke the table"
	[ "$(cells | sed -n 2p | cut -f4)" = 'q"b\s????????ok€' ] ||
		fail "hostile name text: '$(cells | sed -n 2p | cut -f4)'"
	wait "$fake_pid"; fake_pid=

	# Listening, never answering: the 5 s receive timeout.
	python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(4)
open(sys.argv[1] + ".up", "w").close()
time.sleep(60)' "$TMP/mute.sock" &
	fake_pid=$!
	for _ in $(seq 50); do [ -e "$TMP/mute.sock.up" ] && break; sleep 0.1; done
	start=$(date +%s)
	run "$XFERCTL" -s "$TMP/mute.sock" status
	took=$(($(date +%s) - start))
	expect_rc 1 "silent xferd"
	expect_err "^xferctl: xferd did not answer" "silent xferd"
	[ $took -ge 4 ] && [ $took -le 8 ] || fail "gave up after ${took}s, want 5"
fi

echo "pass: xferctl status/clients/regions/peers/rails/ping/config/names/lists, text, --json and --csv"
exit 0

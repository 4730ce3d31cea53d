#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# vm.sh - a throw-away qemu guest with Soft-RoCE (rdma_rxe), for the tests
# that need real verbs on machines without an RDMA NIC.
#
#   vm.sh build        fetch Debian's kernel package, build the initramfs
#                      (idempotent: ~0.1 s when up to date)
#   vm.sh run CMD...   boot the guest, run CMD there as root, power off
#   vm.sh probe        0 if qemu can run here; 77 and the reason if not
#
# The guest runs the host's own userland: the host root is its root,
# shared read-only over 9p with a tmpfs overlay on top (writes succeed and
# are thrown away), and the project directory is mounted read-write at the
# same path.  Binaries outside the project must exist before the guest
# boots (the root share caches).  The host therefore needs rdma-core,
# ibverbs-providers, iproute2 and kmod, besides qemu (`make deps`).
#
# In the guest, CMD runs with the caller's exported environment, in the
# caller's directory, as root, with `ulimit -l unlimited`, plus:
#   RXE_VM_GUEST=1
#   RXE_DEV=rxe0 RXE_IP=10.0.0.1 RXE_GID_INDEX=<IPv4-mapped RoCEv2 GID>
#   pair setup: RXE_DEV2=rxe1 RXE_IP2=10.0.0.2 RXE_GID_INDEX2=<...>
# Its stdout and stderr are streamed to ours.  Exit status: CMD's; 124
# when the timeout hit; 125 when the guest died before CMD finished (the
# console tail is printed).
#
# Knobs (environment):
#   RXE_VM_DIR       cache: kernel, initramfs, run dirs
#                    (default ${XFER_BUILD:-build}/rdma-vm)
#   RXE_VM_TIMEOUT   seconds for the whole guest, boot included (600)
#   RXE_VM_SETUP     single (default): rxe0 on veth0, both ends of a
#                    test use it (rxe loops the packets back inside);
#                    pair: also rxe1 on veth1, and traffic between rxe0
#                    and rxe1 crosses the veth
#   RXE_VM_MTU       veth MTU: 1500 gives RoCE MTU 1024, 9000 gives 4096
#   RXE_VM_ACCEL     auto|tcg|kvm; auto takes kvm only with real VMX/SVM
#   RXE_VM_MEM, RXE_VM_SMP   guest size (4G, host's CPUs)
#   RXE_VM_CONSOLE=1 stream the guest's console (kernel log) to stderr
#   RXE_VM_KEEP=1    keep the run dir (console.log, qemu.log, ctl/)
#   RXE_VM_KERNEL_PKG  kernel package (default: the one built last time,
#                    else linux-image-amd64's current dependency)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
HERE=$ROOT/tests/rdma
VM_DIR=${RXE_VM_DIR:-${XFER_BUILD:-$ROOT/build}/rdma-vm}

# Modules the initramfs needs before the host root is reachable; the rest
# is loaded later by the host's modprobe from the extracted tree.
INITRD_MODULES=(virtio_pci 9pnet_virtio 9p overlay virtio_console)
# quiet: the console is only read when a guest dies.  mitigations=off,
# cryptomgr.notests, 8250.nr_uarts=1: less work under emulation.
# panic=-1 with -no-reboot: a guest panic ends qemu at once.
KERNEL_ARGS=(console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off nokaslr
	tsc=reliable no_timer_check random.trust_cpu=on 8250.nr_uarts=1
	net.ifnames=0 cryptomgr.notests)

say() { echo "vm: $*" >&2; }
die() { say "$*"; exit 1; }

need_tools() {
	local t
	for t; do
		command -v "$t" >/dev/null ||
			die "$t is missing (\`make deps\` installs the RDMA test packages)"
	done
}

# --- build ---------------------------------------------------------------

# The versioned package linux-image-amd64 currently depends on.
kernel_package() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

# cached_deb PKG: the package file fetched earlier, if any.
cached_deb() {
	local f
	for f in "$VM_DIR/$1"_*.deb; do
		[ -e "$f" ] && echo "$f" && return
	done
}

# extract_vmlinux BZIMAGE OUT: the uncompressed ELF kernel inside a
# bzImage, found through the boot header (setup_sects at 0x1f1, payload
# offset and length at 0x248).  qemu boots it through its PVH entry point,
# which skips the BIOS loader and the in-guest decompression: 2-3 s less
# per boot under TCG.
extract_vmlinux() {
	local img=$1 out=$2 sects off len
	sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$img" | tr -d ' ')
	[ "$sects" = 0 ] && sects=4
	off=$(od -An -tu4 -j $((0x248)) -N4 "$img" | tr -d ' ')
	len=$(od -An -tu4 -j $((0x24c)) -N4 "$img" | tr -d ' ')
	off=$(((sects + 1) * 512 + off))
	tail -c +$((off + 1)) "$img" | head -c "$len" |
		xz -dc --single-stream >"$out.tmp" 2>/dev/null
	if [ "$(head -c 4 "$out.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
		mv "$out.tmp" "$out"
	else
		rm -f "$out.tmp"
		return 1
	fi
}

build_initramfs() {
	local kdir=$1 kver=$2 out=$3 work m name
	work=$(mktemp -d "$VM_DIR/initramfs.XXXXXX")
	mkdir -p "$work"/{bin,dev,proc,sys,lower,rw,newroot,modules}
	cp "$(command -v busybox)" "$work/bin/busybox"
	ln -s busybox "$work/bin/sh"
	cp "$HERE/guest-init" "$work/init"
	chmod 755 "$work/init"
	# modprobe lists the dependencies first; insmod them in that order.
	for m in $(modprobe -d "$kdir" -S "$kver" --show-depends -a "${INITRD_MODULES[@]}" |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
		name=$(basename "$m")
		case $name in
		*.xz) xz -dc "$m" >"$work/modules/${name%.xz}"; name=${name%.xz} ;;
		*) cp "$m" "$work/modules/$name" ;;
		esac
		echo "$name" >>"$work/modules/order"
	done
	[ -s "$work/modules/order" ] || { rm -rf "$work"; die "no initramfs modules"; }
	(cd "$work" && find . -mindepth 1 | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$out.tmp" &&
		mv "$out.tmp" "$out"
	rm -rf "$work"
	[ -s "$out" ] || die "could not write $out"
}

cmd_build() {
	local kpkg kver kdir deb mod initrd input stale=0
	need_tools apt-get apt-cache dpkg-deb depmod modprobe busybox cpio xz \
		gzip flock qemu-system-x86_64
	mkdir -p "$VM_DIR"
	# Two builds at once (make check beside make asan) wait for each other.
	exec 9>"$VM_DIR/build.lock"
	flock 9

	# The kernel built last time, as long as it is complete: no network
	# needed then.  Otherwise the current one (an old one may be gone
	# from the mirror).
	kpkg=${RXE_VM_KERNEL_PKG:-}
	if [ -z "$kpkg" ] && [ -s "$VM_DIR/kernel-package" ]; then
		kpkg=$(cat "$VM_DIR/kernel-package")
		[ -e "$VM_DIR/kernel-${kpkg#linux-image-}/.complete" ] || kpkg=
	fi
	[ -n "$kpkg" ] || kpkg=$(kernel_package)
	if [ -z "$kpkg" ]; then # a fresh machine may have no package lists yet
		timeout 300 apt-get update -q >&2
		kpkg=$(kernel_package)
	fi
	[ -n "$kpkg" ] || die "cannot tell which linux-image package to fetch"
	kver=${kpkg#linux-image-}
	kdir=$VM_DIR/kernel-$kver

	if [ ! -e "$kdir/.complete" ]; then
		rm -rf "$kdir" "$kdir.tmp"
		deb=$(cached_deb "$kpkg")
		if [ -z "$deb" ]; then
			say "fetching $kpkg"
			(cd "$VM_DIR" && timeout 300 apt-get -q -o APT::Sandbox::User=root \
				-o Acquire::Retries=3 download "$kpkg" >&2)
			deb=$(cached_deb "$kpkg")
			[ -n "$deb" ] || die "could not fetch $kpkg"
		fi
		say "extracting $(basename "$deb")"
		mkdir -p "$kdir.tmp"
		# A broken download is fetched again next time.
		dpkg-deb -x "$deb" "$kdir.tmp" ||
			{ rm -f "$deb"; die "dpkg-deb -x $deb failed"; }
		# The package ships no modules.dep: depmod writes it.
		depmod -b "$kdir.tmp" "$kver" || die "depmod failed"
		for mod in rdma_rxe ib_uverbs rdma_ucm veth 9p 9pnet_virtio overlay; do
			modprobe -d "$kdir.tmp" -S "$kver" -n "$mod" 2>/dev/null ||
				die "kernel $kver has no module $mod"
		done
		if ! extract_vmlinux "$kdir.tmp/boot/vmlinuz-$kver" "$kdir.tmp/vmlinux"; then
			say "no vmlinux in the bzImage; booting the bzImage (slower)"
			ln -s "boot/vmlinuz-$kver" "$kdir.tmp/vmlinux"
		fi
		touch "$kdir.tmp/.complete"
		mv "$kdir.tmp" "$kdir"
		rm -f "$deb"
	fi

	initrd=$kdir/initramfs.cpio.gz
	for input in "$HERE/guest-init" "$HERE/vm.sh" "$(command -v busybox)" \
		"$kdir/.complete"; do
		[ "$initrd" -nt "$input" ] || stale=1
	done
	if [ $stale = 1 ]; then
		say "building the initramfs"
		build_initramfs "$kdir" "$kver" "$initrd"
	fi
	echo "$kpkg" >"$VM_DIR/kernel-package"
	say "ready: kernel $kver in $VM_DIR"
}

# --- run -----------------------------------------------------------------

pick_accel() {
	case ${RXE_VM_ACCEL:-auto} in
	auto)
		# A /dev/kvm without VMX/SVM (kvm_pvm, nested "pagetable VM")
		# runs a stock kernel by instruction emulation: far slower than
		# TCG, and it dies on instructions it cannot emulate.
		if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo &&
			[ ! -d /sys/module/kvm_pvm ]; then
			echo kvm
		else
			echo tcg
		fi ;;
	tcg | kvm) echo "$RXE_VM_ACCEL" ;;
	*) die "RXE_VM_ACCEL must be auto, tcg or kvm" ;;
	esac
}

accel_args() {
	case $1 in
	kvm) echo "-accel kvm -cpu host" ;;
	# -cpu max has no AVX-512: binaries built with -march=native on an
	# AVX-512 host die with SIGILL in here.
	tcg) echo "-accel tcg,thread=multi,tb-size=256 -cpu max" ;;
	esac
}

cmd_probe() {
	local accel
	command -v qemu-system-x86_64 >/dev/null || {
		echo "qemu-system-x86_64 is not installed (\`make deps\` installs it)"
		exit 77
	}
	accel=$(pick_accel)
	# Start the accelerator on an empty machine and quit at once.
	if ! echo quit | timeout 60 qemu-system-x86_64 -machine none \
		-accel "$accel" -nodefaults -no-user-config -display none \
		-monitor stdio >/dev/null 2>"$VM_DIR/probe.log"; then
		echo "qemu cannot run here ($accel): $(tail -n 1 "$VM_DIR/probe.log")"
		exit 77
	fi
}

# 'quoted' for the guest's /bin/sh (dash: no $'...').
sh_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# A run's state, global for the EXIT trap.
RUN='' QEMU_PID='' READER_PIDS=()

run_cleanup() {
	# Our own children only: qemu (through its timeout, which passes
	# the signal on) and the readers, which end once qemu has gone.  A
	# second signal (a runner kills the whole group) must not cut this
	# short.
	trap '' TERM INT
	if [ -n "$QEMU_PID" ]; then
		kill -TERM "$QEMU_PID" 2>/dev/null
		wait "$QEMU_PID" 2>/dev/null
	fi
	[ ${#READER_PIDS[@]} -eq 0 ] || kill "${READER_PIDS[@]}" 2>/dev/null
	[ -n "$RUN" ] || return 0
	if [ "${RXE_VM_KEEP:-0}" = 1 ]; then
		say "kept $RUN"
	else
		rm -rf "$RUN"
	fi
}

# write_ctl CMD...: what guest-setup and the command need to know.
write_ctl() {
	local ctl=$RUN/ctl v
	mkdir "$ctl"
	cp "$HERE/guest-setup" "$ctl/setup"
	{
		echo "KVER=$(sh_quote "$KVER")"
		echo "KDIR=$(sh_quote "$KDIR")"
		echo "PROJECT=$(sh_quote "$ROOT")"
		echo "SETUP=$(sh_quote "${RXE_VM_SETUP:-single}")"
		echo "MTU=$(sh_quote "${RXE_VM_MTU:-1500}")"
	} >"$ctl/config"
	# Our exported environment, less what belongs to this host session.
	{
		for v in $(compgen -e); do
			case $v in
			BASH* | SHELLOPTS | PWD | OLDPWD | SHLVL | _ | TERM | \
				DISPLAY | XDG_* | DBUS_* | SSH_* | TMUX* | \
				NOTIFY_SOCKET | LISTEN_* | WATCHDOG_* | INVOCATION_ID) ;;
			*) printf 'export %s=%q\n' "$v" "${!v}" ;;
			esac
		done
		echo 'export TERM=dumb'
		echo 'ulimit -l unlimited || exit 125'
		printf 'cd %q || exit 125\n' "$PWD"
		printf 'exec'
		printf ' %q' "$@"
		echo
	} >"$ctl/cmd"
}

# report_times T0 T1 ACCEL: one line on stderr.
report_times() {
	local key val ready='' done=''
	while IFS='=' read -r key val; do
		case $key in
		ready) ready=$val ;;
		done) done=$val ;;
		esac
	done <"$RUN/ctl/times" 2>/dev/null
	awk -v t0="$1" -v t1="$2" -v accel="$3" -v ready="$ready" -v done="$done" '
	BEGIN {
		line = sprintf("vm: %.1f s wall (%s)", t1 - t0, accel)
		if (ready != "")
			line = line sprintf(", guest ready at %.1f s", ready)
		if (ready != "" && done != "")
			line = line sprintf(", command %.1f s", done - ready)
		print line
	}' >&2
}

cmd_run() {
	local kpkg accel qemu_rc rc t0 t1 f
	[ $# -ge 1 ] || die "usage: vm.sh run CMD [ARG...]"
	kpkg=$(cat "$VM_DIR/kernel-package" 2>/dev/null)
	KVER=${kpkg#linux-image-}
	KDIR=$VM_DIR/kernel-$KVER
	if [ -z "$kpkg" ] || [ ! -s "$KDIR/initramfs.cpio.gz" ]; then
		say "no guest in $VM_DIR: run 'vm.sh build' first"
		exit 125
	fi
	case ${RXE_VM_SETUP:-single} in
	single | pair) ;;
	*) die "RXE_VM_SETUP must be single or pair" ;;
	esac
	accel=$(pick_accel)
	trap run_cleanup EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	mkdir -p "$VM_DIR/runs"
	RUN=$(mktemp -d "$VM_DIR/runs/run.XXXXXX")
	write_ctl "$@"

	# qemu writes the guest's stdout and stderr ports into FIFOs
	# (chardev pipe: PATH.out, PATH.in); a reader copies each to ours.
	mkfifo "$RUN/out.in" "$RUN/out.out" "$RUN/err.in" "$RUN/err.out"
	cat "$RUN/out.out" &
	READER_PIDS+=($!)
	cat "$RUN/err.out" >&2 &
	READER_PIDS+=($!)
	: >"$RUN/console.log"

	t0=$EPOCHREALTIME
	# --foreground keeps qemu in our process group, so a runner that
	# kills the group of a hung test kills the guest too.
	# shellcheck disable=SC2046 # the accel options are words on purpose
	timeout --foreground -k 5 "${RXE_VM_TIMEOUT:-600}" qemu-system-x86_64 \
		$(accel_args "$accel") -m "${RXE_VM_MEM:-4G}" \
		-smp "${RXE_VM_SMP:-$(nproc)}" -machine pc \
		-nodefaults -no-user-config -display none -no-reboot -nic none \
		-kernel "$KDIR/vmlinux" -initrd "$KDIR/initramfs.cpio.gz" \
		-append "${KERNEL_ARGS[*]}" \
		-chardev file,id=console,path="$RUN/console.log" \
		-serial chardev:console \
		-device virtio-serial-pci,id=vser \
		-chardev pipe,id=out,path="$RUN/out" \
		-device virtserialport,bus=vser.0,chardev=out,name=vm.stdout \
		-chardev pipe,id=err,path="$RUN/err" \
		-device virtserialport,bus=vser.0,chardev=err,name=vm.stderr \
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
		-fsdev local,id=vmctl,path="$RUN/ctl",security_model=none \
		-device virtio-9p-pci,fsdev=vmctl,mount_tag=vmctl \
		-fsdev local,id=project,path="$ROOT",security_model=none,multidevs=remap \
		-device virtio-9p-pci,fsdev=project,mount_tag=project \
		</dev/null >"$RUN/qemu.log" 2>&1 &
	QEMU_PID=$!
	if [ "${RXE_VM_CONSOLE:-0}" = 1 ]; then
		tail -n +1 -f --pid="$QEMU_PID" "$RUN/console.log" >&2 &
		READER_PIDS+=($!)
	fi
	wait "$QEMU_PID"
	qemu_rc=$?
	QEMU_PID=
	t1=$EPOCHREALTIME
	# A reader whose FIFO qemu never opened still blocks in open(): an
	# O_RDWR open of our own lets it through, to EOF.
	for f in "$RUN/out.out" "$RUN/err.out"; do
		exec 3<>"$f"
		exec 3>&-
	done
	wait "${READER_PIDS[@]}" 2>/dev/null
	READER_PIDS=()
	report_times "$t0" "$t1" "$accel"

	if [ -s "$RUN/ctl/rc" ]; then
		return "$(cat "$RUN/ctl/rc")"
	fi
	if [ $qemu_rc = 124 ] || [ $qemu_rc = 137 ]; then
		say "timed out after ${RXE_VM_TIMEOUT:-600} s (RXE_VM_TIMEOUT)"
		rc=124
	else
		say "the guest died (qemu exit $qemu_rc) before the command finished"
		rc=125
	fi
	[ -s "$RUN/qemu.log" ] && { echo "--- qemu"; tail -n 20 "$RUN/qemu.log"; } >&2
	{
		echo "--- guest console (tail)"
		# What ended it, in case that scrolled out of the tail.
		grep -E -m 3 'Kernel panic|guest-(init|setup):' "$RUN/console.log"
		tail -n 40 "$RUN/console.log"
	} >&2
	return $rc
}

case ${1:-} in
build) shift; cmd_build "$@" ;;
run) shift; cmd_run "$@" ;;
probe) shift; mkdir -p "$VM_DIR"; cmd_probe ;;
*) echo "usage: vm.sh build | run CMD [ARG...] | probe" >&2; exit 2 ;;
esac

# SPDX-License-Identifier: Apache-2.0
# xferd - one non-recursive Makefile for the daemon, libxfer, tools, tests.
#
#   make            build everything into build/ (installs missing deps)
#   make check      unit and integration tests
#   make demo       start xferd, move verified data between two clients
#   make bench      xferbench beside its baselines -> bench/results/DATE.md,
#                   its summary in BENCHMARKS.md
#   make asan       the tests again under ASan/UBSan (build-asan/)
#   make fuzz       libFuzzer harnesses (build-fuzz/), FUZZ_SECONDS each
#   make soak       the storm test for SOAK_MINUTES (default 30), not in check
#   make install    PREFIX=/usr/local DESTDIR=
#   make deb        Debian packages (dpkg-buildpackage) into $(BUILD)/deb/
#   V=1             show the commands
#   NO_DEPS=1       never run apt-get (offline, sbuild, debian/rules)

VERSION   := 0.1.0
SOVERSION := 1

BUILD   ?= build
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
# The Grafana dashboard and Prometheus rules (monitoring/).
DATADIR ?= $(PREFIX)/share/xferd
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# xferd reads /etc/xferd/xferd.conf whatever its PREFIX.
SYSCONFDIR ?= /etc

CC      ?= cc
PROTOC  ?= protoc-c
PKG     ?= pkg-config

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages the build, the tests and the benchmarks need.
DEPS_BUILD := build-essential pkg-config libibverbs-dev libevent-dev \
	libprotobuf-c-dev protobuf-c-compiler libsystemd-dev libssl-dev check \
	uthash-dev libsmartcols-dev libjson-c-dev
# metadata = etcd: the tests start real etcd servers (etcdctl writes bad
# records by hand); the metrics tests a real Prometheus (and promtool).
DEPS_TEST  := iproute2 procps psmisc python3 systemd jq openssl etcd-server \
	etcd-client prometheus curl
# man_pages.sh renders every man page with man --warnings.
DEPS_TEST  += man-db
DEPS_BENCH := ucx-utils iperf3
# The Python package (python/): Debian's python3 builds and tests it.
DEPS_PYTHON := python3-dev python3-setuptools python3-pip python3-pytest \
	python3-numpy
# The RDMA stage: Soft-RoCE in a qemu guest that runs the host's userland
# (tests/rdma/vm.sh).
DEPS_RDMA  := rdma-core ibverbs-providers ibverbs-utils libibverbs-dev \
	librdmacm-dev rdmacm-utils perftest busybox-static qemu-system-x86 \
	kmod cpio xz-utils iproute2
# `make deb`: Debian's packaging tools and debian/control's Build-Depends.
DEPS_DEB   := debhelper dh-python lintian dpkg-dev fakeroot python3-all-dev \
	python3-setuptools
# The fuzz harnesses (tests/fuzz/): clang's libFuzzer and sanitizers.
DEPS_FUZZ  := clang libclang-rt-14-dev
# NIXL, built from ../shared/nixl by scripts/nixl-build.sh for the XFERD
# backend (nixl/) and its tests; not libabsl-dev, libasio-dev or
# libtomlplusplus-dev (too old: NIXL takes its own from the tarballs).
DEPS_NIXL  := meson ninja-build g++ pkg-config cmake libgtest-dev \
	libgmock-dev liburing-dev pybind11-dev python3-dev libgflags-dev

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
ifeq ($(WERROR),1)
WARN    += -Werror
endif
ifeq ($(SAN),1)
CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# The code under test for libFuzzer: clang, coverage hooks, ASan/UBSan.
ifeq ($(FUZZ),1)
CC      := clang
CFLAGS  := -O1 -g -fno-omit-frame-pointer \
	-fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

# `make BUILD=build-stages STAGE_STAMPS=1`: an xferd that stamps each
# same-node completion with the TSC at which it took the SQE and wrote
# the CQE, for `xferbench lat --stages` (bench/stages.h).  Not for use.
ifeq ($(STAGE_STAMPS),1)
CPPFLAGS += -DXFERD_STAGE_STAMPS
endif

GEN     := $(BUILD)/gen
OBJ     := $(BUILD)/obj
# Includes by path: "common/ring.h" from the root, "mem/region.h" inside
# daemon/.
CPPFLAGS += -D_GNU_SOURCE -Iinclude -I. -I$(GEN) -Idaemon -Iclient

# libsystemd is optional: sd_notify and socket activation when present.
# Recursive (=) on purpose: evaluated when a recipe runs, after `deps`
# has installed what a fresh machine lacks, not when make reads this file.
SYSTEMD_CFLAGS = $(shell $(PKG) --exists libsystemd 2>/dev/null && \
	echo -DHAVE_SYSTEMD $$($(PKG) --cflags libsystemd))
SYSTEMD_LIBS   = $(shell $(PKG) --exists libsystemd 2>/dev/null && \
	$(PKG) --libs libsystemd)

# CUDA is optional: found at $(CUDA_HOME) (default /usr/local/cuda) when
# its include/cuda.h is there; CUDA=0 turns it off.  libxfer and xferd
# load the driver (libcuda.so.1) at run time and link nothing of CUDA, so
# the same binaries run where there is no GPU.  The GPU tests and
# gpubench link the static CUDA runtime (it loads the driver itself) and
# exit 77 where there is none.
CUDA_HOME ?= /usr/local/cuda
ifneq ($(CUDA),0)
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
HAVE_CUDA := 1
endif
endif
ifeq ($(HAVE_CUDA),1)
CUDA_CFLAGS := -DHAVE_CUDA -I$(CUDA_HOME)/include
NVCC        := $(wildcard $(CUDA_HOME)/bin/nvcc)
HAVE_NVCC   := $(if $(NVCC),1,)
CUDART_A    := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a \
	$(CUDA_HOME)/targets/x86_64-linux/lib/libcudart_static.a))
CUDART_LIBS := $(CUDART_A) -ldl -lrt -lpthread
endif

ALL_CFLAGS = -std=c11 $(WARN) -fPIC -fvisibility=hidden -pthread $(CFLAGS)

PROTOS     := client ctl token peer
PROTO_C    := $(PROTOS:%=$(GEN)/%.pb-c.c)
PROTO_H    := $(PROTOS:%=$(GEN)/%.pb-c.h)

# Code both sides speak: framing, ring protocol, tokens.
COMMON_SRC := $(wildcard common/*.c)
DAEMON_SRC := $(wildcard daemon/*.c daemon/*/*.c)
LIB_SRC    := $(wildcard client/*.c)

obj = $(patsubst %.c,$(OBJ)/%.o,$(1))

COMMON_OBJ := $(call obj,$(COMMON_SRC)) $(OBJ)/gen/client.pb-c.o \
	$(OBJ)/gen/token.pb-c.o
CTL_PB_OBJ := $(OBJ)/gen/ctl.pb-c.o
DAEMON_OBJ := $(call obj,$(DAEMON_SRC))
LIB_OBJ    := $(call obj,$(LIB_SRC))

XFERD     := $(BUILD)/xferd
XFERCTL   := $(BUILD)/xferctl
XFERBENCH := $(BUILD)/xferbench
DLISTBENCH := $(BUILD)/dlistbench
XFERDEMO  := $(BUILD)/xferdemo
XFERSTREAM := $(BUILD)/xferstream
TCPBASE   := $(BUILD)/tcpbase
LIBSO     := $(BUILD)/libxfer.so.$(SOVERSION)
LIBA      := $(BUILD)/libxfer.a
LIBPC     := $(BUILD)/libxfer.pc

BASE_LIBS := -lprotobuf-c -lcrypto -pthread
ifeq ($(HAVE_CUDA),1)
BASE_LIBS += -ldl   # dlopen of libcuda.so.1 (glibc before 2.34)
endif

# Programs under tests/ that use libxfer.
TEST_PROGS := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,\
	$(filter-out tests/integration/testlib.c,$(wildcard tests/integration/*.c)))
# Programs the test scripts drive (not tests of their own).
TEST_TOOLS := $(patsubst tests/tools/%.c,$(BUILD)/test-tools/%,\
	$(wildcard tests/tools/*.c))
# GPU tests (tests/gpu/gpu_*.c) go beside the others so that run-tests.sh
# runs them too: without a GPU each exits 77.
ifneq ($(CUDART_A),)
GPU_TESTS  := $(patsubst tests/gpu/%.c,$(BUILD)/tests/%,\
	$(wildcard tests/gpu/gpu_*.c))
GPUBENCH   := $(if $(wildcard bench/gpubench.c),$(BUILD)/gpubench)
STAGEBENCH := $(if $(wildcard bench/stagebench.c),$(BUILD)/stagebench)
KVBENCH    := $(if $(wildcard bench/kvbench.c),$(BUILD)/kvbench)
endif
UNIT_SRC   := $(wildcard tests/unit/*.c)
UNIT_BIN   := $(BUILD)/tests/unit_tests

.PHONY: deb install-python installed nixl-plugin nixl-check-build nixlbench
.PHONY: all deps check unit integration demo bench asan fuzz fuzz-run fuzz-corpus install \
	clean python soak
.DEFAULT_GOAL := all

all: $(XFERD) $(XFERCTL) $(XFERBENCH) $(DLISTBENCH) $(XFERDEMO) $(XFERSTREAM) $(TCPBASE) $(LIBSO) $(LIBA) $(LIBPC) \
	$(TEST_PROGS) $(TEST_TOOLS) $(UNIT_BIN) $(GPU_TESTS) $(GPUBENCH) $(STAGEBENCH) \
	$(KVBENCH)

# --- dependencies --------------------------------------------------------

# Installs only what is missing, so it is a no-op on a prepared machine.
# NO_DEPS=1: installs nothing (offline builds, sbuild, debian/rules, where
# debian/control's Build-Depends already did).
deps:
ifneq ($(NO_DEPS),1)
	$(Q)missing=$$(for p in $(DEPS_BUILD) $(DEPS_TEST) $(DEPS_RDMA) $(DEPS_PYTHON) \
		$(DEPS_NIXL) $(EXTRA_DEPS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $$missing || \
		{ apt-get update -q && \
		  apt-get install -y -q --no-install-recommends $$missing; }; \
	fi
endif

# Keep every intermediate (generated sources, test objects): without this
# make deletes them after a build and rebuilds them the next time.
.SECONDARY:

# The generated code and thus every object wait for deps (order-only).
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto | deps
	@mkdir -p $(GEN)
	@echo "  PROTOC  $<"
	$(Q)$(PROTOC) --proto_path=proto --c_out=$(GEN) $<

# --- compiling -----------------------------------------------------------

$(OBJ)/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(OBJ_CUDA_CFLAGS) $(OBJ_LIB_CFLAGS) $(CPPFLAGS) $(ALL_CFLAGS) $(SYSTEMD_CFLAGS) \
		-MMD -MP -c -o $@ $<

# What sees CUDA's headers (and HAVE_CUDA): libxfer, xferd, GPU programs.
GPU_PROG_OBJ := $(call obj,$(wildcard tests/gpu/*.c) bench/gpubench.c bench/kvbench.c \
	bench/stagebench.c bench/gpu_common.c)
$(LIB_OBJ) $(DAEMON_OBJ): OBJ_CUDA_CFLAGS = $(CUDA_CFLAGS)
$(GPU_PROG_OBJ): OBJ_CUDA_CFLAGS = $(CUDA_CFLAGS) -Itests/integration

# Generated code is not ours to warn about.
$(OBJ)/gen/%.pb-c.o: $(GEN)/%.pb-c.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) -std=c11 -fPIC -fvisibility=hidden $(CFLAGS) \
		-c -o $@ $<

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)

# --- linking -------------------------------------------------------------

# The GPU batch-copy kernel: nvcc makes a fatbin (Ampere and Hopper code,
# plus PTX for later GPUs) that xferd embeds and loads at run time.
ifeq ($(HAVE_NVCC),1)
NVCC_ARCHS := -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CUDA_KERNEL_OBJ := $(OBJ)/gen/cuda_copy_fatbin.o
$(DAEMON_OBJ): OBJ_CUDA_CFLAGS += -DHAVE_NVCC

$(GEN)/cuda_copy.fatbin: daemon/gpu/kernel.cu daemon/gpu/kernel.h | deps
	@mkdir -p $(GEN)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) -fatbin $(NVCC_ARCHS) -Idaemon -o $@ $<

# As a C array, 8-byte aligned as the driver reads the fatbin header.
$(GEN)/cuda_copy_fatbin.c: $(GEN)/cuda_copy.fatbin
	$(Q){ echo '__attribute__((aligned(8)))'; \
	  echo 'const unsigned char xferd_copy_fatbin[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '};'; } > $@

$(CUDA_KERNEL_OBJ): $(GEN)/cuda_copy_fatbin.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -c -o $@ $<
endif

$(XFERD): $(DAEMON_OBJ) $(COMMON_OBJ) $(CTL_PB_OBJ) $(OBJ)/gen/peer.pb-c.o \
		$(CUDA_KERNEL_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -levent -libverbs $(BASE_LIBS) $(SYSTEMD_LIBS) \
		$(ETCD_LIBS)

$(LIBSO): $(LIB_OBJ) $(COMMON_OBJ) client/libxfer.map
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,libxfer.so.$(SOVERSION) \
		-Wl,--version-script=client/libxfer.map -Wl,-z,defs -o $@ \
		$(LIB_OBJ) $(COMMON_OBJ) $(BASE_LIBS)
	$(Q)ln -sf libxfer.so.$(SOVERSION) $(BUILD)/libxfer.so

# The static archive lets tests and the device scripts run without
# installing the library.
$(LIBA): $(LIB_OBJ) $(COMMON_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# The .pc of the build's PREFIX; `make install` writes its own with the
# install's PREFIX/LIBDIR/INCDIR, which may differ from the build's.
PC_SUBST = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	-e 's|@INCLUDEDIR@|$(INCDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	client/libxfer.pc.in
$(LIBPC): client/libxfer.pc.in Makefile
	@mkdir -p $(dir $@)
	$(Q)$(PC_SUBST) > $@

# The etcd backend (daemon/meta/etcd.c): json-c, and libevent's OpenSSL
# bufferevents for https endpoints.  Recursive (=) as SYSTEMD_CFLAGS.
ETCD_CFLAGS = $(shell $(PKG) --cflags json-c libevent_openssl)
ETCD_LIBS   = $(shell $(PKG) --libs json-c libevent_openssl libssl)
$(call obj,$(wildcard daemon/meta/*.c) tests/fuzz/fuzz_etcd_record.c \
	tests/unit/test_meta.c): OBJ_LIB_CFLAGS = $(ETCD_CFLAGS)

# xferctl's tables (libsmartcols) and JSON (json-c).  Recursive (=) for
# the same reason as SYSTEMD_CFLAGS: read after `deps` installed them.
XFERCTL_CFLAGS = $(shell $(PKG) --cflags smartcols json-c)
XFERCTL_LIBS   = $(shell $(PKG) --libs smartcols json-c)
# The installed CLI: tools/xferctl/.
XFERCTL_OBJ := $(call obj,$(wildcard tools/xferctl/*.c))
$(XFERCTL_OBJ): OBJ_LIB_CFLAGS = $(XFERCTL_CFLAGS)

$(XFERCTL): $(XFERCTL_OBJ) $(OBJ)/common/rendezvous.o $(OBJ)/common/wire.o \
		$(CTL_PB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(XFERCTL_LIBS) $(BASE_LIBS)

$(DLISTBENCH): $(OBJ)/bench/dlistbench.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS)

$(XFERBENCH): $(OBJ)/bench/xferbench.o $(OBJ)/bench/stages.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS) -lm

$(XFERDEMO): $(OBJ)/examples/xferdemo.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS)

# NIXL's sender/receiver on a stream (examples/xferstream.c).
$(XFERSTREAM): $(OBJ)/examples/xferstream.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS)

# Plain TCP, the baseline of the link between two xferds (bench/tcpbase.c).
$(TCPBASE): $(OBJ)/bench/tcpbase.o $(OBJ)/common/numparse.o
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/tests/%: $(OBJ)/tests/integration/%.o $(OBJ)/tests/integration/testlib.o $(LIBA)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS)

# GPU tests of the daemon's own GPU code, linked with its objects as the
# unit tests are (their rule is below UNIT_DEPS); the rest are clients.
GPU_DAEMON_TESTS := $(filter $(BUILD)/tests/gpu_stages $(BUILD)/tests/gpu_dmabuf,\
	$(GPU_TESTS))
$(filter-out $(GPU_DAEMON_TESTS),$(GPU_TESTS)): $(BUILD)/tests/%: \
		$(OBJ)/tests/gpu/%.o $(OBJ)/tests/gpu/gpulib.o \
		$(OBJ)/tests/integration/testlib.o $(LIBA)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS) $(CUDART_LIBS)

# gpu_common.o: what the two GPU benchmarks share (bench/gpu_common.h).
$(GPUBENCH): $(OBJ)/bench/gpubench.o $(OBJ)/bench/gpu_common.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS) $(CUDART_LIBS) -lm

$(KVBENCH): $(OBJ)/bench/kvbench.o $(OBJ)/bench/gpu_common.o $(LIBA)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS) $(CUDART_LIBS) -ldl

# Test tools may use the daemon's wire code (proto/) besides libxfer.
$(BUILD)/test-tools/%: $(OBJ)/tests/tools/%.o $(OBJ)/tests/integration/testlib.o \
		$(LIBA) $(OBJ)/gen/peer.pb-c.o
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BASE_LIBS) -libverbs

# Unit tests link the modules they test directly.
UNIT_DEPS := $(filter-out $(OBJ)/daemon/main.o,$(DAEMON_OBJ)) $(CUDA_KERNEL_OBJ) \
	$(COMMON_OBJ) $(CTL_PB_OBJ) $(OBJ)/gen/peer.pb-c.o
# The daemon's objects come before libxfer.a: the archive then adds only
# what they lack (the client calls of gpulib).
$(GPU_DAEMON_TESTS): $(BUILD)/tests/%: $(OBJ)/tests/gpu/%.o \
		$(OBJ)/tests/gpu/gpulib.o $(OBJ)/tests/integration/testlib.o \
		$(UNIT_DEPS) $(LIBA)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -levent -libverbs $(BASE_LIBS) \
		$(SYSTEMD_LIBS) $(ETCD_LIBS) $(CUDART_LIBS)

# The GPU stages alone against cudaMemcpyAsync (bench/stagebench.c).
$(STAGEBENCH): $(OBJ)/bench/stagebench.o $(UNIT_DEPS)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -levent -libverbs $(BASE_LIBS) \
		$(SYSTEMD_LIBS) $(ETCD_LIBS) $(CUDART_LIBS)

$(UNIT_BIN): $(call obj,$(UNIT_SRC)) $(UNIT_DEPS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(shell $(PKG) --libs check) -levent -libverbs \
		$(BASE_LIBS) $(SYSTEMD_LIBS) $(ETCD_LIBS)

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), each linked with the real
# code it feeds: the daemon's objects, as the unit tests link them.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_SECONDS ?= 60

$(BUILD)/fuzz/%: $(OBJ)/tests/fuzz/%.o $(UNIT_DEPS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ -levent -libverbs \
		$(BASE_LIBS) $(SYSTEMD_LIBS) $(ETCD_LIBS)

# The seed corpora (tests/fuzz/corpus/), packed by the real code.
$(BUILD)/fuzz-seeds: $(OBJ)/tests/fuzz/seeds.o $(UNIT_DEPS)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -levent -libverbs $(BASE_LIBS) \
		$(SYSTEMD_LIBS) $(ETCD_LIBS)

fuzz-corpus: $(BUILD)/fuzz-seeds
	$(Q)$(BUILD)/fuzz-seeds tests/fuzz/corpus

# --- the Python package --------------------------------------------------

# xferd._core, built by setup.py against $(LIBA) into $(BUILD)/python/lib
# (the tests put that on PYTHONPATH).  Debian's python3 on purpose: the
# python3 first on PATH may be another build that does not see Debian's
# numpy and pytest.  Not under SAN=1: the extension would need the ASan
# runtime preloaded into python3 (LD_PRELOAD=libasan.so), which reports
# the interpreter's own leaks and allocator tricks; tests/python/run.sh
# skips there instead.
PYTHON    := /usr/bin/python3
PY_STAMP  := $(BUILD)/python/.built
PY_SRC    := $(wildcard python/src/*.c python/src/*.h python/xferd/*.py \
	python/xferd/*.pyi) python/setup.py

python: $(if $(filter 1,$(SAN)),,$(PY_STAMP))

$(PY_STAMP): $(PY_SRC) $(LIBA) include/xfer.h include/xfer_ring.h | deps
	@echo "  PYEXT   python/xferd"
	$(Q)cd python && XFER_BUILD=$(abspath $(BUILD)) $(PYTHON) setup.py -q \
		build --build-base $(abspath $(BUILD))/python/tmp \
		--build-lib $(abspath $(BUILD))/python/lib --force \
		$(if $(Q),2>&1 | grep -v 'byte-compiling is disabled' || true)
	$(Q)test -n "$$(ls $(BUILD)/python/lib/xferd/_core*.so 2>/dev/null)"
	$(Q)touch $@

# --- NIXL backend ---------------------------------------------------------

# libplugin_XFERD.so (nixl/) and NIXL's plugin harness against it
# (tests/nixl/harness.cpp), built against the NIXL that
# scripts/nixl-build.sh builds once per machine into its cache
# (/var/cache/xferd-ci/nixl-KEY; the first time takes minutes).  Installed
# nowhere: point NIXL_PLUGIN_DIR at $(BUILD)/nixl.  libxfer is linked
# statically and kept out of the plugin's exports.
NIXL_OUT    := $(BUILD)/nixl
NIXL_PLUGIN := $(NIXL_OUT)/libplugin_XFERD.so
NIXL_HARNESS := $(NIXL_OUT)/xferd_harness
NIXL_SRC    := $(wildcard nixl/*.cpp nixl/*.h)
CXX         ?= g++
NIXL_CXXFLAGS = -std=c++20 -O2 -g -fPIC -Wall -Wextra -Iinclude -Inixl \
	-isystem $$d/prefix/include -isystem $$d/prefix/include/backend \
	-isystem $$d/prefix/include/utils \
	-isystem $$d/src/nixl/subprojects/abseil-cpp-20250814.1
NIXL_LIBS   = -L$$d/prefix/lib/x86_64-linux-gnu -lnixl_common \
	-lnixl_build -Wl,-rpath,$$d/prefix/lib/x86_64-linux-gnu

nixl-plugin: $(NIXL_PLUGIN) $(NIXL_HARNESS)

$(NIXL_PLUGIN): $(NIXL_SRC) $(LIBA) include/xfer.h include/xfer_ring.h
	@echo "  CXX     $@"
	$(Q)d=$$(scripts/nixl-build.sh) && mkdir -p $(NIXL_OUT) && \
	$(CXX) $(NIXL_CXXFLAGS) -shared -o $@ $(filter %.cpp,$(NIXL_SRC)) \
		$(LIBA) -Wl,--exclude-libs,ALL $(BASE_LIBS) $(NIXL_LIBS) \
		-Wl,--no-undefined

$(NIXL_HARNESS): tests/nixl/harness.cpp $(NIXL_PLUGIN)
	@echo "  CXX     $@"
	$(Q)d=$$(scripts/nixl-build.sh) && \
	$(CXX) $(NIXL_CXXFLAGS) -isystem $$d/src/nixl/test/gtest/plugins \
		-isystem $$d/src/nixl/test/gtest -o $@ $< $(NIXL_PLUGIN) \
		-Wl,-rpath,$(abspath $(NIXL_OUT)) $(NIXL_LIBS) -lnixl \
		-lgtest -lgtest_main -pthread

# --- running -------------------------------------------------------------

# The NIXL tests (tests/integration/nixl_*.sh) need the plugin: built
# here when NIXL builds; when it cannot (no tarballs) those tests fail,
# the rest of check runs.  Under ASan they skip (NIXL is not
# instrumented), so SAN=1 builds no plugin.
check: all python $(if $(filter 1,$(SAN)),,nixl-check-build)
	$(Q)tests/run-tests.sh $(BUILD)

nixl-check-build:
	$(Q)$(MAKE) --no-print-directory nixl-plugin nixlbench || \
		echo "NIXL plugin not built: the NIXL tests will fail"

# NIXL's nixlbench with XFERD in its backend list and its ASIO runtime
# fixed (tests/nixl/nixlbench-*.patch), built once per machine beside
# NIXL's cache by scripts/nixlbench-build.sh, which prints its path.
nixlbench:
	$(Q)scripts/nixlbench-build.sh >/dev/null

unit: $(UNIT_BIN)
	$(Q)$(UNIT_BIN)

demo: all
	$(Q)examples/demo.sh $(BUILD)

# The three reports go into one day's file under bench/results/ (the day
# the run started) and each replaces its own part of BENCHMARKS.md.
bench:
	$(Q)$(MAKE) --no-print-directory EXTRA_DEPS="$(DEPS_BENCH)" all
	$(Q)export BENCH_REPORT="$${BENCH_REPORT:-$(CURDIR)/bench/results/$$(date -u +%F).md}"; \
		bench/bench.sh $(BUILD) && bench/bench-tcp.sh $(BUILD) && \
		bench/bench-rdma.sh $(BUILD)

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan SAN=1 check

# Every harness for FUZZ_SECONDS from its seed corpus; a crash, leak,
# sanitizer report or timeout fails the target and keeps its input in
# build-fuzz/crashes/.
fuzz:
	$(Q)$(MAKE) --no-print-directory EXTRA_DEPS="$(DEPS_FUZZ)" deps
	$(Q)$(MAKE) --no-print-directory BUILD=build-fuzz FUZZ=1 fuzz-run

fuzz-run: $(FUZZ_BIN)
	$(Q)tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS) $(FUZZ_BIN)

# Clients storming two xferds under kill -9 and faults, every byte checked
# (tests/integration/netns_storm.sh), for SOAK_MINUTES; a line a minute.
SOAK_MINUTES ?= 30
soak: all
	$(Q)tests/soak.sh $(BUILD) $(SOAK_MINUTES)

# What install needs built: not the tests (debian/rules builds only this).
INSTALLED := $(XFERD) $(XFERCTL) $(XFERBENCH) $(DLISTBENCH) $(XFERSTREAM) \
	$(LIBSO) $(LIBA) $(LIBPC)
installed: $(INSTALLED)

# NO_PYTHON=1 leaves the Python package out (debian/rules installs it
# with pybuild).
install: $(INSTALLED) $(if $(filter 1,$(NO_PYTHON)),,install-python)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/xferd \
		$(DESTDIR)$(DATADIR)/grafana $(DESTDIR)$(DATADIR)/prometheus
	install -m 0755 $(XFERD) $(DESTDIR)$(SBINDIR)/xferd
	install -m 0755 $(XFERCTL) $(XFERBENCH) $(DLISTBENCH) $(XFERSTREAM) \
		$(DESTDIR)$(BINDIR)/
	install -m 0755 $(LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libxfer.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libxfer.so
	install -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/
	$(PC_SUBST) > $(DESTDIR)$(LIBDIR)/pkgconfig/libxfer.pc
	install -m 0644 include/xfer.h include/xfer_ring.h $(DESTDIR)$(INCDIR)/
	sed 's|@SBINDIR@|$(SBINDIR)|g' systemd/xferd.service > \
		$(DESTDIR)$(UNITDIR)/xferd.service
	install -m 0644 systemd/xferd.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/xferd.sysusers $(DESTDIR)$(SYSUSERSDIR)/xferd.conf
	@# The example configuration; an edited one is never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/xferd/xferd.conf || \
		install -m 0644 etc/xferd.conf $(DESTDIR)$(SYSCONFDIR)/xferd/xferd.conf
	install -m 0644 tools/xferctl/xferctl.1 bench/xferbench.1 \
		bench/dlistbench.1 examples/xferstream.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 client/libxfer.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 daemon/xferd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 daemon/xferd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 monitoring/grafana/xferd.json $(DESTDIR)$(DATADIR)/grafana/
	install -m 0644 monitoring/prometheus/xferd-rules.yml \
		$(DESTDIR)$(DATADIR)/prometheus/

install-python: $(LIBA)
	@# The Python package into Debian's python3 (dist-packages under
	@# PREFIX), built in $(BUILD)/python, libxfer linked statically.
	@# PREFIX=/usr: Debian's own layout (/usr/lib/python3/dist-packages;
	@# without it Debian's setuptools puts /usr's under /usr/local).
	cd python && XFER_BUILD=$(abspath $(BUILD)) $(PYTHON) setup.py -q \
		build --build-base $(abspath $(BUILD))/python/tmp \
		--build-lib $(abspath $(BUILD))/python/lib \
		install --skip-build --prefix=$(PREFIX) \
		$(if $(filter /usr,$(PREFIX)),--install-layout=deb) \
		$(if $(DESTDIR),--root=$(DESTDIR))

# Debian packages into $(BUILD)/deb/, built from a copy of the tree
# (scripts/build-deb.sh), lintian-checked.  tests/pkg/deb.sh installs and
# runs them.
deb:
	$(Q)$(MAKE) --no-print-directory EXTRA_DEPS="$(DEPS_DEB)" deps
	$(Q)scripts/build-deb.sh $(BUILD)/deb

clean:
	rm -rf build build-asan build-fuzz

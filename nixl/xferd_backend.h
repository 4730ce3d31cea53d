/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferd_backend.h - NIXL's XFERD backend: a nixlBackendEngine (NIXL's
 * plugin API version 1) that moves bytes through the local xferd with
 * libxfer's public API (include/xfer.h) and nothing else.
 *
 * One engine is one libxfer context (xfer_open).  NIXL's memory maps onto
 * xferd's: registerMem is xfer_reg (host or GPU memory alike), a
 * registration's public data is an xferd token (xfer_export of the whole
 * registration), loadRemoteMD imports a token, loadLocalMD points at the
 * registration itself (an SQE's remote may be one's own region).  A
 * request becomes one SQE: a prepared-list descriptor (XFER_OP_*_DLIST)
 * over two xferd lists cached per (metadata, descriptor set), or a batch
 * of linked SQEs the first time a set is seen.  See doc/nixl.md.
 *
 * Threads: NIXL may call an engine from several threads (its own and a
 * progress thread); every use of the context (SQ, CQ, round trips) and
 * of the engine's tables is under the engine's one mutex, ring_lock.  It
 * is a leaf: nothing is called with it held that takes another lock of
 * this file.  Round trips (xfer_reg, xfer_import, xfer_dlist_create)
 * block under it, as libxfer requires one thread at a time per context.
 */
#ifndef XFERD_NIXL_BACKEND_H
#define XFERD_NIXL_BACKEND_H

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend_engine.h"

#include <xfer.h>

namespace xferd_nixl {

/* Bytes of a NIXL notification message that xferd's notification
 * carries (its message, xfer_ring.h); a longer one is refused. */
constexpr size_t NOTIF_MSG_MAX = XFER_NOTIFY_MSG_MAX;

/* (offset, length) of each descriptor of a request, relative to its
 * registration or token: the key of a cached xferd list. */
using range_set = std::vector<std::pair<uint64_t, uint64_t>>;

class XferdEngine;

/*
 * Every metadata object of this backend, told apart at run time by kind:
 * a descriptor of a request may carry a registration (LOCAL) where NIXL
 * would have passed loaded metadata (NIXL's own plugin harness does so).
 */
class XferdMD : public nixlBackendMD {
public:
	enum class Kind { LOCAL, REMOTE };
	Kind kind;
	/* The handle an SQE names and where its offsets start. */
	uint64_t handle = 0;
	uintptr_t base = 0;
	uint64_t len = 0;
	/* xferd lists over this handle, by descriptor set; destroyed with the
	 * metadata (xferd drops them with the region or import anyway). */
	std::map<range_set, struct xfer_dlist *> lists;

	XferdMD(Kind k, bool is_private) : nixlBackendMD(is_private), kind(k) {}
};

/* registerMem: memory of this process registered with xferd. */
class XferdLocalMD : public XferdMD {
public:
	struct xfer_mem *mem = nullptr;
	nixl_mem_t seg;

	XferdLocalMD() : XferdMD(Kind::LOCAL, true) {}
};

/* loadRemoteMD (an imported token) or loadLocalMD (a view of one of our
 * registrations: remote is nullptr, nothing to unimport). */
class XferdRemoteMD : public XferdMD {
public:
	struct xfer_remote *remote = nullptr;
	std::string agent;

	XferdRemoteMD() : XferdMD(Kind::REMOTE, false) {}
};

/* One request: its SQEs are built by prepXfer, submitted by postXfer. */
class XferdReq : public nixlBackendReqH {
public:
	uint64_t id = 0;
	nixl_xfer_op_t op = NIXL_WRITE;
	bool use_list = false;
	struct xfer_dlist *local_list = nullptr, *remote_list = nullptr;
	/* Vector mode: one (local handle, off, remote handle, off, len) each. */
	struct range {
		uint64_t local, local_off, remote, remote_off, len;
	};
	std::vector<range> ranges;
	uint64_t notify_handle = 0; /* the remote handle a notification goes to */
	bool has_notif = false;
	std::string notif_msg;
	/* In flight: CQEs outstanding; the first error; bytes; last path. */
	unsigned outstanding = 0;
	bool posted = false, notify_pending = false, released = false;
	int error = 0;
	uint64_t bytes = 0;
	unsigned path = XFER_PATH_NONE;
};

class XferdEngine : public nixlBackendEngine {
public:
	explicit XferdEngine(const nixlBackendInitParams *init_params);
	~XferdEngine() override;

	bool supportsRemote() const override { return true; }
	bool supportsLocal() const override { return true; }
	bool supportsNotif() const override { return true; }
	nixl_mem_list_t getSupportedMems() const override
	{
		return {DRAM_SEG, VRAM_SEG};
	}

	nixl_status_t registerMem(const nixlBlobDesc &mem,
				  const nixl_mem_t &nixl_mem,
				  nixlBackendMD *&out) override;
	nixl_status_t deregisterMem(nixlBackendMD *meta) override;
	nixl_status_t getPublicData(const nixlBackendMD *meta,
				    std::string &str) const override;
	nixl_status_t getConnInfo(std::string &str) const override;
	nixl_status_t loadRemoteConnInfo(const std::string &remote_agent,
					 const std::string &conn_info) override;
	nixl_status_t connect(const std::string &) override { return NIXL_SUCCESS; }
	nixl_status_t disconnect(const std::string &) override { return NIXL_SUCCESS; }
	nixl_status_t loadRemoteMD(const nixlBlobDesc &input,
				   const nixl_mem_t &nixl_mem,
				   const std::string &remote_agent,
				   nixlBackendMD *&output) override;
	nixl_status_t loadLocalMD(nixlBackendMD *input,
				  nixlBackendMD *&output) override;
	nixl_status_t unloadMD(nixlBackendMD *input) override;

	nixl_status_t prepXfer(const nixl_xfer_op_t &operation,
			       const nixl_meta_dlist_t &local,
			       const nixl_meta_dlist_t &remote,
			       const std::string &remote_agent,
			       nixlBackendReqH *&handle,
			       const nixl_opt_b_args_t *opt_args) const override;
	nixl_status_t postXfer(const nixl_xfer_op_t &operation,
			       const nixl_meta_dlist_t &local,
			       const nixl_meta_dlist_t &remote,
			       const std::string &remote_agent,
			       nixlBackendReqH *&handle,
			       const nixl_opt_b_args_t *opt_args) const override;
	nixl_status_t checkXfer(nixlBackendReqH *handle) const override;
	nixl_status_t releaseReqH(nixlBackendReqH *handle) const override;

	nixl_status_t getNotifs(notif_list_t &notif_list) override;
	nixl_status_t genNotif(const std::string &remote_agent,
			       const std::string &msg) const override;

private:
	/* All mutable: NIXL's transfer methods are const. */
	mutable std::mutex ring_lock;
	struct xfer_ctx *ctx = nullptr;
	uint32_t timeout_ms = 0;
	std::string identity; /* our sender record, as getConnInfo gives it */
	mutable uint64_t next_id = 1;
	mutable std::unordered_map<uint64_t, XferdReq *> inflight;
	mutable notif_list_t notifs;
	/* Sender record (node, client) -> agent name, from conn infos. */
	std::map<std::string, std::string> senders;
	/* Imports of each remote agent, for genNotif. */
	std::map<std::string, std::set<XferdRemoteMD *>> agent_mds;
	/* Descriptor sets seen once: the second sight makes xferd lists. */
	mutable std::set<std::pair<const XferdMD *, range_set>> seen;

	nixl_status_t resolve(const nixlMetaDesc &d, const XferdMD *&md,
			      uint64_t &off) const;
	nixl_status_t cachedList(XferdMD *md, const range_set &set,
				 struct xfer_dlist *&out) const;
	nixl_status_t submitLocked(XferdReq *req) const;
	nixl_status_t sendNotifyLocked(XferdReq *req) const;
	void drainLocked() const;
	void dropListsLocked(XferdMD *md) const;
	std::string senderName(const struct xfer_cqe_sender &s,
			       const std::string &named) const;
};

/* A negative errno of libxfer or a CQE as a NIXL status. */
nixl_status_t status_of(int err);

} // namespace xferd_nixl

#endif /* XFERD_NIXL_BACKEND_H */

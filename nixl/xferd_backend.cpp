/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferd_backend.cpp - the XFERD engine's methods (xferd_backend.h says
 * what it maps onto what).  Thread: any NIXL thread; every method that
 * touches the context or the tables holds ring_lock (a leaf).
 */
#include "xferd_backend.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sched.h>

namespace xferd_nixl {

namespace {

/* Linked SQEs per batch in vector mode: a batch is one CQE, and it must
 * fit the SQ with room to spare for other requests. */
constexpr size_t BATCH_MAX = 256;
/* Descriptor sets remembered for their second sight (then bounded by
 * forgetting them all: a miss costs a batch, never correctness). */
constexpr size_t SEEN_MAX = 4096;
/* How long postXfer waits for SQ or index room before giving up. */
constexpr int SQ_WAIT_LOOPS = 100000;

const char CONN_MAGIC[] = "xferd1:";

std::string hex(const uint8_t *p, size_t n)
{
	std::string s;
	char b[3];

	for (size_t i = 0; i < n; i++) {
		snprintf(b, sizeof b, "%02x", p[i]);
		s += b;
	}
	return s;
}

/* The (node, client) of a sender record, as text: a conn info's body and
 * the key of senders. */
std::string sender_key(const struct xfer_cqe_sender &s)
{
	return hex(s.node, sizeof s.node) + "/" + std::to_string(s.client);
}

} // namespace

nixl_status_t status_of(int err)
{
	switch (-err) {
	case 0:
		return NIXL_SUCCESS;
	case EINVAL:
	case ERANGE:
	case E2BIG:
		return NIXL_ERR_INVALID_PARAM;
	case ENOENT:
		return NIXL_ERR_NOT_FOUND;
	case EACCES:
	case EPERM:
	case ESTALE:
		return NIXL_ERR_NOT_ALLOWED;
	case ENOTSUP:
		return NIXL_ERR_NOT_SUPPORTED;
	case ECONNRESET:
	case ENOTCONN:
	case EHOSTUNREACH:
	case ECONNREFUSED:
	case EPIPE:
		return NIXL_ERR_REMOTE_DISCONNECT;
	case ECANCELED:
		return NIXL_ERR_CANCELED;
	default:
		return NIXL_ERR_BACKEND;
	}
}

XferdEngine::XferdEngine(const nixlBackendInitParams *init_params)
	: nixlBackendEngine(init_params)
{
	std::string sock, tmo;
	struct xfer_cqe_sender me;
	int rc;

	/* "socket": xferd's socket (empty: $XFERD_SOCKET or the default);
	 * "timeout_ms": the SQE timeout of other-node paths (0: xferd's). */
	if (getInitParam("socket", sock) != NIXL_SUCCESS)
		sock.clear();
	if (getInitParam("timeout_ms", tmo) == NIXL_SUCCESS && !tmo.empty()) {
		char *end;
		unsigned long v = strtoul(tmo.c_str(), &end, 10);

		if (*end || v > UINT32_MAX) {
			NIXL_ERROR << "XFERD: timeout_ms '" << tmo
				   << "' is not a number of milliseconds";
			initErr = true;
			return;
		}
		timeout_ms = (uint32_t)v;
	}
	/* Our agent's name as our sender name, where xferd takes it (64
	 * bytes of printable ASCII): what a peer calls us when it never
	 * loaded our conn info. */
	bool nameable = localAgent.size() <= XFER_SENDER_NAME_MAX &&
		std::all_of(localAgent.begin(), localAgent.end(), [](char ch) {
			return (unsigned char)ch >= 0x20 && (unsigned char)ch <= 0x7e;
		});
	rc = xfer_open_named(sock.empty() ? nullptr : sock.c_str(),
			     nameable ? localAgent.c_str() : nullptr, &ctx);
	if (rc) {
		NIXL_ERROR << "XFERD: cannot reach xferd at "
			   << (sock.empty() ? "the default socket" : sock)
			   << ": " << xfer_strerror(rc);
		ctx = nullptr;
		initErr = true;
		return;
	}
	xfer_ctx_identity(ctx, &me);
	identity = sender_key(me);
	senders[identity] = localAgent;
	NIXL_DEBUG << "XFERD: agent " << localAgent << " is xferd client "
		   << identity;
}

XferdEngine::~XferdEngine()
{
	/* xfer_close cancels what is in flight and drops every region,
	 * import and list of the context; then the requests NIXL left. */
	xfer_close(ctx);
	for (auto &kv : inflight)
		if (kv.second->released)
			delete kv.second;
}

nixl_status_t XferdEngine::registerMem(const nixlBlobDesc &mem,
				       const nixl_mem_t &nixl_mem,
				       nixlBackendMD *&out)
{
	std::lock_guard<std::mutex> g(ring_lock);
	struct xfer_mem *m;
	int rc;

	if (nixl_mem != DRAM_SEG && nixl_mem != VRAM_SEG)
		return NIXL_ERR_NOT_SUPPORTED;
	/* xfer_reg tells host from GPU memory itself. */
	rc = xfer_reg(ctx, reinterpret_cast<void *>(mem.addr), mem.len, &m);
	if (rc) {
		NIXL_ERROR << "XFERD: xfer_reg of " << mem.len << " bytes: "
			   << xfer_strerror(rc);
		return status_of(rc);
	}
	auto *md = new XferdLocalMD();
	md->mem = m;
	md->seg = nixl_mem;
	md->handle = xfer_mem_handle(m);
	md->base = mem.addr;
	md->len = mem.len;
	out = md;
	return NIXL_SUCCESS;
}

void XferdEngine::dropListsLocked(XferdMD *md) const
{
	for (auto &kv : md->lists)
		xfer_dlist_destroy(ctx, kv.second);
	md->lists.clear();
	for (auto it = seen.begin(); it != seen.end();)
		it = it->first == md ? seen.erase(it) : std::next(it);
}

nixl_status_t XferdEngine::deregisterMem(nixlBackendMD *meta)
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *md = dynamic_cast<XferdLocalMD *>(meta);
	int rc;

	if (!md)
		return NIXL_ERR_INVALID_PARAM;
	dropListsLocked(md);
	rc = xfer_dereg(ctx, md->mem);
	delete md;
	return status_of(rc);
}

nixl_status_t XferdEngine::getPublicData(const nixlBackendMD *meta,
					 std::string &str) const
{
	auto *md = dynamic_cast<const XferdLocalMD *>(meta);
	uint8_t tok[XFER_TOKEN_MAX];
	size_t n = sizeof tok;
	int rc;

	if (!md)
		return NIXL_ERR_INVALID_PARAM;
	/* Never blocks: the whole registration's token. */
	rc = xfer_export(md->mem, 0, md->len, tok, &n);
	if (rc)
		return status_of(rc);
	str.assign(reinterpret_cast<const char *>(tok), n);
	return NIXL_SUCCESS;
}

/* Who we are as a sender of notifications: the peer names our
 * notifications by it.  Reaching our xferd needs nothing more: a token
 * says where its region lives. */
nixl_status_t XferdEngine::getConnInfo(std::string &str) const
{
	str = CONN_MAGIC + identity;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::loadRemoteConnInfo(const std::string &remote_agent,
					      const std::string &conn_info)
{
	std::lock_guard<std::mutex> g(ring_lock);

	if (conn_info.compare(0, sizeof CONN_MAGIC - 1, CONN_MAGIC) != 0)
		return NIXL_ERR_INVALID_PARAM;
	senders[conn_info.substr(sizeof CONN_MAGIC - 1)] = remote_agent;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::loadRemoteMD(const nixlBlobDesc &input,
					const nixl_mem_t &nixl_mem,
					const std::string &remote_agent,
					nixlBackendMD *&output)
{
	std::lock_guard<std::mutex> g(ring_lock);
	struct xfer_remote *r;
	int rc;

	if (nixl_mem != DRAM_SEG && nixl_mem != VRAM_SEG)
		return NIXL_ERR_NOT_SUPPORTED;
	rc = xfer_import(ctx, input.metaInfo.data(), input.metaInfo.size(), &r);
	if (rc) {
		NIXL_ERROR << "XFERD: importing a token of " << remote_agent
			   << ": " << xfer_strerror(rc);
		return status_of(rc);
	}
	auto *md = new XferdRemoteMD();
	md->remote = r;
	md->handle = xfer_remote_handle(r);
	md->base = input.addr; /* offsets are from the registration's start */
	md->len = xfer_remote_len(r);
	md->agent = remote_agent;
	agent_mds[remote_agent].insert(md);
	output = md;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::loadLocalMD(nixlBackendMD *input,
				       nixlBackendMD *&output)
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *reg = dynamic_cast<XferdLocalMD *>(input);

	if (!reg)
		return NIXL_ERR_INVALID_PARAM;
	/* One's own region is a valid remote of an SQE: a view, no import. */
	auto *md = new XferdRemoteMD();
	md->handle = reg->handle;
	md->base = reg->base;
	md->len = reg->len;
	md->agent = localAgent;
	agent_mds[localAgent].insert(md);
	output = md;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::unloadMD(nixlBackendMD *input)
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *md = dynamic_cast<XferdRemoteMD *>(input);
	int rc = 0;

	if (!md)
		return NIXL_ERR_INVALID_PARAM;
	dropListsLocked(md);
	if (md->remote)
		rc = xfer_unimport(ctx, md->remote);
	auto it = agent_mds.find(md->agent);
	if (it != agent_mds.end()) {
		it->second.erase(md);
		if (it->second.empty())
			agent_mds.erase(it);
	}
	delete md;
	return status_of(rc);
}

/* A descriptor's metadata and its offset inside it.  The metadata may be
 * a registration (LOCAL) on either side, or loaded metadata (REMOTE). */
nixl_status_t XferdEngine::resolve(const nixlMetaDesc &d, const XferdMD *&md,
				   uint64_t &off) const
{
	md = dynamic_cast<const XferdMD *>(d.metadataP);
	if (!md || d.addr < md->base || d.len > md->len ||
	    d.addr - md->base > md->len - d.len) {
		NIXL_ERROR << "XFERD: descriptor " << (void *)d.addr << "+"
			   << d.len << " outside its registration";
		return NIXL_ERR_INVALID_PARAM;
	}
	off = d.addr - md->base;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::cachedList(XferdMD *md, const range_set &set,
				      struct xfer_dlist *&out) const
{
	auto it = md->lists.find(set);
	std::vector<uint64_t> offs, lens;
	int rc;

	if (it != md->lists.end()) {
		out = it->second;
		return NIXL_SUCCESS;
	}
	for (auto &r : set) {
		offs.push_back(r.first);
		lens.push_back(r.second);
	}
	rc = xfer_dlist_create(ctx, md->handle, (uint32_t)set.size(),
			       offs.data(), lens.data(), 0, &out);
	if (rc) {
		NIXL_ERROR << "XFERD: xfer_dlist_create of " << set.size()
			   << " entries: " << xfer_strerror(rc);
		return status_of(rc);
	}
	md->lists.emplace(set, out);
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::prepXfer(const nixl_xfer_op_t &operation,
				    const nixl_meta_dlist_t &local,
				    const nixl_meta_dlist_t &remote,
				    const std::string &remote_agent,
				    nixlBackendReqH *&handle,
				    const nixl_opt_b_args_t *) const
{
	std::lock_guard<std::mutex> g(ring_lock);
	size_t n = (size_t)local.descCount();
	const XferdMD *lmd0 = nullptr, *rmd0 = nullptr;
	bool one_pair = true;
	range_set lset, rset;
	nixl_status_t st;

	if (operation != NIXL_READ && operation != NIXL_WRITE)
		return NIXL_ERR_INVALID_PARAM;
	if (n != (size_t)remote.descCount() || n == 0 || n > UINT32_MAX)
		return NIXL_ERR_INVALID_PARAM;
	auto req = std::make_unique<XferdReq>();
	req->op = operation;
	for (size_t i = 0; i < n; i++) {
		const XferdMD *lmd, *rmd;
		uint64_t loff, roff;

		if ((st = resolve(local[i], lmd, loff)) != NIXL_SUCCESS ||
		    (st = resolve(remote[i], rmd, roff)) != NIXL_SUCCESS)
			return st;
		if (lmd->kind != XferdMD::Kind::LOCAL ||
		    local[i].len != remote[i].len)
			return NIXL_ERR_INVALID_PARAM;
		if (i == 0) {
			lmd0 = lmd;
			rmd0 = rmd;
		} else if (lmd != lmd0 || rmd != rmd0) {
			one_pair = false;
		}
		req->ranges.push_back({lmd->handle, loff, rmd->handle, roff,
				       (uint64_t)local[i].len});
		lset.emplace_back(loff, (uint64_t)local[i].len);
		rset.emplace_back(roff, (uint64_t)remote[i].len);
	}
	req->notify_handle = req->ranges.back().remote;

	/* One list descriptor over cached lists when both sides are one
	 * registration each and this set was seen before; a batch of linked
	 * SQEs the first time (no round trip for a set never repeated). */
	if (one_pair && n > 1) {
		auto *lmd = const_cast<XferdMD *>(lmd0);
		auto *rmd = const_cast<XferdMD *>(rmd0);
		auto lkey = std::make_pair(lmd0, lset);
		auto rkey = std::make_pair(rmd0, rset);
		bool cached = lmd->lists.count(lset) && rmd->lists.count(rset);

		if (cached || (seen.count(lkey) && seen.count(rkey))) {
			if ((st = cachedList(lmd, lset, req->local_list)) != NIXL_SUCCESS ||
			    (st = cachedList(rmd, rset, req->remote_list)) != NIXL_SUCCESS)
				return st;
			req->use_list = true;
		} else {
			if (seen.size() >= SEEN_MAX)
				seen.clear();
			seen.insert(lkey);
			seen.insert(rkey);
		}
	}
	NIXL_DEBUG << "XFERD: prepared " << (operation == NIXL_WRITE ? "WRITE" : "READ")
		   << " of " << n << " descriptors to " << remote_agent << " as "
		   << (req->use_list ? "one list descriptor" : "linked SQEs");
	handle = req.release();
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::submitLocked(XferdReq *req) const
{
	unsigned op = req->op == NIXL_WRITE ? XFER_OP_WRITE : XFER_OP_READ;
	size_t n = req->ranges.size();
	size_t nbatch = req->use_list ? 1 : (n + BATCH_MAX - 1) / BATCH_MAX;
	struct xfer_sqe *sqe = nullptr;
	int rc;

	req->notify_pending = req->has_notif && nbatch > 1;
	for (size_t b = 0; b < nbatch; b++) {
		size_t first = b * BATCH_MAX;
		size_t cnt = req->use_list ? 1 : std::min(BATCH_MAX, n - first);

		/* Room comes back as xferd takes SQEs: wait for it briefly. */
		for (int loop = 0; xfer_sq_space(ctx) < cnt; loop++) {
			if (loop == SQ_WAIT_LOOPS)
				return NIXL_ERR_BACKEND;
			xfer_submit(ctx);
			drainLocked();
			sched_yield();
		}
		if (req->use_list) {
			unsigned lop = op == XFER_OP_WRITE ? XFER_OP_WRITE_DLIST
							   : XFER_OP_READ_DLIST;
			sqe = xfer_get_sqe(ctx);
			for (int loop = 0;; loop++) {
				rc = xfer_prep_dlist(ctx, sqe, lop, req->local_list,
						     req->remote_list, (uint32_t)n,
						     nullptr, nullptr, req->id);
				if (rc != -EAGAIN || loop == SQ_WAIT_LOOPS)
					break;
				drainLocked();
				sched_yield();
			}
			if (rc) {
				xfer_prep_nop(sqe, 0); /* the SQE is spent: a NOP */
				xfer_submit(ctx);
				return status_of(rc);
			}
		} else {
			for (size_t i = first; i < first + cnt; i++) {
				const XferdReq::range &r = req->ranges[i];

				sqe = xfer_get_sqe(ctx);
				xfer_prep_rw(sqe, op, r.local, r.local_off, r.remote,
					     r.remote_off, r.len, req->id);
				if (i + 1 < first + cnt)
					xfer_sqe_set_link(sqe);
				xfer_sqe_set_timeout(sqe, timeout_ms);
			}
		}
		xfer_sqe_set_timeout(sqe, timeout_ms);
		if (req->has_notif && nbatch == 1) {
			xfer_sqe_set_notify(sqe, 0);
			rc = xfer_sqe_set_message(ctx, sqe, req->notif_msg.data(),
						  req->notif_msg.size());
			if (rc) {
				NIXL_ERROR << "XFERD: notification message: "
					   << xfer_strerror(rc);
				req->error = rc;
			}
		}
		req->outstanding++;
	}
	xfer_submit(ctx);
	return NIXL_SUCCESS;
}

/* After every batch of a many-batch request: the notification alone. */
nixl_status_t XferdEngine::sendNotifyLocked(XferdReq *req) const
{
	struct xfer_sqe *sqe;

	for (int loop = 0; !(sqe = xfer_get_sqe(ctx)); loop++) {
		if (loop == SQ_WAIT_LOOPS)
			return NIXL_ERR_BACKEND;
		xfer_submit(ctx);
		sched_yield();
	}
	xfer_prep_notify(sqe, req->notify_handle, 0, req->id);
	int rc = xfer_sqe_set_message(ctx, sqe, req->notif_msg.data(),
				      req->notif_msg.size());
	if (rc) {
		/* An xferd without messages: the SQE is spent, a NOP. */
		xfer_prep_nop(sqe, req->id);
		NIXL_ERROR << "XFERD: notification message: " << xfer_strerror(rc);
		req->error = rc;
	}
	xfer_sqe_set_timeout(sqe, timeout_ms);
	req->notify_pending = false;
	req->outstanding++;
	xfer_submit(ctx);
	return NIXL_SUCCESS;
}

std::string XferdEngine::senderName(const struct xfer_cqe_sender &s,
				    const std::string &named) const
{
	auto it = senders.find(sender_key(s));

	/* A sender whose conn info we never loaded: the agent name it
	 * gave itself, else xferd's name for it. */
	if (it != senders.end())
		return it->second;
	return !named.empty() ? named : "xferd:" + sender_key(s);
}

/* Every CQE there is: completions to their requests, notifications to
 * the list getNotifs hands out.  Never blocks. */
void XferdEngine::drainLocked() const
{
	struct xfer_cqe *cqe;

	while (xfer_peek_cqe(ctx, &cqe) == 0) {
		if (cqe->flags & XFER_CQE_F_NOTIFY) {
			struct xfer_cqe_sender s;
			std::string who = "xferd:unknown";
			char name[XFER_SENDER_NAME_MAX + 1] = "";
			size_t len;
			const void *m = xfer_cqe_message(ctx, cqe, &len);

			xfer_cqe_sender_name(ctx, cqe, name, sizeof name);
			if (xfer_cqe_sender(ctx, cqe, &s) == 0)
				who = senderName(s, name);
			notifs.emplace_back(who, m ? std::string((const char *)m, len)
						 : std::string());
			xfer_cq_advance(ctx, 1);
			continue;
		}
		auto it = inflight.find(cqe->user_data);
		if (it == inflight.end()) {
			xfer_cq_advance(ctx, 1);
			continue;
		}
		XferdReq *req = it->second;
		if (cqe->result < 0) {
			if (!req->error)
				req->error = (int)cqe->result;
		} else {
			req->bytes += (uint64_t)cqe->result;
		}
		if (cqe->path != XFER_PATH_NONE)
			req->path = cqe->path;
		xfer_cq_advance(ctx, 1);
		if (--req->outstanding)
			continue;
		if (req->notify_pending && !req->error &&
		    sendNotifyLocked(req) == NIXL_SUCCESS)
			continue;
		NIXL_DEBUG << "XFERD: request " << req->id << ": "
			   << (req->error ? xfer_strerror(req->error) : "done")
			   << ", " << req->bytes << " bytes via "
			   << xfer_path_name(req->path);
		inflight.erase(it);
		if (req->released)
			delete req;
	}
}

nixl_status_t XferdEngine::postXfer(const nixl_xfer_op_t &operation,
				    const nixl_meta_dlist_t &,
				    const nixl_meta_dlist_t &,
				    const std::string &,
				    nixlBackendReqH *&handle,
				    const nixl_opt_b_args_t *opt_args) const
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *req = dynamic_cast<XferdReq *>(handle);
	nixl_status_t st;

	if (!req || req->op != operation)
		return NIXL_ERR_INVALID_PARAM;
	if (req->posted && req->outstanding)
		return NIXL_ERR_REPOST_ACTIVE;
	req->has_notif = opt_args && opt_args->hasNotif;
	if (req->has_notif) {
		/* xferd's notification carries NOTIF_MSG_MAX bytes: a
		 * longer message cannot travel faithfully. */
		if (opt_args->notifMsg.size() > NOTIF_MSG_MAX) {
			NIXL_ERROR << "XFERD: a notification message of "
				   << opt_args->notifMsg.size()
				   << " bytes; this backend carries up to "
				   << NOTIF_MSG_MAX;
			return NIXL_ERR_INVALID_PARAM;
		}
		req->notif_msg = opt_args->notifMsg;
	}
	/* A new id per post: CQEs of an earlier post never count here. */
	req->id = next_id++;
	req->error = 0;
	req->bytes = 0;
	req->path = XFER_PATH_NONE;
	req->posted = true;
	inflight[req->id] = req;
	st = submitLocked(req);
	if (st != NIXL_SUCCESS && !req->outstanding) {
		inflight.erase(req->id);
		return st;
	}
	if (st != NIXL_SUCCESS)
		req->error = -EIO; /* part went: report the failure at check */
	drainLocked();
	if (req->outstanding)
		return NIXL_IN_PROG;
	return req->error ? status_of(req->error) : NIXL_SUCCESS;
}

nixl_status_t XferdEngine::checkXfer(nixlBackendReqH *handle) const
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *req = dynamic_cast<XferdReq *>(handle);

	if (!req || !req->posted)
		return NIXL_ERR_INVALID_PARAM;
	drainLocked();
	if (req->outstanding)
		return NIXL_IN_PROG;
	return req->error ? status_of(req->error) : NIXL_SUCCESS;
}

nixl_status_t XferdEngine::releaseReqH(nixlBackendReqH *handle) const
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto *req = dynamic_cast<XferdReq *>(handle);

	if (!req)
		return NIXL_ERR_INVALID_PARAM;
	/* In flight: its CQEs still name it; drainLocked frees it then.
	 * The lists stay cached with their metadata. */
	if (req->outstanding)
		req->released = true;
	else
		delete req;
	return NIXL_SUCCESS;
}

nixl_status_t XferdEngine::getNotifs(notif_list_t &notif_list)
{
	std::lock_guard<std::mutex> g(ring_lock);

	drainLocked();
	for (auto &n : notifs)
		notif_list.push_back(std::move(n));
	notifs.clear();
	return NIXL_SUCCESS;
}

/* A notification alone goes to the owner of a region of the agent: any
 * of its imports will do. */
nixl_status_t XferdEngine::genNotif(const std::string &remote_agent,
				    const std::string &msg) const
{
	std::lock_guard<std::mutex> g(ring_lock);
	auto it = agent_mds.find(remote_agent);

	if (msg.size() > NOTIF_MSG_MAX)
		return NIXL_ERR_INVALID_PARAM;
	if (it == agent_mds.end() || it->second.empty())
		return NIXL_ERR_NOT_FOUND;
	auto *req = new XferdReq();
	req->id = next_id++;
	req->posted = true;
	req->released = true; /* nobody checks it: drainLocked frees it */
	req->notify_handle = (*it->second.begin())->handle;
	req->notif_msg = msg;
	inflight[req->id] = req;
	if (sendNotifyLocked(req) != NIXL_SUCCESS) {
		inflight.erase(req->id);
		delete req;
		return NIXL_ERR_BACKEND;
	}
	return NIXL_SUCCESS;
}

} // namespace xferd_nixl

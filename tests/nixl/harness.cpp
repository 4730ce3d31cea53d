/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness.cpp - NIXL's own plugin test harness (test/gtest/plugins/
 * transfer_handler.h of NIXL's sources, built by scripts/nixl-build.sh)
 * against the XFERD engine with local agents: DRAM -> DRAM, WRITE then
 * READ, one and several buffers, whole and split into entries, the bytes
 * checked by the harness, each case twice on the same descriptors (the
 * second time over the engine's cached xferd lists instead of linked
 * SQEs); and WRITEs with a notification, its message and sender checked.
 * Run by tests/integration/nixl_harness.sh against the shared xferd.
 */
#include <gtest/gtest.h>

#include <unistd.h>

#include "plugins_common.h"
#include "transfer_handler.h"
#include "xferd_backend.h"

namespace gtest::plugins {
namespace {

const std::string agent = "xferd-harness";
nixl_b_params_t params; /* defaults: $XFERD_SOCKET, xferd's timeout */

nixlBackendInitParams init_params()
{
	nixlBackendInitParams p;

	p.localAgent = agent;
	p.type = "XFERD";
	p.customParams = &params;
	p.enableProgTh = false;
	p.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_RW;
	return p;
}

/*
 * The harness checks a notification after every transfer of a handler
 * when the engine supports them, but sets one only for the first (it
 * clears hasNotif after checking it): so a handler with notifications
 * does one WRITE, and the WRITE-then-READ rounds run on the same engine
 * with notifications turned off for the harness.
 */
class XferdEngineQuiet : public xferd_nixl::XferdEngine {
public:
	using XferdEngine::XferdEngine;
	bool supportsNotif() const override { return false; }
};

class xferdHarness : public setupBackendTestFixture {
protected:
	std::shared_ptr<nixlBackendEngine> quiet_;

	xferdHarness()
	{
		localBackendEngine_ =
			std::make_shared<xferd_nixl::XferdEngine>(&GetParam());
		quiet_ = std::make_shared<XferdEngineQuiet>(&GetParam());
	}
};

/* WRITE then READ back, twice: linked SQEs the first time a descriptor
 * set is seen, the cached xferd lists after. */
void rounds(std::shared_ptr<nixlBackendEngine> e, bool split, int nbufs)
{
	ASSERT_FALSE(e->getInitErr());
	transferHandler<DRAM_SEG, DRAM_SEG> t(e, e, agent, agent, split, nbufs);

	for (int round = 0; round < 2; round++) {
		t.setLocalMem();
		t.testTransfer(NIXL_WRITE);
		t.resetLocalMem();
		t.testTransfer(NIXL_READ);
		t.checkLocalMem();
	}
}

/* One WRITE with the harness's notification ("Test", from agent). */
void notified(std::shared_ptr<nixlBackendEngine> e, bool split, int nbufs)
{
	transferHandler<DRAM_SEG, DRAM_SEG> t(e, e, agent, agent, split, nbufs);

	t.setLocalMem();
	t.testTransfer(NIXL_WRITE);
}

TEST_P(xferdHarness, OneBuffer) { rounds(quiet_, false, 1); }
TEST_P(xferdHarness, OneBufferSplit) { rounds(quiet_, true, 1); }
TEST_P(xferdHarness, SeveralBuffers) { rounds(quiet_, false, 3); }
TEST_P(xferdHarness, SeveralBuffersSplit) { rounds(quiet_, true, 3); }
TEST_P(xferdHarness, NotifyOneBuffer) { notified(localBackendEngine_, false, 1); }
TEST_P(xferdHarness, NotifyOneBufferSplit) { notified(localBackendEngine_, true, 1); }
TEST_P(xferdHarness, NotifySeveralBuffersSplit) { notified(localBackendEngine_, true, 3); }

/* Messages up to xferd's bound travel whole (a vLLM request id is 40-60
 * bytes), from the agent by name; one byte more is refused. */
TEST_P(xferdHarness, LongMessages)
{
	auto e = localBackendEngine_;
	transferHandler<DRAM_SEG, DRAM_SEG> t(e, e, agent, agent, false, 1);
	std::string longest(XFER_NOTIFY_MSG_MAX, 'r');
	const std::string req = "cmpl-5b1e7c1d2f0a4b8c9d3e6f7a8b9c0d1e-0:kv-ready";

	for (size_t i = 0; i < longest.size(); i++)
		longest[i] = (char)(' ' + i % 90);
	ASSERT_EQ(e->genNotif(agent, req), NIXL_SUCCESS);
	ASSERT_EQ(e->genNotif(agent, longest), NIXL_SUCCESS);
	EXPECT_EQ(e->genNotif(agent, longest + "x"), NIXL_ERR_INVALID_PARAM);
	notif_list_t got;
	for (int i = 0; i < 5000 && got.size() < 2; i++) {
		notif_list_t more;
		ASSERT_EQ(e->getNotifs(more), NIXL_SUCCESS);
		got.insert(got.end(), more.begin(), more.end());
		if (got.size() < 2)
			usleep(1000);
	}
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0].first, agent);
	EXPECT_EQ(got[0].second, req);
	EXPECT_EQ(got[1].first, agent);
	EXPECT_EQ(got[1].second, longest);
}

TEST_P(xferdHarness, Capabilities)
{
	EXPECT_TRUE(localBackendEngine_->supportsLocal());
	EXPECT_TRUE(localBackendEngine_->supportsRemote());
	EXPECT_TRUE(localBackendEngine_->supportsNotif());
}

INSTANTIATE_TEST_SUITE_P(XFERD, xferdHarness, testing::Values(init_params()));

} // namespace
} // namespace gtest::plugins

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness.cpp - NIXL's own plugin test harness (test/gtest/plugins/
 * transfer_handler.h of NIXL's sources, built by scripts/nixl-build.sh)
 * against the XFERD engine with local agents: DRAM -> DRAM, WRITE then
 * READ, one and several buffers, whole and split into entries; the
 * harness checks the bytes and the notification (message and sender).
 * Every case runs twice on the same descriptors: the second time the
 * engine uses its cached xferd lists instead of linked SQEs.
 * Run by tests/integration/nixl_harness.sh against the shared xferd.
 */
#include <gtest/gtest.h>

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

class xferdHarness : public setupBackendTestFixture {
protected:
	xferdHarness()
	{
		localBackendEngine_ =
			std::make_shared<xferd_nixl::XferdEngine>(&GetParam());
	}
};

void run(std::shared_ptr<nixlBackendEngine> e, bool split, int nbufs)
{
	transferHandler<DRAM_SEG, DRAM_SEG> t(e, e, agent, agent, split, nbufs);

	for (int round = 0; round < 2; round++) {
		t.setLocalMem();
		t.testTransfer(NIXL_WRITE);
		t.resetLocalMem();
		t.testTransfer(NIXL_READ);
		t.checkLocalMem();
	}
}

TEST_P(xferdHarness, OneBuffer) { run(localBackendEngine_, false, 1); }
TEST_P(xferdHarness, OneBufferSplit) { run(localBackendEngine_, true, 1); }
TEST_P(xferdHarness, SeveralBuffers) { run(localBackendEngine_, false, 3); }
TEST_P(xferdHarness, SeveralBuffersSplit) { run(localBackendEngine_, true, 3); }

TEST_P(xferdHarness, Capabilities)
{
	EXPECT_TRUE(localBackendEngine_->supportsLocal());
	EXPECT_TRUE(localBackendEngine_->supportsRemote());
	EXPECT_TRUE(localBackendEngine_->supportsNotif());
}

INSTANTIATE_TEST_SUITE_P(XFERD, xferdHarness, testing::Values(init_params()));

} // namespace
} // namespace gtest::plugins

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - the unit test runner: every module's suite in one srunner.
 * Exits 0 when all tests pass, 1 otherwise.
 */
#include <stdlib.h>

#include "core/log.h"
#include "suites.h"

int main(void)
{
	/* The code under test logs expected failures (a broken ring, ...);
	 * keep the report readable. */
	log_init(LOG_LVL_ERR);

	SRunner *sr = srunner_create(ring_suite());
	srunner_add_suite(sr, ring_phase_suite());
	srunner_add_suite(sr, wire_suite());
	srunner_add_suite(sr, token_suite());
	srunner_add_suite(sr, config_suite());
	srunner_add_suite(sr, progress_suite());
	srunner_add_suite(sr, names_suite());
	srunner_add_suite(sr, netaddr_suite());
	srunner_add_suite(sr, affinity_suite());
	srunner_add_suite(sr, auth_suite());
	srunner_add_suite(sr, peer_suite());
	srunner_add_suite(sr, dmabuf_suite());
	srunner_add_suite(sr, rcache_suite());
	srunner_add_suite(sr, rdma_dev_suite());
	srunner_add_suite(sr, rdma_land_suite());
	srunner_add_suite(sr, rdma_sched_suite());
	srunner_add_suite(sr, tcp_sched_suite());
	srunner_add_suite(sr, path_suite());
	srunner_add_suite(sr, movers_suite());
	srunner_add_suite(sr, staging_suite());
	srunner_add_suite(sr, pipeline_suite());
	srunner_add_suite(sr, dlist_suite());
	srunner_add_suite(sr, copy_workers_suite());
	srunner_add_suite(sr, fairq_suite());
	srunner_add_suite(sr, common_suite());
	srunner_add_suite(sr, regworker_suite());
	srunner_add_suite(sr, meta_suite());
	srunner_add_suite(sr, metrics_suite());
	srunner_add_suite(sr, quota_suite());
	srunner_add_suite(sr, http_request_suite());

	/* CK_ENV is CK_NORMAL unless CK_VERBOSITY says otherwise
	 * (CK_VERBOSITY=verbose lists every test). */
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

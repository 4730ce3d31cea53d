/* SPDX-License-Identifier: Apache-2.0 */
/*
 * suites.h - the check suites of the unit test binary, one per module.
 * main.c runs them all; each is defined in its own test_*.c.
 */
#ifndef XFER_UNIT_SUITES_H
#define XFER_UNIT_SUITES_H

#include <check.h>

Suite *ring_suite(void);
Suite *ring_phase_suite(void);
Suite *wire_suite(void);
Suite *token_suite(void);
Suite *config_suite(void);
Suite *progress_suite(void);
Suite *names_suite(void);
Suite *netaddr_suite(void);
Suite *affinity_suite(void);
Suite *auth_suite(void);
Suite *peer_suite(void);
Suite *dmabuf_suite(void);
Suite *rcache_suite(void);
Suite *rdma_dev_suite(void);
Suite *path_suite(void);
Suite *movers_suite(void);
Suite *staging_suite(void);
Suite *pipeline_suite(void);
Suite *dlist_suite(void);
Suite *copy_workers_suite(void);
Suite *common_suite(void);
Suite *regworker_suite(void);
Suite *meta_suite(void);
Suite *metrics_suite(void);
Suite *quota_suite(void);
Suite *http_request_suite(void);
Suite *fairq_suite(void);
Suite *rdma_land_suite(void);
Suite *rdma_sched_suite(void);
Suite *tcp_sched_suite(void);

#endif /* XFER_UNIT_SUITES_H */

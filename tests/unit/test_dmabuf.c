/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dmabuf.c - the page span a GPU range is exported with as a
 * dma-buf, and the refusals of the NIC registration's arguments.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "gpu/dmabuf.h"
#include "suites.h"

START_TEST(span_aligned)
{
	struct dmabuf_span s;

	ck_assert_int_eq(dmabuf_span(0x200000, 65536, 65536, &s), 0);
	ck_assert_uint_eq(s.base, 0x200000);
	ck_assert_uint_eq(s.size, 65536);
	ck_assert_uint_eq(s.offset, 0);
}
END_TEST

START_TEST(span_unaligned_widens)
{
	struct dmabuf_span s;

	/* 3 bytes before a page end and 5 after: two pages. */
	ck_assert_int_eq(dmabuf_span(0x20fffd, 8, 65536, &s), 0);
	ck_assert_uint_eq(s.base, 0x200000);
	ck_assert_uint_eq(s.size, 2 * 65536);
	ck_assert_uint_eq(s.offset, 0xfffd);
	ck_assert_uint_ge(s.base + s.size, 0x20fffd + 8);
}
END_TEST

START_TEST(span_refusals)
{
	struct dmabuf_span s = { 1, 2, 3 };

	ck_assert_int_eq(dmabuf_span(0x1000, 0, 4096, &s), -EINVAL);
	ck_assert_int_eq(dmabuf_span(0x1000, 10, 0, &s), -EINVAL);
	ck_assert_int_eq(dmabuf_span(0x1000, 10, 3000, &s), -EINVAL);
	ck_assert_int_eq(dmabuf_span(UINT64_MAX - 5, 10, 4096, &s), -EINVAL);
	ck_assert_int_eq(dmabuf_span(UINT64_MAX - 4096, 10, 4096, &s), -EINVAL);
	/* untouched on failure */
	ck_assert_uint_eq(s.base, 1);
	ck_assert_uint_eq(s.size, 2);
	ck_assert_uint_eq(s.offset, 3);
}
END_TEST

START_TEST(reg_refuses_bad_arguments)
{
	struct ibv_mr *mr = NULL;

	/* No protection domain, no fd, nothing to register: refused before
	 * the NIC is asked, and no MR comes back. */
	ck_assert_int_eq(nic_reg_dmabuf(NULL, 3, 0, 4096, 0, 0, &mr), -EINVAL);
	ck_assert_int_eq(nic_reg_dmabuf((struct ibv_pd *)&mr, -1, 0, 4096, 0, 0,
					&mr), -EINVAL);
	ck_assert_int_eq(nic_reg_dmabuf((struct ibv_pd *)&mr, 3, 0, 0, 0, 0,
					&mr), -EINVAL);
	ck_assert_ptr_null(mr);
}
END_TEST

START_TEST(export_without_gpu)
{
	struct dmabuf_span s;
	int fd = -1;

	/* No GPU here (CI): a clear -ENOTSUP, no fd. */
	int rc = gpu_dmabuf_export(0x200000, 4096, &fd, &s);
	ck_assert_int_eq(rc, -ENOTSUP);
	ck_assert_int_eq(fd, -1);
}
END_TEST

Suite *dmabuf_suite(void)
{
	Suite *s = suite_create("dmabuf");
	TCase *tc = tcase_create("span");

	tcase_add_test(tc, span_aligned);
	tcase_add_test(tc, span_unaligned_widens);
	tcase_add_test(tc, span_refusals);
	tcase_add_test(tc, reg_refuses_bad_arguments);
	tcase_add_test(tc, export_without_gpu);
	suite_add_tcase(s, tc);
	return s;
}

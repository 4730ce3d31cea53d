/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pubname.c - the syntax of published names and of lookup node parts.
 *
 * Hand-written rather than a regex(3): the rule is a character class and
 * a length, checked on every publish, unpublish and lookup, and a
 * compiled regex would need state and a lock shared by both sides.
 */
#include <string.h>

#include "common/pubname.h"

static bool name_char(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || (ch && strchr("._:@+-", ch));
}

bool pubname_valid(const char *name, size_t len)
{
	if (!name || len == 0 || len > PUBNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!name_char((unsigned char)name[i]))
			return false;
	return true;
}

bool pubname_node_valid(const char *node, size_t len)
{
	if (!node || len == 0 || len > PUBNAME_NODE_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)node[i] <= 0x20 ||
		    (unsigned char)node[i] >= 0x7f)
			return false;
	return true;
}

bool pubname_lookup_valid(const char *s)
{
	const char *slash = s ? strchr(s, '/') : NULL;

	if (!s)
		return false;
	if (!slash)
		return pubname_valid(s, strnlen(s, PUBNAME_MAX + 1));
	return pubname_node_valid(s, (size_t)(slash - s)) &&
	       pubname_valid(slash + 1, strnlen(slash + 1, PUBNAME_MAX + 1));
}

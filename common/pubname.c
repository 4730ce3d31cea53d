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
	if (!node || len == 0 || len > PUBNAME_NODE_MAX || node[0] == '~')
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)node[i] <= 0x20 ||
		    (unsigned char)node[i] >= 0x7f)
			return false;
	return true;
}

/* "~uid/" at s: the uid, and where the name starts; false if s does
 * not start with a well-formed qualifier. */
static bool parse_uid(const char *s, uint32_t *uid, const char **rest)
{
	uint64_t v = 0;
	size_t i = 1;

	if (s[0] != '~')
		return false;
	/* Decimal, no sign, no leading zero: one spelling per uid. */
	if (s[1] == '0' && s[2] != '/')
		return false;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v >= PUBNAME_NO_UID)
			return false;
	}
	if (i == 1 || s[i] != '/')
		return false;
	*uid = (uint32_t)v;
	*rest = s + i + 1;
	return true;
}

bool pubname_qualified_parse(const char *s, struct pubname_ref *out)
{
	if (!s)
		return false;
	*out = (struct pubname_ref){ .qname = s, .uid = PUBNAME_NO_UID,
				     .name = s };
	if (s[0] == '~' && !parse_uid(s, &out->uid, &out->name))
		return false;
	return pubname_valid(out->name, strnlen(out->name, PUBNAME_MAX + 1));
}

bool pubname_lookup_parse(const char *s, struct pubname_ref *out)
{
	const char *slash = s ? strchr(s, '/') : NULL;

	if (!s)
		return false;
	/* "~uid/name": the first '/' ends the qualifier, not a node. */
	if (!slash || s[0] == '~')
		return pubname_qualified_parse(s, out);
	if (!pubname_node_valid(s, (size_t)(slash - s)) ||
	    !pubname_qualified_parse(slash + 1, out))
		return false;
	out->node = s;
	out->node_len = (size_t)(slash - s);
	return true;
}

bool pubname_lookup_valid(const char *s)
{
	struct pubname_ref r;

	return pubname_lookup_parse(s, &r);
}

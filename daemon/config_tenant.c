/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_tenant.c - the tenants of xferd.conf (core/traffic_class.h):
 * `[tenant NAME]` sections, whose lines (weight, uid, gid, rate) name
 * one tenant each, and the one-line form of the same, the `tenant` key
 * (`tenant = NAME weight=3 uid=1000,1001 rate=200M`, for -o), which is
 * also how `xferctl config` shows them.  Called by config.c's parser
 * and key table.  On a reload, config_tenants_rebase keeps each
 * tenant's slot (its clients' tenant number, its counters) by name.
 * Main thread only; no locks.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "core/config_fail.h"
#include "common/numparse.h"

void config_tenants_default(struct tenant_table *tt)
{
	memset(tt, 0, sizeof(*tt));
	snprintf(tt->t[0].name, TENANT_NAME_MAX, "default");
	tt->t[0].weight = 1;
	tt->n = 1;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= TENANT_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return false;
	return true;
}

/* A new tenant NAME, or the one of that name (a second section of the
 * same name adds to it; "default" is tenant 0).  Its index or -EINVAL. */
static int tenant_open(struct tenant_table *tt, const char *name, char *err,
		       size_t errlen)
{
	if (!name_ok(name))
		return config_fail(err, errlen,
				   "tenant: '%s' is not a name (1-31 of A-Z "
				   "a-z 0-9 _ - .)", name);
	for (uint32_t i = 0; i < tt->n; i++)
		if (strcmp(tt->t[i].name, name) == 0)
			return (int)i;
	if (tt->n == TENANT_MAX)
		return config_fail(err, errlen, "tenant: more than %d tenants",
				   TENANT_MAX - 1);
	struct tenant_cfg *t = &tt->t[tt->n];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, TENANT_NAME_MAX, "%s", name);
	t->weight = 1;
	t->rank = (uint8_t)tt->n;  /* a parsed table is in file order */
	return (int)tt->n++;
}

static int id_list(const char *what, const char *value, uint32_t *ids,
		   uint8_t *n, char *err, size_t errlen)
{
	char buf[256];
	char *save = NULL;

	if (strlen(value) >= sizeof(buf))
		return config_fail(err, errlen, "%s: list too long", what);
	strcpy(buf, value);
	for (char *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (numparse_size(tok, 0, &v) || v >= UINT32_MAX)
			return config_fail(err, errlen, "%s: '%s' is not an id",
					   what, tok);
		if (*n == TENANT_IDS_MAX)
			return config_fail(err, errlen, "%s: more than %d ids",
					   what, TENANT_IDS_MAX);
		ids[(*n)++] = (uint32_t)v;
	}
	return 0;
}

/* One setting of tenant i. */
static int tenant_key(struct tenant_cfg *t, const char *key,
		      const char *value, char *err, size_t errlen)
{
	uint64_t v;

	if (strcmp(key, "weight") == 0) {
		if (numparse_size(value, 0, &v) || v < 1 ||
		    v > TENANT_WEIGHT_MAX)
			return config_fail(err, errlen,
					   "weight: '%s' is not a number in "
					   "[1, %d]", value, TENANT_WEIGHT_MAX);
		t->weight = (uint32_t)v;
		return 0;
	}
	if (strcmp(key, "rate") == 0) {
		if (strcmp(value, "off") == 0) {
			t->rate = 0;
			return 0;
		}
		if (numparse_size(value, NUMPARSE_BYTE_UNIT, &v) ||
		    v < 65536)
			return config_fail(err, errlen,
					   "rate: '%s' is not bytes a second "
					   "(64K or more) or off", value);
		t->rate = v;
		return 0;
	}
	if (strcmp(key, "uid") == 0)
		return id_list("uid", value, t->uids, &t->nuids, err, errlen);
	if (strcmp(key, "gid") == 0)
		return id_list("gid", value, t->gids, &t->ngids, err, errlen);
	return config_fail(err, errlen,
			   "'%s' is not a tenant key (weight, uid, gid, rate)",
			   key);
}

int config_tenant_section(struct xferd_config *c, const char *header,
			  char *err, size_t errlen)
{
	char name[64];
	char extra;

	if (sscanf(header, "[tenant %63[^] ] %c", name, &extra) != 2 ||
	    extra != ']')
		return config_fail(err, errlen,
				   "'%s' is not a [tenant NAME] section",
				   header);
	int i = tenant_open(&c->tenants, name, err, errlen);
	if (i < 0)
		return i;
	c->tenants.section = (uint32_t)i;
	return 0;
}

int config_tenant_key(struct xferd_config *c, const char *key,
		      const char *value, char *err, size_t errlen)
{
	return tenant_key(&c->tenants.t[c->tenants.section], key, value, err,
			  errlen);
}

int config_tenant_line(struct xferd_config *c, const char *value, char *err,
		       size_t errlen)
{
	char buf[512];
	char *save = NULL;
	struct tenant_table tt = c->tenants;

	if (strlen(value) >= sizeof(buf))
		return config_fail(err, errlen, "tenant: value too long");
	strcpy(buf, value);
	char *tok = strtok_r(buf, " \t", &save);
	if (!tok)
		return config_fail(err, errlen, "tenant: 'NAME key=value ...'");
	int i = tenant_open(&tt, tok, err, errlen);
	if (i < 0)
		return i;
	while ((tok = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(tok, '=');
		if (!eq)
			return config_fail(err, errlen,
					   "tenant: '%s' is not key=value",
					   tok);
		*eq = '\0';
		if (tenant_key(&tt.t[i], tok, eq + 1, err, errlen))
			return -EINVAL;
	}
	c->tenants = tt;
	return 0;
}

static size_t ids_text(char *buf, size_t len, const char *what,
		       const uint32_t *ids, uint8_t n)
{
	size_t k = 0;

	for (uint8_t j = 0; j < n && k < len; j++)
		k += (size_t)snprintf(buf + k, len - k, "%s%u",
				      j ? "," : what, ids[j]);
	return k;
}

void config_tenant_get(const struct xferd_config *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	/* In the file's order; removed tenants are not the configuration. */
	for (uint32_t r = 0; r < TENANT_MAX && n < len; r++) {
		const struct tenant_cfg *t = NULL;
		for (uint32_t i = 0; i < c->tenants.n; i++)
			if (tenant_slot_used(&c->tenants, i) &&
			    !c->tenants.t[i].removed &&
			    c->tenants.t[i].rank == r)
				t = &c->tenants.t[i];
		if (!t)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s weight=%u",
				      n ? "; " : "", t->name, t->weight);
		if (n < len && t->nuids)
			n += ids_text(buf + n, len - n, " uid=", t->uids,
				      t->nuids);
		if (n < len && t->ngids)
			n += ids_text(buf + n, len - n, " gid=", t->gids,
				      t->ngids);
		if (n < len && t->rate)
			n += (size_t)snprintf(buf + n, len - n, " rate=%llu",
					      (unsigned long long)t->rate);
	}
}

static int find_name(const struct tenant_table *tt, const char *name)
{
	for (uint32_t i = 0; i < tt->n; i++)
		if (tenant_slot_used(tt, i) && strcmp(tt->t[i].name, name) == 0)
			return (int)i;
	return -1;
}

int config_tenants_rebase(struct tenant_table *next,
			  const struct tenant_table *cur,
			  const bool held[TENANT_MAX], char *err,
			  size_t errlen)
{
	struct tenant_table out;
	bool placed[TENANT_MAX] = { false };

	memset(&out, 0, sizeof(out));
	/* Every tenant still named keeps its slot, with its new settings;
	 * one no longer named stays, removed, while held. */
	for (uint32_t i = 0; i < cur->n; i++) {
		if (!tenant_slot_used(cur, i))
			continue;
		int j = find_name(next, cur->t[i].name);
		if (j >= 0) {
			out.t[i] = next->t[j];
			placed[j] = true;
		} else if (held[i]) {
			out.t[i] = cur->t[i];
			out.t[i].removed = true;
			out.t[i].nuids = out.t[i].ngids = 0;
			out.t[i].rank = UINT8_MAX;
		}
	}
	/* New tenants: the lowest slots nobody holds. */
	for (uint32_t j = 0; j < next->n; j++) {
		if (placed[j])
			continue;
		uint32_t k = 1;
		while (k < TENANT_MAX && out.t[k].name[0])
			k++;
		if (k == TENANT_MAX)
			return config_fail(err, errlen, "tenant %s: no free "
					   "slot (%d at most; removed tenants "
					   "keep theirs while their clients "
					   "remain)", next->t[j].name,
					   TENANT_MAX - 1);
		out.t[k] = next->t[j];
		/* Another tenant's counters until now, or never used. */
		out.fresh |= 1u << k;
	}
	out.n = 1;
	for (uint32_t i = 0; i < TENANT_MAX; i++) {
		if (out.t[i].name[0])
			out.n = i + 1;
		else
			out.t[i].weight = 1;  /* unused: never 0 to a queue */
	}
	*next = out;
	return 0;
}

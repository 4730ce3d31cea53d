/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_config.c - xferd.conf as xferd reads it: arbitrary text, line by
 * line, through config_parse_line() (daemon/config.c), the function
 * config_load() runs on every line of the file.
 *
 * Invariants: a refused line leaves the settings unchanged and says why;
 * an accepted one leaves them within the bounds the daemon relies on.
 */
#include <string.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xferd_config cfg, before;
	char text[4096], err[256];

	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	config_defaults(&cfg);
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		memcpy(&before, &cfg, sizeof(cfg));
		err[0] = '\0';
		if (config_parse_line(&cfg, line, err, sizeof(err))) {
			FUZZ_ASSERT(memcmp(&cfg, &before, sizeof(cfg)) == 0);
			FUZZ_ASSERT(err[0] != '\0');
			break;  /* as config_load: the first bad line ends it */
		}
		FUZZ_ASSERT(cfg.npeers <= CONFIG_MAX_PEERS);
		FUZZ_ASSERT(memchr(cfg.socket_path, 0, sizeof(cfg.socket_path)));
		FUZZ_ASSERT(memchr(cfg.listen, 0, sizeof(cfg.listen)));
		FUZZ_ASSERT(memchr(cfg.node_name, 0, sizeof(cfg.node_name)));
		FUZZ_ASSERT(memchr(cfg.rdma_devices, 0,
				   sizeof(cfg.rdma_devices)));
		FUZZ_ASSERT(memchr(cfg.cluster_key_file, 0,
				   sizeof(cfg.cluster_key_file)));
		FUZZ_ASSERT(cfg.sq_entries <= cfg.max_sq_entries);
		FUZZ_ASSERT((cfg.sq_entries & (cfg.sq_entries - 1)) == 0);
	}
	return 0;
}

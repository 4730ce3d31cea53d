/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz.h - what every libFuzzer harness under tests/fuzz/ defines.
 *
 * Each harness feeds arbitrary bytes to the real parsing and validation
 * code of xferd (linked, not copied) and checks what must hold whatever
 * the input: no sanitizer report, and the invariants it asserts.
 * `make fuzz` builds them with clang (build-fuzz/) and runs each one.
 */
#ifndef XFER_FUZZ_H
#define XFER_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant broke: abort, which libFuzzer reports as a crash and
 * keeps the input for. */
#define FUZZ_ASSERT(cond) \
	do { \
		if (!(cond)) \
			abort(); \
	} while (0)

#endif /* XFER_FUZZ_H */

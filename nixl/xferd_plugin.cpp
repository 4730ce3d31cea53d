/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferd_plugin.cpp - the entry points NIXL looks up in libplugin_XFERD.so
 * (plugin API version 1): the backend's name, its default parameters
 * (what getPluginParams shows) and memory kinds.
 */
#include "backend_plugin.h"
#include "xferd_backend.h"

using xferd_plugin_t = nixlBackendPluginCreator<xferd_nixl::XferdEngine>;

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *nixl_plugin_init()
{
	/* "socket": xferd's socket, empty for $XFERD_SOCKET or the default;
	 * "timeout_ms": other-node transfers fail after this long, 0 for
	 * xferd's op_timeout_ms. */
	return xferd_plugin_t::create(NIXL_PLUGIN_API_VERSION, "XFERD", "0.1.0",
				      {{"socket", ""}, {"timeout_ms", "0"}},
				      {DRAM_SEG, VRAM_SEG});
}

extern "C" NIXL_PLUGIN_EXPORT void nixl_plugin_fini() {}

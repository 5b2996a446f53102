/*
 * Transport plugins that the loader must refuse, one per build flag
 * (tests/meson.build builds each as its own shared object):
 *   FAKE_NEWER   exports only tnt_transport_plugin_v5, a table of an
 *                interface version this library does not speak;
 *   FAKE_NO_SYM  exports no table at all;
 *   FAKE_NO_SEND exports a version-2 table without its send function.
 * None of them is ever called: the loader must say what is wrong and
 * load nothing.
 */
#include <stddef.h>

#include "tnt/transport.h"

#define EXPORT __attribute__((visibility("default")))

static tnt_result_t fake_init(const tnt_transport_env_t *env, void **ctx)
{
    (void)env;
    *ctx = NULL;
    return TNT_ERR_INTERNAL;
}

static tnt_result_t fake_listen(void *ctx, void *addr, size_t *len)
{
    (void)ctx;
    (void)addr;
    *len = 0;
    return TNT_ERR_INTERNAL;
}

static tnt_result_t fake_connect(void *ctx, int peer, const void *addr,
                                 size_t len)
{
    (void)ctx;
    (void)peer;
    (void)addr;
    (void)len;
    return TNT_ERR_INTERNAL;
}

static void fake_close(void *ctx, void *ep)
{
    (void)ctx;
    (void)ep;
}

static void fake_finalize(void *ctx)
{
    (void)ctx;
}

#if defined(FAKE_NEWER)
/* What a plugin built against a later header would carry: its version
 * says 5, and it only exports the v5 symbol. */
EXPORT const tnt_transport_t tnt_transport_plugin_v5 = {
    .size = sizeof(tnt_transport_t) + 64,
    .version = 5,
    .name = "fake-v5",
    .init = fake_init,
    .listen = fake_listen,
    .connect = fake_connect,
    .close = fake_close,
    .finalize = fake_finalize,
};
#elif defined(FAKE_NO_SEND)
EXPORT const tnt_transport_t tnt_transport_plugin_v2 = {
    .size = sizeof(tnt_transport_t),
    .version = 2,
    .name = "fake-no-send",
    .init = fake_init,
    .listen = fake_listen,
    .connect = fake_connect,
    .close = fake_close,
    .finalize = fake_finalize,
};
#elif defined(FAKE_NO_SYM)
/* Functions, but no table: not a transport plugin. */
EXPORT int fake_not_a_plugin(void)
{
    void *ctx;
    return fake_init(NULL, &ctx) + fake_listen(NULL, NULL, &(size_t){0}) +
           fake_connect(NULL, 0, NULL, 0) + (fake_close(NULL, NULL), 0) +
           (fake_finalize(NULL), 0);
}
#else
#error "build with FAKE_NEWER, FAKE_NO_SEND or FAKE_NO_SYM"
#endif

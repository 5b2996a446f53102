/*
 * Transport plugins: TNT_TRANSPORT_PLUGIN=/path/libtnt-net-NAME.so. The
 * shared object exports a tnt_transport_t as `tnt_transport_plugin_v4`
 * (or `_v3`, `_v2`, `_v1`, an older table: still loaded); the
 * newest symbol found wins. It is opened once per process and never
 * closed: communicators of the process share it, and a dlclose would
 * pull code from under any of them.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "transport/transport.h"

/* Newer interface versions than this library's, probed only to name a
 * refused plugin's version. */
#define PROBE_NEWER_MAX 16

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static tnt_transport_t plugin_table;   /* adopted copy */
static const tnt_transport_t *plugin;  /* &plugin_table once loaded */
static char plugin_path[4096];

const tnt_transport_t *tnt__transport_plugin(void)
{
    pthread_mutex_lock(&plugin_lock);
    const tnt_transport_t *t = plugin;
    pthread_mutex_unlock(&plugin_lock);
    return t;
}

/* The table the plugin exports, or NULL with the error recorded. */
static const tnt_transport_t *find_table(void *h, const char *path)
{
    const char *syms[] = {TNT_TRANSPORT_PLUGIN_SYMBOL,
                          TNT_TRANSPORT_PLUGIN_SYMBOL_V3,
                          TNT_TRANSPORT_PLUGIN_SYMBOL_V2,
                          TNT_TRANSPORT_PLUGIN_SYMBOL_V1};
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        const tnt_transport_t *t = dlsym(h, syms[i]);
        if (t)
            return t;
    }
    /* Copied: the next dlsym frees dlerror's string. */
    const char *e = dlerror();
    char why[512];
    snprintf(why, sizeof(why), "%s", e ? e : "not found");
    char sym[64];
    for (int v = PROBE_NEWER_MAX; v > TNT_TRANSPORT_VERSION; v--) {
        snprintf(sym, sizeof(sym), "tnt_transport_plugin_v%d", v);
        if (dlsym(h, sym)) {
            tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN=%s exports %s: "
                       "it implements transport interface version %d; this "
                       "library speaks versions %d to %d", path, sym, v,
                       TNT_TRANSPORT_VERSION_MIN, TNT_TRANSPORT_VERSION);
            return NULL;
        }
    }
    tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN=%s has no symbol %s "
               "(nor %s, %s, %s): %s", path, TNT_TRANSPORT_PLUGIN_SYMBOL,
               TNT_TRANSPORT_PLUGIN_SYMBOL_V3, TNT_TRANSPORT_PLUGIN_SYMBOL_V2,
               TNT_TRANSPORT_PLUGIN_SYMBOL_V1, why);
    return NULL;
}

static tnt_result_t load(const char *path)
{
    if (plugin) {
        if (strcmp(path, plugin_path) == 0)
            return TNT_SUCCESS;
        return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN=%s: this "
                          "process already loaded %s (one plugin per "
                          "process)", path, plugin_path);
    }
    if (strlen(path) >= sizeof(plugin_path))
        return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN: path of "
                          "%zu bytes is too long", strlen(path));
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN=%s cannot "
                          "be loaded: %s", path, dlerror());
    const tnt_transport_t *t = find_table(h, path);
    char what[4200];
    snprintf(what, sizeof(what), "TNT_TRANSPORT_PLUGIN=%s", path);
    tnt_result_t rc = t ? tnt__transport_adopt(t, what, &plugin_table)
                        : TNT_ERR_CONFIG;
    for (int i = 0; rc == TNT_SUCCESS && i < TNT_TP_PLUGIN; i++) {
        const tnt_transport_t *b = tnt__transport_get(i);
        if (b && strcmp(b->name, plugin_table.name) == 0)
            rc = tnt__error(TNT_ERR_CONFIG, "%s: its name '%s' is taken by "
                            "a built-in transport", what, b->name);
    }
    if (rc != TNT_SUCCESS) {
        dlclose(h);
        return rc;
    }
    snprintf(plugin_path, sizeof(plugin_path), "%s", path);
    plugin = &plugin_table;
    TNT_LOG_INFO("transport plugin '%s' (interface version %u) from %s",
                 plugin_table.name, plugin_table.version, path);
    return TNT_SUCCESS;
}

tnt_result_t tnt__transport_plugin_load(const char *path)
{
    if (!path || !*path)
        return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT_PLUGIN is empty; "
                          "expected the path of a transport plugin");
    pthread_mutex_lock(&plugin_lock);
    tnt_result_t rc = load(path);
    pthread_mutex_unlock(&plugin_lock);
    return rc;
}

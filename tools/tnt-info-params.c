/*
 * tnt-info --params: every entry of the one table of environment
 * variables (lib/util/param_table.h), nothing else, in the table's order.
 * Values are read by the library's own readers: the typed reads for
 * sizes, seconds and integers (so "128k" shows the bytes the library
 * uses), the table's check for the rest, the logger and the SIMD choice
 * for the two lenient variables they read, and tnt__params_load for the
 * engine's extra rules (TNT_TIMEOUT > 0, ...), whose error
 * tnt_comm_init would return.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "collectives/reduce.h"
#include "tnt-info.h"
#include "tnt/transport.h"
#include "util/error.h"
#include "util/ifname.h"
#include "util/log.h"
#include "util/param.h"
#include "util/param_table.h"

static const char *type_name(tnt_env_type_t t)
{
    switch (t) {
    case TNT_ENV_T_SIZE: return "size";
    case TNT_ENV_T_SECONDS: return "seconds";
    case TNT_ENV_T_LONG: return "integer";
    case TNT_ENV_T_CHOICE: return "choice";
    case TNT_ENV_T_FLAG: return "flag";
    case TNT_ENV_T_TEXT: return "text";
    }
    return "?";
}

static void range_of(const tnt_env_def_t *d, char *buf, size_t len)
{
    switch (d->type) {
    case TNT_ENV_T_SIZE:
        snprintf(buf, len, "bytes, k/M/G suffixes (powers of 1024)");
        break;
    case TNT_ENV_T_SECONDS:
        snprintf(buf, len, "seconds, %ld..%ld, decimal", d->min, d->max);
        break;
    case TNT_ENV_T_LONG:
        snprintf(buf, len, "%ld..%ld", d->min, d->max);
        break;
    default:
        snprintf(buf, len, "%s", d->values ? d->values : "");
    }
}

/* The value the library uses, as text, read as its reader reads it.
 * Returns the typed read's result; "used" is empty when nothing can be
 * shown (unset and derived by the reader). */
static tnt_result_t used_value(tnt_env_id_t id, const tnt_env_def_t *d,
                               const char *set, char *used, size_t len)
{
    const char *text = (set && *set) ? set : d->def;
    used[0] = '\0';
    tnt_result_t rc = TNT_SUCCESS;
    size_t sz;
    double sec;
    long l;
    switch (d->type) {
    case TNT_ENV_T_SIZE:
        rc = tnt__env_size(id, &sz);
        if (rc == TNT_SUCCESS && text)
            snprintf(used, len, "%zu", sz);
        return rc;
    case TNT_ENV_T_SECONDS:
        rc = tnt__env_seconds(id, &sec);
        if (rc == TNT_SUCCESS && text)
            snprintf(used, len, "%g", sec);
        return rc;
    case TNT_ENV_T_LONG:
        rc = tnt__env_long(id, &l);
        if (rc == TNT_SUCCESS && text)
            snprintf(used, len, "%ld", l);
        return rc;
    case TNT_ENV_T_FLAG: /* util/log.c, core/report.c: off only for 0 */
        if (text)
            snprintf(used, len, "%s",
                     (*text == '\0' || strcmp(text, "0") == 0) ? "0" : "1");
        return TNT_SUCCESS;
    default:
        if (set && !d->strict && *set == '\0')
            return TNT_SUCCESS; /* lenient readers take "" as unset */
        if (set && id == TNT_VAR_LOG_LEVEL) { /* util/log.c: any case */
            char up[32];
            size_t k = 0;
            for (; set[k] && k + 1 < sizeof(up); k++)
                up[k] = (char)toupper((unsigned char)set[k]);
            up[k] = '\0';
            rc = tnt__env_check(d, up);
        } else if (set) {
            rc = tnt__env_check(d, set);
        }
        if (rc == TNT_SUCCESS && id == TNT_VAR_SOCKET_IFNAME && set) {
            char err[256];
            if (tnt__ifname_check(set, err, sizeof(err)) != 0)
                rc = tnt__error(TNT_ERR_CONFIG, "TNT_SOCKET_IFNAME: %s",
                                err);
        }
        if (rc == TNT_SUCCESS && text)
            snprintf(used, len, "%s", text);
        return rc;
    }
}

/* The two lenient choices: what their readers settle on. */
static void lenient_used(tnt_env_id_t id, char *used, size_t len)
{
    static const char *const levels[] = {"ERROR", "WARNING", "INFO",
                                         "DEBUG"};
    if (id == TNT_VAR_LOG_LEVEL) {
        int lv = TNT_LOG_ERROR;
        while (lv < TNT_LOG_DEBUG && tnt__log_enabled(lv + 1))
            lv++;
        snprintf(used, len, "%s", levels[lv]);
    } else if (id == TNT_VAR_SIMD) {
        snprintf(used, len, "%s", tnt__simd_name(tnt__simd_active()));
    }
}

void info_params(info_out_t *o)
{
    tnt__log_init(0); /* TNT_LOG_LEVEL, as tnt_comm_init reads it */
    info_obj(o, "params");
    for (int i = 0; i < TNT_VAR_COUNT; i++) {
        tnt_env_id_t id = (tnt_env_id_t)i;
        const tnt_env_def_t *d = tnt__env_def(id);
        const char *set = tnt__env(id);
        char range[256], used[512];
        range_of(d, range, sizeof(range));
        tnt__clear_error();
        tnt_result_t rc = used_value(id, d, set, used, sizeof(used));
        /* unset: no default, the reader derives the value (help says
         * from what) */
        const char *status = set ? "set" : d->def ? "default" : "unset";
        if (rc != TNT_SUCCESS)
            status = d->strict ? "malformed" : "malformed, ignored";
        if (rc != TNT_SUCCESS && !d->strict)
            snprintf(used, sizeof(used), "%s", d->def ? d->def : "");
        if (id == TNT_VAR_LOG_LEVEL || id == TNT_VAR_SIMD)
            lenient_used(id, used, sizeof(used));
        info_obj(o, d->name);
        info_str(o, "type", type_name(d->type));
        info_str(o, "default", d->def);
        info_str(o, "range", range);
        info_bool(o, "strict", d->strict);
        info_str(o, "read_by", d->reader);
        info_str(o, "value", set);
        info_str(o, "used", used[0] ? used : NULL);
        info_str(o, "status", status);
        if (rc != TNT_SUCCESS)
            info_str(o, "error", tnt_last_error());
        info_str(o, "help", d->help);
        info_close(o);
    }
    info_close(o);
    /* The engine's knobs together, with the rules beyond each value's
     * syntax: the error tnt_comm_init would stop with. */
    tnt_params_t p;
    tnt__clear_error();
    tnt_result_t rc = tnt__params_load(&p);
    info_obj(o, "engine");
    info_bool(o, "valid", rc == TNT_SUCCESS);
    info_str(o, "error", rc == TNT_SUCCESS ? NULL : tnt_last_error());
    info_close(o);
}

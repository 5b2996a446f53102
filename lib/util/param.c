/*
 * Reading and validating the environment knobs declared in param.h. A
 * value that does not parse is an error naming the variable, not a silent
 * fallback to the default: a typo in a job script should stop the job.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/algorithms.h"
#include "util/error.h"
#include "util/param.h"
#include "util/param_table.h"

tnt_result_t tnt__parse_size(const char *what, const char *s, size_t *out)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected a size "
                          "in bytes such as 4096, 32k or 64M", what);
    const char *p = s;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not a size; expected "
                          "a non-negative number of bytes with an optional "
                          "k/M/G suffix", what, s);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is too large", what, s);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    /* Accept "KiB", "KB", "B" after the number or the prefix. */
    if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "ib") == 0))
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' has trailing junk '%s'; "
                          "expected e.g. 4096, 32k, 64M or 1G", what, s, end);
    if (shift && v > (SIZE_MAX >> shift))
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is too large", what, s);
    if (v > SIZE_MAX)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is too large", what, s);
    *out = (size_t)v << shift;
    return TNT_SUCCESS;
}

tnt_result_t tnt__parse_long(const char *what, const char *s, long min,
                             long max, long *out)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected an integer "
                          "in [%ld, %ld]", what, min, max);
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is invalid; expected an "
                          "integer in [%ld, %ld]", what, s, min, max);
    *out = v;
    return TNT_SUCCESS;
}

tnt_result_t tnt__parse_seconds(const char *what, const char *s, double *out)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected seconds",
                          what);
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v) || v < 0)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is invalid; expected a "
                          "non-negative number of seconds", what, s);
    *out = v;
    return TNT_SUCCESS;
}

static tnt_result_t parse_kind_SIZE(const char *n, const char *s, size_t *o)
{
    return tnt__parse_size(n, s, o);
}

static tnt_result_t parse_kind_SECONDS(const char *n, const char *s,
                                       double *o)
{
    return tnt__parse_seconds(n, s, o);
}

static tnt_result_t parse_kind_MICROS(const char *n, const char *s,
                                      double *o)
{
    long us = 0; /* set on success; gcc -O3 cannot see it (release build) */
    TNT_CHECK(tnt__parse_long(n, s, 0, 1000000, &us));
    *o = (double)us * 1e-6;
    return TNT_SUCCESS;
}

static tnt_result_t parse_kind_SWITCH(const char *n, const char *s, int *o)
{
    long v = 0; /* as above */
    TNT_CHECK(tnt__parse_long(n, s, 0, 1, &v));
    *o = (int)v;
    return TNT_SUCCESS;
}

/* Which algorithms each variable may force, and how to say so. An
 * algorithm of another collective is refused here, at tnt_comm_init,
 * naming the variable, rather than failing every call later. */
static const struct {
    const char *var;
    const char *valid;
    int algos[12];
} k_algo_vars[] = {
    {"TNT_ALLREDUCE_ALGO", "auto, ring, rd, rabenseifner, hierarchical, "
     "tree, oneshot, direct, slots, staged or mapped",
     {TNT_ALGO_AUTO, TNT_ALGO_RING, TNT_ALGO_RD, TNT_ALGO_RABENSEIFNER,
      TNT_ALGO_HIER, TNT_ALGO_TREE, TNT_ALGO_ONESHOT, TNT_ALGO_DIRECT,
      TNT_ALGO_SLOTS, TNT_ALGO_STAGED, TNT_ALGO_MAPPED, -1}},
    {"TNT_BCAST_ALGO", "auto, binomial, pipeline, flat or staged",
     {TNT_ALGO_AUTO, TNT_ALGO_BINOMIAL, TNT_ALGO_PIPELINE, TNT_ALGO_FLAT,
      TNT_ALGO_STAGED, -1}},
};

static tnt_result_t parse_kind_ALGO(const char *n, const char *s, int *o)
{
    int a = tnt__algo_parse(s);
    for (size_t v = 0; v < sizeof k_algo_vars / sizeof k_algo_vars[0];
         v++) {
        if (strcmp(n, k_algo_vars[v].var) != 0)
            continue;
        for (const int *k = k_algo_vars[v].algos; a >= 0 && *k >= 0; k++)
            if (*k == a) {
                *o = a;
                return TNT_SUCCESS;
            }
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not %s; expected %s",
                          n, s, a < 0 ? "a known algorithm"
                                      : "an algorithm of this collective",
                          k_algo_vars[v].valid);
    }
    return tnt__error(TNT_ERR_INTERNAL, "%s: no list of algorithms", n);
}

static tnt_result_t parse_kind_TOPOLOGY(const char *n, const char *s,
                                        int *o)
{
    if (strcmp(s, "auto") == 0)
        *o = TNT_TOPOLOGY_AUTO;
    else if (strcmp(s, "flat") == 0)
        *o = TNT_TOPOLOGY_FLAT;
    else
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not a topology "
                          "setting; expected auto (use the hosts' layout) "
                          "or flat (ignore it)", n, s);
    return TNT_SUCCESS;
}

tnt_result_t tnt__params_load(tnt_params_t *p)
{
    memset(p, 0, sizeof(*p));
#define TNT_PARAM_LOAD_(field, id, kind)                                    \
    {                                                                       \
        const tnt_env_def_t *d = tnt__env_def(TNT_VAR_##id);                \
        const char *v = tnt__env(TNT_VAR_##id);                             \
        TNT_CHECK(parse_kind_##kind(d->name, (v && *v) ? v : d->def,        \
                                    &p->field));                            \
    }
    TNT_PARAM_LIST(TNT_PARAM_LOAD_)
#undef TNT_PARAM_LOAD_
    if (p->segment_bytes < 64)
        return tnt__error(TNT_ERR_CONFIG, "TNT_SEGMENT_BYTES=%zu is too "
                          "small; expected at least 64 bytes",
                          p->segment_bytes);
    if (p->allreduce_algo == TNT_ALGO_HIER &&
        p->topology == TNT_TOPOLOGY_FLAT)
        return tnt__error(TNT_ERR_CONFIG, "TNT_ALLREDUCE_ALGO=hierarchical "
                          "contradicts TNT_TOPOLOGY=flat; unset one");
    if (p->timeout_s <= 0)
        return tnt__error(TNT_ERR_CONFIG, "TNT_TIMEOUT must be positive");
    return TNT_SUCCESS;
}

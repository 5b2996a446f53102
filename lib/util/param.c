/*
 * Reading and validating the environment knobs declared in param.h. A
 * value that does not parse is an error naming the variable, not a silent
 * fallback to the default: a typo in a job script should stop the job.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/algorithms.h"
#include "util/error.h"
#include "util/param.h"
#include "util/param_table.h"

/* The one grammar of numbers in every TNT_* variable (docs/environment.md,
 * "Values"): a value is taken exactly as written, in plain decimal digits:
 * no spaces, no '+', no 0x, no exponent; a minus only where the range has
 * negative numbers; seconds may have a fraction ("2.5"), sizes a k/M/G/T
 * suffix. A value out of the variable's range, overflow included, is an
 * error naming the variable, never a silent clamp. */
static size_t digits(const char *p)
{
    return strspn(p, "0123456789");
}

tnt_result_t tnt__parse_size(const char *what, const char *s, size_t *out)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected a size "
                          "in bytes such as 4096, 32k or 64M", what);
    if (!digits(s))
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not a size; expected "
                          "decimal digits with an optional k/M/G/T suffix, "
                          "such as 4096, 32k or 64M (no sign, spaces, 0x "
                          "or exponent)", what, s);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
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
                          "expected decimal digits with an optional k/M/G/T "
                          "suffix, such as 4096, 32k, 64M or 1G", what, s,
                          end);
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
    const char *p = s + (*s == '-' && min < 0);
    char *end = (char *)p;
    long v = 0;
    errno = 0;
    if (digits(p))
        v = strtol(s, &end, 10);
    if (end == p || errno || *end != '\0' || v < min || v > max)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is invalid; expected an "
                          "integer in [%ld, %ld] in decimal digits", what, s,
                          min, max);
    *out = v;
    return TNT_SUCCESS;
}

tnt_result_t tnt__parse_seconds(const char *what, const char *s, double min,
                                double max, double *out)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected seconds "
                          "from %.15g to %.15g", what, min, max);
    size_t n = digits(s), f = s[n] == '.' ? digits(s + n + 1) : 0;
    const char *end = s + n + (s[n] == '.' ? 1 + f : 0);
    double v = n ? strtod(s, NULL) : 0.0;
    if (!n || (s[n] == '.' && !f) || *end != '\0' || !(v >= min) ||
        !(v <= max))
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is invalid; expected "
                          "seconds from %.15g to %.15g, in decimal digits "
                          "with an optional fraction such as 30 or 2.5 (no "
                          "sign, spaces or exponent)", what, s, min, max);
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
    const tnt_env_def_t *d = tnt__env_find(n);
    return tnt__parse_seconds(n, s, (double)d->min, (double)d->max, o);
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
    return TNT_SUCCESS;
}

tnt_result_t tnt__params_check_ranks(const tnt_params_t *p, int nranks)
{
    size_t peers = nranks > 1 ? (size_t)nranks - 1 : 1;
    size_t need = peers * TNT_UNEXPECTED_MIN_PER_PEER;
    if (p->max_unexpected_bytes < need)
        return tnt__error(TNT_ERR_CONFIG, "TNT_MAX_UNEXPECTED_BYTES=%zu is "
                          "too small for %d ranks: flow control keeps the "
                          "early messages of each peer within it / (ranks "
                          "- 1), and even a message that waits for its "
                          "receive (every message, with TNT_EAGER_BYTES=0) "
                          "leaves a record there; expected at least %zu "
                          "(%zuk a peer)", p->max_unexpected_bytes, nranks,
                          need, (size_t)TNT_UNEXPECTED_MIN_PER_PEER >> 10);
    return TNT_SUCCESS;
}

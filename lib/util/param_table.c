/*
 * The table of param_table.h and the one getenv() of the TNT_* variables.
 * Readers ask by id, so a variable cannot be read under a name the table
 * does not know; the typed reads take the default from the table, so a
 * default is written once.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/param.h"
#include "util/param_table.h"

static const tnt_env_def_t k_table[TNT_VAR_COUNT] = {
#define TNT_ENV_DEF_(id, name, type, def, min, max, values, strict, reader, \
                     help)                                                  \
    [TNT_VAR_##id] = {name, TNT_ENV_T_##type, def, min, max, values,        \
                      strict, reader, help},
    TNT_ENV_LIST(TNT_ENV_DEF_)
#undef TNT_ENV_DEF_
};

const tnt_env_def_t *tnt__env_def(tnt_env_id_t id)
{
    return (unsigned)id < TNT_VAR_COUNT ? &k_table[id] : NULL;
}

const tnt_env_def_t *tnt__env_find(const char *name)
{
    for (int i = 0; name && i < TNT_VAR_COUNT; i++)
        if (strcmp(k_table[i].name, name) == 0)
            return &k_table[i];
    return NULL;
}

const char *tnt__env(tnt_env_id_t id)
{
    const tnt_env_def_t *d = tnt__env_def(id);
    const char *v = d ? getenv(d->name) : NULL;
    return (v && *v) ? v : NULL; /* empty means unset, for every variable */
}

const char *tnt__env_named(const char *name)
{
    const tnt_env_def_t *d = tnt__env_find(name);
    const char *v = d ? getenv(d->name) : NULL;
    return (v && *v) ? v : NULL;
}

/* Whether `word` is one of the '|'-separated words of `list`. */
static int one_of(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

tnt_result_t tnt__env_check(const tnt_env_def_t *d, const char *s)
{
    size_t sz;
    double sec;
    long l;
    switch (d->type) {
    case TNT_ENV_T_SIZE:
        return tnt__parse_size(d->name, s, &sz);
    case TNT_ENV_T_SECONDS:
        return tnt__parse_seconds(d->name, s, (double)d->min,
                                  (double)d->max, &sec);
    case TNT_ENV_T_LONG:
        return tnt__parse_long(d->name, s, d->min, d->max, &l);
    case TNT_ENV_T_CHOICE:
        if (s && one_of(d->values, s))
            return TNT_SUCCESS;
        return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not one of %s",
                          d->name, s ? s : "", d->values);
    case TNT_ENV_T_FLAG:
        return TNT_SUCCESS;
    case TNT_ENV_T_TEXT:
        if (s && *s)
            return TNT_SUCCESS;
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected %s",
                          d->name, d->values);
    }
    return tnt__error(TNT_ERR_INTERNAL, "%s: unknown type", d->name);
}

/* The text a typed read parses: the value when set and non-empty, else
 * the default (NULL: neither). */
static const char *value_or_default(tnt_env_id_t id,
                                    const tnt_env_def_t **d)
{
    *d = tnt__env_def(id);
    if (!*d)
        return NULL;
    const char *v = getenv((*d)->name);
    return (v && *v) ? v : (*d)->def;
}

tnt_result_t tnt__env_size(tnt_env_id_t id, size_t *out)
{
    const tnt_env_def_t *d;
    const char *s = value_or_default(id, &d);
    return s ? tnt__parse_size(d->name, s, out) : TNT_SUCCESS;
}

tnt_result_t tnt__env_seconds(tnt_env_id_t id, double *out)
{
    const tnt_env_def_t *d;
    const char *s = value_or_default(id, &d);
    return s ? tnt__parse_seconds(d->name, s, (double)d->min,
                                  (double)d->max, out)
             : TNT_SUCCESS;
}

tnt_result_t tnt__env_long(tnt_env_id_t id, long *out)
{
    const tnt_env_def_t *d;
    const char *s = value_or_default(id, &d);
    return s ? tnt__parse_long(d->name, s, d->min, d->max, out)
             : TNT_SUCCESS;
}

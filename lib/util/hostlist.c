/*
 * Expansion of Slurm's compressed host lists. A list is a comma-separated
 * sequence of names; a name is literal text and bracket groups, each group
 * a comma-separated sequence of numbers and ranges ("[1-3,5]"). The whole
 * list is parsed before anything is produced, so an error leaves nothing
 * half-built, and the host count is checked before any allocation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/hostlist.h"

/* Bracket groups per name: "rack[1-2]-node[01-04]" has two. */
#define MAX_GROUPS 8
/* Digits of one bound: keeps every value far below overflow. */
#define MAX_DIGITS 9

typedef struct range {
    unsigned long lo, hi;
    int width; /* digits of the lower bound: its zero padding */
} range_t;

typedef struct group {
    const char *lit; /* literal text before the bracket (or the tail) */
    size_t litlen;
    range_t *r;
    size_t nr;
    size_t count; /* hosts this group contributes */
} group_t;

typedef struct name {
    group_t g[MAX_GROUPS + 1]; /* the last one has no ranges: the tail */
    int ng;
} name_t;

static int is_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

static tnt_result_t syntax(const char *what, const char *list,
                           const char *at, const char *why)
{
    return tnt__error(TNT_ERR_CONFIG, "%s='%s' is not a valid host list: %s "
                      "at offset %td; expected e.g. node[01-04,07],login1",
                      what, list, why, at - list);
}

static tnt_result_t parse_bound(const char *what, const char *list,
                                const char **p, unsigned long *v, int *w)
{
    const char *s = *p;
    int n = 0;
    unsigned long x = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        if (n == MAX_DIGITS)
            return syntax(what, list, s, "number too long");
        x = x * 10 + (unsigned long)(s[n] - '0');
        n++;
    }
    if (n == 0)
        return syntax(what, list, s, "number expected in brackets");
    *v = x;
    *w = n;
    *p = s + n;
    return TNT_SUCCESS;
}

/* Parse "[...]" at *p (just after '['); ranges are appended to g. */
static tnt_result_t parse_group(const char *what, const char *list,
                                const char **p, group_t *g)
{
    const char *s = *p;
    for (;;) {
        range_t r;
        int wh;
        TNT_CHECK(parse_bound(what, list, &s, &r.lo, &r.width));
        r.hi = r.lo;
        if (*s == '-') {
            s++;
            TNT_CHECK(parse_bound(what, list, &s, &r.hi, &wh));
            if (r.hi < r.lo)
                return syntax(what, list, s, "range goes backwards");
        }
        range_t *n = realloc(g->r, (g->nr + 1) * sizeof(*n));
        if (!n)
            return tnt__error(TNT_ERR_NO_MEMORY, "host list: out of memory");
        g->r = n;
        g->r[g->nr++] = r;
        g->count += r.hi - r.lo + 1;
        if (g->count > TNT_HOSTLIST_MAX)
            return syntax(what, list, s, "too many hosts");
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == ']') {
            *p = s + 1;
            return TNT_SUCCESS;
        }
        return syntax(what, list, s, *s ? "unexpected character in "
                      "brackets" : "missing ']'");
    }
}

/* Parse one name starting at *p, up to a top-level ',' or the end. */
static tnt_result_t parse_name(const char *what, const char *list,
                               const char **p, name_t *nm, size_t *count)
{
    const char *s = *p;
    memset(nm, 0, sizeof(*nm));
    *count = 1;
    group_t *g = &nm->g[0];
    g->lit = s;
    for (;;) {
        while (is_host_char(*s))
            s++;
        g->litlen = (size_t)(s - g->lit);
        if (*s != '[')
            break;
        if (nm->ng == MAX_GROUPS)
            return syntax(what, list, s, "too many bracket groups");
        s++;
        TNT_CHECK(parse_group(what, list, &s, g));
        *count *= g->count;
        if (*count > TNT_HOSTLIST_MAX)
            return syntax(what, list, s, "too many hosts");
        g = &nm->g[++nm->ng];
        g->lit = s;
    }
    if (*s != ',' && *s != '\0')
        return syntax(what, list, s, *s == ']' ? "']' without '['"
                      : "character not allowed in a host name");
    if (s == *p)
        return syntax(what, list, s, "empty host name");
    *p = s;
    return TNT_SUCCESS;
}

static void name_free(name_t *nm)
{
    for (int i = 0; i <= nm->ng; i++)
        free(nm->g[i].r);
}

/* Append every host of nm to hl (room was counted beforehand). */
static tnt_result_t expand_name(const char *what, const name_t *nm, int gi,
                                char *buf, size_t len, tnt_hostlist_t *hl)
{
    const group_t *g = &nm->g[gi];
    if (len + g->litlen >= TNT_HOSTNAME_MAX)
        return tnt__error(TNT_ERR_CONFIG, "%s: a host name is longer than "
                          "%d characters", what, TNT_HOSTNAME_MAX - 1);
    memcpy(buf + len, g->lit, g->litlen);
    len += g->litlen;
    if (gi == nm->ng) {
        buf[len] = '\0';
        if (!(hl->hosts[hl->n] = strdup(buf)))
            return tnt__error(TNT_ERR_NO_MEMORY, "host list: out of memory");
        hl->n++;
        return TNT_SUCCESS;
    }
    for (size_t i = 0; i < g->nr; i++)
        for (unsigned long v = g->r[i].lo; v <= g->r[i].hi; v++) {
            int k = snprintf(buf + len, TNT_HOSTNAME_MAX - len, "%0*lu",
                             g->r[i].width, v);
            if (k < 0 || len + (size_t)k >= TNT_HOSTNAME_MAX)
                return tnt__error(TNT_ERR_CONFIG, "%s: a host name is longer "
                                  "than %d characters", what,
                                  TNT_HOSTNAME_MAX - 1);
            TNT_CHECK(expand_name(what, nm, gi + 1, buf, len + (size_t)k,
                                  hl));
        }
    return TNT_SUCCESS;
}

/* One pass over the list: count (hl->hosts NULL) or fill. */
static tnt_result_t walk(const char *what, const char *list,
                         tnt_hostlist_t *hl, size_t *total)
{
    const char *p = list;
    char buf[TNT_HOSTNAME_MAX];
    *total = 0;
    for (;;) {
        name_t nm;
        size_t count;
        tnt_result_t rc = parse_name(what, list, &p, &nm, &count);
        if (rc == TNT_SUCCESS) {
            *total += count;
            if (*total > TNT_HOSTLIST_MAX)
                rc = syntax(what, list, p, "too many hosts");
        }
        if (rc == TNT_SUCCESS && hl->hosts)
            rc = expand_name(what, &nm, 0, buf, 0, hl);
        name_free(&nm);
        TNT_CHECK(rc);
        if (*p == '\0')
            return TNT_SUCCESS;
        p++; /* the ',' */
    }
}

tnt_result_t tnt__hostlist_expand(const char *what, const char *list,
                                  tnt_hostlist_t *hl)
{
    hl->hosts = NULL;
    hl->n = 0;
    if (!list || !*list)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected a host "
                          "list such as node[01-04,07]", what);
    size_t total;
    TNT_CHECK(walk(what, list, hl, &total));
    hl->hosts = calloc(total, sizeof(*hl->hosts));
    if (!hl->hosts)
        return tnt__error(TNT_ERR_NO_MEMORY, "host list: out of memory for "
                          "%zu hosts", total);
    tnt_result_t rc = walk(what, list, hl, &total);
    if (rc != TNT_SUCCESS)
        tnt__hostlist_free(hl);
    return rc;
}

void tnt__hostlist_free(tnt_hostlist_t *hl)
{
    for (size_t i = 0; hl->hosts && i < hl->n; i++)
        free(hl->hosts[i]);
    free(hl->hosts);
    hl->hosts = NULL;
    hl->n = 0;
}

/*
 * Device, port and GID selection (see verbs_select.h for the rules).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs_select.h"

#define VB_HCA_MAX 32

typedef struct hca_entry {
    char name[64];
    int port;        /* 0: any */
} hca_entry_t;

static int all_zero(const uint8_t *g)
{
    for (int i = 0; i < 16; i++)
        if (g[i])
            return 0;
    return 1;
}

static int gid_score(const vb_gid_desc_t *g)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0xff, 0xff};
    if (all_zero(g->raw))
        return 0;
    if (g->type == VB_GID_ROCE_V1)
        return 1;
    if (g->type != VB_GID_ROCE_V2)
        return 0;
    if (memcmp(g->raw, v4mapped, sizeof(v4mapped)) == 0)
        return 4;
    if (g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80)
        return 2; /* fe80::/10, link-local */
    return 3;
}

int tnt__vb_pick_gid(const vb_port_desc_t *port)
{
    int best = -1, best_score = 0;
    for (int i = 0; i < port->ngids; i++) {
        int s = gid_score(&port->gids[i]);
        if (s > best_score) {
            best = i;
            best_score = s;
        }
    }
    return best;
}

/* Parse TNT_IB_HCA into entries; -1 with `why` on a malformed list. */
static int parse_hca(const char *s, hca_entry_t *e, int *n, int *exclude,
                     char *why, size_t why_len)
{
    *n = 0;
    *exclude = 0;
    if (*s == '^') {
        *exclude = 1;
        s++;
    }
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        size_t nlen = colon ? (size_t)(colon - s) : len;
        if (nlen == 0 || nlen >= sizeof(e->name) || *n == VB_HCA_MAX) {
            snprintf(why, why_len, "TNT_IB_HCA: bad entry '%.*s' (expected "
                     "name or name:port, at most %d entries)", (int)len, s,
                     VB_HCA_MAX);
            return -1;
        }
        memcpy(e[*n].name, s, nlen);
        e[*n].name[nlen] = '\0';
        e[*n].port = 0;
        if (colon) {
            char buf[16];
            size_t plen = len - nlen - 1;
            char *pend;
            long p = 0;
            if (plen > 0 && plen < sizeof(buf)) {
                memcpy(buf, colon + 1, plen);
                buf[plen] = '\0';
                errno = 0;
                p = strtol(buf, &pend, 10);
                if (errno || *pend)
                    p = 0;
            }
            if (p < 1 || p > 255) {
                snprintf(why, why_len, "TNT_IB_HCA: bad port in '%.*s' "
                         "(expected a number from 1)", (int)len, s);
                return -1;
            }
            e[*n].port = (int)p;
        }
        (*n)++;
        s += len;
        if (*s == ',')
            s++;
    }
    if (*n == 0) {
        snprintf(why, why_len, "TNT_IB_HCA is empty%s",
                 *exclude ? " after '^'" : "");
        return -1;
    }
    return 0;
}

/* First active port of dev (only `port` if non-zero); -1 if none. */
static int active_port(const vb_dev_desc_t *d, int port)
{
    for (int i = 0; i < d->nports; i++)
        if (d->ports[i].active && (port == 0 || d->ports[i].num == port))
            return i;
    return -1;
}

static int excluded(const hca_entry_t *e, int n, const char *name, int port)
{
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0 && (e[i].port == 0 ||
                                             e[i].port == port))
            return 1;
    return 0;
}

static int finish(const vb_dev_desc_t *devs, int dev, int pi,
                  const char *gid_index, vb_choice_t *out, char *why,
                  size_t why_len)
{
    const vb_port_desc_t *p = &devs[dev].ports[pi];
    out->dev = dev;
    out->port = p->num;
    out->link = p->link;
    if (gid_index && *gid_index) {
        char *end;
        errno = 0;
        long g = strtol(gid_index, &end, 10);
        /* Decimal digits only, as every TNT_* number (util/param.h). */
        if (errno || *end || gid_index[0] < '0' || gid_index[0] > '9' ||
            g < 0 || g >= p->ngids ||
            all_zero(p->gids[g].raw)) {
            snprintf(why, why_len, "TNT_IB_GID_INDEX='%s' is not a valid "
                     "GID index of %s port %d (it has %d entries)",
                     gid_index, devs[dev].name, p->num, p->ngids);
            return -1;
        }
        out->gid_index = (int)g;
        return 0;
    }
    if (p->link == VB_LINK_IB) {
        out->gid_index = 0;
        return 0;
    }
    out->gid_index = tnt__vb_pick_gid(p);
    if (out->gid_index < 0) {
        snprintf(why, why_len, "%s port %d is RoCE but has no usable GID "
                 "(is an IP address configured on its interface?)",
                 devs[dev].name, p->num);
        return -1;
    }
    return 0;
}

int tnt__vb_select(const vb_dev_desc_t *devs, int ndevs, const char *hca,
                   const char *gid_index, vb_choice_t *out, char *why,
                   size_t why_len)
{
    return tnt__vb_select_nth(devs, ndevs, hca, gid_index, 0, out, why,
                              why_len);
}

/* The candidates are the active ports in the order the user would read
 * them: TNT_IB_HCA's order when it lists devices, else the devices' own
 * order (each device's ports in turn); `pick` takes the pick-th of them,
 * round robin, so that local ranks spread over a host's NICs. */
int tnt__vb_select_nth(const vb_dev_desc_t *devs, int ndevs, const char *hca,
                       const char *gid_index, int pick, vb_choice_t *out,
                       char *why, size_t why_len)
{
    hca_entry_t e[VB_HCA_MAX];
    int n = 0, exclude = 1;
    int cd[VB_HCA_MAX], cp[VB_HCA_MAX], nc = 0;
    memset(out, 0, sizeof(*out));
    if (hca && *hca &&
        parse_hca(hca, e, &n, &exclude, why, why_len) != 0)
        return -1;
    if (ndevs == 0) {
        snprintf(why, why_len, "no RDMA device found");
        return -1;
    }
    if (exclude) {
        for (int d = 0; d < ndevs; d++)
            for (int i = 0; i < devs[d].nports && nc < VB_HCA_MAX; i++)
                if (devs[d].ports[i].active &&
                    !excluded(e, n, devs[d].name, devs[d].ports[i].num)) {
                    cd[nc] = d;
                    cp[nc++] = i;
                }
        if (nc == 0) {
            snprintf(why, why_len, "no active port on any RDMA device%s%s",
                     n ? " outside TNT_IB_HCA=" : "", n ? hca : "");
            return -1;
        }
    } else {
        for (int k = 0; k < n; k++)
            for (int d = 0; d < ndevs && nc < VB_HCA_MAX; d++) {
                if (strcmp(devs[d].name, e[k].name) != 0)
                    continue;
                int pi = active_port(&devs[d], e[k].port);
                if (pi >= 0) {
                    cd[nc] = d;
                    cp[nc++] = pi;
                }
            }
        if (nc == 0) {
            snprintf(why, why_len, "no active port on the devices in "
                     "TNT_IB_HCA=%s", hca);
            return -1;
        }
    }
    int k = pick < 0 ? 0 : pick % nc;
    return finish(devs, cd[k], cp[k], gid_index, out, why, why_len);
}

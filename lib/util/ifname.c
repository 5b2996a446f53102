/*
 * The TNT_SOCKET_IFNAME matcher and the choice of a listening address from
 * the host's interfaces (see ifname.h for the pattern syntax). Matching is
 * pure string and bit arithmetic so that unit tests can run it on made-up
 * interfaces; only tnt__ifname_pick looks at the real ones, through
 * getifaddrs().
 */
#include "util/ifname.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITEM_MAX 128

/* A parsed item of the list. */
struct item {
    int exclude;
    int exact;      /* "=name": the whole name, not a prefix */
    int is_cidr;
    int family;     /* of the CIDR block */
    unsigned char net[16];
    int bits;
    char name[ITEM_MAX];
};

/* Parses the item text[0..len) into *it. Returns 0, or -1 with err set. */
static int parse_item(const char *text, size_t len, struct item *it,
                      char *err, size_t errlen)
{
    memset(it, 0, sizeof(*it));
    while (len > 0 && (*text == ' ' || *text == '\t')) {
        text++;
        len--;
    }
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
        len--;
    if (len > 0 && *text == '^') {
        it->exclude = 1;
        text++;
        len--;
    }
    if (len > 0 && *text == '=') {
        it->exact = 1;
        text++;
        len--;
    }
    if (len == 0 || len >= ITEM_MAX) {
        snprintf(err, errlen, "TNT_SOCKET_IFNAME: %s item '%.*s'",
                 len == 0 ? "empty" : "overlong", (int)len, text);
        return -1;
    }
    memcpy(it->name, text, len);
    it->name[len] = '\0';
    char *slash = strchr(it->name, '/');
    if (slash == NULL)
        return 0;
    /* A CIDR block: address/prefix length. */
    *slash = '\0';
    char *end;
    long bits = strtol(slash + 1, &end, 10);
    it->is_cidr = 1;
    if (inet_pton(AF_INET, it->name, it->net) == 1)
        it->family = AF_INET;
    else if (inet_pton(AF_INET6, it->name, it->net) == 1)
        it->family = AF_INET6;
    int maxbits = it->family == AF_INET ? 32 : 128;
    if (it->family == 0 || slash[1] < '0' || slash[1] > '9' || *end ||
        bits < 0 || bits > maxbits) {
        *slash = '/';
        snprintf(err, errlen, "TNT_SOCKET_IFNAME: '%s' is not a CIDR "
                 "block such as 10.77.0.0/24", it->name);
        return -1;
    }
    it->bits = (int)bits;
    return 0;
}

/* Calls fn on every item of spec; stops at the first non-zero result. */
static int each_item(const char *spec, char *err, size_t errlen,
                     int (*fn)(const struct item *, void *), void *arg)
{
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        struct item it;
        if (parse_item(p, len, &it, err, errlen) != 0)
            return -1;
        int r = fn(&it, arg);
        if (r != 0)
            return r;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

static int accept_any(const struct item *it, void *arg)
{
    (void)it;
    (void)arg;
    return 0;
}

int tnt__ifname_check(const char *spec, char *err, size_t errlen)
{
    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "TNT_SOCKET_IFNAME is empty");
        return -1;
    }
    return each_item(spec, err, errlen, accept_any, NULL) < 0 ? -1 : 0;
}

/* Whether the first bits of a and b agree. */
static int prefix_equal(const unsigned char *a, const unsigned char *b,
                        int bits)
{
    int bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)bytes) != 0)
        return 0;
    if (rest == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

static int item_matches(const struct item *it, const char *name,
                        const struct sockaddr *sa)
{
    if (!it->is_cidr)
        return it->exact ? strcmp(name, it->name) == 0
                         : strncmp(name, it->name, strlen(it->name)) == 0;
    if (sa == NULL || sa->sa_family != it->family)
        return 0;
    const unsigned char *addr =
        sa->sa_family == AF_INET
            ? (const unsigned char *)&((const struct sockaddr_in *)sa)
                  ->sin_addr
            : (const unsigned char *)&((const struct sockaddr_in6 *)sa)
                  ->sin6_addr;
    return prefix_equal(addr, it->net, it->bits);
}

struct match_state {
    const char *name;
    const struct sockaddr *sa;
    int has_include, included, excluded;
};

static int match_one(const struct item *it, void *arg)
{
    struct match_state *m = arg;
    int hit = item_matches(it, m->name, m->sa);
    if (it->exclude) {
        m->excluded |= hit;
    } else {
        m->has_include = 1;
        m->included |= hit;
    }
    return 0;
}

int tnt__ifname_match(const char *spec, const char *name,
                      const struct sockaddr *sa)
{
    char err[160];
    struct match_state m = {name, sa, 0, 0, 0};
    if (each_item(spec, err, sizeof(err), match_one, &m) != 0)
        return 0;
    return !m.excluded && (m.included || !m.has_include);
}

static void addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    const void *a = sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)sa)
                              ->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)sa)
                              ->sin6_addr;
    if (inet_ntop(sa->sa_family, a, buf, (socklen_t)len) == NULL)
        snprintf(buf, len, "?");
}

/* Lists "name addr, ..." of every interface address into buf, so that an
 * error can show what the user could have asked for. */
static void list_interfaces(const struct ifaddrs *ifs, char *buf,
                            size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                    i->ifa_addr->sa_family != AF_INET6))
            continue;
        char a[INET6_ADDRSTRLEN];
        addr_str(i->ifa_addr, a, sizeof(a));
        int n = snprintf(buf + used, len - used, "%s%s %s%s",
                         used ? ", " : "", i->ifa_name, a,
                         (i->ifa_flags & IFF_UP) ? "" : " (down)");
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
    if (used == 0)
        snprintf(buf, len, "none");
}

int tnt__ifname_pick(const char *spec, char *ip, size_t iplen,
                     char *ifname, size_t ifnamelen, char *err,
                     size_t errlen)
{
    int any = spec == NULL || *spec == '\0';
    if (!any && tnt__ifname_check(spec, err, errlen) != 0)
        return -1;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0) {
        snprintf(err, errlen, "getifaddrs failed");
        return -1;
    }
    const struct ifaddrs *best = NULL;
    for (int family = AF_INET; family != 0 && best == NULL;
         family = family == AF_INET ? AF_INET6 : 0) {
        for (const struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != family ||
                !(i->ifa_flags & IFF_UP))
                continue;
            if (any ? !(i->ifa_flags & IFF_LOOPBACK)
                    : tnt__ifname_match(spec, i->ifa_name, i->ifa_addr)) {
                best = i;
                break;
            }
        }
    }
    if (best == NULL) {
        char list[512];
        list_interfaces(ifs, list, sizeof(list));
        if (any)
            snprintf(err, errlen, "no interface but loopback is up; the "
                     "interfaces are: %s", list);
        else
            snprintf(err, errlen, "TNT_SOCKET_IFNAME=%s matches no "
                     "interface that is up; the interfaces are: %s", spec,
                     list);
        freeifaddrs(ifs);
        return -1;
    }
    addr_str(best->ifa_addr, ip, iplen);
    if (ifname != NULL)
        snprintf(ifname, ifnamelen, "%s", best->ifa_name);
    freeifaddrs(ifs);
    return 0;
}

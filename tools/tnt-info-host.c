/*
 * tnt-info: this host as the library sees it: its identity (the one that
 * decides which ranks share memory, util/hostid.c), its interfaces and
 * which address TNT_SOCKET_IFNAME selects (util/ifname.c, the
 * matcher the bootstrap uses).
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tnt-info.h"
#include "tnt/tnt.h"
#include "util/hostid.h"
#include "util/ifname.h"
#include "util/param_table.h"

static void interfaces(info_out_t *o, const char *spec, int spec_ok)
{
    struct ifaddrs *ifs = NULL;
    info_arr(o, "interfaces");
    if (getifaddrs(&ifs) != 0) {
        info_close(o);
        return;
    }
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
                             i->ifa_addr->sa_family != AF_INET6))
            continue;
        char ip[NI_MAXHOST];
        socklen_t sl = i->ifa_addr->sa_family == AF_INET
                           ? sizeof(struct sockaddr_in)
                           : sizeof(struct sockaddr_in6);
        if (getnameinfo(i->ifa_addr, sl, ip, sizeof(ip), NULL, 0,
                        NI_NUMERICHOST) != 0)
            continue;
        info_row(o);
        info_str(o, "name", i->ifa_name);
        info_str(o, "address", ip);
        info_bool(o, "up", (i->ifa_flags & IFF_UP) != 0);
        info_bool(o, "loopback", (i->ifa_flags & IFF_LOOPBACK) != 0);
        /* Matched by the pattern (unset: every interface but loopback,
         * as tnt__ifname_pick reads an empty pattern). */
        int sel = !(spec && *spec) ? !(i->ifa_flags & IFF_LOOPBACK)
                  : spec_ok ? tnt__ifname_match(spec, i->ifa_name,
                                                i->ifa_addr)
                            : 0;
        info_bool(o, "selected", sel);
        info_close(o);
    }
    freeifaddrs(ifs);
    info_close(o);
}

static void socket_ifname(info_out_t *o, const char *spec)
{
    char ip[64] = "", name[64] = "", err[768] = "";
    int rc = tnt__ifname_pick(spec, ip, sizeof(ip), name, sizeof(name),
                              err, sizeof(err));
    info_obj(o, "socket_ifname");
    info_str(o, "TNT_SOCKET_IFNAME", spec);
    if (!(spec && *spec))
        /* Unset, the library listens where its route to rank 0 goes
         * (boot/bootstrap.c); tnt-run picks rank 0's address as below. */
        info_str(o, "rule", "unset: the address of the route to rank 0; "
                            "tnt-run picks rank 0's address as shown");
    else
        info_str(o, "rule", "the first selected IPv4 address of an "
                            "interface that is up (else IPv6)");
    info_str(o, "interface", rc == 0 ? name : NULL);
    info_str(o, "address", rc == 0 ? ip : NULL);
    if (rc != 0)
        info_str(o, "error", err);
    info_close(o);
}

void info_host(info_out_t *o)
{
    char id[TNT_HOST_MAX] = "", hn[256] = "";
    info_obj(o, "host");
    if (gethostname(hn, sizeof(hn) - 1) == 0)
        info_str(o, "hostname", hn);
    tnt_result_t rc = tnt__host_id(id, sizeof(id));
    info_str(o, "host_id", rc == TNT_SUCCESS ? id : NULL);
    if (rc != TNT_SUCCESS)
        info_str(o, "host_id_error", tnt_last_error());
    info_int(o, "online_cpus", sysconf(_SC_NPROCESSORS_ONLN));
    const char *spec = tnt__env(TNT_VAR_SOCKET_IFNAME);
    char err[256];
    int spec_ok = !(spec && *spec) ||
                  tnt__ifname_check(spec, err, sizeof(err)) == 0;
    interfaces(o, spec, spec_ok);
    socket_ifname(o, spec);
    info_close(o);
}

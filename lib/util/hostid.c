/*
 * Host identity for the shared-memory transport. Two ranks count as one
 * host when they can set up shared memory with each other the way the shm
 * transport does it, which is not the same as having one hostname:
 *
 *   - the same kernel (/proc/sys/kernel/random/boot_id): memory, eventfds
 *     and process_vm_readv only exist within one kernel, and containers on
 *     one machine share the boot id while two machines never do;
 *   - the same network namespace: the rendezvous uses abstract unix
 *     sockets, which are scoped by network namespace (chosen because they
 *     leave nothing in the filesystem when a rank is killed);
 *   - the same PID namespace: pids in the address blob are used for
 *     process_vm_readv;
 *   - the same hostname, shown in messages and kept so that the identity
 *     never merges what a user sees as two hosts.
 *
 * The namespaces are identified by the inode of /proc/self/ns/<name>. The
 * result is "hostname/hash" so that messages stay readable. TNT_HOST_ID
 * replaces it verbatim, for launchers that know better (for example, to
 * keep ranks apart that would otherwise share memory).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/hostid.h"
#include "util/param_table.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t hash_ns(uint64_t h, const char *path)
{
    struct stat st;
    uint64_t ino = 0, dev = 0;
    /* Without /proc (unusual) every process looks alike here; the boot id
     * is then missing too and the hostname alone decides. */
    if (stat(path, &st) == 0) {
        ino = (uint64_t)st.st_ino;
        dev = (uint64_t)st.st_dev;
    }
    h = fnv(h, &ino, sizeof(ino));
    return fnv(h, &dev, sizeof(dev));
}

tnt_result_t tnt__host_id(char *out, size_t n)
{
    const char *env = tnt__env(TNT_VAR_HOST_ID);
    if (env) {
        size_t len = strlen(env);
        int ok = len > 0 && len < n;
        for (size_t i = 0; ok && i < len; i++)
            ok = isgraph((unsigned char)env[i]);
        if (!ok)
            return tnt__error(TNT_ERR_CONFIG, "TNT_HOST_ID='%s' is not a "
                              "host identity; expected 1 to %zu printable "
                              "characters without spaces", env, n - 1);
        memcpy(out, env, len + 1);
        return TNT_SUCCESS;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    uint64_t h = fnv(1469598103934665603ull, host, strlen(host));
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
    }
    h = fnv(h, boot, strlen(boot));
    h = hash_ns(h, "/proc/self/ns/net");
    h = hash_ns(h, "/proc/self/ns/pid");
    /* 17 characters for "/" and the hash; the hostname gets the rest. */
    int keep = n > 18 ? (int)(n - 18) : 0;
    snprintf(out, n, "%.*s/%016llx", keep, host, (unsigned long long)h);
    return TNT_SUCCESS;
}

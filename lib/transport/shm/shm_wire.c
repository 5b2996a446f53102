/*
 * Checks of what arrives on the shared-memory transport's unix socket:
 * the handshake messages (hello, challenge, proof) and the descriptors
 * that come with the proof. Anyone on the host who finds the socket's
 * abstract name can send anything, so each check is a function of the
 * bytes (and for descriptors, of what the kernel says they are) that
 * looks at every field before shm.c trusts it; the handshake itself is
 * described in shm_internal.h.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/auth.h"
#include "transport/shm/shm_internal.h"

const char *tnt__shm_hello_parse(const void *buf, size_t len,
                                 const shm_expect_t *e, shm_hello_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm shared-memory hello (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != SHM_MAGIC)
        return "not a libtntcomm shared-memory hello";
    if (out->version != SHM_VERSION)
        return "another protocol version";
    if (out->job_id != e->job_id)
        return "hello from another job (another job key)";
    if (out->comm_id != e->comm_id || out->to != e->rank)
        return "hello for another communicator or rank";
    if (out->from < 0 || out->from >= e->rank)
        return "hello from a rank that may not connect here";
    if (out->ring_bytes != SHM_RING_BYTES)
        return "ring size differs between the ranks";
    return NULL;
}

const char *tnt__shm_challenge_parse(const void *buf, size_t len,
                                     const shm_expect_t *e, int peer,
                                     shm_challenge_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm shared-memory challenge (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != SHM_CHAL_MAGIC)
        return "not a libtntcomm shared-memory challenge";
    if (out->version != SHM_VERSION)
        return "another protocol version";
    if (out->from != peer || out->to != e->rank)
        return "challenge from the wrong rank";
    return NULL;
}

const char *tnt__shm_proof_parse(const void *buf, size_t len,
                                 shm_proof_t *out)
{
    if (len != sizeof(*out))
        return "not a libtntcomm shared-memory proof (wrong length)";
    memcpy(out, buf, sizeof(*out));
    if (out->magic != SHM_PROOF_MAGIC)
        return "not a libtntcomm shared-memory proof";
    if (out->version != SHM_VERSION)
        return "another protocol version";
    return NULL;
}

size_t tnt__shm_auth_input(int connector, const shm_hello_t *h,
                           const shm_challenge_t *c, unsigned char *out)
{
    return tnt__auth_transcript(connector ? "TNT-shm-connect"
                                          : "TNT-shm-accept",
                                h, sizeof(*h), c,
                                offsetof(shm_challenge_t, mac), out,
                                SHM_AUTH_INPUT_MAX);
}

/* 1 if fd is an eventfd. The kernel names it in /proc; where /proc is
 * not mounted, anything that is not a file, directory, pipe or socket
 * (an anonymous inode) passes, and reading it is then harmless. */
static int is_eventfd(int fd)
{
    char path[64], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n > 0) {
        link[n] = '\0';
        return strcmp(link, "anon_inode:[eventfd]") == 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        return 0;
    return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
           !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode);
}

const char *tnt__shm_fds_check(const int *fds, int nfds, size_t seg_bytes)
{
    if (nfds != 3)
        return "proof without exactly a segment and two eventfds";
    /* The connector seals the segment's size, so that nobody can shrink
     * it under this rank's mapping (a SIGBUS at the next access); that
     * also tells a memfd from a file. */
    struct stat st;
    if (fstat(fds[0], &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size != seg_bytes)
        return "segment of the wrong kind or size";
    int seals = fcntl(fds[0], F_GET_SEALS);
    int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (seals < 0 || (seals & need) != need)
        return "segment not sealed (not a libtntcomm memfd)";
    if (!is_eventfd(fds[1]) || !is_eventfd(fds[2]))
        return "descriptors that are not eventfds";
    return NULL;
}

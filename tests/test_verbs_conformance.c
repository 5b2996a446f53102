/*
 * The transport conformance entry for verbs: runs the multi-process
 * collective suite (the program given as argv[1], test_collectives) with
 * TNT_TRANSPORT=verbs. Without an active RDMA port there is nothing to
 * test, and that must never look like a pass: the program prints why and
 * exits 77, which meson reports as SKIP.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "transport/transport.h"

#define EXIT_SKIP 77

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s test_collectives [suite [test]]\n",
                argv[0]);
        return 2;
    }
#ifdef TNT_HAVE_VERBS
    char why[256];
    if (!tnt__verbs_probe(why, sizeof(why))) {
        printf("SKIP: verbs conformance not run: %s (ibv_devinfo shows the "
               "devices; see docs/verbs.md)\n", why);
        return EXIT_SKIP;
    }
    printf("verbs conformance on %s\n", why);
    fflush(stdout);
    setenv("TNT_TRANSPORT", "verbs", 1);
    execv(argv[1], argv + 1);
    perror(argv[1]);
    return 2;
#else
    printf("SKIP: verbs conformance not run: the verbs transport was not "
           "built (libibverbs not found, or -Dverbs=disabled)\n");
    return EXIT_SKIP;
#endif
}

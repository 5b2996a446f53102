/*
 * Hostfiles: one host name per line, blanks around it ignored, '#' starts a
 * comment, empty lines skipped. A name given twice is an error that names
 * both lines: it is almost always a copy-and-paste slip, and silently
 * starting twice as many ranks on one host would oversubscribe it. Anything
 * after the name on its line (Open MPI's "slots=4") is refused for the same
 * reason: we do not honour it, so we must not pretend to.
 */
#include "tnt-run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HOST_MAX 255

static int add_host(char ***hosts, int *n, int *lines, int line,
                    const char *name)
{
    char **h = realloc(*hosts, (size_t)(*n + 1) * sizeof(**hosts));
    if (h == NULL)
        return -1;
    *hosts = h;
    h[*n] = strdup(name);
    if (h[*n] == NULL)
        return -1;
    lines[*n] = line;
    (*n)++;
    return 0;
}

int run_read_hostfile(const char *path, char ***hosts)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "tnt-run: cannot read hostfile '%s': %s\n", path,
                strerror(errno));
        return -1;
    }
    char buf[1024];
    int n = 0, line = 0, rc = -1;
    int lines[RUN_MAX_RANKS];
    *hosts = NULL;
    while (fgets(buf, sizeof(buf), f) != NULL) {
        line++;
        char *hash = strchr(buf, '#');
        if (hash != NULL)
            *hash = '\0';
        char *name = buf + strspn(buf, " \t\r\n");
        size_t len = strcspn(name, " \t\r\n");
        char *rest = name + len + strspn(name + len, " \t\r\n");
        name[len] = '\0';
        if (len == 0)
            continue;
        if (*rest != '\0') {
            fprintf(stderr, "tnt-run: %s:%d: unexpected '%s' after host "
                    "'%s'; expected one host name per line\n", path, line,
                    strtok(rest, "\r\n"), name);
            goto out;
        }
        if (len > HOST_MAX || name[0] == '-') {
            fprintf(stderr, "tnt-run: %s:%d: invalid host name '%s'\n",
                    path, line, name);
            goto out;
        }
        for (int k = 0; k < n; k++) {
            if (strcmp((*hosts)[k], name) == 0) {
                fprintf(stderr, "tnt-run: %s:%d: duplicate host '%s' "
                        "(first on line %d); host names must be unique\n",
                        path, line, name, lines[k]);
                goto out;
            }
        }
        if (n == RUN_MAX_RANKS) {
            fprintf(stderr, "tnt-run: %s:%d: more than %d hosts\n", path,
                    line, RUN_MAX_RANKS);
            goto out;
        }
        if (add_host(hosts, &n, lines, line, name) != 0) {
            fprintf(stderr, "tnt-run: out of memory\n");
            goto out;
        }
    }
    if (ferror(f))
        fprintf(stderr, "tnt-run: cannot read hostfile '%s': %s\n", path,
                strerror(errno));
    else if (n == 0)
        fprintf(stderr, "tnt-run: hostfile '%s' names no host\n", path);
    else
        rc = n;
out:
    fclose(f);
    if (rc < 0) {
        for (int k = 0; k < n; k++)
            free((*hosts)[k]);
        free(*hosts);
        *hosts = NULL;
    }
    return rc;
}

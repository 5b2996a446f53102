/*
 * What the launcher tells an agent on its standard input: one host's share
 * of the job as "name value" lines up to "end", values percent-encoded so
 * that any byte (a newline in an argument, say) survives. The job key
 * travels this way, inside the ssh connection, so that it never appears on
 * a command line that ps on the remote host would show. After "end" the
 * agent answers on its stdout and the launcher sends "go ROOTADDR", then
 * possibly "term" or "kill" (tnt-run-agent.c).
 */
#include "tnt-run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES (256 * 1024)
#define MAX_ITEMS 4096

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Appends "name value\n" with value percent-encoded. */
static int put(char **buf, size_t *len, size_t *cap, const char *name,
               const char *value)
{
    size_t need = strlen(name) + 3 * strlen(value) + 3;
    if (*len + need > *cap) {
        size_t cap2 = (*cap + need) * 2;
        char *b = realloc(*buf, cap2);
        if (b == NULL)
            return -1;
        *buf = b;
        *cap = cap2;
    }
    *len += (size_t)sprintf(*buf + *len, "%s ", name);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p < 0x20 || *p == '%' || *p == 0x7f)
            *len += (size_t)sprintf(*buf + *len, "%%%02x", *p);
        else
            (*buf)[(*len)++] = (char)*p;
    }
    (*buf)[(*len)++] = '\n';
    return 0;
}

int run_spec_send(int fd, const struct run_spec *sp)
{
    char *buf = NULL, num[160];
    size_t len = 0, cap = 0;
    int rc = 0;
    rc |= put(&buf, &len, &cap, "host", sp->host);
    rc |= put(&buf, &len, &cap, "cwd", sp->cwd ? sp->cwd : "");
    snprintf(num, sizeof num, "%d %d %d", sp->size, sp->first, sp->nlocal);
    rc |= put(&buf, &len, &cap, "ranks", num);
    snprintf(num, sizeof num, "%d %d %d %d %d %d", sp->root_loopback,
             sp->pin_socket, sp->pin_mem, sp->bind_core, sp->out_all,
             sp->info);
    rc |= put(&buf, &len, &cap, "flags", num);
    for (int k = 0; k < sp->argc; k++)
        rc |= put(&buf, &len, &cap, "arg", sp->argv[k]);
    for (int k = 0; k < sp->nextra; k++)
        rc |= put(&buf, &len, &cap, "env", sp->extra[k]);
    rc |= put(&buf, &len, &cap, "key", sp->key);
    rc |= put(&buf, &len, &cap, "end", "");
    if (rc == 0)
        rc = write_all(fd, buf, len);
    free(buf);
    return rc;
}

ssize_t run_read_line(int fd, char *buf, size_t size)
{
    size_t n = 0;
    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return n > 0 ? -1 : 0;
        if (c == '\n')
            break;
        if (n + 1 >= size) {
            errno = EMSGSIZE;
            return -1;
        }
        buf[n++] = c;
    }
    buf[n] = '\0';
    return (ssize_t)(n > 0 ? n : 1);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes in place; -1 on a malformed escape. */
static int decode(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r != '%') {
            *w++ = *r;
            continue;
        }
        int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);
        if (lo < 0 || (hi == 0 && lo == 0))
            return -1;
        *w++ = (char)(hi * 16 + lo);
        r += 2;
    }
    *w = '\0';
    return 0;
}

static int push(char ***v, int *n, const char *s)
{
    if (*n >= MAX_ITEMS)
        return -1;
    char **g = realloc(*v, (size_t)(*n + 2) * sizeof(**v));
    if (g == NULL)
        return -1;
    *v = g;
    g[*n] = strdup(s);
    if (g[*n] == NULL)
        return -1;
    g[++*n] = NULL;
    return 0;
}

int run_spec_read(int fd, struct run_spec *sp, char *err, size_t errlen)
{
    memset(sp, 0, sizeof(*sp));
    char *line = malloc(LINE_MAX_BYTES);
    int rc = -1;
    if (line == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (;;) {
        ssize_t n = run_read_line(fd, line, LINE_MAX_BYTES);
        if (n <= 0) {
            snprintf(err, errlen, "the job description ended early");
            break;
        }
        char *value = strchr(line, ' ');
        if (value == NULL || decode(value + 1) != 0) {
            snprintf(err, errlen, "malformed line in the job description");
            break;
        }
        *value++ = '\0';
        int bad = 0;
        if (strcmp(line, "end") == 0) {
            rc = sp->argc > 0 && sp->host != NULL && sp->nlocal > 0 ? 0 : -1;
            if (rc != 0)
                snprintf(err, errlen, "incomplete job description");
            break;
        } else if (strcmp(line, "host") == 0) {
            free(sp->host);
            bad = (sp->host = strdup(value)) == NULL;
        } else if (strcmp(line, "cwd") == 0) {
            free(sp->cwd);
            bad = (sp->cwd = *value ? strdup(value) : NULL) == NULL &&
                  *value;
        } else if (strcmp(line, "ranks") == 0) {
            bad = sscanf(value, "%d %d %d", &sp->size, &sp->first,
                         &sp->nlocal) != 3 || sp->nlocal < 1 ||
                  sp->nlocal > RUN_MAX_RANKS || sp->first < 0 ||
                  sp->first + sp->nlocal > sp->size;
        } else if (strcmp(line, "flags") == 0) {
            bad = sscanf(value, "%d %d %d %d %d %d", &sp->root_loopback,
                         &sp->pin_socket, &sp->pin_mem, &sp->bind_core,
                         &sp->out_all, &sp->info) != 6;
        } else if (strcmp(line, "arg") == 0) {
            bad = push(&sp->argv, &sp->argc, value) != 0;
        } else if (strcmp(line, "env") == 0) {
            bad = strchr(value, '=') == NULL ||
                  push(&sp->extra, &sp->nextra, value) != 0;
        } else if (strcmp(line, "key") == 0) {
            bad = strlen(value) >= sizeof sp->key;
            if (!bad)
                strcpy(sp->key, value);
        } else {
            bad = 1;
        }
        if (bad) {
            snprintf(err, errlen, "bad '%s' line in the job description",
                     line);
            break;
        }
    }
    free(line);
    return rc;
}

void run_spec_free(struct run_spec *sp)
{
    for (int k = 0; k < sp->argc; k++)
        free(sp->argv[k]);
    for (int k = 0; k < sp->nextra; k++)
        free(sp->extra[k]);
    free(sp->argv);
    free(sp->extra);
    free(sp->host);
    free(sp->cwd);
    memset(sp, 0, sizeof(*sp));
}

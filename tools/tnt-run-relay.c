/*
 * The output relay of tnt-run. Each rank writes into its own pipes; this
 * file reads them, cuts the bytes into lines and writes every line whole,
 * behind the rank's "[i] " prefix, to the launcher's stdout or stderr. The
 * launcher is the only writer of its streams and writes one rank's complete
 * lines at a time, so lines of different ranks can never mix, however the
 * ranks split their writes. A line longer than RELAY_MAX_LINE is cut into
 * pieces of that size so that memory stays bounded. On an agent's stdout,
 * the agent's own messages to the launcher are taken out of the stream and
 * handed to a callback instead.
 */
#include "tnt-run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RELAY_MAX_LINE (64 * 1024)
#define RELAY_MIN_READ 4096

/* Writes data[0..len) as one line behind prefix, adding the newline that an
 * unterminated or cut line lacks. */
static void emit_line(FILE *sink, const char *prefix, const char *data,
                      size_t len, int has_newline)
{
    fputs(prefix, sink);
    fwrite(data, 1, len, sink);
    if (!has_newline)
        fputc('\n', sink);
}

/* Keeps a copy of the line for error messages, and hands an agent's
 * message to its callback. Returns 1 when the line was such a message. */
static int look_at_line(struct run_stream *s, const char *data, size_t len)
{
    size_t plen = strlen(RUN_CTL_PREFIX);
    size_t n = len;
    if (n > 0 && data[n - 1] == '\n')
        n--;
    if (s->on_ctl != NULL && n >= plen &&
        memcmp(data, RUN_CTL_PREFIX, plen) == 0) {
        char msg[512];
        size_t m = n - plen < sizeof msg - 1 ? n - plen : sizeof msg - 1;
        memcpy(msg, data + plen, m);
        msg[m] = '\0';
        s->on_ctl(s->ctl_arg, msg);
        return 1;
    }
    if (n > sizeof s->last - 1)
        n = sizeof s->last - 1;
    memcpy(s->last, data, n);
    s->last[n] = '\0';
    return 0;
}

/* Writes every complete line of s (and, if force, the partial rest too),
 * keeps the rest for later and flushes the sink. */
static int emit_lines(struct run_stream *s, const char *prefix, FILE *sink,
                      int force)
{
    size_t start = 0;
    if (s->len == 0)
        return 0;
    for (;;) {
        char *nl = memchr(s->data + start, '\n', s->len - start);
        if (nl == NULL)
            break;
        size_t end = (size_t)(nl - s->data) + 1;
        if (!look_at_line(s, s->data + start, end - start) && sink != NULL)
            emit_line(sink, prefix, s->data + start, end - start, 1);
        start = end;
    }
    /* A buffer full of one line cannot grow further: cut the line here. */
    if (s->len > start && (force || s->len - start >= RELAY_MAX_LINE)) {
        if (!look_at_line(s, s->data + start, s->len - start) &&
            sink != NULL)
            emit_line(sink, prefix, s->data + start, s->len - start, 0);
        start = s->len;
    }
    memmove(s->data, s->data + start, s->len - start);
    s->len -= start;
    if (sink != NULL && fflush(sink) != 0)
        return -1;
    return 0;
}

/* Makes room for at least RELAY_MIN_READ more bytes, or for what is left
 * below RELAY_MAX_LINE. Returns the free space, 0 when out of memory. */
static size_t reserve(struct run_stream *s)
{
    if (s->cap - s->len >= RELAY_MIN_READ || s->cap >= RELAY_MAX_LINE)
        return s->cap - s->len;
    size_t cap = s->cap ? 2 * s->cap : 2 * RELAY_MIN_READ;
    if (cap > RELAY_MAX_LINE)
        cap = RELAY_MAX_LINE;
    char *data = realloc(s->data, cap);
    if (data == NULL)
        return s->cap - s->len;
    s->data = data;
    s->cap = cap;
    return s->cap - s->len;
}

int run_relay_close(struct run_stream *s, const char *prefix, FILE *sink)
{
    int rc = 0;
    if (s->len > 0)
        rc = emit_lines(s, prefix, sink, 1);
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    free(s->data);
    s->data = NULL;
    s->len = s->cap = 0;
    return rc;
}

int run_relay_read(struct run_stream *s, const char *prefix, FILE *sink)
{
    size_t room = reserve(s);
    if (room == 0) {
        /* Out of memory with a partial line held: pass it on as it is. */
        if (emit_lines(s, prefix, sink, 1) != 0)
            return -1;
        room = s->cap - s->len;
        if (room == 0)
            return run_relay_close(s, prefix, sink);
    }
    ssize_t n;
    do {
        n = read(s->fd, s->data + s->len, room);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    /* End of file, or an error that reading again cannot cure (EIO): the
     * stream is over either way. */
    if (n <= 0)
        return run_relay_close(s, prefix, sink);
    s->len += (size_t)n;
    return emit_lines(s, prefix, sink, 0);
}

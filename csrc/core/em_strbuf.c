/* em_strbuf.c: the string builder used by every deterministic dump (IR, guards, logs).
 * Consumes format strings; produces a growing NUL-terminated buffer owned by the caller.
 */
#include <stdarg.h>
#include <stdio.h>

#include "em_core.h"

static int sb_reserve(EmStrBuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + extra + 1) ncap *= 2;
    char *p = realloc(b->s, ncap);
    if (!p) return -1;
    b->s = p;
    b->cap = ncap;
    return 0;
}

int em_sb_puts(EmStrBuf *b, const char *s) {
    size_t n = strlen(s);
    if (sb_reserve(b, n)) return -1;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
    return 0;
}

int em_sb_putc(EmStrBuf *b, unsigned char c) {
    if (sb_reserve(b, 1)) return -1;
    b->s[b->len++] = (char)c;
    b->s[b->len] = 0;
    return 0;
}

int em_sb_printf(EmStrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || sb_reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void em_sb_free(EmStrBuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

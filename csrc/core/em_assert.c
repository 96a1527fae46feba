/* em_assert.c: the failure path of EM_ASSERT (em_core.h). Consumes the failed condition's
 * location, text and message; produces a report on stderr and an abort (a core dump or the
 * sanitizer's stack trace), never a return.
 */
#include <stdarg.h>
#include <stdio.h>

#include "em_core.h"

_Noreturn void em_assert_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: ember internal assertion failed: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

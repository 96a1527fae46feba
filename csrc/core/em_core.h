/* em_core.h: base layer shared by every module: status codes, ownership tags, asserts,
 * growable vectors and a string builder. Pure C (no Python.h), so ir/ and backend/ can use it.
 */
#ifndef EM_CORE_H
#define EM_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Ownership tags for PyObject * in prototypes (convention 3 of DESIGN.md). */
#define EM_NEW      /* returns a new reference */
#define EM_BORROWED /* reference owned by someone else */
#define EM_STEALS   /* callee takes the caller's reference */

#define EM_LIKELY(x) __builtin_expect(!!(x), 1)
#define EM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define EM_UNUSED(x) ((void)(x))

/* EM_ASSERT(cond, fmt, ...): an invariant of ember's own code, never a check of user input
 * (those are aborts or exceptions). In a debug build (EM_DEBUG: EMBER_DEBUG=1 or EMBER_ASAN=1)
 * a false cond prints file:line, the condition and the message to stderr and aborts; in other
 * builds cond is not evaluated (only type-checked). An expression of type void. */
#ifdef EM_DEBUG
#define EM_ASSERT(cond, ...) (EM_LIKELY(cond) ? (void)0 : em_assert_fail(__FILE__, __LINE__, #cond, __VA_ARGS__))
#else
#define EM_ASSERT(cond, ...) ((void)sizeof(!(cond)))
#endif
_Noreturn void em_assert_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Status of a stage. EM_ERR: a Python exception is set (or, in pure C modules, out of
 * memory). EM_ABORT: the stage gave up for a user-visible reason (an abort reason code). */
typedef enum { EM_OK = 0, EM_ERR = -1, EM_ABORT = -2 } EmStatus;

/* Growable vector of T: `EmVec(T) v = {0}`; em_vec_push returns 0 or -1 (out of memory). */
#define EmVec(T)          \
    struct {              \
        T *data;          \
        int32_t len, cap; \
    }
#define em_vec_reserve(v, n)    \
    ((v)->len + (n) <= (v)->cap \
         ? 0                    \
         : em_vec_grow_((void **)&(v)->data, &(v)->cap, (v)->len + (n), (int32_t)sizeof(*(v)->data)))
#define em_vec_push(v, x) (em_vec_reserve((v), 1) ? -1 : ((v)->data[(v)->len++] = (x), 0))
#define em_vec_free(v) (free((v)->data), (v)->data = NULL, (v)->len = (v)->cap = 0)

static inline int em_vec_grow_(void **data, int32_t *cap, int32_t need, int32_t elem) {
    int32_t ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*data, (size_t)ncap * (size_t)elem);
    if (!p) return -1;
    *data = p;
    *cap = ncap;
    return 0;
}

/* String builder; all appends return 0 or -1 (out of memory). Text stays NUL-terminated. */
typedef struct {
    char *s;
    size_t len, cap;
} EmStrBuf;

/* first[i] = the least j with (a[j], b[j]) == (a[i], b[i]); a key (0, 0) matches nothing
 * (first[i] = i). Hashing: O(n). Returns 1 when some first[i] != i, 0 when none, -1 when out
 * of memory. */
int em_first_same(const uint64_t *a, const uint64_t *b, int32_t n, int32_t *first);

int em_sb_puts(EmStrBuf *b, const char *s);
int em_sb_putc(EmStrBuf *b, unsigned char c); /* any byte, NUL included */
int em_sb_printf(EmStrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void em_sb_free(EmStrBuf *b);

#endif

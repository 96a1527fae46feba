/* em_cache.h: per-code cache on the code object's extra slot. An EmExtra holds the entries
 * (most recent first), the recompile count and what to do with the code: compile, skip
 * (never intercepted) or fallback (runs as plain Python after an abort or the limit).
 */
#ifndef EM_CACHE_H
#define EM_CACHE_H

#include <Python.h>

#include "../guard/em_guard.h"

typedef struct EmEntry {
    struct EmEntry *next;
    EmGuardProg P;
    int32_t backend;              /* backend number it was compiled for (EMH_BACKEND_SHIFT) */
    void *compiled;               /* backend product, freed by free_compiled */
    void (*free_compiled)(void *);
    EM_NEW PyObject *(*info_compiled)(void *); /* optional: dict merged into entries() */
    char *graph_text, *guard_text; /* deterministic dumps, owned */
    int32_t op_count, ninputs;
    long long hits;
    double compile_s;       /* wall time the driver spent producing this entry */
    /* graph break: the graph returns the values the transformed code needs; the transformed
     * code (tcode) runs the unsupported instruction and calls the resume function */
    PyObject *tcode;        /* owned, or NULL for a frame captured whole */
    int nargs;              /* argument slots of the frame, passed on to tcode */
    PyObject *tfunc;        /* owned: function of tcode for ... */
    PyObject *tfunc_closure; /* ... this closure (owned, may be NULL) */
    char *break_reason;     /* owned: "file:line: reason" of the break */
} EmEntry;

typedef enum { EMX_COMPILE = 0, EMX_SKIP = 1, EMX_FALLBACK = 2 } EmExtraMode;

typedef struct {
    EmEntry *head;
    int n_entries;
    int n_compiles;
    EmExtraMode mode;
    PyObject *reason; /* str: why the code falls back, or NULL */
} EmExtra;

/* Sets up the extra index (once, at import). 0 or -1. */
int em_cache_init(void);
/* The code's extra (borrowed) or NULL; em_cache_get_or_new creates one (NULL on error). */
EmExtra *em_cache_get(PyCodeObject *co);
EmExtra *em_cache_get_or_new(PyCodeObject *co);
/* Pushes an entry in front (takes ownership). */
void em_cache_push(EmExtra *x, EmEntry *e);
void em_cache_move_front(EmExtra *x, EmEntry *prev, EmEntry *e);
void em_entry_free(EmEntry *e);
/* Drops the extras of every code seen since the last reset. */
void em_cache_reset(void);
/* Entries of a code (for ember.explain and tests): list of dicts (graph and guard dumps,
 * counts, break reason, backend). */
EM_NEW PyObject *em_cache_entries(PyCodeObject *co);

#endif

/* em_cache.h: per-code cache on the code object's extra slot. An EmExtra holds the entries
 * (most recent first), the recompile count and what to do with the code: compile, skip
 * (never intercepted) or fallback (runs as plain Python after an abort or the limit).
 *
 * Lifetimes (threads, ember.reset): extras and entries are reference counted, under the
 * GIL. The code's extra slot owns one reference to its extra; a call that uses an extra or
 * an entry (guards, compile, graph run: each may release the GIL) holds one more, so
 * ember.reset() (which detaches every extra from its code) or an entry invalidated by a
 * dead guarded object never frees what another frame is using. The list is linked through
 * owned references (x->head and every e->next own the entry they point to), so an entry
 * unlinked while a walker stands on it still leads the walker on.
 *
 * Returns: lookups give the extra or entry (NULL: none, or for the _new/_or_new forms no memory
 * with MemoryError set); em_cache_entries a new list or NULL with an exception.
 */
#ifndef EM_CACHE_H
#define EM_CACHE_H

#include <Python.h>

#include "../guard/em_guard.h"

struct EmExtra;

typedef struct EmEntry {
    struct EmEntry *next;         /* owned reference */
    struct EmExtra *owner;        /* borrowed: the extra whose list holds it, NULL once unlinked */
    int refcnt;                   /* under the GIL */
    EmGuardProg P;                /* P.dead: invalidated, never matches again */
    PyObject *watch;              /* owned capsule: context = the entry while its weak
                                   * references may call back, NULL after */
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
    PyObject *tfunc;        /* owned: function of tcode (frames of a function without a closure) */
    char *break_reason;     /* owned: "file:line: reason" of the break */
    int32_t rerun_limit;    /* when its graph raises at a node before this one (or at it, with
                             * rerun_meta), nothing changed outside the graph's results (no mutation,
                             * random draw or state but grad mode, which a failure restores): the
                             * frame may run again as plain Python (em_trace_rerun_limit) */
    int rerun_meta;
} EmEntry;

typedef enum { EMX_COMPILE = 0, EMX_SKIP = 1, EMX_FALLBACK = 2 } EmExtraMode;

typedef struct EmExtra {
    EmEntry *head;    /* owned reference */
    int refcnt;       /* the code's extra slot + calls using it (under the GIL) */
    unsigned gen;     /* bumped by every push: a miss rechecks when it changed meanwhile */
    int n_entries;
    int n_compiles;
    int tree_compiles; /* compiles of this code and of the frames it called while it was the
                        * outermost frame ember handled on its thread (accumulated limit) */
    EmExtraMode mode;
    int recursive;    /* EMX_FALLBACK at a recompile limit: its callees run as plain Python too */
    int watch_told;   /* EMBER_LOGS=breaks said once that a watching tool made it run as plain Python */
    PyObject *reason; /* str: why the code falls back, or NULL */
    PyObject *dyn_state; /* dict or NULL: the sizes earlier compiles saw, by source (automatic
                          * dynamic, trace/em_shape_sym.c) */
} EmExtra;

/* Sets up the extra index and the compile lock (once, at import). 0 or -1. */
int em_cache_init(void);
/* The code's extra (borrowed) or NULL; em_cache_get_or_new creates one (NULL on error).
 * Take a reference (em_extra_incref) before anything that can run Python code. */
EmExtra *em_cache_get(PyCodeObject *co);
EmExtra *em_cache_get_or_new(PyCodeObject *co);
static inline void em_extra_incref(EmExtra *x) { x->refcnt++; }
void em_extra_decref(EmExtra *x);
/* A new entry with one reference (the caller's); NULL with MemoryError. */
EmEntry *em_entry_new(void);
static inline void em_entry_incref(EmEntry *e) { e->refcnt++; }
/* Drops a reference; the entry (and the entries only it led to) is freed at zero. */
void em_entry_decref(EmEntry *e);
/* Pushes an entry in front, taking over the caller's reference, and trades the entry's
 * strong references to the objects its guards check by identity for weak references: when
 * one of them dies the entry is invalidated (P.dead) and unlinked, and freed once no call
 * uses it (TorchDynamo's guards do the same). May run Python code (an object only the
 * entry kept alive dies here). */
void em_cache_push(EmExtra *x, EmEntry *e);
/* Moves an entry of x's list to the front (no-op when it is not in the list). */
void em_cache_move_front(EmExtra *x, EmEntry *e);
/* Takes e out of its extra's list (no-op when it is in none). */
void em_cache_unlink(EmEntry *e);
/* Drops the extras of every code seen since the last reset (detached: calls still using
 * one keep it until they return). */
void em_cache_reset(void);
/* Entries of a code (for ember.explain and tests): list of dicts (graph and guard dumps,
 * counts, break reason, backend). */
EM_NEW PyObject *em_cache_entries(PyCodeObject *co);

/* The compile lock (DESIGN.md, Threads): one for the process, re-entrant for the thread
 * that holds it (a backend's compile or a traced call can re-enter ember), waited for with
 * the GIL released (the holder releases the GIL in torch calls and must get it back).
 * Never fails. */
void em_cache_lock(void);
void em_cache_unlock(void);
/* In a child after fork(): a fresh lock, held only if the forking thread held it. */
void em_cache_after_fork(void);

#endif

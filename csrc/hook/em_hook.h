/* em_hook.h: the PEP 523 frame hook and its per-thread enable flag.
 *
 * Returns: 0, or -1 with a Python exception; em_hook_call a new reference or NULL with an
 * exception, as the call it makes.
 */
#ifndef EM_HOOK_H
#define EM_HOOK_H

#include <Python.h>

#include "../core/em_core.h"

/* Thread flag bits; the bits from EMH_BACKEND_SHIFT up are the backend number (index in
 * em_state.backends, 0 = eager) frames are compiled for. */
/* EMH_ITERATION: a top-level call starts a new iteration (em_state.new_iteration). */
/* EMH_DYN_ALL / EMH_DYN_STATIC: ember.compile's dynamic=True / False (neither: None). */
enum {
    EMH_ENABLED = 1,
    EMH_FULLGRAPH = 2,
    EMH_ITERATION = 4,
    EMH_DYN_ALL = 16,
    EMH_DYN_STATIC = 32,
    EMH_BACKEND_SHIFT = 8
};
static inline int32_t em_hook_backend(int flags) { return (int32_t)((unsigned)flags >> EMH_BACKEND_SHIFT); }

int em_hook_init(void);
/* Sets this thread's flags, installing the hook when the first thread enables it. Returns
 * the previous flags (to pass to em_hook_exit). */
int em_hook_enter(int flags);
void em_hook_exit(int prev);
int em_hook_flags(void);
/* Calls fn with this thread's flags set to `flags` (the compiled-callable wrapper). */
EM_NEW PyObject *em_hook_call(int flags, PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames);

#endif

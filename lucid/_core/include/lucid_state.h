/* Per-thread autograd state. Included by exactly one translation unit (core);
 * the other modules read grad mode through core's grad_enabled(). */
#ifndef LUCID_STATE_H
#define LUCID_STATE_H
static _Thread_local int lucid_grad_enabled = 1;
/* lucid.autocast: the dtype code ops of the matmul family run in, -1 when off. */
static _Thread_local int lucid_autocast_code = -1;
/* Depth of lucid's allocator scopes on this thread (core.pyx, _alloc_enter). */
static _Thread_local int lucid_alloc_depth = 0;
#endif

/* Per-thread autograd state. Included by exactly one translation unit (_C). */
#ifndef LUCID_STATE_H
#define LUCID_STATE_H
static _Thread_local int lucid_grad_enabled = 1;
#endif

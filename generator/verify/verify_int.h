/* verify_int.h - what kb-verify's files share (not part of libkb). */
#ifndef KB_VERIFY_INT_H
#define KB_VERIFY_INT_H

#include "generator/task.h"

/* The index of t's parameter called name, or -1 (cpuref.c). */
int kbv_param_index(const kb_task *t, const char *name);

/* The CPU float64 implementation of a task, by kb_task.cpu_ref. bufs[i]
 * holds parameter i's elements as doubles (NULL for dims and scalars),
 * vals[i] the value of dims and scalars. Outputs are written into their
 * bufs. Returns 0, or -1 with why set when name is unknown. */
int kbv_cpu_ref(const kb_task *t, double **bufs, const double *vals,
                kb_buf *why);

#endif

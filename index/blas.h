/*
 * blas.h - the chosen BLAS's cblas.h (BLIS's or OpenBLAS's: the Makefile's
 * BLAS), for the encoder's matrix products (bert.c) and the flat vector
 * search (vec_file.c).
 */
#ifndef KB_INDEX_BLAS_H
#define KB_INDEX_BLAS_H

#include <stdint.h>

#ifdef KB_BLAS_BLIS
/* BLIS's cblas.h defines static inline helpers it does not use */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <cblas.h>
#pragma GCC diagnostic pop
void bli_thread_set_num_threads(int64_t n);
#else
#include <cblas.h>
#endif

#endif

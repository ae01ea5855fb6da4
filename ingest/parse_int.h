/* parse_int.h - helpers shared by the HTML, CUDA-source and text parsers
 * (defined in parse_text.c). */
#ifndef KB_PARSE_INT_H
#define KB_PARSE_INT_H

#include <stddef.h>

/* 1 if data does not look like text: a NUL byte in the first 8 KiB (unless
 * it starts with a UTF-16 byte-order mark), or more than 10% of those bytes
 * control characters other than tab, newline, carriage return, form feed
 * and escape. Empty data is text. */
int kb_ingest_looks_binary(const char *data, size_t len);

/* The last component of a path or URL ("a/b/c.cu" -> "c.cu"); a pointer
 * into path, never NULL. */
const char *kb_ingest_basename(const char *path);

#endif

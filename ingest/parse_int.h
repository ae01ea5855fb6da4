/* parse_int.h - helpers shared by the parsers (defined in parse_text.c). */
#ifndef KB_PARSE_INT_H
#define KB_PARSE_INT_H

#include <stddef.h>

#include "ingest/ingest_int.h"

/* 1 if data does not look like text: a NUL byte in the first 8 KiB (unless
 * it starts with a UTF-16 byte-order mark), or more than 10% of those bytes
 * control characters other than tab, newline, carriage return, form feed
 * and escape. Empty data is text. */
int kb_ingest_looks_binary(const char *data, size_t len);

/* The check every parser makes first: KB_ERR_PARSE with "'path' does not
 * look like WHAT (binary data)" when data looks binary, or holds a NUL byte
 * anywhere (no parser decodes UTF-16, and a NUL would cut the stored text);
 * KB_OK otherwise, empty data included. path may be NULL. */
kb_rc kb_ingest_check_text(const char *data, size_t len, const char *path,
                           const char *what, kb_err *err);

/* The last component of a path or URL ("a/b/c.cu" -> "c.cu"); a pointer
 * into path, never NULL. */
const char *kb_ingest_basename(const char *path);

#endif

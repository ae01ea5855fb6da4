/* parsers_int.h - helpers shared by the document parsers (parsers.c). */
#ifndef KB_PARSERS_INT_H
#define KB_PARSERS_INT_H

#include <stddef.h>

/* The id docutils (and so Sphinx) gives a section with this title:
 * lower-case, compatibility-decomposed to ASCII, runs of other characters
 * to one '-', leading digits and dashes and trailing dashes dropped
 * ("12.1.5. Loop Counters Signed vs. Unsigned" ->
 * "loop-counters-signed-vs-unsigned"). Caller frees; "" if nothing is
 * left; NULL only on no memory. */
char *kb_ingest_docutils_id(const char *title);

/* A set of strings, for de-duplicating anchors. */
typedef struct {
    char **slots;
    size_t cap, n;
} kb_strset;

void kb_strset_init(kb_strset *s);
void kb_strset_release(kb_strset *s);
int kb_strset_has(const kb_strset *s, const char *key);
/* Adds a copy of key; returns 0, or -1 on no memory. */
int kb_strset_add(kb_strset *s, const char *key);

/* The GitHub slug of heading, made unique against seen ("x", "x-1",
 * "x-2", ...) and added to it. Caller frees; NULL out of memory. */
char *kb_ingest_unique_slug(kb_strset *seen, const char *heading);

#endif

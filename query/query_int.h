/*
 * query_int.h - what the files of query/ share (one section per file).
 */
#ifndef KB_QUERY_INT_H
#define KB_QUERY_INT_H

#include "index/index.h"

/* ------------------------------------------------------------ query.c */

/* The columns kb_result_from_row reads, in its order, from
 * KB_RESULT_TABLES. */
#define KB_RESULT_COLUMNS \
    "c.id, d.source_id, d.title, c.heading_path, d.url, c.anchor, d.path," \
    " c.kind, c.text, s.version"
#define KB_RESULT_NCOLUMNS 10
#define KB_RESULT_TABLES \
    "chunks c JOIN documents d ON d.id = c.document_id" \
    " LEFT JOIN sources s ON s.id = d.source_id"
/* A result (rank and scores unset) from a row that starts with
 * KB_RESULT_COLUMNS; KB_ERR_NOMEM when out of memory. */
kb_rc kb_result_from_row(sqlite3_stmt *st, kb_result *r);

#endif

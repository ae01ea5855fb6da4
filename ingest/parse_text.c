/* parse_text.c - plain text: the file name as the top heading, one text
 * block per paragraph (blank-line separated). */
#include "kb/kb.h"

#include <stdlib.h>
#include <string.h>

#include "ingest/ingest_int.h"

kb_rc kb_parse_text(const char *data, size_t len, const char *path,
                    kb_doc *doc, kb_err *err)
{
    if (!path)
        path = "";
    kb_rc rc = kb_ingest_check_text(data, len, path, "text", err);
    if (rc != KB_OK)
        return rc;
    const char *base = kb_ingest_basename(path);
    rc = kb_doc_heading(doc, 1, *base ? base : "text", NULL);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    const char *p = data, *end = data + len;
    /* skip a UTF-8 byte-order mark */
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    const char *para = NULL;   /* start of the current paragraph */
    const char *para_end = NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (kb_ingest_blank(p, (size_t)(le - p))) {
            if (para) {
                rc = kb_doc_add(doc, KB_KIND_TEXT, para, (size_t)(para_end - para));
                if (rc != KB_OK)
                    return kb_err_set(err, rc, "out of memory");
                para = NULL;
            }
        } else {
            if (!para)
                para = p;
            para_end = le;
            if (para_end > para && para_end[-1] == '\r')
                para_end--;
        }
        p = nl ? nl + 1 : end;
    }
    if (para) {
        rc = kb_doc_add(doc, KB_KIND_TEXT, para, (size_t)(para_end - para));
        if (rc != KB_OK)
            return kb_err_set(err, rc, "out of memory");
    }
    return KB_OK;
}

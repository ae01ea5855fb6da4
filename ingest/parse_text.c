/* parse_text.c - plain text: the file name as the top heading, one text
 * block per paragraph (blank-line separated). */
#include "kb/kb.h"

#include <stdlib.h>
#include <string.h>

#include "ingest/parse_int.h"

int kb_ingest_looks_binary(const char *data, size_t len)
{
    size_t n = len < 8192 ? len : 8192;
    const unsigned char *p = (const unsigned char *)data;
    if (n >= 2 && ((p[0] == 0xFF && p[1] == 0xFE) || (p[0] == 0xFE && p[1] == 0xFF)))
        return 0;
    size_t ctrl = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == 0)
            return 1;
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' &&
             c != 0x1b) || c == 0x7f)
            ctrl++;
    }
    return n > 0 && ctrl * 10 > n;
}

kb_rc kb_ingest_check_text(const char *data, size_t len, const char *path,
                           const char *what, kb_err *err)
{
    if (kb_ingest_looks_binary(data, len) || (len && memchr(data, '\0', len)))
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s' does not look like %s (binary data)",
                          path ? path : "", what);
    return KB_OK;
}

const char *kb_ingest_basename(const char *path)
{
    if (!path)
        return "";
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')    /* "dir/" names dir */
        n--;
    const char *base = path;
    for (size_t i = 0; i + 1 < n; i++)
        if (path[i] == '/')
            base = path + i + 1;
    return base;
}

/* 1 if the line [s, e) holds only white space. */
static int blank_line(const char *s, const char *e)
{
    for (; s < e; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\f' && *s != '\v')
            return 0;
    return 1;
}

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
        if (blank_line(p, le)) {
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

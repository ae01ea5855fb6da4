/* mcp_check.c - what a message must be before mcp.c reads it (serve.h,
 * "mcp_check.c"): text that JSON allows, an id that MCP allows, a header
 * value in its base64 form. */
#include "serve/serve.h"

#include <math.h>
#include <string.h>

#include <openssl/evp.h>
#include <utf8proc.h>

#define JSON_INT_MAX 9007199254740991.0   /* 2^53 - 1: exact in a double */

const char *kb_mcp_bad_text(const char *s, size_t n, size_t *bad)
{
    int in_string = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        *bad = i;
        if (c >= 0x80) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                                  (utf8proc_ssize_t)(n - i), &cp);
            if (k <= 0)
                return "not UTF-8";
            i += (size_t)k;
            continue;
        }
        if (c < 0x20 && (in_string || !strchr(" \t\r\n", c) || c == 0))
            return "not JSON: a raw control character";
        if (in_string && c == '\\')
            i++;   /* the escaped character is never the string's end */
        else if (c == '"')
            in_string = !in_string;
        i++;
    }
    return NULL;
}

int kb_mcp_valid_id(const cJSON *id)
{
    if (cJSON_IsString(id))
        return 1;
    double d = id && cJSON_IsNumber(id) ? id->valuedouble : 0.5;
    return isfinite(d) && floor(d) == d && fabs(d) <= JSON_INT_MAX;
}

const char *kb_mcp_header_value(const char *h, char *buf, size_t n)
{
    size_t len = h ? strlen(h) : 0;
    if (len < 12 || strncmp(h, "=?base64?", 9) || strcmp(h + len - 2, "?="))
        return h;
    size_t b64 = len - 11;
    if (b64 % 4 || b64 / 4 * 3 + 1 > n)
        return NULL;
    int got = EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)h + 9, (int)b64);
    if (got < 0)
        return NULL;
    got -= (h[len - 3] == '=') + (h[len - 4] == '=');   /* the padding decodes to 0s */
    buf[got] = '\0';
    return buf;
}

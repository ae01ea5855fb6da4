/* tool_check.c - the arguments' checker of the tool table (kb.h, "tools",
 * kb_tool_check_args): a tool's input schema, in the subset of JSON Schema
 * it knows, applied to a call's arguments, with a message that names the
 * tool, the argument and what it must be. */
#include "api/api.h"
#include "kb/kb_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_INT_MAX 9007199254740991.0   /* 2^53 - 1: exact in a double */

/* The subset of JSON Schema the checker knows; a schema with any other
 * keyword is refused, so a table never relies on a check that is not
 * made. */
static const char *const known_keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "description", "default", "title", NULL
};

typedef struct {
    const char *tool;
    kb_err *err;
} checker;

static int is_integer(const cJSON *v)
{
    double d = v->valuedouble;
    return cJSON_IsNumber(v) && isfinite(d) && floor(d) == d &&
           fabs(d) <= JSON_INT_MAX;
}

static int has_type(const cJSON *v, const char *type)
{
    if (strcmp(type, "string") == 0) return cJSON_IsString(v);
    if (strcmp(type, "integer") == 0) return is_integer(v);
    if (strcmp(type, "number") == 0) return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    if (strcmp(type, "boolean") == 0) return cJSON_IsBool(v);
    if (strcmp(type, "array") == 0) return cJSON_IsArray(v);
    if (strcmp(type, "object") == 0) return cJSON_IsObject(v);
    if (strcmp(type, "null") == 0) return cJSON_IsNull(v);
    return 0;
}

/* A type's name in a message: "an integer". */
static const char *type_phrase(const char *type)
{
    if (strcmp(type, "integer") == 0) return "an integer";
    if (strcmp(type, "array") == 0) return "an array";
    if (strcmp(type, "object") == 0) return "an object";
    if (strcmp(type, "boolean") == 0) return "true or false";
    if (strcmp(type, "null") == 0) return "null";
    if (strcmp(type, "number") == 0) return "a number";
    return "a string";
}

/* What v is, for "..., not X". */
static const char *kind_of(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "invalid JSON";
}

/* Characters (code points) of a UTF-8 string, as JSON Schema counts. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int num_kw(const cJSON *schema, const char *kw, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(schema, kw);
    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/* Appends the names in array a (strings), joined by ", ". */
static kb_rc join_names(kb_buf *b, const cJSON *a)
{
    kb_rc rc = KB_OK;
    int first = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        const char *name = cJSON_IsString(x) ? x->valuestring : x->string;
        if (rc == KB_OK && !first)
            rc = kb_buf_puts(b, ", ");
        if (rc == KB_OK && name)
            rc = kb_buf_puts(b, name);
        first = 0;
    }
    return rc;
}

/* What a value of schema must be: "an integer from 1 to 50", "one of
 * hybrid, lexical, vector", "a non-empty string of at most 65536
 * characters". */
static kb_rc describe(const cJSON *schema, kb_buf *b)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (cJSON_IsArray(en)) {
        kb_rc rc = kb_buf_puts(b, "one of ");
        if (rc == KB_OK)
            rc = join_names(b, en);
        return rc;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    double lo = 0, hi = 0, min_len = 0, max_len = 0;
    int has_lo = num_kw(schema, "minimum", &lo), has_hi = num_kw(schema, "maximum", &hi);
    kb_rc rc = KB_OK;
    if (cJSON_IsArray(type)) {   /* ["integer", "null"] */
        const cJSON *x;
        cJSON_ArrayForEach(x, type)
            if (rc == KB_OK && cJSON_IsString(x))
                rc = kb_buf_printf(b, "%s%s", x == type->child ? "" : " or ",
                                   type_phrase(x->valuestring));
        return rc;
    }
    if (!t)
        return kb_buf_puts(b, "a value");
    num_kw(schema, "minLength", &min_len);
    if (strcmp(t, "string") == 0 && min_len >= 1)
        rc = kb_buf_puts(b, min_len == 1 ? "a non-empty string"
                                         : "a string");
    else
        rc = kb_buf_puts(b, type_phrase(t));
    if (rc == KB_OK && has_lo && has_hi)
        rc = kb_buf_printf(b, " from %.17g to %.17g", lo, hi);
    else if (rc == KB_OK && has_lo)
        rc = kb_buf_printf(b, " of at least %.17g", lo);
    else if (rc == KB_OK && has_hi)
        rc = kb_buf_printf(b, " of at most %.17g", hi);
    if (rc == KB_OK && min_len > 1)
        rc = kb_buf_printf(b, " of at least %.17g characters", min_len);
    if (rc == KB_OK && num_kw(schema, "maxLength", &max_len))
        rc = kb_buf_printf(b, " of at most %.17g characters", max_len);
    if (rc == KB_OK && num_kw(schema, "minItems", &lo))
        rc = kb_buf_printf(b, " of at least %.17g items", lo);
    if (rc == KB_OK && num_kw(schema, "maxItems", &hi))
        rc = kb_buf_printf(b, " of at most %.17g items", hi);
    return rc;
}

/* Fails with "TOOL: LABEL must be <describe(schema)>, not ACTUAL". */
static kb_rc must_be(const checker *c, const cJSON *schema, const char *label,
                     const char *actual)
{
    kb_buf want;
    kb_buf_init(&want, 512);
    kb_rc rc = describe(schema, &want);
    if (rc == KB_OK)
        rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: %s must be %s, not %s", c->tool,
                        label, want.data, actual);
    else
        rc = kb_err_set(c->err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&want);
    return rc;
}

static kb_rc schema_error(const checker *c, const char *what)
{
    return kb_err_set(c->err, KB_ERR_INTERNAL, "tool '%s': its input schema %s",
                      c->tool, what);
}

static kb_rc check_value(const checker *c, const cJSON *schema, const cJSON *v,
                         const char *path);

/* The members of object v against schema's properties, required and
 * additionalProperties (false only). */
static kb_rc check_members(const checker *c, const cJSON *schema, const cJSON *v,
                           const char *path)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (extra && !cJSON_IsFalse(extra))
        return schema_error(c, "has an additionalProperties other than false");
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
        char sub[256];
        snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", m->string);
        if (ps) {
            kb_rc rc = check_value(c, ps, m, sub);
            if (rc != KB_OK)
                return rc;
            continue;
        }
        if (!extra)
            continue;
        kb_buf names;
        kb_buf_init(&names, 4096);
        kb_rc rc = join_names(&names, props);
        if (rc != KB_OK)
            rc = kb_err_set(c->err, KB_ERR_NOMEM, "out of memory");
        else if (*path)
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown key '%.*s' in "
                            "'%s' (keys: %s)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string, path,
                            names.len ? names.data : "none");
        else if (names.len)
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown argument '%.*s' "
                            "(arguments: %s)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string, names.data);
        else
            rc = kb_err_set(c->err, KB_ERR_USAGE, "%s: unknown argument '%.*s' "
                            "(it takes none)", c->tool, kb_utf8_cut(m->string, 64),
                            m->string);
        kb_buf_release(&names);
        return rc;
    }
    const cJSON *req;
    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(schema, "required")) {
        if (!cJSON_IsString(req))
            return schema_error(c, "has a required entry that is not a name");
        if (!cJSON_GetObjectItemCaseSensitive(v, req->valuestring))
            return *path
                ? kb_err_set(c->err, KB_ERR_USAGE, "%s: '%s' lacks its key '%s'",
                             c->tool, path, req->valuestring)
                : kb_err_set(c->err, KB_ERR_USAGE, "%s: missing argument '%s'",
                             c->tool, req->valuestring);
    }
    return KB_OK;
}

/* Checks v against schema; path names v in messages ("" for the
 * arguments themselves, "k", "sources[2]"). */
static kb_rc check_value(const checker *c, const cJSON *schema, const cJSON *v,
                         const char *path)
{
    if (!cJSON_IsObject(schema))
        return schema_error(c, "is not a JSON object");
    const cJSON *kw;
    cJSON_ArrayForEach(kw, schema) {
        size_t i = 0;
        while (known_keywords[i] && strcmp(known_keywords[i], kw->string) != 0)
            i++;
        if (!known_keywords[i]) {
            char what[128];
            snprintf(what, sizeof what, "uses '%.*s', which the checker "
                     "does not know", kb_utf8_cut(kw->string, 40), kw->string);
            return schema_error(c, what);
        }
    }
    char label[288], actual[160];
    if (*path)
        snprintf(label, sizeof label, "'%s'", path);
    else
        snprintf(label, sizeof label, "the arguments");

    /* type */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    int typed = !type;
    if (cJSON_IsString(type)) {
        typed = has_type(v, type->valuestring);
    } else if (cJSON_IsArray(type)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, type)
            typed |= cJSON_IsString(t) && has_type(v, t->valuestring);
    }
    if (!typed) {
        if (cJSON_IsNumber(v))
            snprintf(actual, sizeof actual, "%.17g", v->valuedouble);
        else
            snprintf(actual, sizeof actual, "%s", kind_of(v));
        return must_be(c, schema, label, actual);
    }

    /* enum (of strings) */
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (en) {
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en)
            found |= cJSON_IsString(e) && cJSON_IsString(v) &&
                     strcmp(e->valuestring, v->valuestring) == 0;
        if (!found) {
            if (cJSON_IsString(v))
                snprintf(actual, sizeof actual, "'%.*s'", kb_utf8_cut(v->valuestring, 64),
                         v->valuestring);
            else
                snprintf(actual, sizeof actual, "%s", kind_of(v));
            return must_be(c, schema, label, actual);
        }
    }

    double lo = 0, hi = 0;
    if (cJSON_IsNumber(v) &&
        ((num_kw(schema, "minimum", &lo) && v->valuedouble < lo) ||
         (num_kw(schema, "maximum", &hi) && v->valuedouble > hi))) {
        snprintf(actual, sizeof actual, "%.17g", v->valuedouble);
        return must_be(c, schema, label, actual);
    }
    if (cJSON_IsString(v)) {
        double len = (double)utf8_chars(v->valuestring);
        if ((num_kw(schema, "minLength", &lo) && len < lo) ||
            (num_kw(schema, "maxLength", &hi) && len > hi)) {
            if (len == 0)
                snprintf(actual, sizeof actual, "an empty string");
            else
                snprintf(actual, sizeof actual, "one of %.17g characters", len);
            return must_be(c, schema, label, actual);
        }
    }
    if (cJSON_IsArray(v)) {
        double n = (double)cJSON_GetArraySize(v);
        if ((num_kw(schema, "minItems", &lo) && n < lo) ||
            (num_kw(schema, "maxItems", &hi) && n > hi)) {
            snprintf(actual, sizeof actual, "an array of %.17g items", n);
            return must_be(c, schema, label, actual);
        }
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        size_t i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            char sub[288];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i++);
            kb_rc rc = items ? check_value(c, items, x, sub) : KB_OK;
            if (rc != KB_OK)
                return rc;
        }
    }
    if (cJSON_IsObject(v))
        return check_members(c, schema, v, path);
    return KB_OK;
}

kb_rc kb_tool_check_args(const kb_tool *tool, const cJSON *args, kb_err *err)
{
    checker c = { tool->name, err };
    /* parsed per call: a few microseconds, and nothing shared between
     * threads */
    cJSON *schema = cJSON_Parse(tool->input_schema);
    kb_rc rc;
    if (!schema)
        rc = schema_error(&c, "is not JSON");
    else if (!args)
        rc = check_members(&c, schema, NULL, "");
    else
        rc = check_value(&c, schema, args, "");
    cJSON_Delete(schema);
    return rc;
}

kb_rc kb_tool_drop_empty(const kb_tool *tool, const cJSON *args, cJSON **trimmed)
{
    *trimmed = NULL;
    if (!cJSON_IsObject(args))
        return KB_OK;
    cJSON *schema = cJSON_Parse(tool->input_schema);
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    kb_rc rc = schema ? KB_OK : KB_ERR_NOMEM;
    const cJSON *a;
    cJSON_ArrayForEach(a, args) {
        if (rc != KB_OK || !cJSON_IsString(a) || a->valuestring[0] ||
            !cJSON_GetObjectItemCaseSensitive(props, a->string))
            continue;   /* the checker names an unknown one */
        int needed = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, required)
            needed |= cJSON_IsString(r) && strcmp(r->valuestring, a->string) == 0;
        if (needed)   /* the checker says what a required one must be */
            continue;
        if (!*trimmed && !(*trimmed = cJSON_Duplicate(args, 1)))
            rc = KB_ERR_NOMEM;
        else
            cJSON_DeleteItemFromObjectCaseSensitive(*trimmed, a->string);
    }
    cJSON_Delete(schema);
    if (rc != KB_OK) {
        cJSON_Delete(*trimmed);
        *trimmed = NULL;
    }
    return rc;
}

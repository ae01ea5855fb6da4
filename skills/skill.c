/* skill.c - SKILL.md: YAML front matter (libyaml, events in, events out)
 * and a Markdown body kept as it is, with its `## ` sections. */
#include "skills/skill.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* SKILL.md files are small; anything near this is not a skill */
#define SKILL_MAX_BYTES KB_SKILL_MD_MAX

static const char *const key_names[KB_SKILL_NKEYS] = {
    "name", "description", "license", "compatibility", "metadata", "allowed-tools"
};

const char *kb_skill_key_name(kb_skill_key k)
{
    return (unsigned)k < KB_SKILL_NKEYS ? key_names[k] : "?";
}

void kb_skill_init(kb_skill *s)
{
    memset(s, 0, sizeof *s);
}

static void sections_release(kb_skill *s)
{
    for (size_t i = 0; i < s->nsections; i++)
        free(s->sections[i].title);
    free(s->sections);
    s->sections = NULL;
    s->nsections = s->capsections = 0;
}

void kb_skill_release(kb_skill *s)
{
    free(s->path);
    free(s->dir);
    for (int k = 0; k < KB_SKILL_NKEYS; k++)
        free(s->fields[k]);
    for (size_t i = 0; i < s->nmeta; i++) {
        free(s->meta[i].key);
        free(s->meta[i].value);
    }
    free(s->meta);
    free(s->body);
    sections_release(s);
    kb_skill_init(s);
}

/* ------------------------------------------------------------------ scalars */

static int all_in(const char *s, const char *set)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr(set, *s))
            return 0;
    return 1;
}

static int one_of(const char *s, const char *const *words)
{
    for (size_t i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return 1;
    return 0;
}

/* A decimal, sexagesimal or exponent number: digits (and '_', ':') with
 * at most one '.', then optionally e[+-]digits; at least one digit. */
static int decimal_like(const char *s)
{
    int digits = 0, dots = 0;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (isdigit((unsigned char)*s))
            digits++;
        else if (*s == '.')
            dots++;
        else if (*s != '_' && *s != ':')
            return 0;
    }
    if (!digits || dots > 1)
        return 0;
    if (!*s)
        return 1;
    s++;                                  /* the exponent */
    if (*s == '+' || *s == '-')
        s++;
    return all_in(s, "0123456789");
}

/* What YAML 1.1 or 1.2 would resolve a plain scalar to, if not a string:
 * "null", "boolean", "number" or "date"; NULL for a string. */
static const char *yaml_plain_type(const char *t)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
    static const char *const bools[] = {
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True",
        "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", NULL
    };
    static const char *const specials[] = {
        ".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", NULL
    };
    if (one_of(t, nulls))
        return "null";
    if (one_of(t, bools))
        return "boolean";
    const char *u = t + (*t == '+' || *t == '-');
    if (one_of(u, specials))
        return "number";
    if (u[0] == '0' && (u[1] == 'x' || u[1] == 'X') && all_in(u + 2, "0123456789abcdefABCDEF_"))
        return "number";
    if (u[0] == '0' && (u[1] == 'o' || u[1] == 'O') && all_in(u + 2, "01234567_"))
        return "number";
    if (u[0] == '0' && (u[1] == 'b' || u[1] == 'B') && all_in(u + 2, "01_"))
        return "number";
    if (decimal_like(u))
        return "number";
    /* a timestamp: YYYY-M[M]-D[D], then anything */
    if (isdigit((unsigned char)t[0]) && isdigit((unsigned char)t[1]) &&
        isdigit((unsigned char)t[2]) && isdigit((unsigned char)t[3]) && t[4] == '-' &&
        isdigit((unsigned char)t[5]))
        return "date";
    return NULL;
}

int kb_skill_yaml_nonstring(const char *text)
{
    return yaml_plain_type(text ? text : "") != NULL;
}

/* ------------------------------------------------------------------ sections */

/* The `## ` headings of body outside fenced code, with their ranges. */
static kb_rc find_sections(kb_skill *s)
{
    sections_release(s);
    const char *b = s->body ? s->body : "";
    int line = s->body_line;
    char fence = 0;
    for (const char *p = b; *p; line++) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + n && q - p < 4 && *q == ' ')
            q++;
        if ((q[0] == '`' || q[0] == '~') && q[1] == q[0] && q[2] == q[0]) {
            if (!fence)
                fence = q[0];
            else if (fence == q[0])
                fence = 0;
        } else if (!fence && n >= 3 && p[0] == '#' && (p[1] == '#' || p[1] == ' ')) {
            int level = p[1] == '#' ? 2 : 1;
            if (level == 2 && p[2] == '#')
                level = 3;
            if (s->nsections)
                if (level <= 2)
                    s->sections[s->nsections - 1].end = (size_t)(p - b);
            if (level == 2 && (p[2] == ' ' || p[2] == '\t')) {
                const char *t = p + 3, *e = p + n;
                while (t < e && isspace((unsigned char)*t))
                    t++;
                while (e > t && (isspace((unsigned char)e[-1]) || e[-1] == '#'))
                    e--;
                if (KB_GROW(s->sections, s->nsections + 1, s->capsections) != KB_OK)
                    return KB_ERR_NOMEM;
                kb_skill_section *x = &s->sections[s->nsections];
                if (!(x->title = kb_strndup(t, (size_t)(e - t))))
                    return KB_ERR_NOMEM;
                x->line = line;
                x->start = (size_t)(p - b);
                x->end = strlen(b);
                s->nsections++;
            }
        }
        p = eol ? eol + 1 : p + n;
    }
    return KB_OK;
}

const kb_skill_section *kb_skill_section_find(const kb_skill *s, const char *title)
{
    for (size_t i = 0; i < s->nsections; i++)
        if (strcasecmp(s->sections[i].title, title) == 0)
            return &s->sections[i];
    return NULL;
}

kb_rc kb_skill_set_body(kb_skill *s, const char *body)
{
    char *b = kb_strdup(body ? body : "");
    if (!b)
        return KB_ERR_NOMEM;
    free(s->body);
    s->body = b;
    return find_sections(s);
}

/* ------------------------------------------------------------------ metadata */

const char *kb_skill_get(const kb_skill *s, const char *key)
{
    for (size_t i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta[i].key, key) == 0)
            return s->meta[i].value;
    return NULL;
}

kb_rc kb_skill_set(kb_skill *s, const char *key, const char *value)
{
    size_t i = 0;
    while (i < s->nmeta && strcmp(s->meta[i].key, key) != 0)
        i++;
    if (!value) {
        if (i == s->nmeta)
            return KB_OK;
        free(s->meta[i].key);
        free(s->meta[i].value);
        memmove(&s->meta[i], &s->meta[i + 1], (s->nmeta - i - 1) * sizeof *s->meta);
        s->nmeta--;
        return KB_OK;
    }
    char *v = kb_strdup(value);
    if (!v)
        return KB_ERR_NOMEM;
    if (i < s->nmeta) {
        free(s->meta[i].value);
        s->meta[i].value = v;
        return KB_OK;
    }
    char *k = kb_strdup(key);
    if (!k || KB_GROW(s->meta, s->nmeta + 1, s->capmeta) != KB_OK) {
        free(k);
        free(v);
        return KB_ERR_NOMEM;
    }
    s->meta[s->nmeta++] = (kb_skill_meta){ .key = k, .value = v, .line = 0 };
    s->has_metadata = 1;
    return KB_OK;
}

kb_rc kb_skill_set_field(kb_skill *s, kb_skill_key k, const char *value)
{
    if (k == KB_SKILL_METADATA || (unsigned)k >= KB_SKILL_NKEYS)
        return KB_ERR_USAGE;
    char *v = NULL;
    if (value && !(v = kb_strdup(value)))
        return KB_ERR_NOMEM;
    free(s->fields[k]);
    s->fields[k] = v;
    return KB_OK;
}

/* ------------------------------------------------------------------ parse */

/* One parse of a front matter: libyaml's events, checked as they come. */
typedef struct {
    yaml_parser_t yp;
    const char *path;
    kb_skill *s;
    kb_skill_diags *d;
    int line0;             /* the file's line of the YAML's first line */
    int broken;            /* libyaml gave up: no more events */
    kb_rc rc;              /* sticky: KB_ERR_NOMEM */
} fm_parse;

static int ev_line(const fm_parse *p, const yaml_event_t *ev)
{
    return p->line0 + (int)ev->start_mark.line;
}

static void problem(fm_parse *p, int line, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(fm_parse *p, int line, const char *rule, const char *fmt, ...)
{
    if (p->rc != KB_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    p->rc = kb_skill_diag_vadd(p->d, p->path, line, KB_SKILL_ERROR, rule, fmt, ap);
    va_end(ap);
}

/* The next event into ev (0), or -1 when libyaml stopped on malformed
 * YAML (reported once) or the parse failed. */
static int next(fm_parse *p, yaml_event_t *ev)
{
    if (p->broken || p->rc != KB_OK)
        return -1;
    if (!yaml_parser_parse(&p->yp, ev)) {
        p->broken = 1;
        if (p->yp.error == YAML_MEMORY_ERROR) {
            p->rc = KB_ERR_NOMEM;
            return -1;
        }
        int line = p->line0 + (int)p->yp.problem_mark.line;
        if (p->yp.context)
            problem(p, line, "yaml", "malformed YAML: %s (%s)",
                    p->yp.problem ? p->yp.problem : "error", p->yp.context);
        else
            problem(p, line, "yaml", "malformed YAML: %s",
                    p->yp.problem ? p->yp.problem : "error");
        return -1;
    }
    if (ev->type == YAML_NO_EVENT) {
        /* past the stream's end libyaml hands out empty events forever: a
         * reader out of step with the nesting would never stop */
        p->broken = 1;
        problem(p, p->line0, "yaml", "malformed YAML: the front matter ends early");
        return -1;
    }
    /* what the format's strict-YAML reader refuses, wherever it stands */
    const yaml_char_t *anchor = NULL, *tag = NULL;
    int flow = 0;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        problem(p, ev_line(p, ev), "yaml", "aliases ('*%s') are not allowed in the "
                "front matter", (const char *)ev->data.alias.anchor);
        break;
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        flow = ev->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        flow = ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
        break;
    default:
        break;
    }
    if (anchor)
        problem(p, ev_line(p, ev), "yaml", "anchors ('&%s') are not allowed in the "
                "front matter", (const char *)anchor);
    if (tag)
        problem(p, ev_line(p, ev), "yaml", "tags ('%s') are not allowed in the front "
                "matter", (const char *)tag);
    if (flow)
        problem(p, ev_line(p, ev), "yaml", "flow style ('{...}', '[...]') is not "
                "allowed in the front matter: write one key per line");
    return 0;
}

/* Skips the rest of the node that ev starts. */
static void skip_node(fm_parse *p, const yaml_event_t *first)
{
    if (first->type != YAML_MAPPING_START_EVENT && first->type != YAML_SEQUENCE_START_EVENT)
        return;
    int depth = 1;
    yaml_event_t ev;
    while (depth > 0 && next(p, &ev) == 0) {
        if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT)
            depth++;
        else if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT)
            depth--;
        yaml_event_delete(&ev);
    }
}

static const char *node_kind(const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_MAPPING_START_EVENT: return "a map";
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_ALIAS_EVENT: return "an alias";
    default: return "not a string";
    }
}

/* The string of a scalar event, or NULL (reported) when it is not one:
 * another node, or a plain scalar YAML reads as null, a boolean, a number
 * or a date. what names it in messages ("'name'", "metadata 'kb-x'"). */
static const char *scalar_string(fm_parse *p, const yaml_event_t *ev, const char *what,
                                 int key_line)
{
    int at = key_line ? key_line : ev_line(p, ev);
    if (ev->type != YAML_SCALAR_EVENT) {
        problem(p, at, "type", "%s must be a string, not %s", what,
                node_kind(ev));
        return NULL;
    }
    const char *v = (const char *)ev->data.scalar.value;
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        const char *type = yaml_plain_type(v);
        if (type && strcmp(type, "null") == 0) {
            problem(p, at, "type", "%s is empty (YAML reads it as null)", what);
            return NULL;
        }
        if (type) {
            problem(p, at, "type", "%s is read as a %s, not a string: quote "
                    "it ('%s')", what, type, v);
            return NULL;
        }
    }
    if (strlen(v) != ev->data.scalar.length) {
        problem(p, at, "type", "%s holds a NUL character", what);
        return NULL;
    }
    return v;
}

/* metadata: a block map of string to string, keys unique. */
static void parse_metadata(fm_parse *p)
{
    kb_skill *s = p->s;
    s->has_metadata = 1;
    yaml_event_t k, v;
    while (next(p, &k) == 0) {
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return;
        }
        int kline = ev_line(p, &k);
        const char *key = scalar_string(p, &k, "a metadata key", 0);
        skip_node(p, &k);        /* a complex key ('? - x'): its value is next */
        if (next(p, &v) != 0) {
            yaml_event_delete(&k);
            return;
        }
        if (key) {
            kb_buf what;
            kb_buf_init(&what, 0);
            kb_rc rc = kb_buf_printf(&what, "metadata '%s'", key);
            const char *val = rc == KB_OK ? scalar_string(p, &v, what.data, kline) : NULL;
            if (rc != KB_OK)
                p->rc = rc;
            kb_buf_release(&what);
            if (val && kb_skill_get(s, key)) {
                problem(p, kline, "keys", "metadata '%s' is given twice", key);
            } else if (val && p->rc == KB_OK) {
                if ((p->rc = kb_skill_set(s, key, val)) == KB_OK)
                    s->meta[s->nmeta - 1].line = kline;
            }
        }
        skip_node(p, &v);
        yaml_event_delete(&v);
        yaml_event_delete(&k);
    }
}

static int key_index(const char *key)
{
    for (int i = 0; i < KB_SKILL_NKEYS; i++)
        if (strcmp(key, key_names[i]) == 0)
            return i;
    return -1;
}

/* The root mapping's pairs, after its MAPPING_START. */
static void parse_top(fm_parse *p)
{
    kb_skill *s = p->s;
    yaml_event_t k, v;
    while (next(p, &k) == 0) {
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return;
        }
        int line = ev_line(p, &k);
        const char *key = scalar_string(p, &k, "a key", 0);
        int ki = key ? key_index(key) : -1;
        if (key && ki < 0)
            problem(p, line, "keys", "unknown key '%s': the front matter holds only name, "
                    "description, license, compatibility, metadata and allowed-tools "
                    "(kb's own fields go under metadata)", key);
        else if (ki >= 0 && s->lines[ki])
            problem(p, line, "keys", "'%s' is given twice (first on line %d)", key,
                    s->lines[ki]);
        skip_node(p, &k);        /* a complex key ('? - x'): its value is next */
        if (next(p, &v) != 0) {
            yaml_event_delete(&k);
            return;
        }
        if (ki >= 0 && !s->lines[ki]) {
            s->lines[ki] = line;
            if (ki == KB_SKILL_METADATA && v.type == YAML_MAPPING_START_EVENT) {
                parse_metadata(p);
            } else if (ki == KB_SKILL_METADATA) {
                problem(p, line, "type", "'metadata' must be a map of string to string, "
                        "not %s", v.type == YAML_SCALAR_EVENT ? "a string" : node_kind(&v));
                skip_node(p, &v);
            } else {
                kb_buf what;
                kb_buf_init(&what, 0);
                kb_rc rc = kb_buf_printf(&what, "'%s'", key);
                const char *val = rc == KB_OK ? scalar_string(p, &v, what.data, line) : NULL;
                kb_buf_release(&what);
                if (rc != KB_OK)
                    p->rc = rc;
                else if (val && !(s->fields[ki] = kb_strdup(val)))
                    p->rc = KB_ERR_NOMEM;
                skip_node(p, &v);
            }
        } else {
            skip_node(p, &v);
        }
        yaml_event_delete(&v);
        yaml_event_delete(&k);
    }
}

/* The front matter's YAML: one document holding one block mapping. */
static void parse_yaml(fm_parse *p)
{
    yaml_event_t ev;
    if (next(p, &ev) != 0)                /* STREAM_START */
        return;
    yaml_event_delete(&ev);
    if (next(p, &ev) != 0)
        return;
    if (ev.type == YAML_STREAM_END_EVENT) {
        problem(p, 1, "frontmatter", "the front matter is empty");
        yaml_event_delete(&ev);
        return;
    }
    yaml_event_delete(&ev);               /* DOCUMENT_START */
    if (next(p, &ev) != 0)
        return;
    if (ev.type == YAML_MAPPING_START_EVENT) {
        parse_top(p);
    } else {
        problem(p, ev_line(p, &ev), "yaml", "the front matter must be a map of keys "
                "to values, not %s", ev.type == YAML_SCALAR_EVENT ? "a string"
                                                                   : node_kind(&ev));
        skip_node(p, &ev);
    }
    yaml_event_delete(&ev);
    if (next(p, &ev) != 0)                /* DOCUMENT_END */
        return;
    yaml_event_delete(&ev);
    if (next(p, &ev) != 0)
        return;
    if (ev.type == YAML_DOCUMENT_START_EVENT)
        problem(p, ev_line(p, &ev), "yaml", "the front matter holds more than one YAML "
                "document");
    yaml_event_delete(&ev);
}

/* The end of the line at p (its '\n', or the end of the text). */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

/* 1 if [p, e) is a fence line: '---' and trailing blanks. */
static int is_fence(const char *p, const char *e)
{
    if (e - p < 3 || memcmp(p, "---", 3) != 0)
        return 0;
    for (p += 3; p < e; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r')
            return 0;
    return 1;
}

/* Finds the front matter in text: the YAML between the fences, and where
 * the body starts. Problems go to p. Returns 0 when found. */
static int split_front_matter(fm_parse *p, const char *text, size_t len,
                              size_t *yaml_start, size_t *yaml_end,
                              size_t *body_start, int *body_line)
{
    const char *end = text + len;
    if (memchr(text, '\0', len)) {
        problem(p, 0, "frontmatter", "holds a NUL byte: not a text file");
        return -1;
    }
    const char *e = line_end(text, end);
    if (!is_fence(text, e)) {
        problem(p, 1, "frontmatter", len >= 3 && (unsigned char)text[0] == 0xEF ?
                "must start with a line '---' (a byte-order mark stands before it)" :
                "must start with a line '---' opening the YAML front matter");
        return -1;
    }
    *yaml_start = e < end ? (size_t)(e + 1 - text) : len;
    int line = 2;
    for (const char *q = text + *yaml_start; q < end; line++) {
        const char *qe = line_end(q, end);
        if (is_fence(q, qe)) {
            *yaml_end = (size_t)(q - text);
            *body_start = qe < end ? (size_t)(qe + 1 - text) : len;
            *body_line = line + 1;
            return 0;
        }
        /* the format's reference validator ends the front matter at the
         * first '---' wherever it stands */
        const char *dash = memmem(q, (size_t)(qe - q), "---", 3);
        if (dash) {
            problem(p, line, "frontmatter", "'---' inside the front matter: the "
                    "format's validator would end the front matter there");
            return -1;
        }
        q = qe < end ? qe + 1 : end;
    }
    problem(p, 1, "frontmatter", "the front matter is not closed: no line '---' after it");
    return -1;
}

/* flow collections ('[', '{') the front matter may open in all: it needs
 * none (flow style is refused), and this many can never be slow */
#define FLOW_MAX 64

/* 1 if the front matter's YAML (n bytes at y) is small enough for libyaml:
 * at most KB_SKILL_FRONT_MAX bytes and FLOW_MAX brackets, counted whether
 * quoted or not (a count no quoting can hide nesting from); else 0, the
 * problem reported. */
static int front_matter_bounded(fm_parse *p, const char *y, size_t n)
{
    if (n > KB_SKILL_FRONT_MAX) {
        problem(p, p->line0, "frontmatter", "the front matter is %zu bytes, over the "
                "limit of %u (the format's fields fit in 2 KB): not parsed", n,
                KB_SKILL_FRONT_MAX);
        return 0;
    }
    int line = p->line0, flows = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] == '\n')
            line++;
        else if ((y[i] == '[' || y[i] == '{') && ++flows > FLOW_MAX) {
            problem(p, line, "yaml", "flow style ('{...}', '[...]') is not allowed in "
                    "the front matter, and it opens over %d: not parsed", FLOW_MAX);
            return 0;
        }
    }
    return 1;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return kb_strdup(".");
    if (slash == path)
        return kb_strdup("/");
    return kb_strndup(path, (size_t)(slash - path));
}

kb_rc kb_skill_parse(const char *path, const char *text, size_t len,
                     kb_skill *out, kb_skill_diags *diags, kb_err *err)
{
    kb_skill_release(out);
    kb_skill_diags local;
    kb_skill_diags_init(&local);
    fm_parse p = { .path = path, .s = out, .d = diags ? diags : &local, .line0 = 2 };
    size_t n0 = p.d->n;
    size_t ys = 0, ye = 0, bs = 0;
    int bline = 0;
    if (!(out->path = kb_strdup(path)) || !(out->dir = dir_of(path)))
        p.rc = KB_ERR_NOMEM;
    if (p.rc == KB_OK && split_front_matter(&p, text, len, &ys, &ye, &bs, &bline) == 0) {
        if (!front_matter_bounded(&p, text + ys, ye - ys)) {
            /* refused before libyaml sees it: its scanner is super-linear
             * in deep flow nesting (200 KB of '[' took 37 s) */
        } else if (!yaml_parser_initialize(&p.yp)) {
            p.rc = KB_ERR_NOMEM;
        } else {
            yaml_parser_set_input_string(&p.yp, (const unsigned char *)text + ys, ye - ys);
            yaml_parser_set_encoding(&p.yp, YAML_UTF8_ENCODING);
            parse_yaml(&p);
            yaml_parser_delete(&p.yp);
        }
        out->body_line = bline;
        if (p.rc == KB_OK && !(out->body = kb_strndup(text + bs, len - bs)))
            p.rc = KB_ERR_NOMEM;
        if (p.rc == KB_OK)
            p.rc = find_sections(out);
    }
    kb_rc rc = p.rc;
    if (rc == KB_ERR_NOMEM)
        kb_err_set(err, rc, "out of memory reading '%s'", path);
    else
        rc = kb_skill_diags_fail(p.d, n0, err);
    kb_skill_diags_release(&local);
    if (rc != KB_OK)
        kb_skill_release(out);
    return rc;
}

kb_rc kb_skill_load(const char *path, kb_skill *out, kb_skill_diags *diags,
                    kb_err *err)
{
    size_t n = strlen(path);
    int is_md = n >= 8 && strcmp(path + n - 8, "SKILL.md") == 0;
    char *file = is_md ? kb_strdup(path) : kb_path_join(path, "SKILL.md");
    if (!file)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf text;
    kb_buf_init(&text, 0);
    kb_rc rc = kb_read_file(file, SKILL_MAX_BYTES, &text, err);
    if (rc == KB_OK)
        rc = kb_skill_parse(file, text.data ? text.data : "", text.len, out, diags, err);
    kb_buf_release(&text);
    free(file);
    return rc;
}

/* ------------------------------------------------------------------ write */

static int to_buf(void *data, unsigned char *bytes, size_t size)
{
    return kb_buf_append(data, bytes, size) == KB_OK;
}

/* Emits one event made by init (0 on failure). */
static int emit_scalar(yaml_emitter_t *em, const char *v, int quote)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = quote ? YAML_SINGLE_QUOTED_SCALAR_STYLE
                                      : YAML_ANY_SCALAR_STYLE;
    return yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v),
                                        1, 1, style) &&
           yaml_emitter_emit(em, &ev);
}

static int emit_pair(yaml_emitter_t *em, const char *k, const char *v)
{
    return emit_scalar(em, k, kb_skill_yaml_nonstring(k)) &&
           emit_scalar(em, v, kb_skill_yaml_nonstring(v));
}

static int emit_front_matter(yaml_emitter_t *em, const kb_skill *s)
{
    yaml_event_t ev;
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(em, &ev) &&
             yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                 YAML_BLOCK_MAPPING_STYLE) &&
             yaml_emitter_emit(em, &ev);
    for (int k = 0; ok && k < KB_SKILL_NKEYS; k++) {
        if (k != KB_SKILL_METADATA) {
            if (s->fields[k])
                ok = emit_pair(em, key_names[k], s->fields[k]);
            continue;
        }
        if (!s->has_metadata && !s->nmeta)
            continue;
        ok = emit_scalar(em, key_names[k], 0) &&
             yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                 s->nmeta ? YAML_BLOCK_MAPPING_STYLE
                                                          : YAML_FLOW_MAPPING_STYLE) &&
             yaml_emitter_emit(em, &ev);
        for (size_t i = 0; ok && i < s->nmeta; i++)
            ok = emit_pair(em, s->meta[i].key, s->meta[i].value);
        ok = ok && yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    return ok && yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev) &&
           yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(em, &ev) &&
           yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev) &&
           yaml_emitter_flush(em);
}

kb_rc kb_skill_write(const kb_skill *s, kb_buf *out)
{
    kb_buf yaml;
    kb_buf_init(&yaml, 0);
    yaml_emitter_t em;
    if (!yaml_emitter_initialize(&em))
        return KB_ERR_NOMEM;
    yaml_emitter_set_output(&em, to_buf, &yaml);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);        /* one line per value */
    yaml_emitter_set_indent(&em, 2);
    yaml_emitter_set_break(&em, YAML_LN_BREAK);
    int ok = emit_front_matter(&em, s);
    yaml_emitter_delete(&em);
    kb_rc rc = ok ? KB_OK : KB_ERR_NOMEM;
    /* an implicit document may still be closed with a line '...' (a line
     * of its own: a value may end in "...") */
    if (rc == KB_OK && yaml.len >= 5 && strcmp(yaml.data + yaml.len - 5, "\n...\n") == 0)
        yaml.data[yaml.len -= 4] = '\0';
    if (rc == KB_OK)
        rc = kb_buf_puts(out, "---\n");
    if (rc == KB_OK)
        rc = kb_buf_append(out, yaml.data ? yaml.data : "", yaml.len);
    if (rc == KB_OK)
        rc = kb_buf_puts(out, "---\n");
    if (rc == KB_OK && s->body)
        rc = kb_buf_puts(out, s->body);
    kb_buf_release(&yaml);
    return rc;
}

kb_rc kb_skill_save(const kb_skill *s, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_skill_write(s, &b);
    if (rc != KB_OK)
        rc = kb_err_set(err, rc, "out of memory writing '%s'", s->path);
    else
        rc = kb_write_file_atomic(s->path, b.data, b.len, err);
    kb_buf_release(&b);
    return rc;
}

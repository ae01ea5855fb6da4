/* prompt.c - the prompt for a task (gen.h, "prompt.c"): retrieval (the
 * team's skills, exemplar kernels, doc passages, each with its citation),
 * assembly in fixed sections within a token budget, the passages for a
 * repair, and the task folder a name resolves to. */
#include "generator/gen.h"
#include "skills/skill.h"
#include "verify/verify.h"
#include "kb/kb_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tokens are estimated as api/tools.c packs results: 3 bytes each,
 * fewer than English prose takes, since code and identifiers cut into
 * more tokens - a budget should not be overrun by the estimate. */
#define BYTES_PER_TOKEN 3
#define DEFAULT_BUDGET KB_GEN_BUDGET_DEFAULT

#define SKILLS_MAX 3
#define EXEMPLARS_MAX 2
#define DOCS_MAX 6
/* an exemplar is its whole file up to this size, else its section (a
 * function), else the chunk alone */
#define EXEMPLAR_MAX_BYTES 9000
#define SKILL_MAX_BYTES 12000
#define REFERENCE_MAX_BYTES (1u << 20)
#define REPAIR_K 6
#define REPAIR_QUERY_MAX 600

/* The section headings, in their order (README, "kb prompt"). */
#define H_HARDWARE "## Hardware profile"
#define H_TASK "## Task"
#define H_REFERENCE "## Reference kernel"
#define H_CONTEXT "## Retrieved context"
#define H_FEEDBACK "## Last attempts"
#define H_PARENT "## Kernel to refine"
#define H_CONTRACT "## Output contract"

static long tokens_of(size_t bytes)
{
    return (long)((bytes + BYTES_PER_TOKEN - 1) / BYTES_PER_TOKEN);
}

/* ------------------------------------------------------------------ cites */

static void cite_release(kb_gen_cite *c)
{
    free(c->kind);
    free(c->source);
    free(c->title);
    free(c->heading);
    free(c->url);
    free(c->skill);
    memset(c, 0, sizeof *c);
}

void kb_gen_prompt_release(kb_gen_prompt *p)
{
    if (!p)
        return;
    free(p->system);
    free(p->user);
    for (size_t i = 0; i < p->ncites; i++)
        cite_release(&p->cites[i]);
    free(p->cites);
    memset(p, 0, sizeof *p);
}

/* A retrieved passage: its citation and the text carried. */
typedef struct {
    kb_gen_cite cite;
    char *label;      /* "skill vectorized-global-access: verified, 1.61x on gelu" */
    char *text;
    int code;         /* fenced as CUDA */
} passage;

typedef struct {
    passage *items;
    size_t n, cap;
} passages;

static void passages_release(passages *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        cite_release(&ps->items[i].cite);
        free(ps->items[i].label);
        free(ps->items[i].text);
    }
    free(ps->items);
    memset(ps, 0, sizeof *ps);
}

/* " > "-joined heading path of r. */
static char *heading_of(const kb_result *r)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_puts(&b, "");
    for (size_t i = 0; rc == KB_OK && i < r->depth; i++)
        rc = kb_buf_printf(&b, "%s%s", i ? " > " : "", r->heading_path[i]);
    return kb_buf_finish(&b, rc);
}

/* Appends a passage for r (its citation copied) with label and text
 * (both taken, freed on failure). */
static kb_rc push_passage(passages *ps, const kb_result *r, const char *skill,
                          char *label, char *text, int code, kb_err *err)
{
    kb_rc rc = label && text ? KB_GROW(ps->items, ps->n + 1, ps->cap) : KB_ERR_NOMEM;
    if (rc != KB_OK) {
        free(label);
        free(text);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    passage *p = &ps->items[ps->n];
    memset(p, 0, sizeof *p);
    p->label = label;
    p->text = text;
    p->code = code;
    p->cite.chunk_id = (long long)r->chunk_id;
    p->cite.kind = kb_strdup(kb_kind_name(r->kind));
    p->cite.source = kb_strdup(r->source);
    p->cite.title = kb_strdup(r->title);
    p->cite.heading = heading_of(r);
    p->cite.url = kb_strdup(r->url);
    p->cite.skill = kb_strdup(skill ? skill : "");
    ps->n++;   /* released with the list, whole or not */
    if (!p->cite.kind || !p->cite.source || !p->cite.title || !p->cite.heading ||
        !p->cite.url || !p->cite.skill)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* 1 when ps holds a passage cited at r's chunk. */
static int have_passage(const passages *ps, const kb_result *r)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->items[i].cite.chunk_id == (long long)r->chunk_id)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ documents */

/* The text of the chunks of chunk id's document in order, each after its
 * section's heading when headed (a skill: "#### Technique"), or joined by
 * newlines (code); *first the document's first chunk. NULL in *out (and
 * KB_OK) when it is over max bytes. */
static kb_rc document_text(kb_store *store, long long id, int headed, size_t max,
                           char **out, long long *first, kb_err *err)
{
    *out = NULL;
    *first = id;
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT id, heading_path, text FROM chunks WHERE "
                                "document_id = (SELECT document_id FROM chunks WHERE "
                                "id = ?) ORDER BY ord", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    kb_buf b;
    kb_buf_init(&b, 0);
    char *last = NULL;   /* the heading path of the chunk before */
    int step = SQLITE_DONE, over = 0;
    while (rc == KB_OK && !over && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *hp = (const char *)sqlite3_column_text(st, 1);
        const char *text = (const char *)sqlite3_column_text(st, 2);
        hp = hp ? hp : "[]";
        if (!last)
            *first = sqlite3_column_int64(st, 0);
        if (headed && (!last || strcmp(last, hp) != 0)) {
            cJSON *arr = cJSON_Parse(hp);
            int n = cJSON_GetArraySize(arr);
            const char *h = n > 1 ? cJSON_GetStringValue(cJSON_GetArrayItem(arr, n - 1))
                                  : NULL;
            if (h)
                rc = kb_buf_printf(&b, "%s#### %s\n\n", b.len ? "\n\n" : "", h);
            else if (b.len)
                rc = kb_buf_puts(&b, "\n\n");
            cJSON_Delete(arr);
        } else if (b.len) {
            rc = kb_buf_puts(&b, headed ? "\n\n" : "\n");
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(&b, text ? text : "");
        free(last);
        last = kb_strdup(hp);
        if (rc == KB_OK && !last)
            rc = KB_ERR_NOMEM;
        over = b.len > max;   /* not carried whole: not at all */
    }
    if (rc == KB_OK && !over && step != SQLITE_DONE)
        rc = kb_store_db_error(store, err, "cannot read a document's chunks");
    else if (rc == KB_ERR_NOMEM)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    sqlite3_finalize(st);
    free(last);
    if (rc == KB_OK && !over) {
        *out = kb_buf_finish(&b, KB_OK);
        if (!*out)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else {
        kb_buf_release(&b);
    }
    return rc;
}

/* The text of r's section (kb_get_chunk's whole section), NULL when over
 * max bytes. */
static kb_rc section_text(kb_store *store, const kb_result *r, size_t max,
                          char **out, kb_err *err)
{
    *out = NULL;
    kb_results sec;
    kb_rc rc = kb_get_chunk(store, r->chunk_id, 1, &sec, err);
    if (rc != KB_OK)
        return rc;
    kb_buf b;
    kb_buf_init(&b, max);
    for (size_t i = 0; rc == KB_OK && i < sec.n; i++)
        rc = kb_buf_printf(&b, "%s%s", i ? "\n" : "", sec.items[i].text);
    kb_results_release(&sec);
    *out = kb_buf_finish(&b, rc);
    return rc == KB_OK && !*out ? kb_err_set(err, KB_ERR_NOMEM, "out of memory")
                                : KB_OK;
}

/* ------------------------------------------------------------------ retrieval */

/* What the task asks for, as retrieval filters it. */
typedef struct {
    const char *arch;        /* "sm_90", or NULL: unknown device */
    int cc;                  /* 90; 0 unknown */
    const char *ops;         /* the task's, comma-joined */
    char dtypes[64];         /* the task's buffer and scalar types, comma-joined */
} want;

/* 1 if the comma- or space-separated lists a and b share an item (an
 * empty a: yes). */
static int lists_meet(const char *a, const char *b)
{
    if (!a || !*a)
        return 1;
    for (const char *p = a; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        for (const char *q = b; n && q && *q;) {
            q += strspn(q, ", ");
            size_t m = strcspn(q, ", ");
            if (m == n && strncmp(p, q, n) == 0)
                return 1;
            q += m;
        }
        p += n;
    }
    return 0;
}

/* Does a skill's kb-arch let it run on the device? "sm_NN" and "sm_NN+"
 * from NN up (NVRTC compiles for the device's own architecture),
 * "sm_NNa" on NN only (arch-specific features: wgmma, setmaxnreg); no
 * kb-arch, or an unknown device: yes. */
static int arch_fits(const char *have, int cc)
{
    if (!have || !*have || !cc)
        return 1;
    for (const char *p = have; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        if (n > 3 && strncmp(p, "sm_", 3) == 0) {
            char *end = NULL;
            long v = strtol(p + 3, &end, 10);
            if (end > p + 3 && (end < p + n && *end == 'a' ? v == cc : v <= cc))
                return 1;
        }
        p += n;
    }
    return 0;
}

static int status_tier(const char *status)
{
    if (!strcmp(status, "approved") || !strcmp(status, "verified"))
        return 0;
    return !strcmp(status, "draft") ? 1 : 2;
}

/* The skills for the task: verified and approved first, then drafts, each
 * tier in search order; only those whose arch, dtype and ops fit. A
 * skill is carried whole (its SKILL.md's sections). */
static kb_rc retrieve_skills(kb_store *store, const kb_config *cfg, const char *text,
                             const want *w, const char *task_name, passages *ps,
                             kb_err *err)
{
    kb_skill_query q = { .run = kb_query_run, .text = text, .mode = KB_MODE_HYBRID, .k = 50,
                             .config = cfg };
    kb_skill_hits hits;
    kb_rc rc = kb_skill_search(store, &q, &hits, err);
    if (rc != KB_OK)
        return rc;
    size_t taken = 0;
    for (int tier = 0; tier < 3 && rc == KB_OK; tier++)
        for (size_t i = 0; i < hits.n && taken < SKILLS_MAX && rc == KB_OK; i++) {
            const kb_skill_hit *h = &hits.items[i];
            if (status_tier(h->status) != tier || !arch_fits(h->arch, w->cc) ||
                !lists_meet(h->dtype, w->dtypes) || !lists_meet(h->ops, w->ops))
                continue;
            char *body = NULL;
            long long top_id = 0;
            rc = document_text(store, (long long)h->r->chunk_id, 1, SKILL_MAX_BYTES,
                               &body, &top_id, err);
            if (rc != KB_OK || !body)
                continue;
            kb_buf l;
            kb_buf_init(&l, 0);
            kb_rc lr = kb_buf_printf(&l, "skill %s: %s", h->name,
                                     *h->status ? h->status : "no status");
            if (lr == KB_OK && *h->speedup)
                lr = kb_buf_printf(&l, ", %sx", h->speedup);
            if (lr == KB_OK && *h->task)
                lr = kb_buf_printf(&l, " on %s%s", h->task,
                                   strcmp(h->task, task_name) ? "" : " (this task)");
            /* the skill is cited at its top: the document, not one section */
            kb_results top;
            rc = kb_get_chunk(store, top_id, 0, &top, err);
            if (rc == KB_OK) {
                rc = push_passage(ps, &top.items[0], h->name, kb_buf_finish(&l, lr), body,
                                  0, err);
                kb_results_release(&top);
                taken++;
            } else {
                kb_buf_release(&l);
                free(body);
            }
        }
    kb_skill_hits_release(&hits);
    return rc;
}

/* Passages of kinds for text: code as exemplars (whole files when small),
 * text and tables as doc passages; at most max of them, none twice. */
static kb_rc retrieve_kind(kb_store *store, const kb_config *cfg, const char *text,
                           unsigned kinds, int max, passages *ps, kb_err *err)
{
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = text;
    o.mode = KB_MODE_HYBRID;
    o.k = max * 3;
    o.filter.kinds = kinds;
    o.config = cfg;
    kb_results res;
    kb_rc rc = kb_query_run(store, NULL, &o, &res, err);
    if (rc != KB_OK)
        return rc;
    int code = (kinds & (1u << KB_KIND_CODE)) != 0;
    int taken = 0;
    for (size_t i = 0; i < res.n && taken < max && rc == KB_OK; i++) {
        const kb_result *r = &res.items[i];
        if (have_passage(ps, r))
            continue;
        int dup = 0;   /* an exemplar is its file: one passage a file */
        for (size_t j = 0; code && j < i && !dup; j++)
            dup = strcmp(res.items[j].path, r->path) == 0 &&
                  strcmp(res.items[j].source, r->source) == 0;
        if (dup)
            continue;
        char *body = NULL;
        long long first;
        if (code) {
            rc = document_text(store, (long long)r->chunk_id, 0, EXEMPLAR_MAX_BYTES,
                               &body, &first, err);
            if (rc == KB_OK && !body)
                rc = section_text(store, r, EXEMPLAR_MAX_BYTES, &body, err);
        }
        if (rc == KB_OK && !body)
            body = kb_strdup(r->text);
        if (rc != KB_OK)
            break;
        if (code && body && !strstr(body, "__global__")) {
            free(body);   /* host code, or a helper: no kernel to learn from */
            continue;
        }
        kb_buf l;
        kb_buf_init(&l, 0);
        kb_rc lr = code ? kb_buf_printf(&l, "exemplar %s", *r->path ? r->path : r->title)
                        : kb_buf_printf(&l, "doc: %s", r->depth
                                        ? r->heading_path[r->depth - 1] : r->title);
        rc = push_passage(ps, r, NULL, kb_buf_finish(&l, lr), body, code, err);
        taken++;
    }
    kb_results_release(&res);
    return rc;
}

/* ------------------------------------------------------------------ task text */

static const char *c_type(kb_dtype t)
{
    switch (t) {
    case KB_DT_F32: return "float";
    case KB_DT_BF16: return "__nv_bfloat16";
    case KB_DT_F16: return "__half";
    case KB_DT_I32: return "int";
    case KB_DT_U32: return "unsigned int";
    case KB_DT_F64: return "double";
    }
    return "void";
}

static int is_buffer(const kb_task_param *p)
{
    return p->role != KB_ROLE_DIM && p->role != KB_ROLE_SCALAR;
}

/* The shape a prompt shows: the one named target, else the first timed,
 * else the first. */
static const kb_shape *target_shape(const kb_task *t)
{
    for (size_t i = 0; i < t->nshapes; i++)
        if (!strcmp(t->shapes[i].name, "target"))
            return &t->shapes[i];
    for (size_t i = 0; i < t->nshapes; i++)
        if (t->shapes[i].timed)
            return &t->shapes[i];
    return &t->shapes[0];
}

/* x in the fewest digits that give it back ("1e-05", not the
 * "1.0000000000000001e-05" a JSON number's round trip leaves), integers
 * whole. */
static void num_text(double x, char out[40])
{
    if (fabs(x) < 1e15 && floor(x) == x) {
        snprintf(out, 40, "%.0f", x);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, 40, "%.*g", digits, x);
        if (strtod(out, NULL) == x)
            return;
    }
}

static kb_rc put_num(kb_buf *b, double x)
{
    char t[40];
    num_text(x, t);
    return kb_buf_puts(b, t);
}

/* expr as the prompt shows it: a plain number in its fewest digits. */
static const char *expr_text(const char *expr, char buf[40])
{
    char *end = NULL;
    double x = strtod(expr, &end);
    if (end == expr || *end)
        return expr;
    num_text(x, buf);
    return buf;
}

/* expr, and its value at the target shape when that says more; a plain
 * number as a person writes it. */
static kb_rc put_expr(kb_buf *b, const kb_task *t, const kb_shape *s, const char *expr)
{
    double x;
    char *end = NULL;
    x = strtod(expr, &end);
    if (end != expr && !*end)
        return put_num(b, x);
    kb_rc rc = kb_buf_printf(b, "%s", expr);
    if (rc == KB_OK && kb_task_eval(t, s, expr, &x, NULL) == KB_OK) {
        char tmp[40];
        num_text(x, tmp);
        if (strcmp(tmp, expr) != 0)
            rc = kb_buf_printf(b, " = %s", tmp);
    }
    return rc;
}

static kb_rc put_signature(kb_buf *b, const kb_task *t, const char *kernel)
{
    kb_rc rc = kb_buf_printf(b, "extern \"C\" __global__ void %s(", kernel);
    for (size_t i = 0; rc == KB_OK && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        rc = kb_buf_printf(b, "%s%s%s%s%s", i ? ", " : "",
                           p->role == KB_ROLE_INPUT ? "const " : "",
                           c_type(p->dtype), is_buffer(p) ? " *" : " ", p->name);
    }
    return rc == KB_OK ? kb_buf_puts(b, ")\n") : rc;
}

/* A size in the largest binary unit it reaches: whole when it is one
 * ("48 KiB"), else with a decimal ("139.8 GiB"). */
static kb_rc put_bytes(kb_buf *b, double n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    double x = n;
    while (x >= 1024 && u < 4) {
        x /= 1024;
        u++;
    }
    return floor(x) == x ? kb_buf_printf(b, "%.0f %s", x, units[u])
                         : kb_buf_printf(b, "%.1f %s", x, units[u]);
}

static double dev_num(const cJSON *d, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *dev_str(const cJSON *d, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, key));
}

/* The device's architecture: "arch", else from "compute_capability"
 * ("9.0" -> sm_90, cc 90). */
static void device_arch(const cJSON *d, char arch[16], int *cc)
{
    *cc = 0;
    arch[0] = '\0';
    const char *a = dev_str(d, "arch"), *c = dev_str(d, "compute_capability");
    int major = 0, minor = 0;
    if (c && sscanf(c, "%d.%d", &major, &minor) == 2 && major > 0 && major < 100 &&
        minor >= 0 && minor < 10)
        *cc = major * 10 + minor;
    if (a && strlen(a) < 16 && !strncmp(a, "sm_", 3)) {
        snprintf(arch, 16, "%s", a);
        long v = strtol(a + 3, NULL, 10);
        if (!*cc && v > 0 && v < 1000)
            *cc = (int)v;
    } else if (*cc) {
        snprintf(arch, 16, "sm_%d", *cc);
    }
}

static kb_rc section_hardware(kb_buf *b, const cJSON *d)
{
    kb_rc rc = kb_buf_puts(b, H_HARDWARE "\n\n");
    if (!cJSON_IsObject(d))
        return rc == KB_OK ? kb_buf_puts(b, "Unknown device: no kb-verify --device-info "
                                            "profile was given. Write for a current "
                                            "NVIDIA data-centre GPU and keep the kernel "
                                            "portable.\n") : rc;
    char arch[16];
    int cc;
    device_arch(d, arch, &cc);
    const char *name = dev_str(d, "name");
    rc = kb_buf_printf(b, "%s", name ? name : "a CUDA device");
    if (rc == KB_OK && dev_str(d, "compute_capability"))
        rc = kb_buf_printf(b, ": compute capability %s%s%s%s",
                           dev_str(d, "compute_capability"), *arch ? " (" : "", arch,
                           *arch ? ")" : "");
    if (rc == KB_OK && dev_num(d, "sms") > 0)
        rc = kb_buf_printf(b, ", %.0f SMs", dev_num(d, "sms"));
    if (rc == KB_OK && dev_num(d, "sm_clock_khz") > 0)
        rc = kb_buf_printf(b, " at %.0f MHz", dev_num(d, "sm_clock_khz") / 1000);
    if (rc == KB_OK && dev_num(d, "warp_size") > 0)
        rc = kb_buf_printf(b, ", warp size %.0f", dev_num(d, "warp_size"));
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ".\n");
    if (rc == KB_OK && dev_num(d, "max_threads_per_block") > 0)
        rc = kb_buf_printf(b, "- threads: at most %.0f a block, %.0f an SM; %.0f "
                           "32-bit registers an SM\n", dev_num(d, "max_threads_per_block"),
                           dev_num(d, "max_threads_per_sm"), dev_num(d, "registers_per_sm"));
    if (rc == KB_OK && dev_num(d, "shared_per_block_bytes") > 0) {
        rc = kb_buf_puts(b, "- shared memory: ");
        if (rc == KB_OK)
            rc = put_bytes(b, dev_num(d, "shared_per_block_bytes"));
        if (rc == KB_OK)
            rc = kb_buf_puts(b, " a block");
        if (rc == KB_OK && dev_num(d, "shared_per_block_optin_bytes") > 0) {
            rc = kb_buf_puts(b, " (");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "shared_per_block_optin_bytes"));
            if (rc == KB_OK)
                rc = kb_buf_puts(b, " dynamic with opt-in)");
        }
        if (rc == KB_OK && dev_num(d, "shared_per_sm_bytes") > 0) {
            rc = kb_buf_puts(b, ", ");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "shared_per_sm_bytes"));
            if (rc == KB_OK)
                rc = kb_buf_puts(b, " an SM");
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    if (rc == KB_OK && dev_num(d, "l2_bytes") > 0) {
        rc = kb_buf_puts(b, "- L2 cache: ");
        if (rc == KB_OK)
            rc = put_bytes(b, dev_num(d, "l2_bytes"));
        if (rc == KB_OK && dev_num(d, "memory_bytes") > 0) {
            rc = kb_buf_puts(b, "; device memory: ");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "memory_bytes"));
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    double peak = dev_num(d, "peak_bandwidth_bytes_per_s");
    double copy = dev_num(d, "measured_copy_bytes_per_s");
    if (rc == KB_OK && (peak > 0 || copy > 0)) {
        rc = kb_buf_puts(b, "- memory bandwidth:");
        if (rc == KB_OK && peak > 0)
            rc = kb_buf_printf(b, " %.2f TB/s peak", peak / 1e12);
        if (rc == KB_OK && copy > 0)
            rc = kb_buf_printf(b, "%s %.2f TB/s measured (a device-to-device copy)",
                               peak > 0 ? "," : "", copy / 1e12);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    double f32 = dev_num(d, "fp32_flops_per_s"), bf16 = dev_num(d, "bf16_tensor_flops_per_s");
    if (rc == KB_OK && (f32 > 0 || bf16 > 0)) {
        rc = kb_buf_puts(b, "- peak rates:");
        if (rc == KB_OK && f32 > 0)
            rc = kb_buf_printf(b, " fp32 %.1f TFLOP/s", f32 / 1e12);
        if (rc == KB_OK && bf16 > 0)
            rc = kb_buf_printf(b, "%s bf16 tensor cores %.1f TFLOP/s", f32 > 0 ? "," : "",
                               bf16 / 1e12);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    const char *drv = dev_str(d, "driver_version"), *cuda = dev_str(d, "cuda_driver_version"),
               *nvrtc = dev_str(d, "nvrtc_version");
    if (rc == KB_OK && (drv || cuda || nvrtc))
        rc = kb_buf_printf(b, "- software:%s%s%s%s%s%s\n", drv ? " driver " : "",
                           drv ? drv : "", cuda ? ", CUDA " : "", cuda ? cuda : "",
                           nvrtc ? ", NVRTC " : "", nvrtc ? nvrtc : "");
    return rc;
}

/* The roofline floor at shape s in ms, as kb-verify computes it (its
 * peak bandwidth and rates); 0 when the device does not say. */
static double floor_ms(const kb_task *t, const kb_shape *s, const cJSON *d,
                       double *bytes, double *flops)
{
    *bytes = *flops = 0;
    if (t->roof_bytes)
        kb_task_eval(t, s, t->roof_bytes, bytes, NULL);
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, flops, NULL);
    double bw = dev_num(d, "peak_bandwidth_bytes_per_s");
    double bf16 = dev_num(d, "bf16_tensor_flops_per_s"), f32 = dev_num(d, "fp32_flops_per_s");
    double rate = !strcmp(t->roof_unit, "bf16_tensor") ? bf16
                : !strcmp(t->roof_unit, "fp32_tensor3") ? bf16 / 6.0
                : !strcmp(t->roof_unit, "int") ? 0 : f32;
    double a = bw > 0 ? *bytes / bw : 0, c = rate > 0 ? *flops / rate : 0;
    return (a > c ? a : c) * 1e3;
}

static const char *role_name(kb_role r)
{
    static const char *const names[] = { "input", "output", "input and output",
                                         "scratch", "dimension", "scalar" };
    return (unsigned)r <= KB_ROLE_SCALAR ? names[r] : "?";
}

static kb_rc section_task(kb_buf *b, const kb_task *t, const cJSON *d)
{
    const kb_shape *s = target_shape(t);
    kb_rc rc = kb_buf_printf(b, H_TASK "\n\n%s (level %d; ops: %s): %s\n\n", t->name,
                             t->level, *t->ops ? t->ops : "none", t->description);
    /* the signature of every kernel the launch calls */
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Signature (every kernel of the task takes this parameter "
                           "list, in this order):\n\n```cuda\n");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (!seen)
            rc = put_signature(b, t, t->launches[i].kernel);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "```\n\nParameters:\n");
    for (size_t i = 0; rc == KB_OK && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        rc = kb_buf_printf(b, "- `%s` (%s%s%s): %s, ", p->name,
                           p->role == KB_ROLE_INPUT ? "const " : "", c_type(p->dtype),
                           is_buffer(p) ? " *" : "", role_name(p->role));
        if (rc == KB_OK && is_buffer(p)) {
            rc = put_expr(b, t, s, p->size);
            if (rc == KB_OK)
                rc = kb_buf_printf(b, " elements of %s", kb_dtype_name(p->dtype));
        } else if (rc == KB_OK) {
            rc = put_expr(b, t, s, p->value);
        }
        for (size_t k = 0; rc == KB_OK && k < p->ndists; k++)
            rc = kb_buf_printf(b, "%s%s", k ? ", " : "; drawn from ", p->dists[k]);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, p->role == KB_ROLE_INPUT ? "; read only (checked unchanged)"
                              : p->role == KB_ROLE_OUTPUT ? "; every element checked"
                              : p->role == KB_ROLE_INOUT ? "; checked after the run"
                              : p->role == KB_ROLE_SCRATCH ? "; yours to use, not checked"
                              : "");
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    /* the target shape only: the others are kept back */
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\nTarget shape (timed):");
    for (size_t i = 0; rc == KB_OK && i < t->ndims; i++) {
        rc = kb_buf_printf(b, "%s %s = ", i ? "," : "", t->dims[i]);
        if (rc == KB_OK)
            rc = put_num(b, s->dims[i]);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ". The kernel is also checked on other shapes, kept back: "
                         "sizes that are no multiple of any tile and tiny ones. Handle "
                         "every size the parameters allow.\n\n");
    /* tolerances */
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Tolerance (%s): |out - ref| <= atol + rtol*|ref|, atol = ",
                           kb_dtype_name(t->dtype));
    if (rc == KB_OK)
        rc = put_expr(b, t, s, t->atol);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ", rtol = ");
    if (rc == KB_OK)
        rc = put_expr(b, t, s, t->rtol);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "; a non-finite output where the reference is finite fails. "
                         "Correctness is checked on every shape with several seeds and "
                         "input distributions; outputs are poisoned before each run (NaN, "
                         "a sentinel, a stale valid result) and must depend on the whole "
                         "current input.\n\n");
    /* the launch contract */
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Launch: kb-verify owns allocation, inputs, the stream and "
                           "the launches; by default it runs, in order:\n");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        const kb_launch *l = &t->launches[i];
        rc = kb_buf_printf(b, "- %s: grid (", l->kernel);
        for (int k = 0; rc == KB_OK && k < 3 && l->grid[k]; k++) {
            rc = kb_buf_puts(b, k ? ", " : "");
            if (rc == KB_OK)
                rc = put_expr(b, t, s, l->grid[k]);
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "), block (");
        for (int k = 0; rc == KB_OK && k < 3 && l->block[k]; k++) {
            rc = kb_buf_puts(b, k ? ", " : "");
            if (rc == KB_OK)
                rc = put_expr(b, t, s, l->block[k]);
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "), dynamic shared memory ");
        if (rc == KB_OK)
            rc = l->shared ? put_expr(b, t, s, l->shared) : kb_buf_puts(b, "0");
        if (rc == KB_OK)
            rc = kb_buf_puts(b, " bytes\n");
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "To launch otherwise, start the source with one header line "
                         "per launch, run in order (expressions of the dims, no spaces; "
                         "dynamic shared memory over 48 KiB is opted in for you):\n\n"
                         "    // kb-launch: kernel=NAME grid=E[,E[,E]] block=E[,E[,E]] "
                         "shared=E\n\n"
                         "`// kb-verify: arch=sm_90a` compiles for the arch-specific "
                         "target (wgmma, setmaxnreg); `// kb-tensormap: buffer=A "
                         "dims=K,M box=64,128 swizzle=128` (dims and box innermost first) "
                         "asks for a TMA tensor map over a buffer, passed after the "
                         "parameters as a `const __grid_constant__ CUtensorMap`.\n\n");
    /* the baseline and the roofline */
    if (rc == KB_OK && !strcmp(t->baseline, "reference"))
        rc = kb_buf_puts(b, "Baseline: the reference kernel below. The verdict is "
                         "`faster` at a geomean speedup of 1.03x or more on the timed "
                         "shapes, else `correct`.");
    else if (rc == KB_OK)
        rc = kb_buf_printf(b, "Baseline: the vendor library (%s). Within 3%% of it either "
                           "way is `correct` (parity); `faster` needs 1.03x.", t->baseline);
    double bytes, flops, fl = floor_ms(t, s, d, &bytes, &flops);
    if (rc == KB_OK && (bytes > 0 || flops > 0)) {
        rc = kb_buf_puts(b, " Roofline at the target shape: ");
        if (rc == KB_OK)
            rc = put_bytes(b, bytes);
        if (rc == KB_OK)
            rc = kb_buf_printf(b, " moved, %.4g flop (%s)", flops, t->roof_unit);
        if (rc == KB_OK && fl > 0)
            rc = kb_buf_printf(b, ": a floor of %.4f ms on this device; a time below "
                               "0.7x the floor is `suspicious`, not faster", fl);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, ".");
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\n\nRefused (verdict `refused`): `%globaltimer`, "
                         "`__managed__`, device malloc/free/new, device-side launches "
                         "(`<<<`, cudaLaunchDevice, graphs), runtime API calls from the "
                         "device, and any #include but CUDA's device headers "
                         "(cuda_bf16.h, cuda_fp16.h, mma.h, cuda/barrier, ...). No host "
                         "code.\n");
    return rc;
}

static kb_rc section_code(kb_buf *b, const char *heading, const char *intro,
                          const char *src)
{
    size_t n = strlen(src);
    return kb_buf_printf(b, "%s\n\n%s```cuda\n%s%s```\n", heading, intro, src,
                         n && src[n - 1] == '\n' ? "" : "\n");
}

static kb_rc section_contract(kb_buf *b, const kb_task *t)
{
    kb_rc rc = kb_buf_puts(b, H_CONTRACT "\n\nReply with exactly one fenced code block "
                           "in CUDA (```cuda ... ```) holding the whole candidate source, "
                           "and at most a short paragraph before it on the technique; "
                           "nothing after it.\n- Device code only: `extern \"C\" "
                           "__global__` kernels named as the launch calls them (");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (!seen)
            rc = kb_buf_printf(b, "%s`%s`", i ? ", " : "", t->launches[i].kernel);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ", or your own names with `// kb-launch:` lines), each with "
                         "the task's parameter list in its order; helpers are "
                         "`__device__`. No main, no cudaMalloc, no `<<<...>>>`.\n"
                         "- Optional header comment lines at the top: `// kb-launch:` "
                         "(one per launch), `// kb-verify: arch=sm_90a`, `// "
                         "kb-tensormap:`, as the task says.\n");
    return rc;
}

/* ------------------------------------------------------------------ assembly */

/* Cuts the feedback section fb, whose first head bytes are its heading
 * and intro, to at most room bytes when it is longer: after the last
 * attempt ("### " at a line's start) that fits whole, the first excepted,
 * else after the last line that fits, else inside a line at a character
 * boundary; then says how much was left out. A cut feedback is worth more
 * than none: without it the next round's prompt is the last round's again.
 * Too little room for any of it empties it. */
static kb_rc fit_feedback(kb_buf *fb, size_t head, size_t room)
{
    if (fb->len <= room)
        return KB_OK;
    static const char note[] = "\n(the rest of the feedback did not fit within the "
                               "token budget: %zu bytes left out)\n";
    size_t note_max = sizeof note + 20;
    if (room < head + note_max + 64) {
        kb_buf_reset(fb);
        return KB_OK;
    }
    size_t keep = room - note_max, cut = 0;
    for (size_t i = keep; i > head + 1 && !cut; i--)
        if (fb->data[i - 1] == '\n' && strncmp(fb->data + i, "### ", 4) == 0)
            cut = i;
    for (size_t i = keep; i > head && !cut; i--)
        if (fb->data[i - 1] == '\n')
            cut = i;
    if (!cut)
        cut = head + (size_t)kb_utf8_cut(fb->data + head, keep - head);
    size_t left = fb->len - cut;
    fb->len = cut;
    fb->data[cut] = '\0';
    return kb_buf_printf(fb, note, left);
}

static const char system_text[] =
    "You are an expert CUDA kernel engineer. You write one CUDA kernel for the task "
    "the user describes, to be correct and as fast as it can be on the GPU the "
    "hardware profile names. Your source is compiled with NVRTC and verified by "
    "kb-verify: checked against the reference kernel on several shapes, seeds and "
    "input distributions, then timed against the task's baseline with the L2 "
    "flushed. Ground your choices in the retrieved context and cite what you use "
    "by its [n]. Answer as the output contract at the end says.";

/* One passage as the prompt carries it, numbered n. */
static kb_rc render_passage(kb_buf *b, const passage *p, size_t n)
{
    kb_rc rc = kb_buf_printf(b, "### [%zu] %s\nSource: %s", n, p->label, p->cite.source);
    if (rc == KB_OK && *p->cite.heading)
        rc = kb_buf_printf(b, " \xc2\xb7 %s", p->cite.heading);
    if (rc == KB_OK && *p->cite.url)
        rc = kb_buf_printf(b, " \xc2\xb7 %s", p->cite.url);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\n\n");
    size_t len = strlen(p->text);
    if (rc == KB_OK)
        rc = p->code ? kb_buf_printf(b, "```cuda\n%s%s```\n\n", p->text,
                                     len && p->text[len - 1] == '\n' ? "" : "\n")
                     : kb_buf_printf(b, "%s\n\n", p->text);
    return rc;
}

static kb_rc copy_cite(kb_gen_cite *dst, const kb_gen_cite *src)
{
    memset(dst, 0, sizeof *dst);
    dst->chunk_id = src->chunk_id;
    dst->kind = kb_strdup(src->kind);
    dst->source = kb_strdup(src->source);
    dst->title = kb_strdup(src->title);
    dst->heading = kb_strdup(src->heading);
    dst->url = kb_strdup(src->url);
    dst->skill = kb_strdup(src->skill);
    if (!dst->kind || !dst->source || !dst->title || !dst->heading || !dst->url ||
        !dst->skill) {
        cite_release(dst);
        return KB_ERR_NOMEM;
    }
    return KB_OK;
}

/* The retrieval query of a task: the words of its name, description and
 * ops (three letters or more: "y = GELU(x)" says gelu). */
static char *task_query(const kb_task *t)
{
    kb_buf all, b;
    kb_buf_init(&all, 0);
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_printf(&all, "%s %s %s", t->name, t->description, t->ops);
    for (const char *p = all.data; rc == KB_OK && p && *p;) {
        size_t n = 0;
        while (p[n] && (isalnum((unsigned char)p[n]) || p[n] == '_' ||
                        ((p[n] == '-' || p[n] == '.') && n && isalnum((unsigned char)p[n + 1]))))
            n++;
        size_t letters = 0;
        for (size_t i = 0; i < n; i++)
            letters += isalpha((unsigned char)p[i]) != 0;
        if (letters >= 3)
            rc = kb_buf_printf(&b, "%s%.*s", b.len ? " " : "", (int)n, p);
        p += n ? n : 1;
    }
    kb_buf_release(&all);
    return kb_buf_finish(&b, rc);
}

/* The task and its reference source (both the caller's). */
static kb_rc load_task(const kb_config *config, const char *tasks_dir, const char *task,
                       kb_task **t, char **ref, kb_err *err)
{
    *t = NULL;
    *ref = NULL;
    if (!task || !*task)
        return kb_err_set(err, KB_ERR_USAGE, "no task given");
    char *dir = NULL;
    kb_rc rc = kb_gen_task_dir(config, tasks_dir, task, &dir, err);
    if (rc == KB_OK)
        rc = kb_task_load(dir, t, err);
    char *path = rc == KB_OK ? kb_path_join(dir, "reference.cu") : NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    if (rc == KB_OK && !path)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_read_file(path, REFERENCE_MAX_BYTES, &b, err);
    if (rc == KB_OK && !(*ref = kb_buf_finish(&b, KB_OK)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&b);
    free(path);
    free(dir);
    if (rc != KB_OK) {
        kb_task_free(*t);
        *t = NULL;
    }
    return rc;
}

static kb_rc retrieve(const kb_gen_prompt_opts *o, const kb_task *t, passages *ps,
                      kb_err *err)
{
    want w = { 0 };
    char arch[16];
    device_arch(o->device, arch, &w.cc);
    w.arch = *arch ? arch : NULL;
    w.ops = t->ops;
    /* the types the kernel handles: its buffers' and scalars', and the task's */
    snprintf(w.dtypes, sizeof w.dtypes, "%s", kb_dtype_name(t->dtype));
    for (size_t i = 0; i < t->nparams; i++) {
        const char *n = kb_dtype_name(t->params[i].dtype);
        if (t->params[i].role != KB_ROLE_DIM && !lists_meet(n, w.dtypes) &&
            strlen(w.dtypes) + strlen(n) + 2 < sizeof w.dtypes) {
            strncat(w.dtypes, ",", sizeof w.dtypes - strlen(w.dtypes) - 1);
            strncat(w.dtypes, n, sizeof w.dtypes - strlen(w.dtypes) - 1);
        }
    }
    char *q = task_query(t);
    if (!q)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = retrieve_skills(o->store, o->config, q, &w, t->name, ps, err);
    if (rc == KB_OK)
        rc = retrieve_kind(o->store, o->config, q, 1u << KB_KIND_CODE, EXEMPLARS_MAX, ps,
                           err);
    if (rc == KB_OK)
        rc = retrieve_kind(o->store, o->config, q,
                           (1u << KB_KIND_TEXT) | (1u << KB_KIND_TABLE), DOCS_MAX, ps, err);
    free(q);
    return rc;
}

kb_rc kb_gen_prompt_build(const kb_gen_prompt_opts *o, kb_gen_prompt *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    long budget = o->budget_tokens > 0 ? o->budget_tokens : DEFAULT_BUDGET;
    kb_task *t = NULL;
    char *ref = NULL;
    passages ps = { 0 };
    kb_buf head, tail, feedback, parent, ctx, user;
    kb_buf_init(&head, 0);
    kb_buf_init(&tail, 0);
    kb_buf_init(&feedback, 0);
    kb_buf_init(&parent, 0);
    kb_buf_init(&ctx, 0);
    kb_buf_init(&user, 0);
    char *used = NULL;
    kb_rc rc = load_task(o->config, o->tasks_dir, o->task, &t, &ref, err);
    if (rc == KB_OK && o->store)
        rc = retrieve(o, t, &ps, err);
    if (rc != KB_OK)
        goto out;

    /* what is always there: before the context, and the contract after it */
    kb_rc br = kb_buf_printf(&head, "# Task: %s\n\n", t->name);
    if (br == KB_OK)
        br = section_hardware(&head, o->device);
    if (br == KB_OK)
        br = kb_buf_puts(&head, "\n");
    if (br == KB_OK)
        br = section_task(&head, t, o->device);
    if (br == KB_OK)
        br = kb_buf_puts(&head, "\n");
    if (br == KB_OK)
        br = section_code(&head, H_REFERENCE, "The plain, obviously correct kernel "
                          "that the candidate is checked against:\n\n", ref);
    if (br == KB_OK)
        br = kb_buf_puts(&head, "\n" H_CONTEXT "\n\n");
    if (br == KB_OK)
        br = section_contract(&tail, t);
    static const char feedback_head[] = H_FEEDBACK "\n\nThe verdicts of the last "
                                        "candidates; fix what failed:\n\n";
    if (br == KB_OK && o->feedback && *o->feedback)
        br = kb_buf_printf(&feedback, "%s%s%s\n", feedback_head, o->feedback,
                           o->feedback[strlen(o->feedback) - 1] == '\n' ? "" : "\n");
    if (br == KB_OK && o->parent && *o->parent)
        br = section_code(&parent, H_PARENT, "A verified kernel to improve on; keep "
                          "what makes it correct:\n\n", o->parent);
    if (br == KB_OK)
        br = kb_buf_puts(&parent, "");   /* data never NULL below */
    if (br == KB_OK)
        br = kb_buf_puts(&feedback, "");
    if (br != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
        goto out;
    }

    /* the budget: the task and the contract always; then the feedback and
     * the kernel to refine; then the passages, best first, each whole or
     * not at all (one that does not fit makes way for a smaller one) */
    static const char none_fit[] = "(no passage fits within the token budget)\n\n";
    static const char none_found[] = "(nothing retrieved: no KB)\n\n";
    size_t fixed = sizeof system_text - 1 + head.len + tail.len + sizeof none_fit - 1;
    size_t limit = (size_t)budget * BYTES_PER_TOKEN;
    if (fixed > limit) {
        rc = kb_err_set(err, KB_ERR_USAGE, "a budget of %ld tokens is too small for "
                        "task '%s': its definition, reference and the output contract "
                        "take about %ld", budget, t->name, tokens_of(fixed));
        goto out;
    }
    /* the feedback before the kernel to refine; when both do not fit, the
     * kernel keeps its place if it takes at most half of the room left,
     * and the feedback is cut to the rest */
    size_t sum = fixed - (sizeof none_fit - 1);
    size_t room = limit - fixed - 1;   /* a "none fits" and feedback's blank line kept room for */
    if (feedback.len + parent.len > room) {
        if (parent.len > room / 2)
            kb_buf_reset(&parent);
        br = fit_feedback(&feedback, sizeof feedback_head - 1, room - parent.len);
    }
    sum += feedback.len + parent.len;
    if (br != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
        goto out;
    }
    used = calloc(ps.n ? ps.n : 1, 1);
    if (!used) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t ncites = 0;
    kb_buf one;
    kb_buf_init(&one, 0);
    for (size_t i = 0; br == KB_OK && i < ps.n; i++) {
        kb_buf_reset(&one);
        br = render_passage(&one, &ps.items[i], ncites + 1);
        if (br == KB_OK && sum + one.len <= limit) {
            sum += one.len;
            br = kb_buf_append(&ctx, one.data, one.len);
            used[i] = 1;
            ncites++;
        }
    }
    kb_buf_release(&one);
    if (br == KB_OK && !ncites)
        br = kb_buf_puts(&ctx, o->store ? none_fit : none_found);
    if (br == KB_OK)
        br = kb_buf_append(&user, head.data, head.len);
    if (br == KB_OK)
        br = kb_buf_append(&user, ctx.data, ctx.len);
    if (br == KB_OK)
        br = kb_buf_append(&user, feedback.data, feedback.len);
    if (br == KB_OK && feedback.len)
        br = kb_buf_puts(&user, "\n");
    if (br == KB_OK)
        br = kb_buf_append(&user, parent.data, parent.len);
    if (br == KB_OK && parent.len)
        br = kb_buf_puts(&user, "\n");
    if (br == KB_OK)
        br = kb_buf_append(&user, tail.data, tail.len);
    if (br == KB_OK && ncites && !(out->cites = calloc(ncites, sizeof *out->cites)))
        br = KB_ERR_NOMEM;
    for (size_t i = 0; br == KB_OK && i < ps.n; i++)
        if (used[i] && (br = copy_cite(&out->cites[out->ncites], &ps.items[i].cite)) == KB_OK)
            out->ncites++;
    if (br == KB_OK && !(out->system = kb_strdup(system_text)))
        br = KB_ERR_NOMEM;
    if (br == KB_OK && !(out->user = kb_buf_finish(&user, KB_OK)))
        br = KB_ERR_NOMEM;
    if (br != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
        goto out;
    }
    /* the hash is over both, a NUL between them */
    size_t ls = strlen(out->system), lu = strlen(out->user);
    char *both = malloc(ls + lu + 1);
    if (!both) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(both, out->system, ls + 1);
    memcpy(both + ls + 1, out->user, lu);
    kb_sha256_hex(both, ls + 1 + lu, out->hash);
    free(both);
    out->tokens = tokens_of(ls + lu);
    kb_log_debug("prompt for '%s': %ld tokens of %ld, %zu of %zu passages", t->name,
                 out->tokens, budget, out->ncites, ps.n);
out:
    if (rc != KB_OK)
        kb_gen_prompt_release(out);
    free(used);
    kb_buf_release(&head);
    kb_buf_release(&tail);
    kb_buf_release(&feedback);
    kb_buf_release(&parent);
    kb_buf_release(&ctx);
    kb_buf_release(&user);
    passages_release(&ps);
    kb_task_free(t);
    free(ref);
    return rc;
}

/* ------------------------------------------------------------------ JSON */

kb_rc kb_gen_prompt_json(const kb_gen_prompt *p, cJSON **out, kb_err *err)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = NULL;
    int ok = o && cJSON_AddStringToObject(o, "system", p->system) &&
             cJSON_AddStringToObject(o, "user", p->user) &&
             cJSON_AddNumberToObject(o, "tokens", (double)p->tokens) &&
             cJSON_AddStringToObject(o, "hash", p->hash) &&
             (arr = cJSON_AddArrayToObject(o, "cites")) != NULL;
    for (size_t i = 0; ok && i < p->ncites; i++) {
        const kb_gen_cite *c = &p->cites[i];
        cJSON *x = cJSON_CreateObject();
        ok = x && cJSON_AddItemToArray(arr, x) &&
             cJSON_AddNumberToObject(x, "chunk_id", (double)c->chunk_id) &&
             cJSON_AddStringToObject(x, "kind", c->kind) &&
             cJSON_AddStringToObject(x, "source", c->source) &&
             cJSON_AddStringToObject(x, "title", c->title) &&
             cJSON_AddStringToObject(x, "heading", c->heading) &&
             cJSON_AddStringToObject(x, "url", c->url) &&
             cJSON_AddStringToObject(x, "skill", c->skill);
        if (!ok && x && !x->prev)
            cJSON_Delete(x);
    }
    if (!ok) {
        cJSON_Delete(o);
        *out = NULL;
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory making JSON");
    }
    *out = o;
    return KB_OK;
}

/* An expression's value at shape s, or null when it has none there. */
static cJSON *eval_json(const kb_task *t, const kb_shape *s, const char *expr)
{
    double x;
    return expr && kb_task_eval(t, s, expr, &x, NULL) == KB_OK ? cJSON_CreateNumber(x)
                                                             : cJSON_CreateNull();
}

static int add_item(cJSON *o, const char *key, cJSON *x)
{
    if (x && cJSON_AddItemToObject(o, key, x))
        return 1;
    cJSON_Delete(x);
    return 0;
}

static cJSON *expr_json(const char *expr)
{
    char buf[40];
    return cJSON_CreateString(expr_text(expr, buf));
}

/* An array of the expressions of e[0..n) that are set. */
static cJSON *expr_array(char *const *e, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n && e[i]; i++)
        if (!cJSON_AddItemToArray(a, expr_json(e[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

static cJSON *task_object(const kb_task *t, const char *ref)
{
    const kb_shape *s = target_shape(t);
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "name", t->name) &&
             cJSON_AddStringToObject(o, "description", t->description) &&
             cJSON_AddNumberToObject(o, "level", t->level) &&
             cJSON_AddArrayToObject(o, "ops") &&
             cJSON_AddStringToObject(o, "dtype", kb_dtype_name(t->dtype));
    cJSON *kernels = ok ? cJSON_AddArrayToObject(o, "kernels") : NULL;
    kb_buf sig;
    kb_buf_init(&sig, 0);
    ok = ok && kernels && kb_buf_puts(&sig, "") == KB_OK;
    for (size_t i = 0; ok && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (!seen)
            ok = put_signature(&sig, t, t->launches[i].kernel) == KB_OK &&
                 cJSON_AddItemToArray(kernels, cJSON_CreateString(t->launches[i].kernel));
    }
    ok = ok && cJSON_AddStringToObject(o, "signature", sig.data);
    kb_buf_release(&sig);
    cJSON *ops = ok ? cJSON_GetObjectItemCaseSensitive(o, "ops") : NULL;
    for (const char *p = t->ops; ok && *p;) {
        size_t n = strcspn(p, ",");
        char *one = kb_strndup(p, n);
        ok = one && cJSON_AddItemToArray(ops, cJSON_CreateString(one));
        free(one);
        p += n + (p[n] == ',');
    }
    cJSON *params = ok ? cJSON_AddArrayToObject(o, "params") : NULL;
    ok = ok && params;
    for (size_t i = 0; ok && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        cJSON *x = cJSON_CreateObject();
        const char *expr = is_buffer(p) ? p->size : p->value;
        ok = x && cJSON_AddItemToArray(params, x) &&
             cJSON_AddStringToObject(x, "name", p->name) &&
             cJSON_AddStringToObject(x, "type", kb_dtype_name(p->dtype)) &&
             cJSON_AddStringToObject(x, "role", role_name(p->role)) &&
             add_item(x, is_buffer(p) ? "size" : "value", expr_json(expr)) &&
             add_item(x, "at_target", eval_json(t, s, expr)) &&
             add_item(x, "dists", expr_array(p->dists, p->ndists));
    }
    cJSON *shape = ok ? cJSON_AddObjectToObject(o, "target_shape") : NULL;
    cJSON *dims = shape ? cJSON_AddObjectToObject(shape, "dims") : NULL;
    ok = ok && dims && cJSON_AddStringToObject(shape, "name", s->name);
    for (size_t i = 0; ok && i < t->ndims; i++)
        ok = cJSON_AddNumberToObject(dims, t->dims[i], s->dims[i]) != NULL;
    cJSON *tol = ok ? cJSON_AddObjectToObject(o, "tolerance") : NULL;
    ok = ok && tol && cJSON_AddStringToObject(tol, "dtype", kb_dtype_name(t->dtype)) &&
         add_item(tol, "atol", expr_json(t->atol)) &&
         add_item(tol, "rtol", expr_json(t->rtol)) &&
         add_item(tol, "atol_at_target", eval_json(t, s, t->atol)) &&
         add_item(tol, "rtol_at_target", eval_json(t, s, t->rtol));
    cJSON *launch = ok ? cJSON_AddArrayToObject(o, "launch") : NULL;
    ok = ok && launch;
    for (size_t i = 0; ok && i < t->nlaunches; i++) {
        const kb_launch *l = &t->launches[i];
        cJSON *x = cJSON_CreateObject();
        ok = x && cJSON_AddItemToArray(launch, x) &&
             cJSON_AddStringToObject(x, "kernel", l->kernel) &&
             add_item(x, "grid", expr_array(l->grid, 3)) &&
             add_item(x, "block", expr_array(l->block, 3)) &&
             add_item(x, "shared", expr_json(l->shared ? l->shared : "0"));
    }
    cJSON *roof = ok ? cJSON_AddObjectToObject(o, "roofline") : NULL;
    ok = ok && roof && cJSON_AddStringToObject(o, "baseline", t->baseline) &&
         cJSON_AddStringToObject(roof, "bytes", t->roof_bytes ? t->roof_bytes : "0") &&
         cJSON_AddStringToObject(roof, "flops", t->roof_flops ? t->roof_flops : "0") &&
         cJSON_AddStringToObject(roof, "unit", t->roof_unit) &&
         add_item(roof, "bytes_at_target", eval_json(t, s, t->roof_bytes)) &&
         add_item(roof, "flops_at_target", eval_json(t, s, t->roof_flops)) &&
         cJSON_AddStringToObject(o, "reference", ref);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

kb_rc kb_gen_task_json(const kb_config *config, const char *tasks_dir, const char *task,
                       cJSON **out, kb_err *err)
{
    *out = NULL;
    kb_task *t = NULL;
    char *ref = NULL;
    kb_rc rc = load_task(config, tasks_dir, task, &t, &ref, err);
    if (rc == KB_OK && !(*out = task_object(t, ref)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory making JSON");
    kb_task_free(t);
    free(ref);
    return rc;
}

/* ------------------------------------------------------------------ repair */

/* Appends the salient part of an NVRTC log to q: its error lines, the
 * "file(line): " before them dropped, each once; and the identifiers they
 * quote to ids. */
static kb_rc log_query(kb_buf *q, kb_buf *ids, const char *log)
{
    kb_rc rc = KB_OK;
    for (const char *line = log; rc == KB_OK && line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        const char *e = NULL;
        for (size_t i = 0; i + 6 <= n && !e; i++)
            if (!strncmp(line + i, "error", 5) && (i == 0 || line[i - 1] == ' '))
                e = line + i;
        if (e && !strncmp(e, "error detected", 14))
            e = NULL;   /* "1 error detected in the compilation of ..." */
        if (e) {
            const char *colon = memchr(e, ':', (size_t)(line + n - e));
            const char *msg = colon ? colon + 1 : e;
            size_t m = (size_t)(line + n - msg);
            while (m && *msg == ' ') {
                msg++;
                m--;
            }
            int seen = 0;
            if (q->len && m) {   /* the same message twice says nothing more */
                char *dup = kb_strndup(msg, m);
                seen = !dup || strstr(q->data, dup) != NULL;
                free(dup);
            }
            if (!seen && m && q->len + m + 1 <= REPAIR_QUERY_MAX)
                rc = kb_buf_printf(q, "%s%.*s", q->len ? " " : "", (int)m, msg);
            /* identifier "__shfl_xor" is undefined: __shfl_xor */
            const char *a = memchr(msg, '"', m);
            while (rc == KB_OK && a) {
                const char *b = memchr(a + 1, '"', (size_t)(msg + m - a - 1));
                if (!b)
                    break;
                size_t k = (size_t)(b - a - 1);
                char *id = k && k < 128 ? kb_strndup(a + 1, k) : NULL;
                if (k && k < 128 && !id)
                    rc = KB_ERR_NOMEM;
                else if (id && (!ids->len || !strstr(ids->data, id)) &&
                         ids->len + k + 1 <= REPAIR_QUERY_MAX)
                    rc = kb_buf_printf(ids, "%s%s", ids->len ? " " : "", id);
                free(id);
                a = b + 1 < msg + m ? memchr(b + 1, '"', (size_t)(msg + m - b - 1)) : NULL;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return rc;
}

/* Words that a failure class's passages hold, searched with its reason. */
static const char *class_words(kb_verify_verdict v)
{
    switch (v) {
    case KB_VERIFY_INCORRECT:
        return "wrong results race condition __syncthreads bounds check";
    case KB_VERIFY_TIMEOUT:
        return "kernel hangs deadlock __syncthreads in divergent code";
    case KB_VERIFY_CRASH:
        return "illegal memory access misaligned address out of bounds";
    case KB_VERIFY_REFUSED:
        return "device code restrictions";
    default:
        return NULL;
    }
}

kb_rc kb_gen_repair_context(kb_store *store, const kb_config *config,
                            const kb_verify_result *r, long budget_tokens,
                            kb_buf *out, kb_err *err)
{
    if (!store || !r || budget_tokens <= 0)
        return KB_OK;
    kb_buf q, ids, text;
    kb_buf_init(&q, REPAIR_QUERY_MAX + 64);
    kb_buf_init(&ids, REPAIR_QUERY_MAX + 64);
    kb_buf_init(&text, 0);
    kb_rc rc = KB_OK;
    unsigned kinds = (1u << KB_KIND_TEXT) | (1u << KB_KIND_TABLE) | (1u << KB_KIND_SKILL);
    if (r->verdict == KB_VERIFY_COMPILE_ERROR) {
        rc = log_query(&q, &ids, r->compile.log);
        if (rc == KB_OK && !q.len)   /* no error line: the reason says it */
            rc = kb_buf_printf(&q, "%.*s", REPAIR_QUERY_MAX, r->reason);
        kinds |= 1u << KB_KIND_CODE;
    } else if (class_words(r->verdict)) {
        rc = kb_buf_printf(&q, "%s %.*s %s", r->verdict_name, REPAIR_QUERY_MAX / 2,
                           r->reason, class_words(r->verdict));
    }
    /* the identifiers the errors quote lead the query, and are a keyword
     * list of their own: "identifier" alone finds "Identifying Hotspots" */
    if (rc == KB_OK && q.len)
        rc = kb_buf_printf(&text, "%s%s%s", ids.len ? ids.data : "", ids.len ? " " : "",
                           q.data);
    kb_buf_release(&q);
    if (rc != KB_OK || !text.len) {
        kb_buf_release(&ids);
        kb_buf_release(&text);
        return rc == KB_OK ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_search lex = { KB_SEARCH_LEX, ids.data };
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = text.data;
    o.searches = &lex;
    o.nsearches = ids.len ? 1 : 0;
    o.mode = KB_MODE_HYBRID;
    o.k = REPAIR_K;
    o.filter.kinds = kinds;
    o.config = config;
    kb_results res;
    rc = kb_query_run(store, NULL, &o, &res, err);
    kb_buf_release(&ids);
    kb_buf_release(&text);
    if (rc != KB_OK)
        return rc;
    size_t limit = (size_t)budget_tokens * BYTES_PER_TOKEN, sum = 0, n = 0;
    static const char intro[] = "Passages on this failure, from the knowledge base:\n\n";
    kb_buf add, one;
    kb_buf_init(&add, 0);
    kb_buf_init(&one, 0);
    rc = kb_buf_puts(&add, intro);
    sum = add.len;
    for (size_t i = 0; rc == KB_OK && i < res.n; i++) {
        const kb_result *x = &res.items[i];
        char *h = heading_of(x);
        kb_buf_reset(&one);
        rc = h ? kb_buf_printf(&one, "[repair %zu] %s \xc2\xb7 %s \xc2\xb7 %s\n%s\n\n", n + 1,
                               x->source, h, x->url, x->text)
               : KB_ERR_NOMEM;
        free(h);
        if (rc == KB_OK && sum + one.len <= limit) {
            sum += one.len;
            rc = kb_buf_append(&add, one.data, one.len);
            n++;
        }
    }
    if (rc == KB_OK && n)   /* at once: out is unchanged if it cannot take it */
        rc = kb_buf_append(out, add.data, add.len);
    kb_buf_release(&add);
    kb_buf_release(&one);
    kb_results_release(&res);
    return rc == KB_OK ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

/* ------------------------------------------------------------------ tasks */

kb_rc kb_gen_task_dir(const kb_config *config, const char *tasks_dir, const char *task,
                      char **dir, kb_err *err)
{
    *dir = NULL;
    if (tasks_dir) {
        char *path = kb_path_join(tasks_dir, task);
        if (!path)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        kb_rc rc = kb_task_find(path, NULL, dir, err);
        free(path);
        return rc;
    }
    char *manifest = config && config->manifest ? kb_strdup(config->manifest)
                                                : kb_manifest_default_path();
    if (!manifest)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_task_find(task, manifest, dir, err);
    free(manifest);
    return rc;
}

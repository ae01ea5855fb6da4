/* task.c - kernel tasks: task.json, size expressions, launch overrides in
 * candidate source, source refusal, fast_p, finding a task by name, a
 * result as text. Plain C (cJSON): kb never links CUDA; kb-verify links
 * this from libkb.a. */
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ dtypes */

static const struct { const char *name; kb_dtype t; size_t size; } dtypes[] = {
    { "f32", KB_DT_F32, 4 }, { "bf16", KB_DT_BF16, 2 }, { "f16", KB_DT_F16, 2 },
    { "i32", KB_DT_I32, 4 }, { "u32", KB_DT_U32, 4 }, { "f64", KB_DT_F64, 8 },
};

const char *kb_dtype_name(kb_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].t == t)
            return dtypes[i].name;
    return "?";
}

int kb_dtype_parse(const char *name, kb_dtype *out)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = dtypes[i].t;
            return 0;
        }
    return -1;
}

size_t kb_dtype_size(kb_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].t == t)
            return dtypes[i].size;
    return 0;
}

/* ------------------------------------------------------------------ expressions */

/* A recursive-descent parser over values that know whether they are
 * integers (from integer literals, dims and integer operations) or reals
 * (a literal with '.' or an exponent, sqrt, a real operand). */
typedef struct {
    double v;
    int real;
} num;

typedef struct {
    const char *s, *p;
    const char *const *names;
    const double *values;
    size_t n;
    kb_err *err;
    kb_rc rc;
    int depth;          /* nesting of atoms: parentheses, calls, signs */
} expr_st;

static num e_sum(expr_st *e);

static void e_ws(expr_st *e)
{
    while (isspace((unsigned char)*e->p))
        e->p++;
}

static num e_fail(expr_st *e, const char *what)
{
    if (e->rc == KB_OK)
        e->rc = kb_err_set(e->err, KB_ERR_PARSE, "bad expression '%s': %s",
                           e->s, what);
    return (num){ 0, 0 };
}

static num e_call(expr_st *e, const char *name, size_t len)
{
    num args[2] = { { 0, 0 }, { 0, 0 } };
    int nargs = 0;
    e->p++; /* '(' */
    for (;;) {
        e_ws(e);
        if (nargs == 2)
            return e_fail(e, "too many arguments");
        args[nargs++] = e_sum(e);
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        if (*e->p == ',') {
            e->p++;
            continue;
        }
        if (*e->p == ')') {
            e->p++;
            break;
        }
        return e_fail(e, "expected ',' or ')'");
    }
    double a = args[0].v, b = args[1].v;
    int real = args[0].real || (nargs == 2 && args[1].real);
#define FN(s) (len == sizeof(s) - 1 && strncmp(name, s, len) == 0)
    if (FN("ceil_div") && nargs == 2) {
        if (b == 0)
            return e_fail(e, "division by zero");
        return (num){ ceil(a / b), 0 };
    }
    if (FN("min") && nargs == 2)
        return (num){ a < b ? a : b, real };
    if (FN("max") && nargs == 2)
        return (num){ a > b ? a : b, real };
    if (FN("sqrt") && nargs == 1)
        return (num){ sqrt(a), 1 };
    if (FN("floor") && nargs == 1)
        return (num){ floor(a), 0 };
    if (FN("ceil") && nargs == 1)
        return (num){ ceil(a), 0 };
#undef FN
    return e_fail(e, "unknown function or wrong number of arguments");
}

static num e_atom_in(expr_st *e);

/* An atom, one level deeper: past KB_EXPR_MAX_DEPTH a parse error, not a
 * stack overflow (200,000 '(' once crashed kb-verify). */
static num e_atom(expr_st *e)
{
    if (e->depth >= KB_EXPR_MAX_DEPTH) {
        if (e->rc == KB_OK)
            e->rc = kb_err_set(e->err, KB_ERR_PARSE, "bad expression '%.40s...': "
                               "nested too deeply (at most %d levels)", e->s,
                               KB_EXPR_MAX_DEPTH);
        return (num){ 0, 0 };
    }
    e->depth++;
    num v = e_atom_in(e);
    e->depth--;
    return v;
}

static num e_atom_in(expr_st *e)
{
    e_ws(e);
    const char *p = e->p;
    if (*p == '(') {
        e->p++;
        num v = e_sum(e);
        e_ws(e);
        if (*e->p != ')')
            return e_fail(e, "expected ')'");
        e->p++;
        return v;
    }
    if (*p == '-') {
        e->p++;
        num v = e_atom(e);
        v.v = -v.v;
        return v;
    }
    if (*p == '+') {
        e->p++;
        return e_atom(e);
    }
    if (isdigit((unsigned char)*p) || *p == '.') {
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p)
            return e_fail(e, "bad number");
        int real = 0;
        for (const char *q = p; q < end; q++)
            if (*q == '.' || *q == 'e' || *q == 'E')
                real = 1;
        e->p = end;
        return (num){ v, real };
    }
    if (isalpha((unsigned char)*p) || *p == '_') {
        const char *q = p;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        size_t len = (size_t)(q - p);
        e->p = q;
        e_ws(e);
        if (*e->p == '(')
            return e_call(e, p, len);
        for (size_t i = 0; i < e->n; i++)
            if (strlen(e->names[i]) == len && strncmp(e->names[i], p, len) == 0)
                return (num){ e->values[i], e->values[i] != floor(e->values[i]) };
        if (e->rc == KB_OK)
            e->rc = kb_err_set(e->err, KB_ERR_PARSE,
                               "bad expression '%s': unknown name '%.*s'",
                               e->s, (int)len, p);
        return (num){ 0, 0 };
    }
    return e_fail(e, *p ? "unexpected character" : "unexpected end");
}

static num e_prod(expr_st *e)
{
    num v = e_atom(e);
    for (;;) {
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        char op = *e->p;
        if (op != '*' && op != '/' && op != '%')
            return v;
        e->p++;
        num r = e_atom(e);
        if (e->rc)
            return (num){ 0, 0 };
        int real = v.real || r.real;
        if (op == '*') {
            v.v *= r.v;
        } else if (r.v == 0) {
            return e_fail(e, "division by zero");
        } else if (op == '/') {
            v.v = real ? v.v / r.v : trunc(v.v / r.v);
        } else {
            if (real)
                return e_fail(e, "'%' needs integers");
            v.v = fmod(v.v, r.v);
        }
        v.real = real;
    }
}

static num e_sum(expr_st *e)
{
    num v = e_prod(e);
    for (;;) {
        if (e->rc)
            return (num){ 0, 0 };
        e_ws(e);
        char op = *e->p;
        if (op != '+' && op != '-')
            return v;
        e->p++;
        num r = e_prod(e);
        v.v = op == '+' ? v.v + r.v : v.v - r.v;
        v.real = v.real || r.real;
    }
}

kb_rc kb_expr_eval(const char *expr, const char *const *names,
                   const double *values, size_t n, double *out, kb_err *err)
{
    expr_st e = { expr, expr, names, values, n, err, KB_OK, 0 };
    if (!expr)
        return kb_err_set(err, KB_ERR_PARSE, "missing expression");
    num v = e_sum(&e);
    if (e.rc)
        return e.rc;
    e_ws(&e);
    if (*e.p)
        return kb_err_set(err, KB_ERR_PARSE,
                          "bad expression '%s': unexpected '%s'", expr, e.p);
    *out = v.v;
    return KB_OK;
}

kb_rc kb_task_eval(const kb_task *t, const kb_shape *s, const char *expr,
                   double *out, kb_err *err)
{
    return kb_expr_eval(expr, (const char *const *)t->dims, s->dims, t->ndims,
                        out, err);
}

/* ------------------------------------------------------------------ task.json */

static void launch_release(kb_launch *l)
{
    free(l->kernel);
    for (int i = 0; i < 3; i++) {
        free(l->grid[i]);
        free(l->block[i]);
    }
    free(l->shared);
}

void kb_launches_free(kb_launch *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        launch_release(&l[i]);
    free(l);
}

void kb_task_free(kb_task *t)
{
    if (!t)
        return;
    free(t->dir);
    free(t->name);
    free(t->description);
    free(t->ops);
    free(t->kernel);
    for (size_t i = 0; i < t->ndims; i++)
        free(t->dims[i]);
    for (size_t i = 0; i < t->nparams; i++) {
        kb_task_param *p = &t->params[i];
        free(p->name);
        free(p->size);
        free(p->value);
        for (size_t j = 0; j < p->ndists; j++)
            free(p->dists[j]);
    }
    free(t->params);
    for (size_t i = 0; i < t->nshapes; i++)
        free(t->shapes[i].name);
    free(t->shapes);
    free(t->atol);
    free(t->rtol);
    kb_launches_free(t->launches, t->nlaunches);
    free(t->baseline);
    for (int i = 0; i < 3; i++)
        free(t->blas_args[i]);
    free(t->baseline_then);
    free(t->cpu_ref);
    free(t->roof_bytes);
    free(t->roof_flops);
    free(t->roof_unit);
    free(t);
}

/* A JSON number or string as an expression string (caller frees); NULL
 * for anything else, or out of memory. */
static char *json_expr(const cJSON *v)
{
    if (cJSON_IsString(v))
        return kb_strdup(v->valuestring);
    if (cJSON_IsNumber(v)) {
        kb_buf b;
        kb_buf_init(&b, 0);
        return kb_buf_finish(&b, kb_buf_printf(&b, "%.17g", v->valuedouble));
    }
    return NULL;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Fills a grid/block triple from a number, a string or an array of them. */
static kb_rc parse_dim3(const cJSON *v, char *out[3], const char *what,
                        const char *path, kb_err *err)
{
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if (n < 1 || n > 3)
            return kb_err_set(err, KB_ERR_PARSE, "'%s': %s needs 1 to 3 values",
                              path, what);
        for (int i = 0; i < n; i++)
            if (!(out[i] = json_expr(cJSON_GetArrayItem(v, i))))
                return kb_err_set(err, KB_ERR_PARSE, "'%s': bad %s", path, what);
        return KB_OK;
    }
    if (!(out[0] = json_expr(v)))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': missing %s", path, what);
    return KB_OK;
}

static kb_rc parse_launch(const cJSON *o, const char *dflt_kernel,
                          kb_launch *l, const char *path, kb_err *err)
{
    const char *k = json_str(o, "kernel");
    l->kernel = kb_strdup(k ? k : dflt_kernel);
    kb_rc rc = parse_dim3(cJSON_GetObjectItemCaseSensitive(o, "grid"), l->grid,
                          "grid", path, err);
    if (rc == KB_OK)
        rc = parse_dim3(cJSON_GetObjectItemCaseSensitive(o, "block"), l->block,
                        "block", path, err);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shared");
    if (rc == KB_OK && sh)
        l->shared = json_expr(sh);
    if (rc == KB_OK && !l->kernel)
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s': launch names no kernel", path);
    return rc;
}

static kb_rc parse_role(const char *s, kb_role *out)
{
    static const char *names[] = { "input", "output", "inout", "scratch",
                                   "dim", "scalar" };
    for (int i = 0; i < 6; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (kb_role)i;
            return KB_OK;
        }
    return KB_ERR_PARSE;
}

/* name, description, kernel, baseline, cpu_ref, level, max_speedup,
 * dtype, ops and dims */
static kb_rc parse_header(kb_task *t, const cJSON *root, const char *path,
                          kb_err *err)
{
    const char *s;
    if (!(s = json_str(root, "name")))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': missing \"name\"", path);
    t->name = kb_strdup(s);
    t->description = kb_strdup((s = json_str(root, "description")) ? s : "");
    t->kernel = kb_strdup((s = json_str(root, "kernel")) ? s : t->name);
    t->cpu_ref = kb_strdup((s = json_str(root, "cpu_ref")) ? s : t->name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "level");
    t->level = cJSON_IsNumber(v) ? v->valueint : 1;
    v = cJSON_GetObjectItemCaseSensitive(root, "max_speedup");
    t->max_speedup = cJSON_IsNumber(v) ? v->valuedouble : 50.0;
    s = json_str(root, "dtype");
    if (!s || kb_dtype_parse(s, &t->dtype) != 0)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': bad or missing \"dtype\"", path);
    kb_buf ops;
    kb_buf_init(&ops, 0);
    kb_rc rc = KB_OK;
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(root, "ops"))
        if (rc == KB_OK && cJSON_IsString(o))
            rc = kb_buf_printf(&ops, "%s%s", ops.len ? "," : "", o->valuestring);
    if (!(t->ops = kb_buf_finish(&ops, rc)))
        return kb_err_set(err, KB_ERR_NOMEM, "'%s': out of memory", path);
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "dims")) {
        if (!cJSON_IsString(d) || t->ndims == KB_TASK_MAX_DIMS)
            return kb_err_set(err, KB_ERR_PARSE, "'%s': bad \"dims\"", path);
        t->dims[t->ndims++] = kb_strdup(d->valuestring);
    }
    return KB_OK;
}

/* One entry of "params": name, role, type, size or value, dist. */
static kb_rc parse_param(const cJSON *p, kb_task_param *q, const char *path,
                         kb_err *err)
{
    const char *name = json_str(p, "name");
    q->name = kb_strdup(name ? name : "?");
    if (parse_role(json_str(p, "role"), &q->role) != KB_OK)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': param '%s' has a bad role",
                          path, q->name);
    const char *s = json_str(p, "type");
    if (!s || kb_dtype_parse(s, &q->dtype) != 0)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': param '%s' has a bad type",
                          path, q->name);
    q->size = json_expr(cJSON_GetObjectItemCaseSensitive(p, "size"));
    q->value = json_expr(cJSON_GetObjectItemCaseSensitive(p, "value"));
    int buffer = q->role <= KB_ROLE_SCRATCH;
    if (buffer ? !q->size : !q->value)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': param '%s' needs \"%s\"",
                          path, q->name, buffer ? "size" : "value");
    const cJSON *ds;
    cJSON_ArrayForEach(ds, cJSON_GetObjectItemCaseSensitive(p, "dist"))
        if (cJSON_IsString(ds) && q->ndists < KB_TASK_MAX_DISTS)
            q->dists[q->ndists++] = kb_strdup(ds->valuestring);
    if ((q->role == KB_ROLE_INPUT || q->role == KB_ROLE_INOUT) && q->ndists < 2)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': input '%s' needs at least 2 distributions",
                          path, q->name);
    return KB_OK;
}

static kb_rc parse_params(kb_task *t, const cJSON *root, const char *path,
                          kb_err *err)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    int np = cJSON_GetArraySize(params);
    if (!cJSON_IsArray(params) || np < 1)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': missing \"params\"", path);
    if (!(t->params = calloc((size_t)np, sizeof *t->params)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const cJSON *p;
    kb_rc rc = KB_OK;
    cJSON_ArrayForEach(p, params) {
        if ((rc = parse_param(p, &t->params[t->nparams++], path, err)) != KB_OK)
            break;
    }
    return rc;
}

/* "shapes": a name, every dim (positive), and whether it is timed (by
 * default only the first is) */
static kb_rc parse_shapes(kb_task *t, const cJSON *root, const char *path,
                          kb_err *err)
{
    const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(root, "shapes");
    int ns = cJSON_GetArraySize(shapes);
    if (!cJSON_IsArray(shapes) || ns < 1)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': missing \"shapes\"", path);
    if (!(t->shapes = calloc((size_t)ns, sizeof *t->shapes)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const cJSON *sh;
    cJSON_ArrayForEach(sh, shapes) {
        kb_shape *q = &t->shapes[t->nshapes++];
        const char *name = json_str(sh, "name");
        q->name = kb_strdup(name ? name : "?");
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(sh, "timed");
        q->timed = cJSON_IsBool(tm) ? cJSON_IsTrue(tm) : t->nshapes == 1;
        for (size_t i = 0; i < t->ndims; i++) {
            const cJSON *dv = cJSON_GetObjectItemCaseSensitive(sh, t->dims[i]);
            if (!cJSON_IsNumber(dv) || dv->valuedouble < 1)
                return kb_err_set(err, KB_ERR_PARSE,
                                  "'%s': shape '%s' needs a positive '%s'", path,
                                  q->name, t->dims[i]);
            q->dims[i] = dv->valuedouble;
        }
    }
    return KB_OK;
}

/* tolerance by dtype (0 where not given) */
static void parse_tolerance(kb_task *t, const cJSON *root)
{
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "tolerance"),
        kb_dtype_name(t->dtype));
    t->atol = json_expr(cJSON_GetObjectItemCaseSensitive(tol, "atol"));
    t->rtol = json_expr(cJSON_GetObjectItemCaseSensitive(tol, "rtol"));
    if (!t->atol)
        t->atol = kb_strdup("0");
    if (!t->rtol)
        t->rtol = kb_strdup("0");
}

/* launch: an object or an array of objects */
static kb_rc parse_launches(kb_task *t, const cJSON *root, const char *path,
                            kb_err *err)
{
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(root, "launch");
    int nl = cJSON_IsArray(la) ? cJSON_GetArraySize(la) : cJSON_IsObject(la);
    if (nl < 1)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': missing \"launch\"", path);
    if (!(t->launches = calloc((size_t)nl, sizeof *t->launches)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nl; i++) {
        const cJSON *o = cJSON_IsArray(la) ? cJSON_GetArrayItem(la, i) : la;
        /* counted first: a launch that fails half parsed is freed too */
        t->nlaunches++;
        kb_rc rc = parse_launch(o, t->kernel, &t->launches[i], path, err);
        if (rc)
            return rc;
    }
    return KB_OK;
}

static kb_rc parse_roofline(kb_task *t, const cJSON *root, const char *path,
                            kb_err *err)
{
    const cJSON *roof = cJSON_GetObjectItemCaseSensitive(root, "roofline");
    const char *s;
    t->roof_bytes = json_expr(cJSON_GetObjectItemCaseSensitive(roof, "bytes"));
    t->roof_flops = json_expr(cJSON_GetObjectItemCaseSensitive(roof, "flops"));
    t->roof_unit = kb_strdup((s = json_str(roof, "unit")) ? s : "fp32");
    if (strcmp(t->roof_unit, "fp32") != 0 && strcmp(t->roof_unit, "fp32_tensor3") != 0 &&
        strcmp(t->roof_unit, "bf16_tensor") != 0 && strcmp(t->roof_unit, "int") != 0)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': unknown roofline unit '%s' (fp32, "
                          "fp32_tensor3, bf16_tensor, int)", path, t->roof_unit);
    return KB_OK;
}

static int is_buffer_param(const kb_task *t, const char *name)
{
    for (size_t i = 0; i < t->nparams; i++)
        if (strcmp(t->params[i].name, name) == 0)
            return t->params[i].role <= KB_ROLE_SCRATCH;
    return 0;
}

/* "baseline": a name ("reference", "cublas_sgemm", "cublas_bf16"), or a
 * library call with its operands and an epilogue of the task's launches:
 *   {"library":"cublas_bf16", "C":"acc", "then":["bias_gelu"]}
 * (after params and launches: the names are checked against them) */
static kb_rc parse_baseline(kb_task *t, const cJSON *root, const char *path,
                            kb_err *err)
{
    static const char *const ops[3] = { "A", "B", "C" };
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "baseline");
    const char *name = cJSON_IsString(b) ? b->valuestring
                     : cJSON_IsObject(b) ? json_str(b, "library") : "reference";
    if (b && !cJSON_IsString(b) && !cJSON_IsObject(b))
        name = NULL;
    if (!name || (strcmp(name, "reference") != 0 && strcmp(name, "cublas_sgemm") != 0 &&
                  strcmp(name, "cublas_bf16") != 0))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': bad \"baseline\" (reference, "
                          "cublas_sgemm, cublas_bf16, or {\"library\": one of the "
                          "last two, ...})", path);
    if (cJSON_IsObject(b) && strcmp(name, "reference") == 0)
        return kb_err_set(err, KB_ERR_PARSE, "'%s': a baseline object names a "
                          "library (cublas_sgemm, cublas_bf16)", path);
    t->baseline = kb_strdup(name);
    for (int i = 0; i < 3; i++) {
        const char *a = cJSON_IsObject(b) ? json_str(b, ops[i]) : NULL;
        t->blas_args[i] = kb_strdup(a ? a : ops[i]);
        if (strcmp(name, "reference") != 0 && !is_buffer_param(t, t->blas_args[i]))
            return kb_err_set(err, KB_ERR_PARSE, "'%s': the library baseline's %s "
                              "is no buffer of the task ('%s')", path, ops[i],
                              t->blas_args[i]);
    }
    const cJSON *then = cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, "then")
                                          : NULL;
    int nt = cJSON_GetArraySize(then);
    if (then && (!cJSON_IsArray(then) || nt < 1))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': the baseline's \"then\" is "
                          "a list of the task's kernels", path);
    if (nt > 0 && !(t->baseline_then = calloc((size_t)nt, sizeof *t->baseline_then)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const cJSON *k;
    cJSON_ArrayForEach(k, then) {
        size_t i = 0;
        while (i < t->nlaunches && cJSON_IsString(k) &&
               strcmp(t->launches[i].kernel, k->valuestring) != 0)
            i++;
        if (!cJSON_IsString(k) || i == t->nlaunches)
            return kb_err_set(err, KB_ERR_PARSE, "'%s': the baseline's \"then\" "
                              "names no kernel of the task's launch ('%s')", path,
                              cJSON_IsString(k) ? k->valuestring : "?");
        t->baseline_then[t->nthen++] = i;
    }
    if (!t->baseline || !t->blas_args[0] || !t->blas_args[1] || !t->blas_args[2])
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* every expression must evaluate on every shape */
static kb_rc check_shapes(const kb_task *t, const char *path, kb_err *err)
{
    for (size_t i = 0; i < t->nshapes; i++) {
        const kb_shape *q = &t->shapes[i];
        double x;
        kb_rc rc = KB_OK;
        for (size_t j = 0; j < t->nparams && rc == KB_OK; j++)
            rc = kb_task_eval(t, q, t->params[j].size ? t->params[j].size
                                                      : t->params[j].value,
                              &x, err);
        if (rc == KB_OK)
            rc = kb_task_eval(t, q, t->atol, &x, err);
        if (rc == KB_OK)
            rc = kb_task_eval(t, q, t->rtol, &x, err);
        for (size_t j = 0; j < t->nlaunches && rc == KB_OK; j++)
            for (int k = 0; k < 3 && rc == KB_OK; k++) {
                if (t->launches[j].grid[k])
                    rc = kb_task_eval(t, q, t->launches[j].grid[k], &x, err);
                if (rc == KB_OK && t->launches[j].block[k])
                    rc = kb_task_eval(t, q, t->launches[j].block[k], &x, err);
            }
        if (rc != KB_OK)
            return kb_err_set(err, rc, "'%s': shape '%s'", path, q->name);
    }
    return KB_OK;
}

kb_rc kb_task_load(const char *dir, kb_task **out, kb_err *err)
{
    kb_buf raw;
    kb_buf_init(&raw, 4u << 20);
    char *path = kb_path_join(dir, "task.json");
    cJSON *root = NULL;
    kb_task *t = calloc(1, sizeof *t);
    kb_rc rc = KB_OK;
    if (!t || !path) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = kb_read_file(path, 4u << 20, &raw, err)) != KB_OK)
        goto out;
    root = cJSON_Parse(raw.data);
    if (!cJSON_IsObject(root)) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' is not a JSON object", path);
        goto out;
    }
    t->dir = kb_strdup(dir);
    if ((rc = parse_header(t, root, path, err)) ||
        (rc = parse_params(t, root, path, err)) ||
        (rc = parse_shapes(t, root, path, err)))
        goto out;
    parse_tolerance(t, root);
    if ((rc = parse_launches(t, root, path, err)) ||
        (rc = parse_baseline(t, root, path, err)) ||
        (rc = parse_roofline(t, root, path, err)) ||
        (rc = check_shapes(t, path, err)))
        goto out;
out:
    cJSON_Delete(root);
    kb_buf_release(&raw);
    free(path);
    if (rc != KB_OK) {
        kb_task_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

/* ------------------------------------------------------------------ candidate source */

/* Copies src with comments blanked out (newlines kept), and the insides of
 * string/char literals blanked too unless keep_strings. The copy has src's
 * length, so an offset in it is the same offset in src. Caller frees. */
static char *strip_comments(const char *src, int keep_strings)
{
    size_t n = strlen(src);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t i = 0;
    while (i < n) {
        if (src[i] == '/' && src[i + 1] == '/') {
            while (i < n && src[i] != '\n')
                o[i++] = ' ';
        } else if (src[i] == '/' && src[i + 1] == '*') {
            o[i++] = ' ';
            o[i++] = ' ';
            while (i < n && !(src[i] == '*' && src[i + 1] == '/')) {
                o[i] = src[i] == '\n' ? '\n' : ' ';
                i++;
            }
            for (int k = 0; k < 2 && i < n; k++)
                o[i++] = ' ';
        } else if (src[i] == '"' || src[i] == '\'') {
            char q = src[i];
            o[i++] = q;
            while (i < n && src[i] != q && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) {
                    o[i] = keep_strings ? src[i] : ' ';
                    i++;
                }
                o[i] = keep_strings ? src[i] : ' ';
                i++;
            }
            if (i < n)
                o[i] = src[i], i++;
        } else {
            o[i] = src[i];
            i++;
        }
    }
    o[n] = '\0';
    return o;
}

/* 1 if word occurs in s as a whole identifier (followed by '(' when call). */
static int has_word(const char *s, const char *word, int call)
{
    size_t wl = strlen(word);
    for (const char *p = s; (p = strstr(p, word)); p += wl) {
        if (p > s && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
            continue;
        const char *q = p + wl;
        if (isalnum((unsigned char)*q) || *q == '_')
            continue;
        if (!call)
            return 1;
        while (isspace((unsigned char)*q))
            q++;
        if (*q == '(')
            return 1;
    }
    return 0;
}

/* Copies code (comments already blanked, strings kept) with adjacent string
 * literals joined, as the compiler joins them: "%%global" "timer" becomes
 * "%%globaltimer". Caller frees. */
static char *join_strings(const char *code)
{
    size_t n = strlen(code);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t i = 0, k = 0;
    while (i < n) {
        char c = code[i];
        if (c == '\'') {
            o[k++] = code[i++];
            while (i < n && code[i] != '\'' && code[i] != '\n') {
                if (code[i] == '\\' && i + 1 < n)
                    o[k++] = code[i++];
                o[k++] = code[i++];
            }
            if (i < n)
                o[k++] = code[i++];
        } else if (c == '"') {
            o[k++] = code[i++];
            for (;;) {
                while (i < n && code[i] != '"' && code[i] != '\n') {
                    if (code[i] == '\\' && i + 1 < n)
                        o[k++] = code[i++];
                    o[k++] = code[i++];
                }
                if (i >= n || code[i] != '"')
                    break;
                /* closing quote: another literal after blanks continues it */
                size_t j = i + 1;
                while (j < n && isspace((unsigned char)code[j]))
                    j++;
                if (j < n && code[j] == '"') {
                    i = j + 1;
                    continue;
                }
                o[k++] = code[i++];
                break;
            }
        } else {
            o[k++] = code[i++];
        }
    }
    o[k] = '\0';
    return o;
}

/* Marks the candidate refused and appends the first refusal's reason to
 * why; later ones are not kept. Out of memory why is emptied, never left
 * with part of a reason: the refusal stands, and kb_verify_refuse's
 * caller reads the empty reason as out of memory. */
static void refuse(kb_buf *why, int *refused, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(kb_buf *why, int *refused, const char *fmt, ...)
{
    if (*refused)
        return;
    *refused = 1;
    va_list ap;
    va_start(ap, fmt);
    if (kb_buf_vprintf(why, fmt, ap) != KB_OK)
        kb_buf_reset(why);
    va_end(ap);
}

int kb_verify_refuse(const char *src, kb_buf *why)
{
    /* %globaltimer sits in asm strings, so it is looked for in the source
     * without comments but with its string literals, joined as the compiler
     * joins them; everything else in the source without either. */
    char *code = strip_comments(src, 0);
    char *withstr = strip_comments(src, 1);
    char *joined = withstr ? join_strings(withstr) : NULL;
    int refused = 0;
    if (!code || !joined) {
        free(code);
        free(withstr);
        free(joined);
        refuse(why, &refused, "out of memory");
        return 1;
    }
    if (strstr(joined, "globaltimer"))
        refuse(why, &refused, "reads %%globaltimer: kb-verify owns timing");
    free(withstr);
    free(joined);
    if (has_word(code, "__managed__", 0))
        refuse(why, &refused,
               "declares __managed__ memory: kb-verify owns allocation");
    if (has_word(code, "malloc", 1) || has_word(code, "free", 1) ||
        has_word(code, "cudaMalloc", 1) || has_word(code, "new", 0) ||
        has_word(code, "delete", 0))
        refuse(why, &refused, "allocates memory on the device "
               "(malloc/free/new): kb-verify owns allocation");
    if (strstr(code, "<<<") || has_word(code, "cudaLaunchDevice", 1) ||
        has_word(code, "cudaGetParameterBuffer", 1) ||
        has_word(code, "cudaGraphLaunch", 1) ||
        has_word(code, "cudaLaunchKernel", 1))
        refuse(why, &refused, "launches kernels from the device: kb-verify "
               "owns the launches");
    if (has_word(code, "cudaStreamCreate", 1) ||
        has_word(code, "cudaStreamCreateWithFlags", 1) ||
        has_word(code, "cudaDeviceSynchronize", 1) ||
        has_word(code, "cudaEventRecord", 1))
        refuse(why, &refused, "calls the CUDA runtime from the device: "
               "kb-verify owns streams and events");
    for (const char *p = code; (p = strstr(p, "#")); p++) {
        const char *q = p + 1;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "include", 7) != 0)
            continue;
        q += 7;
        while (*q == ' ' || *q == '\t')
            q++;
        /* NVRTC's own headers are fine; anything else is not there */
        static const char *ok[] = { "<cuda_bf16.h>", "<cuda_fp16.h>",
                                    "<mma.h>", "<cuda/barrier>",
                                    "<cooperative_groups.h>",
                                    "<cooperative_groups/reduce.h>",
                                    "<cuda_pipeline.h>", "<stdint.h>",
                                    "<cstdint>", "<math_constants.h>" };
        int good = 0;
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strncmp(q, ok[i], strlen(ok[i])) == 0)
                good = 1;
        if (!good) {
            /* code has the name's quotes blanked: print it from src, which
             * has the same offsets, up to the line's end in code (where a
             * trailing comment is already blank) */
            const char *e = q;
            while (*e && *e != '\n')
                e++;
            while (e > q && isspace((unsigned char)e[-1]))
                e--;
            refuse(why, &refused, "includes '%.*s': a candidate is "
                   "self-contained device code", (int)(e - q), src + (q - code));
        }
    }
    free(code);
    return refused;
}

/* Splits s at top-level commas into up to max expressions. */
static kb_rc split_list(const char *s, size_t len, char **out, int max,
                        const char *what, kb_err *err)
{
    int depth = 0, k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : ',';
        if (c == '(' && ++depth > KB_EXPR_MAX_DEPTH)
            return kb_err_set(err, KB_ERR_PARSE, "%s list nested too deeply (at "
                              "most %d levels)", what, KB_EXPR_MAX_DEPTH);
        else if (c == ')')
            depth--;
        else if (c == ',' && depth == 0) {
            if (k == max || i == start)
                return kb_err_set(err, KB_ERR_PARSE, "bad %s list '%.*s'",
                                  what, (int)len, s);
            out[k++] = kb_strndup(s + start, i - start);
            start = i + 1;
        }
        if (depth < 0)
            return kb_err_set(err, KB_ERR_PARSE, "unbalanced ')' in %s list '%.*s'",
                              what, (int)len, s);
    }
    if (depth != 0)
        return kb_err_set(err, KB_ERR_PARSE, "unbalanced '(' in %s list '%.*s'",
                          what, (int)len, s);
    return KB_OK;
}

void kb_cand_header_release(kb_cand_header *h)
{
    kb_launches_free(h->launches, h->nlaunches);
    for (size_t i = 0; i < h->nmaps; i++) {
        free(h->maps[i].buffer);
        for (int d = 0; d < KB_TMAP_MAX_RANK; d++) {
            free(h->maps[i].dims[d]);
            free(h->maps[i].box[d]);
        }
    }
    free(h->maps);
    free(h->arch);
    memset(h, 0, sizeof *h);
}

/* Calls item(key, value) for each key=value of a header line's rest. */
typedef kb_rc (*header_item_fn)(void *obj, const char *k, size_t kl,
                                const char *v, size_t vl, kb_err *err);

static kb_rc header_items(const char *q, const char *stop, const char *tag,
                          header_item_fn item, void *obj, kb_err *err)
{
    while (q < stop) {
        while (q < stop && isspace((unsigned char)*q))
            q++;
        const char *ks = q;
        while (q < stop && !isspace((unsigned char)*q))
            q++;
        if (q == ks)
            break;
        const char *eq = memchr(ks, '=', (size_t)(q - ks));
        if (!eq)
            return kb_err_set(err, KB_ERR_PARSE, "bad %s item '%.*s' (want key=value)",
                              tag, (int)(q - ks), ks);
        kb_rc rc = item(obj, ks, (size_t)(eq - ks), eq + 1, (size_t)(q - eq - 1), err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}

static int key_is(const char *k, size_t kl, const char *want)
{
    return kl == strlen(want) && strncmp(k, want, kl) == 0;
}

static kb_rc repeated(const char *tag, const char *k, size_t kl, kb_err *err)
{
    return kb_err_set(err, KB_ERR_PARSE, "%s key '%.*s' given twice", tag,
                      (int)kl, k);
}

static kb_rc launch_item(void *obj, const char *k, size_t kl, const char *v,
                         size_t vl, kb_err *err)
{
    kb_launch *x = obj;
    if ((key_is(k, kl, "kernel") && x->kernel) || (key_is(k, kl, "grid") && x->grid[0]) ||
        (key_is(k, kl, "block") && x->block[0]) || (key_is(k, kl, "shared") && x->shared))
        return repeated("kb-launch", k, kl, err);
    if (key_is(k, kl, "kernel"))
        x->kernel = kb_strndup(v, vl);
    else if (key_is(k, kl, "grid"))
        return split_list(v, vl, x->grid, 3, "kb-launch dimension", err);
    else if (key_is(k, kl, "block"))
        return split_list(v, vl, x->block, 3, "kb-launch dimension", err);
    else if (key_is(k, kl, "shared"))
        x->shared = kb_strndup(v, vl);
    else
        return kb_err_set(err, KB_ERR_PARSE, "unknown kb-launch key '%.*s'",
                          (int)kl, k);
    return KB_OK;
}

static kb_rc tensormap_item(void *obj, const char *k, size_t kl, const char *v,
                            size_t vl, kb_err *err)
{
    kb_tensormap *m = obj;
    if ((key_is(k, kl, "buffer") && m->buffer) || (key_is(k, kl, "dims") && m->dims[0]) ||
        (key_is(k, kl, "box") && m->box[0]) || (key_is(k, kl, "swizzle") && m->swizzle_set))
        return repeated("kb-tensormap", k, kl, err);
    if (key_is(k, kl, "buffer"))
        m->buffer = kb_strndup(v, vl);
    else if (key_is(k, kl, "dims"))
        return split_list(v, vl, m->dims, KB_TMAP_MAX_RANK, "kb-tensormap dims", err);
    else if (key_is(k, kl, "box"))
        return split_list(v, vl, m->box, KB_TMAP_MAX_RANK, "kb-tensormap box", err);
    else if (key_is(k, kl, "swizzle")) {
        static const int sizes[] = { 0, 32, 64, 128 };
        m->swizzle_set = 1;
        m->swizzle = -1;
        for (int i = 0; i < 4; i++) {
            char want[8];
            snprintf(want, sizeof want, "%d", sizes[i]);
            if (key_is(v, vl, want))
                m->swizzle = sizes[i];
        }
        if (m->swizzle < 0)
            return kb_err_set(err, KB_ERR_PARSE, "kb-tensormap swizzle must be "
                              "0, 32, 64 or 128 (bytes), not '%.*s'", (int)vl, v);
    } else {
        return kb_err_set(err, KB_ERR_PARSE, "unknown kb-tensormap key '%.*s'",
                          (int)kl, k);
    }
    return KB_OK;
}

static int list_len(char *const *l, int max)
{
    int n = 0;
    while (n < max && l[n])
        n++;
    return n;
}

/* Grows the array *items of *n elements of size bytes by one zeroed
 * element and returns it; NULL (the array untouched) when out of memory. */
static void *append_zeroed(void **items, size_t *n, size_t size)
{
    char *p = realloc(*items, (*n + 1) * size);
    if (!p)
        return NULL;
    *items = p;
    memset(p + *n * size, 0, size);
    return p + (*n)++ * size;
}

kb_rc kb_cand_header_parse(const char *src, kb_cand_header *out, kb_err *err)
{
    kb_cand_header h;
    memset(&h, 0, sizeof h);
    memset(out, 0, sizeof *out);
    kb_rc rc = KB_OK;
    for (const char *line = src; line && *line && rc == KB_OK;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *p = line, *stop = line + len;
        while (p < stop && isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "//", 2) == 0) {
            p += 2;
            while (*p == ' ' || *p == '\t')
                p++;
        } else {
            p = stop;
        }
        if (strncmp(p, "kb-launch:", 10) == 0) {
            kb_launch *x = append_zeroed((void **)&h.launches, &h.nlaunches, sizeof *x);
            if (!x) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            rc = header_items(p + 10, stop, "kb-launch", launch_item, x, err);
            if (rc == KB_OK && (!x->kernel || !x->grid[0] || !x->block[0]))
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "kb-launch needs kernel=, grid= and block=");
        } else if (strncmp(p, "kb-tensormap:", 13) == 0) {
            kb_tensormap *m = append_zeroed((void **)&h.maps, &h.nmaps, sizeof *m);
            if (!m) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            rc = header_items(p + 13, stop, "kb-tensormap", tensormap_item, m, err);
            m->rank = list_len(m->dims, KB_TMAP_MAX_RANK);
            if (rc == KB_OK && (!m->buffer || !m->rank ||
                                list_len(m->box, KB_TMAP_MAX_RANK) != m->rank))
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "kb-tensormap needs buffer=, dims= and box= "
                                "with as many entries as dims");
        } else if (strncmp(p, "kb-verify:", 10) == 0) {
            const char *a = strstr(p, "arch=");
            if (a && a < stop) {
                a += 5;
                const char *e = a;
                while (e < stop && !isspace((unsigned char)*e))
                    e++;
                free(h.arch);
                h.arch = kb_strndup(a, (size_t)(e - a));
            }
        }
        line = end ? end + 1 : NULL;
    }
    if (rc != KB_OK) {
        kb_cand_header_release(&h);
        return rc;
    }
    *out = h;
    return KB_OK;
}

/* ------------------------------------------------------------------ fast_p */

void kb_verify_fast_p(const char *const *verdicts, const double *speedups,
                      size_t ntasks, const double *ps, size_t np, double *out)
{
    for (size_t j = 0; j < np; j++) {
        size_t k = 0;
        for (size_t i = 0; i < ntasks; i++) {
            const char *v = verdicts[i] ? verdicts[i] : "";
            int ok = strcmp(v, "correct") == 0 || strcmp(v, "faster") == 0;
            if (ok && speedups[i] > ps[j])
                k++;
        }
        out[j] = ntasks ? (double)k / (double)ntasks : 0.0;
    }
}

/* ------------------------------------------------------------------ finding a task */

/* Appends dir/tail to the places (a list of NUL-separated paths in
 * looked) unless it is there already; returns 1 if it holds a task.json
 * (a new place), 0 if not, -1 out of memory. The path goes to *found. */
static int try_place(kb_buf *looked, const char *dir,
                     const char *tail, char **found)
{
    char *p = dir ? kb_path_join(dir, tail) : kb_strdup(tail);
    if (!p)
        return -1;
    for (size_t off = 0; off < looked->len; off += strlen(looked->data + off) + 1)
        if (strcmp(looked->data + off, p) == 0) {
            free(p);
            return 0;
        }
    if (kb_buf_append(looked, p, strlen(p) + 1) != KB_OK) {
        free(p);
        return -1;
    }
    char *j = kb_path_join(p, "task.json");
    int here = j ? access(j, R_OK) == 0 : -1;
    free(j);
    if (here != 1)
        free(p);
    else
        *found = p;
    return here;
}

/* p (taken) resolved to its real path when it exists, so that one folder
 * reached two ways is looked in once and said plainly */
static char *real_path(char *p)
{
    char *r = p ? realpath(p, NULL) : NULL;
    if (!r)
        return p;
    free(p);
    return r;
}

kb_rc kb_task_find(const char *arg, const char *manifest, char **dir, kb_err *err)
{
    *dir = NULL;
    kb_buf looked;
    kb_buf_init(&looked, 0);
    int got = try_place(&looked, NULL, arg, dir);
    /* a name, not a path: the tasks folders that kb knows of */
    char *roots[3] = { NULL, kb_strdup("corpus"), NULL };
    if (manifest) {
        const char *slash = strrchr(manifest, '/');
        roots[0] = slash ? kb_strndup(manifest, (size_t)(slash - manifest + 1))
                         : kb_strdup(".");
    }
    char *exe = kb_exe_dir();
    roots[2] = exe ? kb_path_join(exe, "../share/kb") : NULL;
    free(exe);
    char *tail = kb_path_join("tasks", arg);
    for (size_t i = 0; i < 3; i++) {
        roots[i] = real_path(roots[i]);
        if (got == 0 && !strchr(arg, '/') && roots[i])
            got = tail ? try_place(&looked, roots[i], tail, dir) : -1;
        free(roots[i]);
    }
    free(tail);
    kb_rc rc = KB_OK;
    if (got < 0) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory looking for task '%s'", arg);
    } else if (got == 0) {
        /* the places, quoted, in the order looked */
        kb_buf where;
        kb_buf_init(&where, 0);
        kb_rc wr = KB_OK;
        for (size_t off = 0; wr == KB_OK && off < looked.len;
             off += strlen(looked.data + off) + 1)
            wr = kb_buf_printf(&where, "%s'%s'", off ? ", " : "", looked.data + off);
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no task '%s' (a directory with "
                        "task.json): looked in %s", arg,
                        wr == KB_OK ? where.data : "too many places to list");
        kb_buf_release(&where);
    }
    kb_buf_release(&looked);
    return rc;
}

/* ------------------------------------------------------------------ a result as text */

static const char *res_str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static double res_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* log's lines, each after prefix; with only set, just those holding it */
static kb_rc text_lines(kb_buf *b, const char *log, const char *prefix,
                        const char *only)
{
    kb_rc rc = KB_OK;
    for (const char *p = log; rc == KB_OK && p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *line = kb_strndup(p, len);
        if (!line)
            return KB_ERR_NOMEM;
        if (len && (!only || strstr(line, only)))
            rc = kb_buf_printf(b, "%s%s\n", prefix, line);
        free(line);
        p = e ? e + 1 : NULL;
    }
    return rc;
}

/* "kernel K: 31 registers, 0 B static shared memory, ..." of what the
 * compile reported (ptxas's figures, and the driver's once it ran) */
static kb_rc text_kernel(kb_buf *b, const cJSON *k)
{
    static const struct { const char *key, *fmt; } parts[] = {
        { "registers", "%s%.0f registers" },
        { "shared_static_bytes", "%s%.0f B static shared memory" },
        { "local_bytes", "%s%.0f B local memory" },
        { "stack_bytes", "%s%.0f B stack" },
        { "max_threads_per_block", "%s%.0f threads a block at most" },
    };
    kb_rc rc = kb_buf_printf(b, "  kernel %s:", res_str(k, "name"));
    const char *sep = " ";
    for (size_t i = 0; rc == KB_OK && i < sizeof parts / sizeof parts[0]; i++)
        if (cJSON_IsNumber(cJSON_GetObjectItem(k, parts[i].key))) {
            rc = kb_buf_printf(b, parts[i].fmt, sep, res_num(k, parts[i].key));
            sep = ", ";
        }
    if (rc == KB_OK && cJSON_GetObjectItem(k, "spill_store_bytes")) {
        double st = res_num(k, "spill_store_bytes"), ld = res_num(k, "spill_load_bytes");
        rc = st || ld ? kb_buf_printf(b, "%sspills: %.0f B stored, %.0f B loaded", sep, st, ld)
                      : kb_buf_printf(b, "%sno spills", sep);
    }
    return rc == KB_OK ? kb_buf_putc(b, '\n') : rc;
}

kb_rc kb_verify_result_text(const cJSON *res, kb_buf *out)
{
    const cJSON *cj = cJSON_GetObjectItem(res, "compile"), *it;
    const char *verdict = res_str(res, "verdict");
    kb_rc rc = kb_buf_printf(out, "%s: %s\n  %s\n", res_str(res, "task"), verdict,
                             res_str(res, "reason"));
    /* NVRTC's log: whole when it did not compile, else its warnings */
    if (rc == KB_OK && cj && !cJSON_IsTrue(cJSON_GetObjectItem(cj, "ok")))
        rc = kb_buf_puts(out, "  NVRTC's log:\n");
    if (rc == KB_OK && cj)
        rc = cJSON_IsTrue(cJSON_GetObjectItem(cj, "ok"))
             ? text_lines(out, res_str(cj, "log"), "  NVRTC: ", "warning")
             : text_lines(out, res_str(cj, "log"), "    ", NULL);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(cj, "kernels"))
        if (rc == KB_OK)
            rc = text_kernel(out, it);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(res, "timings"))
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  %s: candidate %.4f ms, %s %.4f ms, roofline "
                               "floor %.4f ms, speedup %.2fx\n", res_str(it, "shape"),
                               res_num(cJSON_GetObjectItem(it, "candidate_ms"), "median"),
                               res_str(it, "baseline"),
                               res_num(cJSON_GetObjectItem(it, "baseline_ms"), "median"),
                               res_num(it, "floor_ms"), res_num(it, "speedup"));
    if (rc == KB_OK && cJSON_IsBool(cJSON_GetObjectItem(res, "matches_library")))
        rc = kb_buf_printf(out, "  %s the library: %.3fx (parity is within 3%% "
                           "either way)\n",
                           cJSON_IsTrue(cJSON_GetObjectItem(res, "matches_library"))
                           ? "matches" : "does not match",
                           res_num(res, "library_ratio"));
    if (rc == KB_OK && cJSON_IsNumber(cJSON_GetObjectItem(res, "wall_ms")))
        rc = kb_buf_printf(out, "  wall %.0f ms\n", res_num(res, "wall_ms"));
    return rc;
}

/* ------------------------------------------------------------------ records */

cJSON *kb_task_shapes_json(const kb_task *t)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < t->nshapes; i++) {
        const kb_shape *s = &t->shapes[i];
        cJSON *o = cJSON_CreateObject(), *dims = NULL;
        int added = o && cJSON_AddItemToArray(a, o);
        if (o && !added)   /* a owns o once added, and frees it below */
            cJSON_Delete(o);
        int ok = added && cJSON_AddStringToObject(o, "name", s->name) &&
                 cJSON_AddBoolToObject(o, "timed", s->timed) &&
                 (dims = cJSON_AddObjectToObject(o, "dims"));
        for (size_t k = 0; ok && k < t->ndims; k++)
            ok = cJSON_AddNumberToObject(dims, t->dims[k], s->dims[k]) != NULL;
        if (!ok) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

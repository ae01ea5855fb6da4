/* task.c - kernel tasks: the model (corpus/tasks/<name>/task.json and
 * reference.cu) loaded and freed, dtypes, finding a task by name, and a
 * task's shapes as records keep them. Its size expressions are
 * task_expr.c's, what a candidate's source asks for and the refusal of
 * candidate source task_candidate.c's, reading kb-verify's results
 * task_result.c's. Plain C (cJSON): kb never links CUDA; kb-verify links
 * these four from libkb.a. */
#include "verify/verify.h"

#include <cjson/cJSON.h>
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
    char *roots[KB_DATA_DIRS];
    size_t nroots = kb_data_dirs(manifest, NULL, roots);
    char *tail = kb_path_join("tasks", arg);
    for (size_t i = 0; i < nroots; i++) {
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

/* evidence.c - evidence.json: one record per kb-verify verification, made
 * from kb-verify's own JSON result; what a record says of its kernel; the
 * negative evidence in words (kb-when-not). */
#include "skills/skill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EVIDENCE_MAX_BYTES (16u << 20)

void kb_skill_evidence_init(kb_skill_evidence *ev)
{
    memset(ev, 0, sizeof *ev);
}

void kb_skill_evidence_release(kb_skill_evidence *ev)
{
    free(ev->path);
    cJSON_Delete(ev->root);
    kb_skill_evidence_init(ev);
}

static cJSON *records(const kb_skill_evidence *ev)
{
    return ev->root ? cJSON_GetObjectItemCaseSensitive(ev->root, "records") : NULL;
}

size_t kb_skill_evidence_count(const kb_skill_evidence *ev)
{
    cJSON *r = records(ev);
    return r ? (size_t)cJSON_GetArraySize(r) : 0;
}

const cJSON *kb_skill_evidence_at(const kb_skill_evidence *ev, size_t i)
{
    cJSON *r = records(ev);
    return r && i < (size_t)cJSON_GetArraySize(r) ? cJSON_GetArrayItem(r, (int)i) : NULL;
}

const char *kb_skill_record_str(const cJSON *rec, const char *key)
{
    const cJSON *v = rec ? cJSON_GetObjectItemCaseSensitive(rec, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

kb_rc kb_skill_record_hash(const cJSON *rec, char hex[65])
{
    char *s = cJSON_PrintUnformatted(rec);
    if (!s)
        return KB_ERR_NOMEM;
    kb_sha256_hex(s, strlen(s), hex);
    free(s);
    return KB_OK;
}

const cJSON *kb_skill_evidence_find(const kb_skill_evidence *ev, const char *hex)
{
    for (size_t i = 0; i < kb_skill_evidence_count(ev); i++) {
        char h[65];
        const cJSON *r = kb_skill_evidence_at(ev, i);
        if (kb_skill_record_hash(r, h) == KB_OK && strcmp(h, hex) == 0)
            return r;
    }
    return NULL;
}

/* The fields every record has, each a string. */
static const char *const required[] = { "date", "task", "kernel_sha256", "verdict", NULL };

kb_rc kb_skill_evidence_load(const char *dir, const char *name,
                             kb_skill_evidence *ev, kb_skill_diags *diags,
                             kb_err *err)
{
    kb_skill_evidence_release(ev);
    kb_skill_diags local;
    kb_skill_diags_init(&local);
    kb_skill_diags *d = diags ? diags : &local;
    size_t n0 = d->n;
    kb_buf text;
    kb_buf_init(&text, 0);
    kb_rc rc = KB_OK;
    if (!(ev->path = kb_path_join(dir, "evidence.json")))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    struct stat st;   /* not opened to probe: a FIFO would block the open */
    if (rc == KB_OK && stat(ev->path, &st) == 0) {
        ev->exists = 1;
        rc = kb_read_file(ev->path, EVIDENCE_MAX_BYTES, &text, err);
        /* an empty file's text is "", not text.data (NULL): the error
         * pointer is measured from what was parsed */
        const char *src = text.data ? text.data : "";
        if (rc == KB_OK && !(ev->root = cJSON_Parse(src))) {
            const char *at = cJSON_GetErrorPtr();
            size_t off = at && at >= src && at <= src + text.len ? (size_t)(at - src) : 0;
            if (!text.len)
                rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                                       "empty: not JSON");
            else
                rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                                       "not JSON (near byte %zu)", off);
        }
    } else if (rc == KB_OK) {
        ev->root = cJSON_CreateObject();
        if (!ev->root || !cJSON_AddNumberToObject(ev->root, "kb_evidence", 1) ||
            !cJSON_AddStringToObject(ev->root, "skill", name ? name : "") ||
            !cJSON_AddArrayToObject(ev->root, "records"))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK && ev->root && !cJSON_IsArray(records(ev)))
        rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                               "no \"records\" list: evidence.json is "
                               "{\"kb_evidence\":1,\"skill\":NAME,\"records\":[...]}");
    for (size_t i = 0; rc == KB_OK && ev->root && i < kb_skill_evidence_count(ev); i++) {
        const cJSON *r = kb_skill_evidence_at(ev, i);
        for (size_t k = 0; required[k] && rc == KB_OK; k++)
            if (!cJSON_IsObject(r) || !*kb_skill_record_str(r, required[k]))
                rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                                       "record %zu has no \"%s\"", i + 1, required[k]);
    }
    kb_buf_release(&text);
    if (rc == KB_OK)
        rc = kb_skill_diags_fail(d, n0, err);
    kb_skill_diags_release(&local);
    if (rc != KB_OK) {
        cJSON_Delete(ev->root);
        ev->root = NULL;
    }
    return rc;
}

kb_rc kb_skill_evidence_save(const kb_skill_evidence *ev, kb_err *err)
{
    char *s = cJSON_Print(ev->root);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = s ? kb_buf_puts(&b, s) : KB_ERR_NOMEM;
    if (rc == KB_OK)
        rc = kb_buf_putc(&b, '\n');
    free(s);
    if (rc != KB_OK)
        rc = kb_err_set(err, rc, "out of memory writing '%s'", ev->path);
    else
        rc = kb_write_file_atomic(ev->path, b.data, b.len, err);
    kb_buf_release(&b);
    return rc;
}

kb_rc kb_skill_evidence_add(kb_skill_evidence *ev, cJSON *rec, kb_err *err)
{
    cJSON *r = records(ev);
    if (!r || !cJSON_AddItemToArray(r, rec)) {
        cJSON_Delete(rec);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    return KB_OK;
}

/* ------------------------------------------------------------------ records */

/* dst[key] = a copy of src[key] when src has it. 0 out of memory. */
static int copy_item(cJSON *dst, const cJSON *src, const char *key, const char *as)
{
    const cJSON *v = src ? cJSON_GetObjectItemCaseSensitive(src, key) : NULL;
    if (!v)
        return 1;
    cJSON *c = cJSON_Duplicate(v, 1);
    return c && cJSON_AddItemToObject(dst, as ? as : key, c);
}

/* The device: name, compute capability, SMs and arch from the profile
 * (else the result's own); the driver's version (nvidia-smi's, when the
 * profile gives it), the CUDA version the driver implements and NVRTC's
 * (kb-verify's): null when neither reports one. */
static cJSON *make_device(const cJSON *profile, const cJSON *result_dev)
{
    cJSON *d = cJSON_CreateObject();
    static const char *const keys[] = { "name", "compute_capability", "sms", "arch",
                                        "driver_version", "cuda_driver_version",
                                        "nvrtc_version", NULL };
    int ok = d != NULL;
    for (size_t i = 0; ok && keys[i]; i++) {
        const cJSON *src = profile && cJSON_GetObjectItemCaseSensitive(profile, keys[i])
                               ? profile : result_dev;
        if (src && cJSON_GetObjectItemCaseSensitive(src, keys[i]))
            ok = copy_item(d, src, keys[i], NULL);
        else if (strcmp(keys[i], "arch") == 0 && src) {
            /* "9.0" -> "sm_90" */
            const char *cc = kb_skill_record_str(src, "compute_capability");
            char arch[24] = "";
            const char *dot = strchr(cc, '.');
            if (dot && dot - cc < 4 && strlen(dot + 1) < 4)
                snprintf(arch, sizeof arch, "sm_%.*s%s", (int)(dot - cc), cc, dot + 1);
            ok = cJSON_AddStringToObject(d, "arch", arch) != NULL;
        } else {
            ok = cJSON_AddNullToObject(d, keys[i]) != NULL;
        }
    }
    if (!ok) {
        cJSON_Delete(d);
        return NULL;
    }
    return d;
}

/* The shapes checked: the task's list when given, else the names the
 * checks ran on, in order. */
static cJSON *make_shapes(const cJSON *task_shapes, const cJSON *checks)
{
    if (task_shapes)
        return cJSON_Duplicate(task_shapes, 1);
    cJSON *a = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        const char *sh = kb_skill_record_str(c, "shape");
        int seen = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, a)
            seen |= strcmp(kb_skill_record_str(x, "name"), sh) == 0;
        if (seen || !*sh)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "name", sh) || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* A generated kernel's record: the shape its prompt named ("shown") and
 * the shapes it passed without the model having seen them ("held_back"):
 * acceptance needs those too. 1, or 0 out of memory. */
static int add_held_back(cJSON *rec, const char *shown)
{
    if (!shown)
        return 1;
    cJSON *held = cJSON_CreateArray();
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(rec, "shapes")) {
        const char *n = kb_skill_record_str(x, "name");
        if (*n && strcmp(n, shown) != 0 && !cJSON_AddItemToArray(held, cJSON_CreateString(n)))
            held = NULL;
    }
    return held && cJSON_AddStringToObject(rec, "shown_shape", shown) &&
           cJSON_AddItemToObject(rec, "held_back", held);
}

/* The seeds of the checks (distinct) and how many checks ran and passed. */
static int add_checks(cJSON *rec, const cJSON *result)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(result, "checks");
    cJSON *seeds = cJSON_AddArrayToObject(rec, "seeds");
    int run = 0, passed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        run++;
        passed += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ok"));
        const cJSON *sd = cJSON_GetObjectItemCaseSensitive(c, "seed");
        int seen = !cJSON_IsNumber(sd);
        const cJSON *x;
        cJSON_ArrayForEach(x, seeds)
            seen |= cJSON_IsNumber(sd) && x->valuedouble == sd->valuedouble;
        if (!seen && !cJSON_AddItemToArray(seeds, cJSON_CreateNumber(sd->valuedouble)))
            return 0;
    }
    cJSON *o = cJSON_AddObjectToObject(rec, "checks");
    return seeds && o && cJSON_AddNumberToObject(o, "run", run) &&
           cJSON_AddNumberToObject(o, "passed", passed);
}

static int add_stats(cJSON *dst, const char *as, const cJSON *src)
{
    cJSON *o = cJSON_AddObjectToObject(dst, as);
    return o && copy_item(o, src, "median", NULL) && copy_item(o, src, "ci95_lo", NULL) &&
           copy_item(o, src, "ci95_hi", NULL);
}

/* Per timed shape: the medians with their 95 % intervals, the speedup. */
static int add_timings(cJSON *rec, const cJSON *result)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(result, "timings");
    cJSON *out = cJSON_AddArrayToObject(rec, "timings");
    const char *baseline = "";
    const cJSON *t;
    int ok = out != NULL;
    cJSON_ArrayForEach(t, ts) {
        cJSON *o = cJSON_CreateObject();
        ok = ok && o && cJSON_AddItemToArray(out, o) && copy_item(o, t, "shape", NULL) &&
             copy_item(o, t, "runs", NULL) &&
             add_stats(o, "candidate_ms", cJSON_GetObjectItemCaseSensitive(t, "candidate_ms")) &&
             add_stats(o, "baseline_ms", cJSON_GetObjectItemCaseSensitive(t, "baseline_ms")) &&
             copy_item(o, t, "speedup", NULL) && copy_item(o, t, "floor_ms", NULL);
        const cJSON *ratio = cJSON_GetObjectItemCaseSensitive(t, "ratio");
        if (ok && ratio)
            ok = add_stats(o, "ratio", ratio);
        if (!o)
            ok = 0;
        if (*kb_skill_record_str(t, "baseline"))
            baseline = kb_skill_record_str(t, "baseline");
    }
    /* the speedup's interval, and how far the baseline moved across
     * processes (kb-verify --spread): what re-verification compares */
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(result, "baseline_spread");
    return ok && cJSON_AddStringToObject(rec, "baseline", baseline) &&
           copy_item(rec, result, "speedup_geomean", "speedup") &&
           copy_item(rec, result, "speedup_ci95", NULL) &&
           copy_item(rec, sp, "spread", "baseline_spread") &&
           copy_item(rec, sp, "processes", "baseline_processes") &&
           copy_item(rec, result, "review", NULL);
}

/* The compile: arch and each kernel's registers, shared and local memory. */
static int add_compile(cJSON *rec, const cJSON *result)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(result, "compile");
    if (!c)
        return 1;
    cJSON *o = cJSON_AddObjectToObject(rec, "compile");
    cJSON *ks = o && copy_item(o, c, "arch", NULL) ? cJSON_AddArrayToObject(o, "kernels")
                                                   : NULL;
    int ok = ks != NULL;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(c, "kernels")) {
        cJSON *x = cJSON_CreateObject();
        ok = ok && x && cJSON_AddItemToArray(ks, x) && copy_item(x, k, "name", NULL) &&
             copy_item(x, k, "registers", NULL) &&
             copy_item(x, k, "shared_static_bytes", NULL) &&
             copy_item(x, k, "local_bytes", NULL);
        if (!x)
            ok = 0;
    }
    return ok;
}

kb_rc kb_skill_record_make(const kb_skill_record_in *in, cJSON **out, kb_err *err)
{
    *out = NULL;
    const cJSON *r = in->result;
    if (!cJSON_IsObject(r) || !*kb_skill_record_str(r, "verdict") ||
        !*kb_skill_record_str(r, "task"))
        return kb_err_set(err, KB_ERR_PARSE, "not a kb-verify result: no \"verdict\" "
                          "and \"task\"");
    cJSON *rec = cJSON_CreateObject();
    cJSON *dev = make_device(in->device, cJSON_GetObjectItemCaseSensitive(r, "device"));
    cJSON *shapes = make_shapes(in->shapes, cJSON_GetObjectItemCaseSensitive(r, "checks"));
    int ok = rec && dev && shapes &&
             cJSON_AddStringToObject(rec, "date", in->date) &&
             cJSON_AddStringToObject(rec, "how", in->how) &&
             copy_item(rec, r, "task", NULL) &&
             cJSON_AddStringToObject(rec, "kernel_sha256", in->kernel_sha256);
    if (ok && (ok = cJSON_AddItemToObject(rec, "device", dev)))
        dev = NULL;
    if (ok && (ok = cJSON_AddItemToObject(rec, "shapes", shapes)))
        shapes = NULL;
    cJSON_Delete(dev);
    cJSON_Delete(shapes);
    ok = ok && add_held_back(rec, in->shown_shape);
    ok = ok && copy_item(rec, r, "seed", NULL) && add_checks(rec, r) &&
         copy_item(rec, r, "verdict", NULL) && copy_item(rec, r, "reason", NULL) &&
         add_timings(rec, r) && add_compile(rec, r) &&
         copy_item(rec, r, "wall_ms", "kb_verify_wall_ms");
    if (!ok) {
        cJSON_Delete(rec);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory making an evidence record");
    }
    *out = rec;
    return KB_OK;
}

/* ------------------------------------------------------------------ outcomes */

int kb_skill_record_review(cJSON *rec, double best)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(rec, "speedup");
    if (!(best > 0) || !cJSON_IsNumber(sp) || !(sp->valuedouble > KB_SKILL_REVIEW_OVER * best) ||
        strcmp(kb_skill_record_str(rec, "verdict"), "faster") != 0)
        return 0;
    char why[256];
    snprintf(why, sizeof why, "%.2fx is %.1f times the best verified skill's %.2fx for %s: "
             "review the kernel before trusting it", sp->valuedouble, sp->valuedouble / best,
             best, kb_skill_record_str(rec, "task"));
    cJSON_DeleteItemFromObjectCaseSensitive(rec, "review");
    return cJSON_AddStringToObject(rec, "review", why) ? 1 : -1;
}

int kb_skill_record_interval(const cJSON *rec, double *lo, double *hi)
{
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(rec, "speedup_ci95");
    const cJSON *a = cJSON_GetArrayItem(ci, 0), *b = cJSON_GetArrayItem(ci, 1);
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble > 0) ||
        !(b->valuedouble >= a->valuedouble))
        return 0;
    double s = num(rec, "baseline_spread", 0);
    if (!(s >= 0) || !isfinite(s))
        s = 0;
    *lo = a->valuedouble / (1.0 + s);
    *hi = b->valuedouble * (1.0 + s);
    return 1;
}

double kb_skill_record_bar(const cJSON *rec)
{
    const char *baseline = kb_skill_record_str(rec, "baseline");
    return *baseline && strcmp(baseline, "reference") != 0 ? KB_SKILL_PARITY
                                                           : KB_SKILL_FASTER_MARGIN;
}

kb_skill_outcome kb_skill_record_outcome(const cJSON *rec)
{
    const char *v = kb_skill_record_str(rec, "verdict");
    const char *baseline = kb_skill_record_str(rec, "baseline");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(rec, "speedup");
    /* a timed record whose interval held the bar: what applying it decided
     * (kb_skill_apply_record), the point verdict notwithstanding */
    const char *within = kb_skill_record_str(rec, "within_interval");
    if ((!strcmp(v, "faster") || !strcmp(v, "correct")) && cJSON_IsNumber(sp) && *within)
        return !strcmp(within, "kept") ? KB_SKILL_BACKS : KB_SKILL_SLOWER;
    if (strcmp(v, "faster") == 0)
        return KB_SKILL_BACKS;
    if (strcmp(v, "correct") == 0) {
        if (!cJSON_IsNumber(sp))
            return KB_SKILL_NO_VERDICT;     /* untimed: says nothing of speed */
        /* against a vendor library, parity is the bar */
        if (*baseline && strcmp(baseline, "reference") != 0 &&
            sp->valuedouble >= KB_SKILL_PARITY)
            return KB_SKILL_BACKS;
        return KB_SKILL_SLOWER;
    }
    if (strcmp(v, "suspicious") == 0)
        return KB_SKILL_SUSPICIOUS;
    if (strcmp(v, "incorrect") == 0 || strcmp(v, "crash") == 0 ||
        strcmp(v, "timeout") == 0 || strcmp(v, "compile_error") == 0 ||
        strcmp(v, "refused") == 0)
        return KB_SKILL_FAILS;
    return KB_SKILL_NO_VERDICT;
}

/* " (NVIDIA H200, sm_90)" for the record's device. */
static kb_rc where(kb_buf *b, const cJSON *rec)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(rec, "device");
    const char *name = kb_skill_record_str(d, "name");
    const char *arch = kb_skill_record_str(d, "arch");
    return kb_buf_printf(b, " (%s%s%s)", *name ? name : "unknown device",
                         *arch ? ", " : "", arch);
}

/* Appends phrase (NUL-terminated in p) to out unless out holds it already. */
static kb_rc add_phrase(kb_buf *out, const kb_buf *p)
{
    if (!p->len || (out->data && strstr(out->data, p->data)))
        return KB_OK;
    kb_rc rc = out->len ? kb_buf_puts(out, "; ") : KB_OK;
    return rc == KB_OK ? kb_buf_append(out, p->data, p->len) : rc;
}

/* The phrases of one record. */
static kb_rc record_phrases(const cJSON *rec, kb_buf *out)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    kb_rc rc = KB_OK;
    const char *task = kb_skill_record_str(rec, "task");
    kb_skill_outcome o = kb_skill_record_outcome(rec);
    if (o == KB_SKILL_FAILS) {
        rc = kb_buf_printf(&p, "%s on %s", kb_skill_record_str(rec, "verdict"), task);
        if (rc == KB_OK)
            rc = where(&p, rec);
        const char *why = kb_skill_record_str(rec, "reason");
        if (rc == KB_OK && *why)
            rc = kb_buf_printf(&p, ": %s", why);
        if (rc == KB_OK)
            rc = add_phrase(out, &p);
    }
    /* every timed shape where it did not beat its baseline, and every one
     * of a result that was no faster */
    const char *baseline = kb_skill_record_str(rec, "baseline");
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(rec, "timings")) {
        double sp = num(t, "speedup", NAN);
        if (rc != KB_OK || isnan(sp) || (!(sp < 1.0) && o != KB_SKILL_SLOWER) ||
            o == KB_SKILL_FAILS || o == KB_SKILL_SUSPICIOUS)
            continue;
        kb_buf_reset(&p);
        rc = kb_buf_printf(&p, "%.2fx %s on %s '%s'", sp, *baseline ? baseline : "baseline",
                           task, kb_skill_record_str(t, "shape"));
        if (rc == KB_OK)
            rc = where(&p, rec);
        if (rc == KB_OK)
            rc = add_phrase(out, &p);
    }
    kb_buf_release(&p);
    return rc;
}

kb_rc kb_skill_when_not(const kb_skill_evidence *ev, const char *kernel_sha256,
                        kb_buf *out)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < kb_skill_evidence_count(ev) && rc == KB_OK; i++) {
        const cJSON *rec = kb_skill_evidence_at(ev, i);
        if (!kernel_sha256 ||
            strcmp(kb_skill_record_str(rec, "kernel_sha256"), kernel_sha256) == 0)
            rc = record_phrases(rec, out);
    }
    return rc;
}

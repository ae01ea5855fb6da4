/* lifecycle.c - draft -> verified -> approved -> retired, each step from
 * evidence: kb-verify's records (verify), a reviewer (approve), a reason
 * (retire); and the check that what a skill says of itself agrees with
 * its evidence. */
#include "skills/skill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[KB_SKILL_NSTATUS] = {
    "draft", "verified", "approved", "retired"
};

const char *kb_skill_status_name(kb_skill_status st)
{
    return (unsigned)st < KB_SKILL_NSTATUS ? status_names[st] : "?";
}

int kb_skill_status_parse(const char *name, kb_skill_status *out)
{
    for (int i = 0; name && i < KB_SKILL_NSTATUS; i++)
        if (strcmp(name, status_names[i]) == 0) {
            *out = (kb_skill_status)i;
            return 0;
        }
    return -1;
}

kb_skill_status kb_skill_status_of(const kb_skill *s)
{
    kb_skill_status st = KB_SKILL_DRAFT;
    kb_skill_status_parse(kb_skill_get(s, "kb-status"), &st);
    return st;
}

static const char *name_of(const kb_skill *s)
{
    return s->fields[KB_SKILL_NAME] ? s->fields[KB_SKILL_NAME] : s->dir;
}

/* The record's speedup as kb-speedup writes it ("1.61"), into buf. */
static int speedup_text(const cJSON *rec, char *buf, size_t n)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(rec, "speedup");
    if (!cJSON_IsNumber(sp))
        return 0;
    snprintf(buf, n, "%.2f", sp->valuedouble);
    return 1;
}

/* kb-when-not from the evidence of the current kernel; a hand-written one
 * stays while the evidence holds nothing against the kernel. */
static kb_rc update_when_not(kb_skill *s, const kb_skill_evidence *ev,
                             const char *kernel_sha256)
{
    kb_buf w;
    kb_buf_init(&w, 0);
    kb_rc rc = kb_skill_when_not(ev, kernel_sha256, &w);
    if (rc == KB_OK && w.len)
        rc = kb_skill_set(s, "kb-when-not", w.data);
    kb_buf_release(&w);
    return rc;
}

/* The checks before a record may change anything: the skill is not
 * retired, the record is of its task and kernel and has a verdict that
 * says something of the kernel. */
static kb_rc admit(const kb_skill *s, const cJSON *rec, const char *kernel_sha256,
                   kb_err *err)
{
    const char *name = name_of(s);
    const char *task = kb_skill_get(s, "kb-task");
    const char *rtask = kb_skill_record_str(rec, "task");
    const char *rhash = kb_skill_record_str(rec, "kernel_sha256");
    const char *reason = kb_skill_record_str(rec, "reason");
    if (kb_skill_status_of(s) == KB_SKILL_RETIRED)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' is retired: a retired skill is not "
                          "verified again (make its kernel a new skill with 'kb skill "
                          "new --from')", name);
    if (!task || strcmp(task, rtask) != 0)
        return kb_err_set(err, KB_ERR_MISMATCH, "the result is for task '%s', not '%s''s "
                          "kb-task '%s'", rtask, name, task ? task : "");
    if (strcmp(rhash, kernel_sha256) != 0)
        return kb_err_set(err, KB_ERR_MISMATCH, "the result is for another kernel "
                          "(sha256 %.12s...), not '%s''s kernel.cu (%.12s...)", rhash,
                          name, kernel_sha256);
    switch (kb_skill_record_outcome(rec)) {
    case KB_SKILL_SUSPICIOUS:
        return kb_err_set(err, KB_ERR_MISMATCH, "kb-verify found the result for '%s' "
                          "suspicious (%s): a suspicious result never verifies a skill; "
                          "nothing changed", name, reason);
    case KB_SKILL_NO_VERDICT:
        return kb_err_set(err, KB_ERR_GPU, "cannot verify '%s': %s (verdict '%s'); "
                          "nothing changed", name, *reason ? reason : "no reason given",
                          kb_skill_record_str(rec, "verdict"));
    default:
        return KB_OK;
    }
}

/* The record backs the kernel: verified, or still approved when the
 * approval was for this kernel. */
static kb_rc apply_backing(kb_skill *s, const kb_skill_evidence *ev, const cJSON *rec,
                           const char *hash, kb_buf *what)
{
    kb_skill_status st = kb_skill_status_of(s);
    const cJSON *approved = NULL;
    if (st == KB_SKILL_APPROVED) {
        const char *e = kb_skill_get(s, "kb-evidence");
        approved = e ? kb_skill_evidence_find(ev, e) : NULL;
        if (approved && strcmp(kb_skill_record_str(approved, "kernel_sha256"),
                               kb_skill_record_str(rec, "kernel_sha256")) != 0)
            approved = NULL;
    }
    kb_skill_status to = approved ? KB_SKILL_APPROVED : KB_SKILL_VERIFIED;
    char sp[32];
    int timed = speedup_text(rec, sp, sizeof sp);
    kb_rc rc = kb_skill_set(s, "kb-status", kb_skill_status_name(to));
    if (rc == KB_OK)
        rc = kb_skill_set(s, "kb-speedup", timed ? sp : NULL);
    if (rc == KB_OK)
        rc = kb_skill_set(s, "kb-evidence", hash);
    if (rc == KB_OK)
        rc = kb_skill_set(s, "kb-retired", NULL);
    if (rc == KB_OK && to == KB_SKILL_VERIFIED)
        rc = kb_skill_set(s, "kb-reviewer", NULL);   /* an approval of another kernel */
    if (rc == KB_OK)
        rc = kb_buf_printf(what, "%s -> %s: %s, %sx %s", kb_skill_status_name(st),
                           kb_skill_status_name(to), kb_skill_record_str(rec, "verdict"),
                           timed ? sp : "?", kb_skill_record_str(rec, "baseline"));
    return rc;
}

/* The record fails the kernel or finds it slower: a verified or approved
 * skill is retired with the reason; a draft stays one. */
static kb_rc apply_failing(kb_skill *s, const cJSON *rec, kb_buf *what)
{
    kb_skill_status st = kb_skill_status_of(s);
    const char *verdict = kb_skill_record_str(rec, "verdict");
    char sp[32];
    int timed = speedup_text(rec, sp, sizeof sp);
    kb_buf why;
    kb_buf_init(&why, 0);
    kb_rc rc = kb_buf_printf(&why, "verification on %s: %s", kb_skill_record_str(
                                 cJSON_GetObjectItemCaseSensitive(rec, "device"), "name"),
                             verdict);
    if (rc == KB_OK && timed)
        rc = kb_buf_printf(&why, ", %sx %s", sp, kb_skill_record_str(rec, "baseline"));
    if (rc == KB_OK && *kb_skill_record_str(rec, "reason"))
        rc = kb_buf_printf(&why, " (%s)", kb_skill_record_str(rec, "reason"));
    kb_skill_status to = st == KB_SKILL_DRAFT ? KB_SKILL_DRAFT : KB_SKILL_RETIRED;
    if (rc == KB_OK && to == KB_SKILL_RETIRED) {
        rc = kb_skill_set(s, "kb-status", "retired");
        if (rc == KB_OK)
            rc = kb_skill_set(s, "kb-retired", why.data);
    }
    if (rc == KB_OK)
        rc = kb_buf_printf(what, "%s -> %s: %s", kb_skill_status_name(st),
                           kb_skill_status_name(to), why.data);
    kb_buf_release(&why);
    return rc;
}

/* A timed record whose speedup interval holds the bar decides nothing: a
 * verified or approved skill is kept ("within_interval": "kept"), a draft
 * is not promoted ("not_promoted"). Returns 1 when it marked rec. */
static int mark_interval(const kb_skill *s, cJSON *rec, double *lo, double *hi)
{
    const char *v = kb_skill_record_str(rec, "verdict");
    double bar = kb_skill_record_bar(rec);
    if ((strcmp(v, "faster") != 0 && strcmp(v, "correct") != 0) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rec, "speedup")) ||
        !kb_skill_record_interval(rec, lo, hi) || !(*lo <= bar && bar <= *hi))
        return 0;
    kb_skill_status st = kb_skill_status_of(s);
    int kept = st == KB_SKILL_VERIFIED || st == KB_SKILL_APPROVED;
    cJSON_DeleteItemFromObjectCaseSensitive(rec, "within_interval");
    return cJSON_AddStringToObject(rec, "within_interval",
                                   kept ? "kept" : "not_promoted") != NULL;
}

kb_rc kb_skill_apply_record(kb_skill *s, kb_skill_evidence *ev, cJSON *rec,
                            const char *kernel_sha256, kb_buf *what, kb_err *err)
{
    kb_rc rc = admit(s, rec, kernel_sha256, err);
    double lo = 0, hi = 0;
    int within = rc == KB_OK && mark_interval(s, rec, &lo, &hi);
    char hash[65];
    if (rc == KB_OK && kb_skill_record_hash(rec, hash) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc != KB_OK) {
        cJSON_Delete(rec);
        return rc;
    }
    kb_skill_outcome o = kb_skill_record_outcome(rec);
    if ((rc = kb_skill_evidence_add(ev, rec, err)) != KB_OK)
        return rc;
    rc = o == KB_SKILL_BACKS ? apply_backing(s, ev, rec, hash, what)
                             : apply_failing(s, rec, what);
    if (rc == KB_OK && within)
        rc = kb_buf_printf(what, " (the speedup's interval [%.3f, %.3f] holds the "
                           "bar %.2f: a difference inside it %s)", lo, hi,
                           kb_skill_record_bar(rec), o == KB_SKILL_BACKS
                           ? "retires nothing" : "promotes nothing");
    if (rc == KB_OK)
        rc = update_when_not(s, ev, kernel_sha256);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    return KB_OK;
}

/* The latest record, if it backs the current kernel; else NULL with the
 * reason in why. */
static const cJSON *latest_backing(const kb_skill_evidence *ev, const char *kernel_sha256,
                                   const char **why)
{
    size_t n = kb_skill_evidence_count(ev);
    const cJSON *last = n ? kb_skill_evidence_at(ev, n - 1) : NULL;
    if (!last) {
        *why = "evidence.json holds no verification";
        return NULL;
    }
    if (!kernel_sha256 || strcmp(kb_skill_record_str(last, "kernel_sha256"), kernel_sha256)) {
        *why = "the latest evidence is for another kernel.cu";
        return NULL;
    }
    if (kb_skill_record_outcome(last) != KB_SKILL_BACKS) {
        *why = "the latest evidence does not back the kernel";
        return NULL;
    }
    return last;
}

kb_rc kb_skill_approve(kb_skill *s, const kb_skill_evidence *ev,
                       const char *kernel_sha256, const char *reviewer, kb_err *err)
{
    const char *name = name_of(s);
    kb_skill_status st = kb_skill_status_of(s);
    if (!reviewer || !*reviewer)
        return kb_err_set(err, KB_ERR_USAGE, "approving '%s' needs a reviewer "
                          "(--reviewer WHO)", name);
    if (st == KB_SKILL_APPROVED)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' is already approved (by %s)", name,
                          kb_skill_get(s, "kb-reviewer") ? kb_skill_get(s, "kb-reviewer")
                                                         : "someone");
    if (st != KB_SKILL_VERIFIED)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' is %s: only a verified skill is "
                          "approved ('kb skill verify %s' first)", name,
                          kb_skill_status_name(st), name);
    const char *why = NULL;
    if (!latest_backing(ev, kernel_sha256, &why))
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' cannot be approved: %s ('kb skill "
                          "verify %s' again)", name, why, name);
    kb_rc rc = kb_skill_set(s, "kb-status", "approved");
    if (rc == KB_OK)
        rc = kb_skill_set(s, "kb-reviewer", reviewer);
    return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory");
}

kb_rc kb_skill_retire(kb_skill *s, const char *reason, kb_err *err)
{
    const char *name = name_of(s);
    if (!reason || !*reason)
        return kb_err_set(err, KB_ERR_USAGE, "retiring '%s' needs a reason (--reason "
                          "TEXT)", name);
    if (kb_skill_status_of(s) == KB_SKILL_RETIRED)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' is already retired (%s)", name,
                          kb_skill_get(s, "kb-retired") ? kb_skill_get(s, "kb-retired")
                                                        : "no reason recorded");
    kb_rc rc = kb_skill_set(s, "kb-status", "retired");
    if (rc == KB_OK)
        rc = kb_skill_set(s, "kb-retired", reason);
    return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory");
}

/* ------------------------------------------------------------------ checks */

static int meta_line(const kb_skill *s, const char *key)
{
    for (size_t i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta[i].key, key) == 0 && s->meta[i].line)
            return s->meta[i].line;
    return s->lines[KB_SKILL_METADATA] ? s->lines[KB_SKILL_METADATA] : 1;
}

/* Every record: of the skill's task, never suspicious. */
static kb_rc check_records(const kb_skill *s, const kb_skill_evidence *ev,
                           kb_skill_diags *d)
{
    const char *task = kb_skill_get(s, "kb-task");
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < kb_skill_evidence_count(ev) && rc == KB_OK; i++) {
        const cJSON *r = kb_skill_evidence_at(ev, i);
        if (task && strcmp(kb_skill_record_str(r, "task"), task) != 0)
            rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                                   "record %zu is for task '%s', not kb-task '%s'", i + 1,
                                   kb_skill_record_str(r, "task"), task);
        else if (kb_skill_record_outcome(r) == KB_SKILL_SUSPICIOUS)
            rc = kb_skill_diag_add(d, ev->path, 0, KB_SKILL_ERROR, "evidence",
                                   "record %zu is a suspicious result: it never backs a "
                                   "skill (kb skill verify does not record one)", i + 1);
    }
    return rc;
}

/* A verified or approved skill: its latest record backs its kernel, and
 * kb-evidence and kb-speedup say so. */
static kb_rc check_backed(const kb_skill *s, const kb_skill_evidence *ev,
                          const char *kernel_sha256, kb_skill_diags *d)
{
    const char *st = kb_skill_get(s, "kb-status");
    int line = meta_line(s, "kb-status");
    const char *why = NULL;
    const cJSON *last = latest_backing(ev, kernel_sha256, &why);
    if (!last)
        return kb_skill_diag_add(d, s->path, line, KB_SKILL_ERROR, "status",
                                 "kb-status '%s', but %s: run 'kb skill verify %s'", st,
                                 why, s->fields[KB_SKILL_NAME]);
    char hash[65], sp[32];
    if (kb_skill_record_hash(last, hash) != KB_OK)
        return KB_ERR_NOMEM;
    const char *e = kb_skill_get(s, "kb-evidence");
    kb_rc rc = KB_OK;
    if (!e || strcmp(e, hash) != 0)
        rc = kb_skill_diag_add(d, s->path, meta_line(s, "kb-evidence"), KB_SKILL_ERROR,
                               "evidence", "kb-evidence %s the latest record (%s)",
                               e ? "does not name" : "is missing: it names", hash);
    const char *have = kb_skill_get(s, "kb-speedup");
    if (rc == KB_OK && speedup_text(last, sp, sizeof sp) &&
        (!have || fabs(strtod(have, NULL) - strtod(sp, NULL)) > 0.006))
        rc = kb_skill_diag_add(d, s->path, meta_line(s, "kb-speedup"), KB_SKILL_ERROR,
                               "speedup", "kb-speedup %s%s%s, but the latest evidence "
                               "says %s", have ? "'" : "is missing", have ? have : "",
                               have ? "'" : "", sp);
    return rc;
}

kb_rc kb_skill_check_evidence(const kb_skill *s, const kb_skill_evidence *ev,
                              const char *kernel_sha256, kb_skill_diags *d)
{
    kb_skill_status st = kb_skill_status_of(s);
    kb_rc rc = KB_OK;
    if (!kernel_sha256)
        rc = kb_skill_diag_add(d, s->path, 0, st == KB_SKILL_DRAFT ? KB_SKILL_WARNING
                                                                   : KB_SKILL_ERROR,
                               "kernel", "no kernel.cu beside SKILL.md");
    if (rc == KB_OK)
        rc = check_records(s, ev, d);
    if (rc == KB_OK && (st == KB_SKILL_VERIFIED || st == KB_SKILL_APPROVED))
        rc = check_backed(s, ev, kernel_sha256, d);
    if (rc == KB_OK && st == KB_SKILL_APPROVED && !kb_skill_get(s, "kb-reviewer"))
        rc = kb_skill_diag_add(d, s->path, meta_line(s, "kb-status"), KB_SKILL_ERROR,
                               "status", "kb-status 'approved' names no reviewer "
                               "(kb-reviewer): 'kb skill approve NAME --reviewer WHO'");
    if (rc == KB_OK && st == KB_SKILL_RETIRED && !kb_skill_get(s, "kb-retired"))
        rc = kb_skill_diag_add(d, s->path, meta_line(s, "kb-status"), KB_SKILL_WARNING,
                               "status", "a retired skill without its reason "
                               "(kb-retired)");
    if (rc != KB_OK || kb_skill_get(s, "kb-when-not"))
        return rc;
    kb_buf w;
    kb_buf_init(&w, 0);
    rc = kb_skill_when_not(ev, kernel_sha256, &w);
    if (rc == KB_OK && w.len)
        rc = kb_skill_diag_add(d, s->path, meta_line(s, "kb-status"), KB_SKILL_WARNING,
                               "when-not", "the evidence holds negative results that "
                               "kb-when-not does not summarise: %s", w.data);
    kb_buf_release(&w);
    return rc;
}

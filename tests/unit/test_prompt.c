/* test_prompt.c - the generator's prompt (generator/prompt.c): its sections
 * in their order, the target shape alone, the token budget, passages cut
 * whole, the same prompt for the same KB and inputs, citations carried,
 * the skills' filters, the repair context, and the task object. The KB is
 * real: the CUDA Best Practices Guide from the mirror and the team's
 * skill library (corpus/skills), lexical (no vectors). */
#include "test_util.h"
#include "generator/gen.h"
#include "verify/verify.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>

static char *kb_dir;
static char *tasks_dir;
static kb_store *store;
static kb_config config;
static cJSON *h200;   /* tests/fixtures/skills/h200-device.json */
static int have_mirror;

static int setup(void **state)
{
    (void)state;
    kb_err err;
    kb_err_clear(&err);
    kb_log_set_level(KB_LOG_QUIET);
    kb_dir = tu_tmpdir("prompt");
    tasks_dir = kb_path_join(tu_top(), "corpus/tasks");
    store = tu_open_kb(kb_dir);
    if (kb_config_load(&config, &err) != KB_OK)
        return -1;
    char *manifest = kb_path_join(tu_top(), "corpus/sources.json");
    kb_ingest_stats stats;
    have_mirror = tu_mirror() != NULL;
    if (have_mirror) {
        kb_ingest_opts o = { .config = &config, .manifest_path = manifest,
                             .mirror_dir = tu_mirror() };
        char *ids[] = { "cuda-best-practices" };
        if (kb_ingest_run(store, &o, ids, 1, &stats, &err) != KB_OK)
            fprintf(stderr, "ingest: %s\n", err.msg);
    }
    /* the skill library: the manifest's source 'skills' (read beside it) */
    kb_ingest_opts o = { .config = &config, .manifest_path = manifest };
    char *targets[] = { "skills" };
    kb_rc rc = kb_ingest_run(store, &o, targets, 1, &stats, &err);
    if (rc != KB_OK)
        fprintf(stderr, "ingest: %s\n", err.msg);
    free(manifest);
    char *dev = tu_fixture("skills/h200-device.json");
    kb_buf b;
    kb_buf_init(&b, 0);
    tu_read_file(dev, 0, &b);
    h200 = cJSON_Parse(b.data);
    kb_buf_release(&b);
    free(dev);
    return rc == KB_OK && h200 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kb_store_close(store);
    kb_config_release(&config);
    cJSON_Delete(h200);
    tu_rmtree(kb_dir);
    free(kb_dir);
    free(tasks_dir);
    return 0;
}

/* The prompt for task with these inputs; the test fails on an error. */
static void build(const char *task, kb_store *s, const cJSON *device, long budget,
                  const char *feedback, const char *parent, kb_gen_prompt *p)
{
    kb_gen_prompt_opts o = { .store = s, .config = &config, .tasks_dir = tasks_dir,
                             .task = task, .device = device, .budget_tokens = budget,
                             .feedback = feedback, .parent = parent };
    kb_err err;
    kb_err_clear(&err);
    if (kb_gen_prompt_build(&o, p, &err) != KB_OK)
        fail_msg("prompt for %s: %s", task, err.msg);
}

/* Where s is in text: the offset, or -1. */
static long at(const char *text, const char *s)
{
    const char *p = strstr(text, s);
    return p ? (long)(p - text) : -1;
}

static const char *const tasks[] = {
    "gelu", "softmax", "layernorm", "reduce_sum", "transpose", "gemm_f32",
    "gemm_bf16", "histogram", "scan", "stencil3x3",
};
#define NTASKS (sizeof tasks / sizeof tasks[0])

/* ------------------------------------------------------------ sections */

static void test_sections_in_order(void **state)
{
    (void)state;
    kb_gen_prompt p;
    build("softmax", store, h200, 0, NULL, NULL, &p);
    const char *u = p.user;
    static const char *const order[] = {
        "## Hardware profile\n", "## Task\n", "## Reference kernel\n",
        "## Retrieved context\n", "## Output contract\n",
    };
    long last = -1;
    for (size_t i = 0; i < 5; i++) {
        long a = at(u, order[i]);
        if (a <= last)
            fail_msg("section '%s' missing or out of order", order[i]);
        last = a;
    }
    assert_int_equal(at(u, "## Last attempts"), -1);   /* not given: not there */
    /* no parent given: the kernel of softmax's own skill is refined */
    assert_non_null(p.seed_skill);
    assert_true(at(u, "## Kernel to refine") > at(u, "## Retrieved context"));
    /* the hardware profile is the device's */
    assert_true(at(u, "NVIDIA H200: compute capability 9.0 (sm_90), 132 SMs") > 0);
    assert_true(at(u, "60 MiB") > 0);                        /* L2 */
    assert_true(at(u, "227 KiB dynamic with opt-in") > 0);   /* shared memory */
    assert_true(at(u, "4.81 TB/s peak") > 0);
    /* the task: signature, roles, tolerance, launch, refusals; the
     * reference in its own section; the contract last */
    assert_true(at(u, "extern \"C\" __global__ void softmax(const float *x, float *y, "
                      "int m, int n)") > 0);
    assert_true(at(u, "`x` (const float *): input") > 0);
    assert_true(at(u, "`y` (float *): output") > 0);
    assert_true(at(u, "Tolerance (f32): |out - ref| <= atol + rtol*|ref|") > 0);
    assert_true(at(u, "// kb-launch: kernel=NAME grid=E[,E[,E]] block=E[,E[,E]] "
                      "shared=E") > 0);
    assert_true(at(u, "Refused (verdict `refused`): `%globaltimer`") > 0);
    /* what kb-verify guarantees and judges: the buffers' alignment, the
     * baseline's time on this device (softmax's skills' evidence on the
     * H200), the speedup that is suspicious */
    assert_true(at(u, "Alignment: every buffer starts on a 256-byte boundary") > 0);
    assert_true(at(u, "The baseline takes ") > at(u, "Baseline: the reference kernel"));
    assert_true(at(u, " ms at the target shape on this device (measured by kb-verify") > 0);
    assert_true(at(u, "A speedup over the baseline above 50x on a shape is `suspicious`") > 0);
    assert_true(at(u, "exactly one fenced code block") > at(u, "## Output contract"));
    assert_true(at(p.system, "CUDA kernel engineer") >= 0);
    /* size and hash as documented */
    size_t ls = strlen(p.system), lu = strlen(p.user);
    assert_int_equal(p.tokens, (long)((ls + lu + 2) / 3));
    assert_int_equal(strlen(p.hash), 64);
    kb_gen_prompt_release(&p);

    /* feedback and a parent: their sections between the context and the
     * contract */
    build("softmax", store, h200, 0, "softmax.cu: incorrect: row 3 differs",
          "extern \"C\" __global__ void softmax(const float *x, float *y, int m, int n) {}",
          &p);
    u = p.user;
    long c = at(u, "## Retrieved context"), f = at(u, "## Last attempts"),
         k = at(u, "## Kernel to refine"), o = at(u, "## Output contract");
    assert_true(c > 0 && f > c && k > f && o > k);
    assert_true(at(u, "row 3 differs") > f);
    kb_gen_prompt_release(&p);
}

static void test_unknown_device(void **state)
{
    (void)state;
    kb_gen_prompt p;
    build("gelu", store, NULL, 0, NULL, NULL, &p);
    assert_non_null(strcasestr(p.user, "unknown device"));
    assert_int_equal(at(p.user, "SMs"), -1);
    assert_int_equal(at(p.user, "The baseline takes "), -1);   /* on no known device */
    kb_gen_prompt_release(&p);
}

/* The software line names what the profile gives, a comma between two and
 * none before the first (a profile made on the GPU machine once lacked the
 * driver's version and read "- software:, CUDA 13.0"). */
static void test_software_line(void **state)
{
    (void)state;
    cJSON *d = cJSON_Duplicate(h200, 1);
    cJSON_DeleteItemFromObject(d, "driver_version");
    cJSON_AddStringToObject(d, "cuda_driver_version", "13.0");
    cJSON_AddStringToObject(d, "nvrtc_version", "13.0");
    kb_gen_prompt p;
    build("gelu", store, d, 0, NULL, NULL, &p);
    assert_true(at(p.user, "- software: CUDA 13.0, NVRTC 13.0\n") > 0);
    assert_int_equal(at(p.user, "software:,"), -1);
    kb_gen_prompt_release(&p);
    cJSON_AddStringToObject(d, "driver_version", "580.159.04");
    build("gelu", store, d, 0, NULL, NULL, &p);
    assert_true(at(p.user, "- software: driver 580.159.04, CUDA 13.0, NVRTC 13.0\n") > 0);
    kb_gen_prompt_release(&p);
    cJSON_Delete(d);
}

/* ------------------------------------------------------------ shapes */

/* The prompt holds the target shape's dims and none of the other
 * shapes' (as "N = 1000003"); without retrieval, not even the shapes'
 * names or their numbers. */
/* 1 when s is in text as a whole: neither a letter or digit before it
 * nor a digit after it ("H = 3" is not in "B*H = 32"). */
static int has_whole(const char *text, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        if ((p == text || !isalnum((unsigned char)p[-1])) && !isdigit((unsigned char)p[n]))
            return 1;
    return 0;
}

/* Overwrites every copy of what in text with spaces. */
static void blank(char *text, const char *what)
{
    size_t n = strlen(what);
    for (char *p = n ? strstr(text, what) : NULL; p; p = strstr(p + n, what))
        memset(p, ' ', n);
}

static void test_target_shape_only(void **state)
{
    (void)state;
    /* every task of the library, the level-2 ones too */
    DIR *dir_ = opendir(tasks_dir);
    assert_non_null(dir_);
    const char *all[64];
    char names[64][256];
    size_t nall = 0;
    struct dirent *e;
    while ((e = readdir(dir_)) != NULL && nall < 64) {
        char *j = kb_path_join(tasks_dir, e->d_name);
        char *tj = kb_path_join(j, "task.json");
        if (e->d_name[0] != '.' && access(tj, R_OK) == 0) {
            snprintf(names[nall], sizeof names[nall], "%s", e->d_name);
            all[nall] = names[nall];
            nall++;
        }
        free(tj);
        free(j);
    }
    closedir(dir_);
    assert_true(nall >= NTASKS);
    for (size_t i = 0; i < nall; i++) {
        char *dir = kb_path_join(tasks_dir, all[i]);
        kb_task *t = NULL;
        kb_err err;
        kb_err_clear(&err);
        assert_int_equal(kb_task_load(dir, &t, &err), KB_OK);
        kb_gen_prompt with, bare;
        build(all[i], store, h200, 0, NULL, NULL, &with);
        build(all[i], NULL, h200, 0, NULL, NULL, &bare);
        /* what the task's author wrote (its description may name the
         * sizes it is for) is the task's; kb's own text must not */
        blank(with.user, t->description);
        blank(bare.user, t->description);
        const kb_shape *target = NULL;
        for (size_t s = 0; s < t->nshapes; s++)
            if (!strcmp(t->shapes[s].name, "target"))
                target = &t->shapes[s];
        assert_non_null(target);
        char want[128];
        for (size_t d = 0; d < t->ndims; d++) {
            snprintf(want, sizeof want, "%s = %.0f", t->dims[d], target->dims[d]);
            if (at(with.user, want) < 0)
                fail_msg("%s: the target's '%s' is not in the prompt", all[i], want);
        }
        for (size_t s = 0; s < t->nshapes; s++) {
            const kb_shape *q = &t->shapes[s];
            if (q == target)
                continue;
            for (size_t d = 0; d < t->ndims; d++) {
                if (q->dims[d] == target->dims[d])
                    continue;
                snprintf(want, sizeof want, "%s = %.0f", t->dims[d], q->dims[d]);
                if (has_whole(with.user, want))
                    fail_msg("%s: shape '%s' leaks as '%s'", all[i], q->name, want);
                /* a size such as 1000003 nowhere (a power of two such as 128
                 * may be a box or a swizzle of the launch's help) */
                snprintf(want, sizeof want, "%.0f", q->dims[d]);
                double l2 = log2(q->dims[d]);
                if (q->dims[d] >= 100 && l2 != floor(l2) && has_whole(bare.user, want))
                    fail_msg("%s: shape '%s' leaks as '%s'", all[i], q->name, want);
            }
            snprintf(want, sizeof want, "'%s'", q->name);
            assert_int_equal(at(bare.user, want), -1);
            snprintf(want, sizeof want, " %s ", q->name);
            if (strcmp(q->name, "tiny") && at(bare.user, want) >= 0)   /* "tiny ones" */
                fail_msg("%s: shape name '%s' in the prompt", all[i], q->name);
        }
        /* the task object too */
        cJSON *o = NULL;
        assert_int_equal(kb_gen_task_json(&config, tasks_dir, all[i], &o, &err), KB_OK);
        char *js = cJSON_PrintUnformatted(o);
        for (size_t s = 0; s < t->nshapes; s++) {
            snprintf(want, sizeof want, "\"%s\"", t->shapes[s].name);
            assert_true((at(js, want) >= 0) == (&t->shapes[s] == target));
        }
        free(js);
        cJSON_Delete(o);
        kb_gen_prompt_release(&with);
        kb_gen_prompt_release(&bare);
        kb_task_free(t);
        free(dir);
    }
}

/* ------------------------------------------------------------ budget */

/* The passages of a prompt: each "### [n] ..." block up to the next one
 * or the next section, its number dropped. Caller frees each and the
 * array. */
static char **blocks(const char *user, size_t *n)
{
    char **out = NULL;
    *n = 0;
    const char *p = user;
    while ((p = strstr(p, "\n### [")) != NULL) {
        p++;
        const char *close = strchr(p, ']');
        assert_non_null(close);
        const char *end = strstr(close, "\n### [");
        const char *sec = strstr(close, "\n## ");
        if (!end || (sec && sec < end))
            end = sec;
        assert_non_null(end);
        out = realloc(out, (*n + 1) * sizeof *out);
        assert_non_null(out);
        out[(*n)++] = kb_strndup(close, (size_t)(end - close));
        p = end;
    }
    return out;
}

static void free_blocks(char **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    free(b);
}

static void test_budget(void **state)
{
    (void)state;
    kb_gen_prompt big;
    build("gemm_bf16", store, h200, 200000, NULL, NULL, &big);
    assert_true(big.ncites >= 3);
    size_t nbig;
    char **all = blocks(big.user, &nbig);
    assert_int_equal(nbig, big.ncites);
    long budgets[] = { 2500, 3500, 5000, 8000, 12000 };
    size_t fewest = big.ncites;
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        kb_gen_prompt p;
        build("gemm_bf16", store, h200, budgets[b], NULL, NULL, &p);
        if (p.tokens > budgets[b])
            fail_msg("%ld tokens over a budget of %ld", p.tokens, budgets[b]);
        assert_int_equal((long)((strlen(p.system) + strlen(p.user) + 2) / 3), p.tokens);
        /* the task and the contract are never cut */
        assert_true(at(p.user, "## Task\n") > 0 && at(p.user, "## Output contract\n") > 0);
        assert_true(at(p.user, "__global__ void gemm_bf16(const __nv_bfloat16 *A") > 0);
        /* whole passages: each is one of the unbounded prompt's, as it was */
        size_t n;
        char **some = blocks(p.user, &n);
        assert_int_equal(n, p.ncites);
        for (size_t i = 0; i < n; i++) {
            int found = 0;
            for (size_t j = 0; j < nbig && !found; j++)
                found = !strcmp(some[i], all[j]);
            if (!found)
                fail_msg("budget %ld: passage %zu is not whole: %.200s", budgets[b], i + 1,
                         some[i]);
        }
        free_blocks(some, n);
        if (p.ncites < fewest)
            fewest = p.ncites;
        if (!p.ncites)
            assert_true(at(p.user, "(no passage fits within the token budget)") > 0);
        kb_gen_prompt_release(&p);
    }
    assert_true(fewest < big.ncites);   /* the small budgets did cut */
    free_blocks(all, nbig);
    kb_gen_prompt_release(&big);

    /* a budget the task and the contract alone exceed is an error */
    kb_gen_prompt_opts o = { .store = store, .config = &config, .tasks_dir = tasks_dir,
                             .task = "gemm_bf16", .device = h200, .budget_tokens = 1000 };
    kb_gen_prompt p;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_gen_prompt_build(&o, &p, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "too small"));
    assert_null(p.user);
    /* feedback that does not fit is cut to what does, the task stays:
     * a line without an end is cut inside, and says so */
    kb_buf fb;
    kb_buf_init(&fb, 0);
    for (int i = 0; i < 4000; i++)
        tu_puts(&fb, "mismatch ");
    build("gelu", store, h200, 3000, fb.data, NULL, &p);
    assert_true(p.tokens <= 3000);
    assert_true(at(p.user, "## Last attempts\n") > 0);
    assert_true(at(p.user, "mismatch mismatch") > 0);
    assert_true(at(p.user, "did not fit within the token budget") > 0);
    assert_true(at(p.user, "## Task\n") > 0);
    kb_gen_prompt_release(&p);
    /* attempts are cut whole after the first, and a kernel to refine that
     * takes at most half of the room keeps its place */
    kb_buf_reset(&fb);
    for (int i = 0; i < 60; i++)
        tu_printf(&fb, "### attempt r0s%d (round 1, sample %d): compile_error\n"
                  "compile log (NVRTC): error: expected a \";\"\n\n", i, i + 1);
    const char *parent = "extern \"C\" __global__ void gelu_parent(const float *x, "
                         "float *y, int n) { }\n";
    build("gelu", store, h200, 3000, fb.data, parent, &p);
    assert_true(p.tokens <= 3000);
    assert_true(at(p.user, "### attempt r0s0 (round 1, sample 1)") > 0);
    assert_int_equal(at(p.user, "### attempt r0s59 "), -1);
    assert_true(at(p.user, "gelu_parent") > 0);
    long note = at(p.user, "(the rest of the feedback");
    assert_true(note > 0);
    /* the cut is at an attempt's heading: what precedes the note ends a whole attempt */
    assert_true(strncmp(p.user + note - 5, ";\"\n\n\n", 5) == 0);
    kb_gen_prompt_release(&p);
    kb_buf_release(&fb);
}

/* ------------------------------------------------------------ determinism */

static void test_deterministic(void **state)
{
    (void)state;
    kb_gen_prompt a, b, c;
    build("layernorm", store, h200, 6000, "last: incorrect", NULL, &a);
    build("layernorm", store, h200, 6000, "last: incorrect", NULL, &b);
    /* another handle on the same KB: nothing cached decides */
    kb_store *again = tu_open_kb(kb_dir);
    build("layernorm", again, h200, 6000, "last: incorrect", NULL, &c);
    kb_store_close(again);
    assert_string_equal(a.hash, b.hash);
    assert_string_equal(a.hash, c.hash);
    assert_string_equal(a.user, c.user);
    assert_int_equal(a.ncites, c.ncites);
    for (size_t i = 0; i < a.ncites; i++)
        assert_int_equal(a.cites[i].chunk_id, c.cites[i].chunk_id);
    /* the hash is over both texts: another input, another hash */
    kb_gen_prompt d;
    build("layernorm", store, h200, 6000, "last: timeout", NULL, &d);
    assert_string_not_equal(a.hash, d.hash);
    char hex[65];
    size_t ls = strlen(a.system), lu = strlen(a.user);
    char *both = malloc(ls + 1 + lu);
    assert_non_null(both);
    memcpy(both, a.system, ls + 1);
    memcpy(both + ls + 1, a.user, lu);
    kb_sha256_hex(both, ls + 1 + lu, hex);
    assert_string_equal(hex, a.hash);
    free(both);
    kb_gen_prompt_release(&a);
    kb_gen_prompt_release(&b);
    kb_gen_prompt_release(&c);
    kb_gen_prompt_release(&d);
}

/* ------------------------------------------------------------ citations */

static int cite_has_skill(const kb_gen_prompt *p, const char *name)
{
    for (size_t i = 0; i < p->ncites; i++)
        if (!strcmp(p->cites[i].skill, name))
            return 1;
    return 0;
}

static void test_cites(void **state)
{
    (void)state;
    kb_gen_prompt p;
    build("gelu", store, h200, 0, NULL, NULL, &p);
    assert_true(p.ncites >= (have_mirror ? 2u : 1u));
    /* skills first (only the one whose ops and dtype fit), exemplar
     * kernels next, doc passages last; each cited in the text */
    assert_string_equal(p.cites[0].kind, "skill");
    assert_string_equal(p.cites[0].skill, "vectorized-global-access");
    assert_string_equal(p.cites[0].source, "skills");
    int rank = 0;
    for (size_t i = 0; i < p.ncites; i++) {
        const kb_gen_cite *c = &p.cites[i];
        int r = !strcmp(c->kind, "skill") ? 0 : !strcmp(c->kind, "code") ? 1 : 2;
        assert_true(r >= rank);
        rank = r;
        assert_true(r == 0 ? *c->skill != '\0' : *c->skill == '\0');
        if (r == 0 && i > 0)
            fail_msg("gelu: a second skill, '%s', whose ops do not fit", c->skill);
        assert_true(c->chunk_id > 0 && *c->url && *c->title);
        char ref[32];
        snprintf(ref, sizeof ref, "### [%zu] ", i + 1);
        long a = at(p.user, ref);
        assert_true(a > 0);
        assert_true(at(p.user + a, c->url) > 0);   /* its deep link, under it */
    }
    if (have_mirror)
        assert_string_equal(p.cites[p.ncites - 1].source, "cuda-best-practices");
    cJSON *j = NULL;
    assert_int_equal(kb_gen_prompt_json(&p, &j, NULL), KB_OK);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "cites")), (int)p.ncites);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "hash")), p.hash);
    cJSON_Delete(j);
    kb_gen_prompt_release(&p);

    /* arch: the sm_90a skills on an H200, not on an sm_80 device */
    build("gemm_bf16", store, h200, 0, NULL, NULL, &p);
    int on_h200 = cite_has_skill(&p, "wgmma-warp-specialization") ||
                  cite_has_skill(&p, "tma-mbarrier-pipeline");
    kb_gen_prompt_release(&p);
    assert_true(on_h200);
    cJSON *a100 = cJSON_Duplicate(h200, 1);
    cJSON_ReplaceItemInObject(a100, "compute_capability", cJSON_CreateString("8.0"));
    cJSON_ReplaceItemInObject(a100, "arch", cJSON_CreateString("sm_80"));
    build("gemm_bf16", store, a100, 0, NULL, NULL, &p);
    assert_false(cite_has_skill(&p, "wgmma-warp-specialization"));
    assert_false(cite_has_skill(&p, "tma-mbarrier-pipeline"));
    assert_true(at(p.user, "compute capability 8.0 (sm_80)") > 0);
    kb_gen_prompt_release(&p);
    cJSON_Delete(a100);
    /* dtype: the bf16 GEMM skills are not a float GEMM's */
    build("gemm_f32", store, h200, 0, NULL, NULL, &p);
    assert_true(p.ncites > 0 && !strcmp(p.cites[0].kind, "skill"));
    assert_false(cite_has_skill(&p, "wgmma-warp-specialization"));
    kb_gen_prompt_release(&p);
    /* no store: no retrieval, said in the context section */
    build("gelu", NULL, h200, 0, NULL, NULL, &p);
    assert_int_equal(p.ncites, 0);
    assert_true(at(p.user, "(nothing retrieved: no KB)") > at(p.user, "## Retrieved context"));
    kb_gen_prompt_release(&p);
}

/* ------------------------------------------------------------ seed */

/* 1 when p cites a passage whose url holds s. */
static int cite_url_has(const kb_gen_prompt *p, const char *s)
{
    for (size_t i = 0; i < p->ncites; i++)
        if (strstr(p->cites[i].url, s))
            return 1;
    return 0;
}

static void test_seed(void **state)
{
    (void)state;
    /* transpose: its skill's kernel is the kernel to refine, shown once
     * (not again as an exemplar), the skill itself cited */
    kb_gen_prompt p;
    build("transpose", store, h200, 0, NULL, NULL, &p);
    assert_non_null(p.seed_skill);
    char *dir = kb_path_join(tu_top(), "corpus/skills");
    char *sd = kb_path_join(dir, p.seed_skill);
    char *cu = kb_path_join(sd, "kernel.cu");
    kb_buf k;
    kb_buf_init(&k, 0);
    tu_read_file(cu, 0, &k);
    /* the kernel's signature line stands for it (the KB holds its text
     * in chunks) */
    char *g = strstr(k.data, "__global__");
    assert_non_null(g);
    char *line = strndup(g, strcspn(g, "\n"));
    long refine = at(p.user, "## Kernel to refine");
    assert_true(refine > at(p.user, "## Retrieved context"));
    assert_true(at(p.user, line) > refine);
    assert_int_equal(at(p.user + at(p.user, line) + 1, line), -1);
    assert_true(cite_has_skill(&p, p.seed_skill));
    char *rel = NULL;
    assert_true(asprintf(&rel, "/%s/kernel.cu", p.seed_skill) > 0);
    assert_false(cite_url_has(&p, rel));
    kb_gen_prompt_release(&p);
    /* a kernel given: that one, no seed */
    build("transpose", store, h200, 0, NULL, "__global__ void mine() {}", &p);
    assert_null(p.seed_skill);
    assert_true(at(p.user, "void mine()") > at(p.user, "## Kernel to refine"));
    assert_true(at(p.user, line) < 0 || at(p.user, line) < at(p.user, "## Kernel to refine"));
    kb_gen_prompt_release(&p);
    /* no_seed: no kernel to refine; the skill's kernel is an exemplar */
    kb_gen_prompt_opts o = { .store = store, .config = &config, .tasks_dir = tasks_dir,
                             .task = "transpose", .device = h200, .no_seed = 1 };
    assert_int_equal(kb_gen_prompt_build(&o, &p, NULL), KB_OK);
    assert_null(p.seed_skill);
    assert_int_equal(at(p.user, "## Kernel to refine"), -1);
    assert_true(cite_url_has(&p, rel));
    kb_gen_prompt_release(&p);
    free(rel);
    free(line);
    kb_buf_release(&k);
    free(cu);
    free(sd);
    free(dir);
}

/* ------------------------------------------------------------ what the task is */

/* The doc passages come from what the task is, not its words: a
 * memory-bound elementwise task gets the Best Practices guide's
 * coalescing; a row reduction its synchronization and memory sections;
 * nothing on a newer architecture than the device's. */
static void test_task_topics(void **state)
{
    (void)state;
    if (!have_mirror) {
        skip();
        return;
    }
    kb_gen_prompt p;
    build("gelu", store, h200, 0, NULL, NULL, &p);
    int coalescing = 0;
    for (size_t i = 0; i < p.ncites; i++)
        coalescing |= strstr(p.cites[i].heading, "Coalesced Access to Global Memory") != NULL;
    assert_true(coalescing);
    kb_gen_prompt_release(&p);
    build("stencil3x3", store, h200, 0, NULL, NULL, &p);
    int shared = 0;
    coalescing = 0;
    for (size_t i = 0; i < p.ncites; i++) {
        shared |= strstr(p.cites[i].heading, "Shared Memory") != NULL;
        coalescing |= strstr(p.cites[i].heading, "Coalesced Access") != NULL;
    }
    assert_true(shared && coalescing);
    kb_gen_prompt_release(&p);
    /* gemv_int4: no skill fits; its exemplars are no tensor-core GEMM */
    build("gemv_int4", store, h200, 0, NULL, NULL, &p);
    for (size_t i = 0; i < p.ncites; i++)
        if (!strcmp(p.cites[i].kind, "code"))
            assert_null(strstr(p.user, "wmma::"));
    kb_gen_prompt_release(&p);
}

/* ------------------------------------------------------------ repair */

static void test_repair_context(void **state)
{
    (void)state;
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_verify_result_parse(
        "{\"verdict\":\"compile_error\",\"reason\":\"NVRTC failed\",\"compile\":{\"ok\":false,"
        "\"log\":\"cand.cu(12): error: identifier \\\"__shfl_xor\\\" is undefined\\n"
        "cand.cu(14): error: identifier \\\"__shfl_xor\\\" is undefined\\n"
        "1 error detected in the compilation of \\\"cand.cu\\\".\\n\"}}", &r, &err), KB_OK);
    kb_buf out;
    kb_buf_init(&out, 0);
    tu_puts(&out, "before\n");
    assert_int_equal(kb_gen_repair_context(store, &config, &r, 800, &out, &err), KB_OK);
    assert_true(at(out.data, "before\nPassages on this failure") == 0);
    assert_true(at(out.data, "[repair 1] ") > 0);
    assert_true(out.len - 7 <= 800 * 3);   /* within its budget */
    if (!strstr(out.data, "__shfl_xor_sync"))   /* found for the error's identifier */
        fail_msg("no passage on __shfl_xor: %s", out.data);
    kb_buf_release(&out);
    kb_verify_result_release(&r);

    /* a verdict that needs no repair, and no store: out unchanged */
    assert_int_equal(kb_verify_result_parse("{\"verdict\":\"faster\",\"reason\":\"1.5x\"}",
                                            &r, &err), KB_OK);
    kb_buf_init(&out, 0);
    tu_puts(&out, "x");
    assert_int_equal(kb_gen_repair_context(store, &config, &r, 800, &out, &err), KB_OK);
    assert_string_equal(out.data, "x");
    kb_verify_result_release(&r);
    assert_int_equal(kb_verify_result_parse(
        "{\"verdict\":\"incorrect\",\"reason\":\"the output kept a stale result\"}", &r,
        &err), KB_OK);
    assert_int_equal(kb_gen_repair_context(NULL, &config, &r, 800, &out, &err), KB_OK);
    assert_string_equal(out.data, "x");
    /* a failure class: passages for it, whole, within a small budget */
    assert_int_equal(kb_gen_repair_context(store, &config, &r, 400, &out, &err), KB_OK);
    assert_true(out.len == 1 || (out.len - 1 <= 400 * 3 && at(out.data, "[repair 1]") > 0));
    kb_buf_release(&out);
    kb_verify_result_release(&r);
}

/* ------------------------------------------------------------ tasks */

static void test_task_json(void **state)
{
    (void)state;
    cJSON *o = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_gen_task_json(&config, tasks_dir, "histogram", &o, &err), KB_OK);
    const cJSON *k = cJSON_GetObjectItem(o, "kernels");
    assert_int_equal(cJSON_GetArraySize(k), 2);
    assert_string_equal(cJSON_GetArrayItem(k, 0)->valuestring, "hist_zero");
    assert_string_equal(cJSON_GetArrayItem(k, 1)->valuestring, "histogram");
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(o, "signature")),
                           "void histogram(const unsigned int *x, unsigned int *bins, int n)"));
    const cJSON *ts = cJSON_GetObjectItem(o, "target_shape");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ts, "name")), "target");
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(ts, "dims"), "N")->valuedouble > 1e6);
    const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "params"), 0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p0, "role")), "input");
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(o, "reference")),
                           "atomicAdd"));
    cJSON_Delete(o);
    /* a plain number is shown in its fewest digits */
    assert_int_equal(kb_gen_task_json(&config, tasks_dir, "gelu", &o, &err), KB_OK);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(
        cJSON_GetObjectItem(o, "tolerance"), "rtol")), "1e-05");
    cJSON_Delete(o);
    assert_int_equal(kb_gen_task_json(&config, tasks_dir, "no_such_task", &o, &err),
                     KB_ERR_NOTFOUND);
    assert_null(o);
    assert_non_null(strstr(err.msg, "no task"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sections_in_order),
        cmocka_unit_test(test_unknown_device),
        cmocka_unit_test(test_software_line),
        cmocka_unit_test(test_target_shape_only),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_cites),
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_task_topics),
        cmocka_unit_test(test_repair_context),
        cmocka_unit_test(test_task_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

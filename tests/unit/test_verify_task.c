/* test_verify_task.c - the plain-C side of GPU verification (no GPU, no
 * CUDA): size expressions, every committed task.json, malformed tasks,
 * candidates' launch overrides, source refusal, fast_p, finding a task by
 * name, a result as text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verify/verify.h"

static const char *top(void)
{
    const char *t = getenv("KB_TOP");
    return t ? t : ".";
}

static double ev(const char *e, kb_rc want_rc)
{
    const char *names[] = { "N", "M", "K" };
    double vals[] = { 1000003, 64, 7 };
    double out = -1;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_expr_eval(e, names, vals, 3, &out, &err);
    assert_int_equal(rc, want_rc);
    if (rc)
        assert_true(strstr(err.msg, "bad expression") != NULL);
    return out;
}

static void test_expressions(void **state)
{
    (void)state;
    assert_true(ev("N", KB_OK) == 1000003);
    assert_true(ev("M*K", KB_OK) == 448);
    assert_true(ev("ceil_div(N,256)", KB_OK) == 3907);
    assert_true(ev("ceil_div(N, 256) * 256 - N", KB_OK) == 189);
    assert_true(ev("N/256", KB_OK) == 3906);          /* integer division */
    assert_true(ev("7/2.0", KB_OK) == 3.5);
    assert_true(ev("N%256", KB_OK) == 67);
    assert_true(ev("min(M,K)+max(M,K)", KB_OK) == 71);
    assert_true(ev("-(M-K)*2", KB_OK) == -114);
    assert_true(ev("sqrt(M)", KB_OK) == 8);
    assert_true(ev("1e-5*sqrt(M)", KB_OK) > 7.99e-5);
    assert_true(ev("2*(M+K)", KB_OK) == 142);
    ev("Q*2", KB_ERR_PARSE);            /* unknown name */
    ev("N/0", KB_ERR_PARSE);
    ev("ceil_div(N)", KB_ERR_PARSE);
    ev("(N", KB_ERR_PARSE);
    ev("N N", KB_ERR_PARSE);
    ev("frob(1,2)", KB_ERR_PARSE);
    ev("", KB_ERR_PARSE);
}

/* Nesting up to KB_EXPR_MAX_DEPTH evaluates; deeper (200,000 '(' once
 * overflowed the stack) is a parse error that says why. */
static void test_expression_depth(void **state)
{
    (void)state;
    kb_buf b;
    kb_buf_init(&b, 0);
    for (int i = 0; i < KB_EXPR_MAX_DEPTH - 1; i++)
        assert_int_equal(kb_buf_append(&b, "(", 1), KB_OK);
    assert_int_equal(kb_buf_append(&b, "M", 1), KB_OK);
    for (int i = 0; i < KB_EXPR_MAX_DEPTH - 1; i++)
        assert_int_equal(kb_buf_append(&b, ")", 1), KB_OK);
    assert_true(ev(b.data, KB_OK) == 64);
    static const char *deep[] = { "(", "-", "min(1,", "+" };
    for (size_t d = 0; d < 4; d++) {
        kb_buf_reset(&b);
        for (int i = 0; i < 200000; i++)
            assert_int_equal(kb_buf_append(&b, deep[d], strlen(deep[d])), KB_OK);
        const char *names[] = { "N" };
        double vals[] = { 1 }, out = -1;
        kb_err err;
        kb_err_clear(&err);
        assert_int_equal(kb_expr_eval(b.data, names, vals, 1, &out, &err), KB_ERR_PARSE);
        assert_true(strstr(err.msg, "nested too deeply (at most 64 levels)") != NULL);
        assert_true(strlen(err.msg) < 200);    /* the expression is cut short */
    }
    kb_buf_release(&b);
}

/* Every committed task loads, has >= 3 shapes (one timed, one that is no
 * multiple of 32), inputs with >= 2 distributions, a reference.cu defining
 * each kernel of its launch, and a roofline. */
static void test_committed_tasks(void **state)
{
    (void)state;
    char *dir = kb_path_join(top(), "corpus/tasks");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *td = kb_path_join(dir, e->d_name);
        kb_task *t = NULL;
        kb_err err;
        kb_err_clear(&err);
        kb_rc rc = kb_task_load(td, &t, &err);
        if (rc)
            fail_msg("%s: %s", td, err.msg);
        assert_string_equal(t->name, e->d_name);
        assert_true(t->nshapes >= 3);
        assert_true(t->shapes[0].timed);
        int odd = 0;
        for (size_t s = 0; s < t->nshapes; s++)
            for (size_t k = 0; k < t->ndims; k++)
                if ((long)t->shapes[s].dims[k] % 32)
                    odd = 1;
        assert_true(odd);
        int inputs = 0, outputs = 0;
        for (size_t i = 0; i < t->nparams; i++) {
            if (t->params[i].role == KB_ROLE_INPUT) {
                inputs++;
                assert_true(t->params[i].ndists >= 2);
            }
            outputs += t->params[i].role == KB_ROLE_OUTPUT ||
                       t->params[i].role == KB_ROLE_INOUT;   /* adamw: in place */
        }
        assert_true(inputs >= 1 && outputs >= 1);
        assert_non_null(t->roof_bytes);
        double bytes = 0;
        assert_int_equal(kb_task_eval(t, &t->shapes[0], t->roof_bytes, &bytes, NULL), KB_OK);
        assert_true(bytes > 1e6);    /* the target shape fills the GPU */
        char *rp = kb_path_join(td, "reference.cu");
        kb_buf src;
        kb_buf_init(&src, 0);
        assert_int_equal(kb_read_file(rp, 1 << 20, &src, NULL), KB_OK);
        for (size_t l = 0; l < t->nlaunches; l++) {
            kb_buf want;
            kb_buf_init(&want, 0);
            assert_int_equal(kb_buf_printf(&want, "void %s(", t->launches[l].kernel),
                             KB_OK);
            if (!strstr(src.data, want.data))
                fail_msg("%s: reference.cu lacks kernel %s", td, t->launches[l].kernel);
            kb_buf_release(&want);
        }
        kb_buf refuse;
        kb_buf_init(&refuse, 0);
        assert_int_equal(kb_verify_refuse(src.data, &refuse), 0);
        kb_buf_release(&refuse);
        kb_buf_release(&src);
        free(rp);
        kb_task_free(t);
        free(td);
        n++;
    }
    closedir(d);
    free(dir);
    assert_true(n >= 18);
}

static void write_task(const char *dir, const char *json)
{
    mkdir(dir, 0755);
    char *p = kb_path_join(dir, "task.json");
    assert_int_equal(kb_write_file_atomic(p, json, strlen(json), NULL), KB_OK);
    free(p);
}

static void test_bad_tasks(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/kbtaskXXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *d = kb_path_join(tmpl, "t");
    static const struct { const char *json, *msg; } cases[] = {
        { "[1,2]", "is not a JSON object" },
        { "{\"name\":\"t\"}", "\"dtype\"" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"x\","
          "\"type\":\"f32\",\"role\":\"input\",\"size\":\"N\",\"dist\":[\"normal\"]}]}",
          "at least 2 distributions" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"x\","
          "\"type\":\"f99\",\"role\":\"input\",\"size\":\"N\"}]}", "bad type" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N*Q\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"grid\":1,\"block\":32}}", "unknown name 'Q'" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\"}],\"launch\":{\"grid\":1,\"block\":32}}", "needs a positive 'N'" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}]}", "missing \"launch\"" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"grid\":1,\"block\":32},\"roofline\":{\"bytes\":"
          "\"4*N\",\"unit\":\"fp64\"}}", "unknown roofline unit 'fp64'" },
        /* a launch that fails half parsed (its kernel name already kept):
         * freed with the task (ASan's leak check in make check) */
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":[{\"kernel\":\"k\",\"grid\":1}]}", "missing block" },
        /* baselines: a known name, or a library call over the task's
         * buffers with an epilogue of its kernels */
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":\"cudnn\"}", "bad \"baseline\"" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":{\"C\":\"y\"}}", "bad \"baseline\"" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":{\"library\":\"reference\"}}", "names a library" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":{\"library\":\"cublas_sgemm\"}}", "baseline's A is no buffer of the task ('A')" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":{\"library\":\"cublas_sgemm\",\"A\":\"y\",\"B\":\"y\",\"C\":\"y\","
          "\"then\":[\"epi\"]}}", "names no kernel of the task's launch ('epi')" },
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"kernel\":\"k\",\"grid\":1,\"block\":32},\"baseline\":{\"library\":\"cublas_sgemm\",\"A\":\"y\",\"B\":\"y\",\"C\":\"y\","
          "\"then\":\"k\"}}", "a list of the task's kernels" },
        /* an expression nested past the depth limit is a parse error */
        { "{\"name\":\"t\",\"dtype\":\"f32\",\"dims\":[\"N\"],\"params\":[{\"name\":\"y\","
          "\"type\":\"f32\",\"role\":\"output\",\"size\":\"N\"}],\"shapes\":[{\"name\":"
          "\"a\",\"N\":4}],\"launch\":{\"grid\":\"((((((((((((((((((((((((((((((((((((((("
          "(((((((((((((((((((((((((((((1\",\"block\":32}}", "nested too deeply" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_task(d, cases[i].json);
        kb_task *t = (kb_task *)1;
        kb_err err;
        kb_err_clear(&err);
        assert_int_equal(kb_task_load(d, &t, &err), KB_ERR_PARSE);
        assert_null(t);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
    }
    kb_task *t = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_task_load("/nonexistent/task", &t, &err), KB_ERR_IO);
    assert_true(strstr(err.msg, "cannot open '/nonexistent/task/task.json'") != NULL);
    char *p = kb_path_join(d, "task.json");
    unlink(p);
    free(p);
    rmdir(d);
    rmdir(tmpl);
    free(d);
}

/* A library baseline with its operands and epilogue (gemm_bias_gelu), and
 * the default operands of a plain one (gemm_bf16). */
static void test_library_baseline(void **state)
{
    (void)state;
    kb_task *t = NULL;
    kb_err err;
    kb_err_clear(&err);
    char *d = kb_path_join(top(), "corpus/tasks/gemm_bias_gelu");
    assert_int_equal(kb_task_load(d, &t, &err), KB_OK);
    assert_string_equal(t->baseline, "cublas_bf16");
    assert_string_equal(t->blas_args[0], "A");
    assert_string_equal(t->blas_args[1], "B");
    assert_string_equal(t->blas_args[2], "acc");
    assert_int_equal(t->nthen, 1);
    assert_string_equal(t->launches[t->baseline_then[0]].kernel, "bias_gelu");
    assert_int_equal(t->baseline_then[0], 1);
    kb_task_free(t);
    free(d);
    d = kb_path_join(top(), "corpus/tasks/gemm_bf16");
    assert_int_equal(kb_task_load(d, &t, &err), KB_OK);
    assert_string_equal(t->baseline, "cublas_bf16");
    assert_string_equal(t->blas_args[2], "C");
    assert_int_equal(t->nthen, 0);
    assert_null(t->baseline_then);
    kb_task_free(t);
    free(d);
    d = kb_path_join(top(), "corpus/tasks/adamw");
    assert_int_equal(kb_task_load(d, &t, &err), KB_OK);
    assert_string_equal(t->baseline, "reference");
    assert_int_equal(t->nlaunches, 4);       /* the unfused optimizer */
    assert_int_equal(t->params[0].role, KB_ROLE_INOUT);
    kb_task_free(t);
    free(d);
}

static void test_launch_overrides(void **state)
{
    (void)state;
    const char *src =
        "// A candidate.\n"
        "// kb-launch: kernel=zero grid=1 block=256\n"
        "  // kb-launch: kernel=tile grid=ceil_div(N,32),ceil_div(M,32) block=32,8 shared=4*1024\n"
        "// kb-verify: arch=sm_90a\n"
        "extern \"C\" __global__ void zero() {}\n";
    kb_cand_header h;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_cand_header_parse(src, &h, &err), KB_OK);
    assert_int_equal(h.nlaunches, 2);
    kb_launch *l = h.launches;
    assert_string_equal(l[0].kernel, "zero");
    assert_string_equal(l[0].grid[0], "1");
    assert_null(l[0].grid[1]);
    assert_string_equal(l[1].kernel, "tile");
    assert_string_equal(l[1].grid[0], "ceil_div(N,32)");
    assert_string_equal(l[1].grid[1], "ceil_div(M,32)");
    assert_string_equal(l[1].block[1], "8");
    assert_string_equal(l[1].shared, "4*1024");
    assert_string_equal(h.arch, "sm_90a");
    assert_int_equal(h.nmaps, 0);
    kb_cand_header_release(&h);
    /* none */
    assert_int_equal(kb_cand_header_parse("__global__ void f() {}", &h, &err), KB_OK);
    assert_int_equal(h.nlaunches, 0);
    assert_null(h.launches);
    assert_null(h.arch);
    /* malformed */
    static const char *bad[] = {
        "// kb-launch: kernel=f grid=1\n",
        "// kb-launch: kernel=f grid=1 block=32 colour=red\n",
        "// kb-launch: kernel=f grid=1,2,3,4 block=32\n",
        "// kb-launch: kernel f\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_err_clear(&err);
        assert_int_equal(kb_cand_header_parse(bad[i], &h, &err), KB_ERR_PARSE);
        assert_int_equal(h.nlaunches, 0);
        assert_true(strstr(err.msg, "kb-launch") != NULL);
    }
    /* an unbalanced parenthesis is named, not taken for a missing grid= */
    kb_err_clear(&err);
    assert_int_equal(kb_cand_header_parse("// kb-launch: kernel=f grid=(N+1 block=32\n",
                                          &h, &err), KB_ERR_PARSE);
    assert_int_equal(h.nlaunches, 0);
    assert_true(strstr(err.msg, "unbalanced '('") != NULL);
    assert_true(strstr(err.msg, "(N+1") != NULL);
    /* a repeated key is refused, not overwritten (grid=64,64 grid=8 once
     * gave the grid 8,64 and leaked) */
    static const char *twice[] = {
        "// kb-launch: kernel=a kernel=b grid=1 block=32\n",
        "// kb-launch: kernel=a grid=64,64 grid=8 block=32\n",
        "// kb-launch: kernel=a grid=1 block=32 block=64\n",
        "// kb-launch: kernel=a grid=1 block=32 shared=0 shared=8\n",
        "// kb-launch: kernel=a grid=1 block=32\n// kb-launch: kernel=b kernel=c grid=1 block=1\n",
    };
    for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
        kb_err_clear(&err);
        assert_int_equal(kb_cand_header_parse(twice[i], &h, &err), KB_ERR_PARSE);
        assert_int_equal(h.nlaunches, 0);
        assert_null(h.launches);
        if (!strstr(err.msg, "given twice"))
            fail_msg("case %zu: '%s'", i, err.msg);
    }
    /* a header grid nested past the depth limit is refused when parsed */
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_buf_printf(&b, "// kb-launch: kernel=f block=32 grid="), KB_OK);
    for (int i = 0; i < 200000; i++)
        assert_int_equal(kb_buf_append(&b, "(", 1), KB_OK);
    kb_err_clear(&err);
    assert_int_equal(kb_cand_header_parse(b.data, &h, &err), KB_ERR_PARSE);
    assert_true(strstr(err.msg, "nested too deeply") != NULL);
    kb_buf_release(&b);
}

static void test_tensormap_headers(void **state)
{
    (void)state;
    const char *src =
        "// kb-tensormap: buffer=A dims=K,M box=64,128 swizzle=128\n"
        "// kb-tensormap: buffer=B dims=N,K box=min(64,N),64\n"
        "extern \"C\" __global__ void g() {}\n";
    kb_cand_header h;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_cand_header_parse(src, &h, &err), KB_OK);
    assert_int_equal(h.nmaps, 2);
    assert_string_equal(h.maps[0].buffer, "A");
    assert_int_equal(h.maps[0].rank, 2);
    assert_string_equal(h.maps[0].dims[0], "K");
    assert_string_equal(h.maps[0].box[1], "128");
    assert_int_equal(h.maps[0].swizzle, 128);
    assert_string_equal(h.maps[1].box[0], "min(64,N)");
    assert_int_equal(h.maps[1].swizzle, 0);
    kb_cand_header_release(&h);
    static const char *bad[] = {
        "// kb-tensormap: buffer=A dims=K,M\n",                      /* no box */
        "// kb-tensormap: buffer=A dims=K,M box=64\n",               /* rank */
        "// kb-tensormap: dims=K box=64\n",                          /* no buffer */
        "// kb-tensormap: buffer=A dims=K box=64 swizzle=16\n",
        "// kb-tensormap: buffer=A dims=1,2,3,4,5,6 box=1,1,1,1,1,1\n",
        "// kb-tensormap: buffer=A dims=K box=64 stride=2\n",
        "// kb-tensormap: buffer=A buffer=B dims=K box=64\n",      /* twice */
        "// kb-tensormap: buffer=A dims=K dims=M box=64\n",
        "// kb-tensormap: buffer=A dims=K box=64 box=32\n",
        "// kb-tensormap: buffer=A dims=K box=64 swizzle=0 swizzle=128\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_err_clear(&err);
        assert_int_equal(kb_cand_header_parse(bad[i], &h, &err), KB_ERR_PARSE);
        assert_int_equal(h.nmaps, 0);
        assert_true(strstr(err.msg, "kb-tensormap") != NULL);
    }
}

static void refused(const char *src, const char *why)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    int r = kb_verify_refuse(src, &b);
    if (why) {
        if (!r || !strstr(b.data, why))
            fail_msg("'%s' not refused for '%s' (%s)", src, why, b.data ? b.data : "");
    } else if (r) {
        fail_msg("'%s' refused: %s", src, b.data);
    }
    kb_buf_release(&b);
}

static void test_refusal(void **state)
{
    (void)state;
    refused("__global__ void f(){ asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); }",
            "globaltimer");
    refused("__managed__ float x[4];", "__managed__");
    refused("__global__ void f(){ float *p = (float*)malloc(4); }", "allocates");
    refused("__global__ void f(){ float *p = new float[4]; }", "allocates");
    refused("__global__ void f(){ g<<<1,1>>>(); }", "launches kernels");
    refused("__global__ void f(){ cudaDeviceSynchronize(); }", "runtime");
    refused("#include <stdio.h>\n__global__ void f(){}", "includes '<stdio.h>'");
    refused("#include \"helper.h\" // mine\n__global__ void f(){}",
            "includes '\"helper.h\"':");
    /* a string with // before the asm on the same line hides nothing */
    refused("__global__ void f(){ const char *u = \"http://x\"; "
            "asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); }",
            "globaltimer");
    /* nor does splitting the name over adjacent literals */
    refused("__global__ void f(){ asm volatile(\"mov.u64 %0, %%global\" \"timer;\"\n"
            "  : \"=l\"(t)); }", "globaltimer");
    /* fine: comments and strings mentioning them, allowed headers, names */
    refused("// no %globaltimer, no malloc(), no <<<>>> here\n__global__ void f(){}", NULL);
    refused("/* __managed__ */ __global__ void f(float *newval, int mallocs){}", NULL);
    refused("#include <cuda_bf16.h>\n#include <mma.h>\n__global__ void f(){}", NULL);
    refused("__global__ void f(int *a){ if (a[0] << 3 < 2) a[1] = 0; }", NULL);
}

static void test_fast_p(void **state)
{
    (void)state;
    const char *v[] = { "faster", "correct", "incorrect", "suspicious", "faster", "" };
    double s[] = { 2.5, 0.9, 3.0, 100.0, 1.2, 0 };
    double ps[] = { 0, 1, 1.5, 2 };
    double out[4];
    kb_verify_fast_p(v, s, 6, ps, 4, out);
    assert_true(out[0] == 3.0 / 6);
    assert_true(out[1] == 2.0 / 6);
    assert_true(out[2] == 1.0 / 6);
    assert_true(out[3] == 1.0 / 6);
    kb_verify_fast_p(v, s, 0, ps, 1, out);
    assert_true(out[0] == 0);
}

static void test_find_task(void **state)
{
    (void)state;
    char cwd[4096], tmpl[] = "/tmp/kbfindXXXXXX";
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_non_null(mkdtemp(tmpl));
    char *real = realpath(tmpl, NULL);
    assert_non_null(real);
    char m[512], t[512], want[600];
    snprintf(m, sizeof m, "%s/m", tmpl);
    mkdir(m, 0755);
    snprintf(t, sizeof t, "%s/m/tasks", tmpl);
    mkdir(t, 0755);
    snprintf(t, sizeof t, "%s/m/tasks/foo", tmpl);
    write_task(t, "{}");
    snprintf(m, sizeof m, "%s/m/sources.json", tmpl);
    assert_int_equal(chdir(tmpl), 0);   /* no corpus/ here */
    kb_err err;
    kb_err_clear(&err);
    char *dir = NULL;
    /* a name: beside the manifest */
    assert_int_equal(kb_task_find("foo", m, &dir, &err), KB_OK);
    snprintf(want, sizeof want, "%s/m/tasks/foo", real);
    assert_string_equal(dir, want);
    free(dir);
    /* a directory as it is */
    assert_int_equal(kb_task_find("m/tasks/foo", NULL, &dir, &err), KB_OK);
    assert_string_equal(dir, "m/tasks/foo");
    free(dir);
    /* not there: every place looked in, in order, each once */
    assert_int_equal(kb_task_find("bar", m, &dir, &err), KB_ERR_NOTFOUND);
    assert_null(dir);
    /* (corpus/ and share/kb beside the test's folder, build/tests, are
     * not there: only folders that are, kb_data_dirs) */
    snprintf(want, sizeof want, "no task 'bar' (a directory with task.json): "
             "looked in 'bar', '%s/m/tasks/bar', 'corpus/tasks/bar'", real);
    assert_string_equal(err.msg, want);
    /* a path is looked for only where it says */
    kb_err_clear(&err);
    assert_int_equal(kb_task_find("m/tasks/bar", m, &dir, &err), KB_ERR_NOTFOUND);
    assert_string_equal(err.msg, "no task 'm/tasks/bar' (a directory with "
                        "task.json): looked in 'm/tasks/bar'");
    /* the manifest's folder and corpus/ are one: looked in once */
    mkdir("corpus", 0755);
    kb_err_clear(&err);
    assert_int_equal(kb_task_find("bar", "corpus/sources.json", &dir, &err), KB_ERR_NOTFOUND);
    snprintf(want, sizeof want, "looked in 'bar', '%s/corpus/tasks/bar'", real);
    assert_non_null(strstr(err.msg, want));
    assert_null(strstr(err.msg, "'corpus/tasks/bar'"));
    assert_int_equal(chdir(cwd), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    assert_int_equal(system(cmd), 0);
    free(real);
}

/* the text of result line js, checked for each of the parts */
static void text_has(const char *js, const char *const *parts, const char *absent)
{
    cJSON *res = cJSON_Parse(js);
    assert_non_null(res);
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_verify_result_text(res, &b), KB_OK);
    for (size_t i = 0; parts[i]; i++)
        if (!strstr(b.data, parts[i]))
            fail_msg("'%s' not in:\n%s", parts[i], b.data);
    if (absent && strstr(b.data, absent))
        fail_msg("'%s' in:\n%s", absent, b.data);
    kb_buf_release(&b);
    cJSON_Delete(res);
}

static void test_result_text(void **state)
{
    (void)state;
    const char *err_parts[] = {
        "gelu: compile_error\n  NVRTC could not compile the candidate\n",
        "  NVRTC's log:\n    c.cu(5): error: identifier \"i\" is undefined\n"
        "          y[i] = x[i]\n    1 error detected\n", NULL };
    text_has("{\"task\":\"gelu\",\"verdict\":\"compile_error\",\"reason\":"
             "\"NVRTC could not compile the candidate\",\"compile\":{\"ok\":false,"
             "\"log\":\"c.cu(5): error: identifier \\\"i\\\" is undefined\\n"
             "      y[i] = x[i]\\n\\n1 error detected\\n\",\"kernels\":[]},"
             "\"wall_ms\":31.6}", err_parts, "wall 31.6");
    const char *ok_parts[] = {
        "softmax: faster\n  correct on every check; 11.88x the baseline (geomean)\n",
        "  NVRTC: c.cu(2): warning #550-D: set but never used\n",
        "  kernel softmax_row: 40 registers, 16 B static shared memory, 24 B local "
        "memory, 1024 threads a block at most, spills: 24 B stored, 24 B loaded\n",
        "  kernel helper2: 8 registers, no spills\n",
        "  target: candidate 0.1467 ms, reference 1.7430 ms, roofline floor "
        "0.1115 ms, speedup 11.88x\n",
        "  wall 334 ms\n", NULL };
    text_has("{\"task\":\"softmax\",\"verdict\":\"faster\",\"reason\":\"correct on "
             "every check; 11.88x the baseline (geomean)\",\"compile\":{\"ok\":true,"
             "\"log\":\"ptxas info : Used 40 registers\\nc.cu(2): warning #550-D: set but "
             "never used\\n\",\"kernels\":[{\"name\":\"softmax_row\",\"registers\":40,"
             "\"shared_static_bytes\":16,\"local_bytes\":24,\"spill_store_bytes\":24,"
             "\"spill_load_bytes\":24,\"max_threads_per_block\":1024},{\"name\":"
             "\"helper2\",\"registers\":8,\"spill_store_bytes\":0,\"spill_load_bytes\":0}]},"
             "\"timings\":[{\"shape\":\"target\",\"baseline\":\"reference\","
             "\"candidate_ms\":{\"median\":0.1467},\"baseline_ms\":{\"median\":1.743},"
             "\"floor_ms\":0.1115,\"speedup\":11.88}],\"wall_ms\":334}", ok_parts,
             "ptxas info");
    const char *lib_parts[] = { "  matches the library: 0.985x (parity is within 3% either way)\n", NULL };
    text_has("{\"task\":\"gemm_bf16\",\"verdict\":\"correct\",\"reason\":\"r\","
             "\"matches_library\":true,\"library_ratio\":0.985}", lib_parts, "NVRTC");
    /* a result without its parts is still its first lines */
    const char *bare[] = { ": error\n  \n", NULL };
    text_has("{\"verdict\":\"error\"}", bare, "wall");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_committed_tasks),
        cmocka_unit_test(test_bad_tasks),
        cmocka_unit_test(test_launch_overrides),
        cmocka_unit_test(test_tensormap_headers),
        cmocka_unit_test(test_expression_depth),
        cmocka_unit_test(test_library_baseline),
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_fast_p),
        cmocka_unit_test(test_result_text),
        cmocka_unit_test(test_find_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* cmd_tune.c - kb tune: fine-tunes the local embedder on pairs mined from
 * the KB (kb_tune_pairs), through the optional trainer
 * scripts/tune-embedder.py (PyTorch), and checks what it wrote. */
#include "cli/cli.h"
#include "index/index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRAINER "tune-embedder.py"
#define PAIRS_FILE "pairs.jsonl"

static const kb_option tune_options[] = {
    { "out", 'o', "DIR", "the tuned model's directory (default: the base's, KB_MODEL_DIR,\n"
      "with \"-tuned\" after it)" },
    { "pairs-only", KB_OPT_LONG('p'), NULL, "write DIR/pairs.jsonl and stop (to train elsewhere)" },
    { "python", KB_OPT_LONG('y'), "PY", "the Python with torch and transformers (default python3)" },
    { "trainer", KB_OPT_LONG('t'), "FILE", "the training script (default: tune-embedder.py of\n"
      "kb's scripts/ or share/kb/)" },
    { "epochs", KB_OPT_LONG('e'), "N", "passes over the pairs (default 1)" },
    { "batch", KB_OPT_LONG('b'), "N", "pairs a step, each the others' negatives (default 64)" },
    { "device", KB_OPT_LONG('d'), "D", "auto, cpu or cuda (default auto)" },
    { "max-pairs", KB_OPT_LONG('m'), "N", "train on the first N pairs only" },
    { "json", KB_OPT_LONG('j'), NULL, "print the result as JSON" },
    { NULL, 0, NULL, NULL },
};

static int cmd_tune(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_tune = {
    .name = "tune",
    .fn = cmd_tune,
    .usage = "kb tune [--out DIR] [--pairs-only] [--python PY] [options]",
    .summary = "fine-tune the embedder on this KB's own sections (needs PyTorch)",
    .options = tune_options,
    .notes = "Pairs a section's headings with its chunks, trains all-MiniLM-L6-v2 on them\n"
             "(in-batch negatives, about 90 steps of 64 for the whole corpus: seconds on a\n"
             "GPU, about 18 minutes on 2 CPUs) and writes DIR/model.safetensors and\n"
             "DIR/tuned.json, which pins the new weights' SHA-256. Then re-embed the KB\n"
             "with it, and keep KB_MODEL_DIR=DIR for every command of that KB:\n"
             "  KB_MODEL_DIR=DIR kb ingest --reembed\n",
};

typedef struct {
    const char *out, *python, *trainer, *epochs, *batch, *device, *max_pairs;
    int pairs_only, json;
} tune_args;

/* The trainer: --trainer, else the one beside kb's build (BUILD/kb ->
 * scripts/) or its installation (PREFIX/bin/kb -> PREFIX/share/kb/).
 * NULL when none is readable (or out of memory). */
static char *find_trainer(const char *given)
{
    if (given)
        return access(given, R_OK) == 0 ? kb_strdup(given) : NULL;
    static const char *const beside[] = { "../scripts/" TRAINER, "../share/kb/" TRAINER };
    char *exe = kb_exe_dir();
    for (size_t i = 0; exe && i < sizeof beside / sizeof beside[0]; i++) {
        char *p = kb_path_join(exe, beside[i]);
        if (p && access(p, R_OK) == 0) {
            free(exe);
            return p;
        }
        free(p);
    }
    free(exe);
    return NULL;
}

/* Runs the trainer with its stdout on our stderr (kb's stdout is kb's
 * answer alone); returns its exit status, 127 when it could not start. */
static int run_trainer(char *const argv[])
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return 127;
    if (pid == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execvp(argv[0], argv);
        fprintf(stderr, "kb tune: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 127;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Mines the pairs into dir/pairs.jsonl; *path is the file's name. */
static kb_rc write_pairs(const kb_cli *cli, const char *dir, char **path,
                         size_t *npairs, kb_err *err)
{
    kb_store *store = NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    *path = kb_path_join(dir, PAIRS_FILE);
    kb_rc rc = *path ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, err);
    if (rc == KB_OK)
        rc = kb_tune_pairs(store, &b, npairs, err);
    if (rc == KB_OK && *npairs < 2)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "the KB has %zu section(s) to learn "
                        "from; ingest its sources first ('kb ingest')", *npairs);
    if (rc == KB_OK)
        rc = kb_mkdirs(dir, err);
    if (rc == KB_OK)
        rc = kb_write_file_atomic(*path, b.data, b.len, err);
    kb_store_close(store);
    kb_buf_release(&b);
    return rc;
}

/* Opens the tuned model as every command will (its manifest, the whole
 * file's hash) and embeds one text with it. */
static kb_rc check_tuned(const kb_cli *cli, const char *dir, char *hash, kb_err *err)
{
    kb_embedder *e = NULL;
    float *v = NULL;
    const char *probe = "shared memory bank conflicts";
    char *manifest = kb_path_join(dir, "tuned.json");
    kb_rc rc = manifest ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && access(manifest, R_OK) != 0)
        rc = kb_err_set(err, KB_ERR_MODEL, "the trainer wrote no model: '%s' is missing",
                        manifest);
    free(manifest);
    if (rc == KB_OK)
        rc = kb_embedder_open_local(dir, cli->config->threads, &e, err);
    if (rc == KB_OK)
        rc = kb_embedder_check_weights(e, err);
    if (rc == KB_OK && !(v = malloc((size_t)kb_embedder_dim(e) * sizeof *v)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_embedder_embed(e, &probe, 1, v, err);
    free(v);
    if (rc == KB_OK && strcmp(kb_embedder_name(e), KB_EMBEDDER_TUNED) != 0)
        rc = kb_err_set(err, KB_ERR_MODEL, "'%s' holds no tuned model (no tuned.json)", dir);
    if (rc == KB_OK)
        snprintf(hash, 65, "%s", kb_embedder_weights_hash(e));
    kb_embedder_free(e);
    return rc;
}

/* The base must be the pinned model itself (a tuned one would be tuned
 * again from weights kb cannot pin): checked before anything is written. */
static kb_rc check_base(const kb_cli *cli, const char *base, kb_err *err)
{
    kb_embedder *e = NULL;
    kb_rc rc = kb_embedder_open_local(base, cli->config->threads, &e, err);
    if (rc == KB_OK && strcmp(kb_embedder_name(e), KB_EMBEDDER_BASE) != 0)
        rc = kb_err_set(err, KB_ERR_MODEL, "KB_MODEL_DIR '%s' holds a tuned model; "
                        "tune from the base model (its default directory, 'kb model fetch')",
                        base);
    kb_embedder_free(e);
    return rc;
}

static int tune_run(const kb_cli *cli, const kb_command *self, const tune_args *a)
{
    const char *base = cli->config->model_dir;
    if (!a->pairs_only && (!base || !*base))
        return kb_cli_usage_error(self, "no base model: KB_MODEL_DIR is empty "
                                  "(run 'kb model fetch' or set it)");
    kb_err err;
    kb_err_clear(&err);
    kb_buf dflt;
    kb_buf_init(&dflt, 0);
    const char *out = a->out;
    if (!out) {
        if (!base || !*base)
            return kb_cli_usage_error(self, "--out DIR is needed: KB_MODEL_DIR is empty");
        size_t len = strlen(base);   /* "DIR/" is DIR's sibling too */
        while (len > 1 && base[len - 1] == '/')
            len--;
        if (kb_buf_printf(&dflt, "%.*s-tuned", (int)len, base) != KB_OK) {
            kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
            return kb_cli_fail(&err);
        }
        out = dflt.data;
    }
    if (base && *base && strcmp(out, base) == 0) {
        kb_buf_release(&dflt);
        return kb_cli_usage_error(self, "--out is the base model's directory; "
                                  "the tuned model needs its own");
    }
    char *trainer = find_trainer(a->trainer);   /* --pairs-only: for its hint */
    if (!a->pairs_only && !trainer) {
        kb_buf_release(&dflt);
        return kb_cli_usage_error(self, "no training script: '%s' is not readable%s",
                                  a->trainer ? a->trainer : TRAINER,
                                  a->trainer ? "" : " beside kb; give --trainer FILE");
    }
    char *pairs = NULL, hash[65] = "";
    size_t npairs = 0;
    int status = 0;
    kb_rc rc = a->pairs_only ? KB_OK : check_base(cli, base, &err);
    if (rc == KB_OK)
        rc = write_pairs(cli, out, &pairs, &npairs, &err);
    if (rc == KB_OK && !cli->quiet && !a->pairs_only)
        fprintf(stderr, "kb tune: %zu pairs from the KB in %s\n", npairs, pairs);
    if (rc == KB_OK && !a->pairs_only) {
        const char *argv[24];
        int n = 0;
        argv[n++] = a->python ? a->python : "python3";
        argv[n++] = trainer;
        argv[n++] = "--base";  argv[n++] = base;
        argv[n++] = "--pairs"; argv[n++] = pairs;
        argv[n++] = "--out";   argv[n++] = out;
        if (a->epochs)    { argv[n++] = "--epochs";    argv[n++] = a->epochs; }
        if (a->batch)     { argv[n++] = "--batch";     argv[n++] = a->batch; }
        if (a->device)    { argv[n++] = "--device";    argv[n++] = a->device; }
        if (a->max_pairs) { argv[n++] = "--max-pairs"; argv[n++] = a->max_pairs; }
        argv[n] = NULL;
        status = run_trainer((char *const *)argv);
        if (status != 0)
            rc = kb_err_set(&err, KB_ERR_MODEL, "the trainer '%s' failed (exit %d)%s; "
                            "the model in '%s' is as it was", trainer, status,
                            status == 127 ? ": is the Python right (--python)?" : "",
                            out);
        if (rc == KB_OK)
            rc = check_tuned(cli, out, hash, &err);
    }
    if (rc == KB_OK && a->json) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "dir", out) ||
            !cJSON_AddStringToObject(o, "pairs_file", pairs) ||
            !cJSON_AddNumberToObject(o, "pairs", (double)npairs) ||
            (!a->pairs_only && (!cJSON_AddStringToObject(o, "model", KB_EMBEDDER_TUNED) ||
                                !cJSON_AddStringToObject(o, "sha256", hash)))) {
            cJSON_Delete(o);
            o = NULL;
        }
        rc = kb_cli_print_json(o, &err);
    } else if (rc == KB_OK && a->pairs_only) {
        printf("%zu pairs in %s; train on them where PyTorch is:\n"
               "  python3 %s --base %s --pairs %s --out DIR\n", npairs, pairs,
               trainer ? trainer : TRAINER, base && *base ? base : "BASE_MODEL_DIR", pairs);
    } else if (rc == KB_OK) {
        printf("tuned " KB_EMBEDDER_BASE " on %zu pairs from this KB: %s (SHA-256 %.16s...)\n"
               "re-embed the KB with it, then keep KB_MODEL_DIR for every command of this KB:\n"
               "  KB_MODEL_DIR=%s kb ingest --reembed\n", npairs, out, hash, out);
    }
    free(trainer);
    free(pairs);
    kb_buf_release(&dflt);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}

static int cmd_tune(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    tune_args a = { 0 };
    long n;
    int c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case 'o': a.out = g.arg; break;
        case KB_OPT_LONG('p'): a.pairs_only = 1; break;
        case KB_OPT_LONG('y'): a.python = g.arg; break;
        case KB_OPT_LONG('t'): a.trainer = g.arg; break;
        case KB_OPT_LONG('e'):
        case KB_OPT_LONG('b'):
        case KB_OPT_LONG('m'):
            if (kb_parse_long(g.arg, c == KB_OPT_LONG('b') ? 2 : 1, 1000000000L, &n) != KB_OK)
                return kb_cli_usage_error(self, "--%s wants a number%s, not '%s'",
                                          c == KB_OPT_LONG('e') ? "epochs" :
                                          c == KB_OPT_LONG('b') ? "batch" : "max-pairs",
                                          c == KB_OPT_LONG('b') ? " of 2 or more" : "",
                                          g.arg);
            *(c == KB_OPT_LONG('e') ? &a.epochs : c == KB_OPT_LONG('b') ? &a.batch
                                                                         : &a.max_pairs) = g.arg;
            break;
        case KB_OPT_LONG('d'):
            if (strcmp(g.arg, "auto") && strcmp(g.arg, "cpu") && strcmp(g.arg, "cuda"))
                return kb_cli_usage_error(self, "--device is auto, cpu or cuda, not '%s'", g.arg);
            a.device = g.arg;
            break;
        case KB_OPT_LONG('j'): a.json = 1; break;
        }
    }
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;
    return tune_run(cli, self, &a);
}

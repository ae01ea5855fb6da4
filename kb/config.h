/*
 * config.h - kb's settings from the environment, resolved once.
 *
 * cli/main.c calls kb_config_load at start and hands the result down; no
 * other code reads a KB_* variable. Each variable is a row of one table in
 * config.c (name, meaning, default), which also makes `kb --help`'s list.
 */
#ifndef KB_CONFIG_H
#define KB_CONFIG_H

#include "kb/kb.h"

/* Every string is owned by the config (kb_config_release frees it); NULL
 * means the variable is unset (or set but empty, except KB_MODEL_DIR). */
struct kb_config {
    char *kb_dir;            /* KB_DIR, else $XDG_DATA_HOME/kb, else
                                ~/.local/share/kb: never NULL once loaded */
    char *manifest;          /* KB_MANIFEST; NULL: kb_manifest_default_path() */
    char *mirror;            /* KB_MIRROR; NULL: sources come from their URLs */
    char *model_dir;         /* KB_MODEL_DIR, kept even when empty (then no
                                model is found), else
                                ~/.cache/kb/models/all-MiniLM-L6-v2 */
    int threads;             /* KB_THREADS, 1-64; 0: one per online CPU */
    char *embed_url;         /* KB_EMBED_URL; NULL: the local model */
    char *embed_model;       /* KB_EMBED_MODEL */
    char *embed_api_key;     /* KB_EMBED_API_KEY: never printed */
    long embed_timeout_ms;   /* KB_EMBED_TIMEOUT_MS, 1-86400000; 60000 */
    char *rerank_url;        /* KB_RERANK_URL: a /v1/rerank endpoint; NULL:
                                the local reranking stage alone */
    char *rerank_model;      /* KB_RERANK_MODEL */
    char *rerank_api_key;    /* KB_RERANK_API_KEY: never printed */
    char *verify;            /* KB_VERIFY; NULL: kb-verify beside kb, else
                                on the PATH */
    char *llm_url;           /* KB_LLM_URL: the generator's LLM endpoint */
    char *llm_model;         /* KB_LLM_MODEL */
    char *llm_api_key;       /* KB_LLM_API_KEY: never printed */
    char *llm_api;           /* KB_LLM_API: "openai" or "anthropic"; NULL:
                                judged from KB_LLM_URL (kb_llm_opts_from_config) */
    long llm_timeout_ms;     /* KB_LLM_TIMEOUT_MS, 1-86400000; 300000 */
    char *serve_token;       /* KB_SERVE_TOKEN: kb serve's bearer token,
                                never printed */
    int no_color;            /* NO_COLOR set and not empty */
    char *state_dir;         /* $XDG_STATE_HOME/kb, else ~/.local/state/kb:
                                what kb keeps between commands (the last
                                query's results); never NULL once loaded */
    int term_dumb;           /* TERM is "dumb": no colour (not a kb
                                setting, so not in the table) */
    char *file;              /* the config file looked at:
                                $XDG_CONFIG_HOME/kb/config, else
                                ~/.config/kb/config */
    int file_found;          /* it was there (and was read) */
    unsigned char from[32];  /* per variable of the table: KB_FROM_* */
    int line[32];            /* per variable: its line in the file */
};

enum { KB_FROM_DEFAULT = 0, KB_FROM_ENV, KB_FROM_FILE };

/* Sets every field to its default, as if no variable were set, without
 * reading the environment: kb_dir and model_dir stay NULL. */
void kb_config_init(kb_config *cfg);
/* Fills cfg from the environment and the config file (cfg's old contents
 * are not freed: pass one fresh or released). The file holds "KEY = value"
 * lines (blank lines and '#' comments aside) whose keys are the
 * variables' names; a variable set in the environment wins over the
 * file. A malformed number is KB_ERR_USAGE naming the variable ("bad
 * KB_THREADS 'x': expected a whole number from 1 to 64", after "FILE:LINE:
 * " when it is the file's); so is an unknown key of the file; KB_ERR_NOMEM.
 * On failure cfg is left as after kb_config_init. Release with
 * kb_config_release. */
kb_rc kb_config_load(kb_config *cfg, kb_err *err);
/* Frees the strings (wiping the keys) and goes back to kb_config_init. */
void kb_config_release(kb_config *cfg);

/* Appends the list of variables for `kb --help`: one line each with its
 * meaning and default (never a value: keys stay out of it). */
kb_rc kb_config_help(kb_buf *out);
/* Appends what `kb config` shows: the file, then each variable with its
 * value (a key only as "(set)") and where it came from. */
kb_rc kb_config_show(const kb_config *cfg, kb_buf *out);

/* The KB directory the environment names now: $KB_DIR, else
 * $XDG_DATA_HOME/kb, else ~/.local/share/kb (the rule kb_config_load
 * follows, for kb_store_default_dir's callers that hold no config).
 * Caller frees; NULL when out of memory. */
char *kb_config_env_kb_dir(void);

#endif

/* main.c - kb's entry: global options, the command table, dispatch. */
#include "kb/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one command table: usage and --help are generated from it. */
static const kb_command commands[] = {
    { "ingest", cmd_ingest, "kb ingest [options] [ID|PATH|URL]...",
      "ingest the manifest's sources, some of them, or files and URLs",
      "  --manifest FILE   sources manifest (default corpus/sources.json)\n"
      "  --mirror DIR      read sources from a local mirror ($KB_MIRROR)\n"
      "  --source ID       source id for ad-hoc paths and URLs (default 'local'\n"
      "                    for paths, 'web' for URLs)\n"
      "  --force           re-parse documents even if unchanged\n"
      "  --no-embed        skip embeddings (lexical search only)\n"
      "  --reembed         drop every vector and embed again (new model)\n"
      "  --index KIND      FAISS index: Flat (exact, default) or e.g. HNSW32\n"
      "  --json            print a JSON summary\n" },
    { "query", cmd_query, "kb query [options] TEXT...",
      "search the KB; prints ranked, cited passages",
      "  -k N              number of results (default 10)\n"
      "  --mode M          hybrid (default), lexical or vector\n"
      "  --source ID       only this source (repeatable)\n"
      "  --kind K          only text, code, table, paper or skill (repeatable)\n"
      "  --json            one JSON object (see README)\n"
      "  --explain         show each list's rank and score\n"
      "  --full            print whole chunks instead of snippets\n"
      "  --lex TEXT        also search these keywords, fused (repeatable)\n"
      "  --vec TEXT        also search this phrase by meaning (repeatable)\n"
      "  --hyde TEXT       also search by a hypothetical passage (repeatable);\n"
      "                    at most 10 of --lex, --vec, --hyde\n"
      "  --budget TOKENS   with --json: whole results, best first, within about\n"
      "                    TOKENS tokens (1000-200000; default: no limit)\n" },
    { "get", cmd_get, "kb get [--json [--budget TOKENS]] [--section] CHUNK_ID",
      "print a whole chunk, or with --section its whole section",
      "  --section         print every chunk of the chunk's section\n"
      "  --json            print JSON\n"
      "  --budget TOKENS   with --json: the chunks that fit about TOKENS tokens\n" },
    { "status", cmd_status, "kb status [--json]",
      "show the KB: sources, documents, chunks, last ingest, size",
      "  --json            print JSON\n" },
    { "sources", cmd_sources, "kb sources [--manifest FILE] [--json]",
      "list the manifest's sources and each one's state in the KB",
      "  --manifest FILE   sources manifest (default corpus/sources.json)\n"
      "  --json            print JSON\n" },
    { "papers", cmd_papers, "kb papers [--section S] [--words W] [--json [--budget TOKENS]]",
      "list the literature list's paper records",
      "  --section S       only papers whose section path contains S\n"
      "  --words W         only papers whose title or section holds every word of W\n"
      "  --json            print JSON\n"
      "  --budget TOKENS   with --json: the records that fit about TOKENS tokens\n" },
    { "eval", cmd_eval, "kb eval [options] QRELS.json",
      "measure retrieval against relevance judgments",
      "  --mode M          lexical, vector, hybrid or all (default all)\n"
      "  --k N             cut-off (default 10)\n"
      "  --json            print JSON\n"
      "  --verbose         per-query results\n" },
    { "mcp", cmd_mcp, "kb mcp [--allow-verify [--tasks DIR] [--timeout S]]",
      "serve the KB to coding agents over MCP (stdio; see README)",
      "  --allow-verify    also serve the verify tool, which runs candidate\n"
      "                    kernels on this machine's GPU (kb-verify)\n"
      "  --tasks DIR       verify's tasks (default: where kb verify finds them)\n"
      "  --timeout S       verify's wall-clock limit per candidate (default 120)\n" },
    { "verify", cmd_verify,
      "kb verify [options] TASK CANDIDATE.cu | --suite DIR --candidates DIR",
      "verify a candidate kernel on the GPU (runs kb-verify), or a task suite",
      "  --json            print the JSON result (see README)\n"
      "  --suite DIR       every task under DIR (corpus/tasks); prints fast_p\n"
      "  --candidates DIR  DIR/TASK.cu, DIR/TASK/*.cu, DIR/TASK/candidates/*.cu\n"
      "  --results DIR     score kb-verify JSON results saved in DIR instead\n"
      "  --serve           one kb-verify --serve process for all candidates\n"
      "  --no-timing       correctness only\n"
      "  --compile-only    NVRTC only: no GPU needed, nothing runs\n"
      "  --timeout S       wall-clock limit per candidate (default 120)\n" },
    { "prompt", cmd_prompt, "kb prompt [options] TASK",
      "print the generator's prompt for a task, for an agent that writes the kernel",
      "  --budget-tokens N   the whole prompt within about N tokens (1000-200000;\n"
      "                      default 12000): retrieved passages are cut first\n"
      "  --device-info FILE  the device (kb-verify --device-info --json); default:\n"
      "                      ask kb-verify, else the device is unknown\n"
      "  --tasks DIR         where TASK is (default: where kb verify finds tasks)\n"
      "  --feedback FILE     the last attempts' verdicts, as text\n"
      "  --parent FILE       a kernel to refine\n"
      "  --json              one object: system, user, tokens, hash, cites\n" },
    { "skill", cmd_skill, "kb skill SUBCOMMAND [options] (lint, new, verify, approve, "
      "retire, list, show, export, search)",
      "the skill library: lint, create, verify on the GPU, approve, retire, list, export, search",
      "  lint [PATH...]          check SKILL.md, kb-task, kernel.cu (compiled with\n"
      "                          kb-verify), evidence.json, deep links (with a KB),\n"
      "                          dominance; 'file:line: error: ...', exit 1 on errors\n"
      "      --no-compile        do not compile the kernels\n"
      "      --strict            warnings fail too\n"
      "  new NAME --task T       a draft with the sections to fill\n"
      "      --from FILE         its kernel.cu\n"
      "      --author WHO        kb-author\n"
      "      --description TEXT  the description (else a TODO)\n"
      "  verify NAME...|--all    run kb-verify on kernel.cu, append the result to\n"
      "                          evidence.json, set kb-status and kb-speedup\n"
      "      --timeout S         wall-clock limit per kernel (default 120)\n"
      "      --from-result FILE  import a kb-verify result made elsewhere (JSON or\n"
      "                          JSON lines) instead of a run; the one for the\n"
      "                          skill's task and kernel hash is taken\n"
      "      --device-info FILE  with --from-result: the device (kb-verify\n"
      "                          --device-info --json) for the record\n"
      "  approve NAME --reviewer WHO   a verified skill, approved (the human step)\n"
      "  retire NAME --reason TEXT     retired: kept, never deleted\n"
      "  list                    the skills, retired ones hidden\n"
      "      --status S          draft, verified, approved or retired\n"
      "      --task T            those of one task\n"
      "      --all               retired ones too\n"
      "  show NAME               one skill with its evidence\n"
      "  export DIR              skills an agent loads as-is (.claude/skills, ...)\n"
      "      --status S          verified (and approved; default) or approved\n"
      "  search TEXT...          skills in the KB (ingested: kind skill), one hit each\n"
      "      --arch A            kb-arch holds A (sm_90; 'sm_80+' holds sm_90)\n"
      "      --dtype D, --ops O  kb-dtype, kb-ops hold D, O\n"
      "      --status S          only these (retired ones only when asked: --all)\n"
      "      --k N, --mode M     skills wanted (default 10); hybrid, lexical, vector\n"
      "common options:\n"
      "  --dir DIR               the library (default corpus/skills)\n"
      "  --tasks DIR             the tasks (lint, new, verify; default corpus/tasks)\n"
      "  --json                  print JSON (every subcommand but approve, retire)\n" },
    { "generate", cmd_generate, "kb generate [options] TASK",
      "prompt an LLM for a task's kernel, verify each, feed the verdicts back, "
      "write a win back as a draft skill",
      "  --samples N         candidates requested at once per round (default 4)\n"
      "  --rounds R          rounds of feedback (default 3)\n"
      "  --strategy S        refine (the best so far, with every verdict; default)\n"
      "                      or population (parents drawn from the best few,\n"
      "                      one per technique)\n"
      "  --population N      kernels population keeps (default 4)\n"
      "  --budget-tokens N   no round starts once the run has used N tokens\n"
      "  --prompt-tokens N   each prompt's budget (default 12000)\n"
      "  --max-tokens N      each reply's cap (default 4096)\n"
      "  --floor-fraction F  stop once a kernel reaches F of the roofline (the\n"
      "                      floor over its median; default 0.9)\n"
      "  --compile-only      NVRTC only (no GPU): 'compiled' is the goal, nothing\n"
      "                      is written back\n"
      "  --out DIR           the runs folder (default KB/runs)\n"
      "  --skills DIR        where a win is written (default corpus/skills)\n"
      "  --no-write          write no skill\n"
      "  --replay RUN        re-run RUN's transcript against its recorded replies\n"
      "                      (a run id in the runs folder, or its folder); no LLM\n"
      "  --dry-run           print the first prompt; call nothing\n"
      "  --timeout S         kb-verify's wall-clock limit per candidate (default 120)\n"
      "  --json              one JSON summary object\n"
      "  environment: KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY, KB_LLM_API\n" },
    { "serve", cmd_serve, "kb serve [options]",
      "serve the KB over HTTP: REST endpoints for other agents (see README)",
      "  --listen ADDR:PORT  where to listen (default 127.0.0.1:8377; port 0\n"
      "                      picks a free one; [::1]:PORT for IPv6); the URL\n"
      "                      is printed on stdout\n"
      "  --token-file FILE   ask for 'Authorization: Bearer TOKEN', the token\n"
      "                      being FILE's first line ($KB_SERVE_TOKEN)\n"
      "  --threads N         worker threads, each with its own store and\n"
      "                      embedder (default: one per online CPU)\n"
      "  --max-body BYTES    request body cap, 413 beyond (default 1048576)\n"
      "  --timeout S         close a connection idle this long (default 30)\n"
      "  --max-connections N connections held at once (default 4096)\n"
      "  --drain-timeout S   on SIGTERM or SIGINT, wait this long for the\n"
      "                      requests in flight (default 10), then exit 0\n"
      "  -q                  no access log (one line per request on stderr)\n" },
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

static void main_usage(FILE *f)
{
    fprintf(f, "usage: kb [--kb DIR] [-q] COMMAND [options]\n\n"
               "kb: a knowledge base and kernel skill library for GPU kernel "
               "engineers.\n\ncommands:\n");
    for (size_t i = 0; i < ncommands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nglobal options:\n"
               "  --kb DIR          the KB directory ($KB_DIR, else "
               "$XDG_DATA_HOME/kb)\n"
               "  -q, --quiet       no progress or informational messages\n"
               "  --version         print the version\n\n");
    kb_buf env;
    kb_buf_init(&env, 0);
    if (kb_config_help(&env) == KB_OK)
        fprintf(f, "environment:\n%s\n", env.data);
    kb_buf_release(&env);
    fprintf(f, "'kb COMMAND --help' shows a command's options.\n");
}

/* Takes the global options out of argv wherever they stand (before "--"). */
static int take_global_options(int *argc, char **argv, kb_cli *cli)
{
    int out = 1;
    int i = 1;
    for (; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--kb") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "kb: option '--kb' needs a directory\n");
                return -1;
            }
            cli->kb_dir = argv[++i];
        } else if (strncmp(a, "--kb=", 5) == 0) {
            cli->kb_dir = a + 5;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            cli->quiet = 1;
        } else {
            argv[out++] = argv[i];
        }
    }
    for (; i < *argc; i++)
        argv[out++] = argv[i];
    argv[out] = NULL;
    *argc = out;
    return 0;
}

int main(int argc, char **argv)
{
    kb_cli cli = { 0 };
    if (take_global_options(&argc, argv, &cli) != 0)
        return 2;
    kb_log_set_level(cli.quiet ? KB_LOG_QUIET : KB_LOG_INFO);

    if (argc < 2) {
        main_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 ||
        strcmp(name, "help") == 0) {
        main_usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) {
        printf("kb %s\n", KB_VERSION);
        return 0;
    }
    const kb_command *cmd = NULL;
    for (size_t i = 0; i < ncommands && !cmd; i++)
        if (strcmp(name, commands[i].name) == 0)
            cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "kb: '%s' is not a kb command; see 'kb --help'\n", name);
        return 2;
    }
    if (kb_cli_wants_help(argc - 1, argv + 1)) {
        kb_cli_usage(cmd, 0);
        return 0;
    }

    /* the environment, read once: everything below gets it from here */
    kb_config cfg;
    kb_err err;
    kb_err_clear(&err);
    if (kb_config_load(&cfg, &err) != KB_OK)
        return kb_cli_fail(&err);
    if (!cli.kb_dir)
        cli.kb_dir = cfg.kb_dir;
    cli.config = &cfg;
    cli.color = isatty(STDOUT_FILENO) && !cfg.no_color;
    cli.progress = isatty(STDERR_FILENO) && !cli.quiet;
    int status = cmd->fn(argc - 1, argv + 1, &cli, cmd);
    kb_config_release(&cfg);
    return status;
}

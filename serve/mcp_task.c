/* mcp_task.c - the MCP Tasks extension, io.modelcontextprotocol/tasks
 * (serve.h, "mcp_task.c"): a verify call answered at once with a task
 * whose id is its verification job's, polled with tasks/get until the
 * queue's worker has verified it; and the CallToolResult every tools/call
 * answer is made of. */
#include "serve/serve.h"
#include "api/api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define INVALID_PARAMS (-32602)
#define INTERNAL_ERROR (-32603)
#define MISSING_CAPABILITY (-32021)

#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define POLL_MS 1000          /* a compile-only job takes ~0.3 s, a GPU one ~0.5-2 s */
#define NSEEN 512             /* the tasks whose times the server remembers */

/* When this server first saw a task, and first saw its present status. */
typedef struct {
    char id[65];
    char status[16];
    double created_ms, updated_ms;
} seen;

struct kb_mcp_tasks {
    pthread_mutex_t lock;
    seen e[NSEEN];
    size_t next;
};

kb_mcp_tasks *kb_mcp_tasks_new(void)
{
    kb_mcp_tasks *t = calloc(1, sizeof *t);
    if (t && pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

void kb_mcp_tasks_free(kb_mcp_tasks *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static double wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec * 1000.0 + tv.tv_usec / 1000.0;
}

/* Task id's times as this server saw them (a task it has not seen, or
 * forgot, starts now), its status recorded. */
static void times_of(kb_mcp_tasks *t, const char *id, const char *status,
                     double *created, double *updated)
{
    double now = wall_ms();
    pthread_mutex_lock(&t->lock);
    seen *s = NULL;
    for (size_t i = 0; i < NSEEN && !s; i++)
        if (!strcmp(t->e[i].id, id))
            s = &t->e[i];
    if (!s) {
        s = &t->e[t->next++ % NSEEN];
        snprintf(s->id, sizeof s->id, "%s", id);
        s->created_ms = s->updated_ms = now;
        snprintf(s->status, sizeof s->status, "%s", status);
    } else if (strcmp(s->status, status)) {
        s->updated_ms = now;
        snprintf(s->status, sizeof s->status, "%s", status);
    }
    *created = s->created_ms;
    *updated = s->updated_ms;
    pthread_mutex_unlock(&t->lock);
}

/* ms since the epoch as ISO 8601 UTC, milliseconds included. */
static cJSON *iso_time(double ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char buf[40], out[48];
    gmtime_r(&s, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, sizeof out, "%s.%03dZ", buf, (int)((long long)ms % 1000));
    return cJSON_CreateString(out);
}

/* The Task object of job id in status (with message); NULL out of memory. */
static cJSON *task_json(kb_mcp_tasks *t, const char *id, const char *status,
                        const char *message)
{
    double created, updated;
    times_of(t, id, status, &created, &updated);
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "taskId", id, &ok);
    kb_json_put_str(o, "status", status, &ok);
    if (message)
        kb_json_put_str(o, "statusMessage", message, &ok);
    kb_json_put_item(o, "createdAt", iso_time(created), &ok);
    kb_json_put_item(o, "lastUpdatedAt", iso_time(updated), &ok);
    kb_json_put_item(o, "ttlMs", cJSON_CreateNull(), &ok);   /* the queue keeps results */
    kb_json_put_num(o, "pollIntervalMs", POLL_MS, &ok);
    if (ok)
        return o;
    cJSON_Delete(o);
    return NULL;
}

cJSON *kb_mcp_call_result(cJSON *out, const char *error_text)
{
    int is_error = out == NULL;
    cJSON *r = cJSON_CreateObject();
    char *text = out ? cJSON_PrintUnformatted(out) : NULL;
    int ok = r && (is_error || text);
    cJSON *block = kb_json_push_obj(kb_json_put_arr(r, "content", &ok), &ok);
    kb_json_put_str(block, "type", "text", &ok);
    kb_json_put_str(block, "text", is_error ? error_text : text, &ok);
    if (!is_error)
        kb_json_put_item(r, "structuredContent", out, &ok);   /* out taken */
    kb_json_put_bool(r, "isError", is_error, &ok);
    free(text);
    if (ok)
        return r;
    cJSON_Delete(r);
    return NULL;
}

int kb_mcp_tasks_declared(const cJSON *params)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(meta, META_CAPABILITIES);
    const cJSON *ext = cJSON_GetObjectItemCaseSensitive(caps, "extensions");
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ext, KB_MCP_TASKS_EXTENSION));
}

int kb_mcp_task_call(kb_mcp_tasks *t, kb_tool_ctx *ctx, const cJSON *args, cJSON **result)
{
    *result = NULL;
    char id[65];
    kb_api_job_state st;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_api_verify_submit(ctx, args, id, &st, &err);
    if (rc == KB_ERR_NOMEM)
        return -1;
    if (rc != KB_OK || st != KB_API_JOB_WORKING)
        return 0;   /* in process, done already, or the tool's error: answered now */
    kb_log_info("kb mcp: verify queued as task %.16s", id);
    cJSON *r = task_json(t, id, "working", "queued for a verification worker");
    if (!r || !cJSON_AddStringToObject(r, "resultType", "task")) {
        cJSON_Delete(r);
        return -1;
    }
    *result = r;
    return 1;
}

/* -32021 with the capability that is missing, as the extension says. */
static int missing(char *msg, size_t size, cJSON **data)
{
    snprintf(msg, size, "missing required client capability: declare the "
             "extension '%s' in params._meta's '%s'", KB_MCP_TASKS_EXTENSION,
             META_CAPABILITIES);
    cJSON *d = cJSON_CreateObject(), *caps = cJSON_AddObjectToObject(d, "requiredCapabilities");
    cJSON *ext = caps ? cJSON_AddObjectToObject(caps, "extensions") : NULL;
    if (ext && cJSON_AddObjectToObject(ext, KB_MCP_TASKS_EXTENSION))
        *data = d;
    else
        cJSON_Delete(d);
    return MISSING_CAPABILITY;
}

/* tasks/get's DetailedTask for job id in state st (out: the tool's answer
 * when done, or NULL and tool_err its failure). */
static cJSON *detailed(kb_mcp_tasks *t, const char *id, kb_api_job_state st,
                       cJSON *out, const kb_err *tool_err)
{
    if (st == KB_API_JOB_WORKING)
        return task_json(t, id, "working", "queued or running on a verification worker");
    cJSON *verdict = cJSON_GetObjectItem(out, "verdict");
    char message[160];
    snprintf(message, sizeof message, "%s%s", out ? "verdict: " : "verify failed",
             out ? (cJSON_GetStringValue(verdict) ? verdict->valuestring : "?") : "");
    cJSON *task = task_json(t, id, "completed", message);
    cJSON *r = kb_mcp_call_result(out, tool_err->msg[0] ? tool_err->msg : kb_rc_name(tool_err->rc));
    int ok = task && r;
    kb_json_put_str(r, "resultType", "complete", &ok);
    kb_json_put_item(task, "result", r, &ok);
    if (ok)
        return task;
    cJSON_Delete(task);
    return NULL;
}

int kb_mcp_task_method(kb_mcp_tasks *t, kb_tool_ctx *ctx, const char *method,
                       const cJSON *params, cJSON **result, char *msg, size_t size,
                       cJSON **data)
{
    *result = NULL;
    *data = NULL;
    if (strcmp(method, "tasks/get") && strcmp(method, "tasks/update") &&
        strcmp(method, "tasks/cancel"))
        return snprintf(msg, size, "method '%.64s' not found (tasks: get, update, "
                        "cancel)", method), -32601;
    if (!kb_mcp_tasks_declared(params))
        return missing(msg, size, data);
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "taskId"));
    if (!id)
        return snprintf(msg, size, "%s needs params.taskId, the id a tools/call "
                        "answered with", method), INVALID_PARAMS;
    kb_api_job_state st = KB_API_JOB_NONE;
    cJSON *out = NULL;
    kb_err err, tool_err;
    kb_err_clear(&err);
    kb_err_clear(&tool_err);
    if (strlen(id) <= 64 && kb_api_verify_job(ctx, id, &st, &out, &tool_err, &err) != KB_OK)
        return snprintf(msg, size, "%s: cannot read the verification queue: %s",
                        method, err.msg), INTERNAL_ERROR;
    if (st == KB_API_JOB_NONE)
        return snprintf(msg, size, "Failed to retrieve task: task '%.64s' not found "
                        "(its id is a verify call's job on this server's queue)", id),
               INVALID_PARAMS;
    if (strcmp(method, "tasks/get")) {
        /* update: kb's tasks ask for no input; cancel: acknowledged, and the
         * job runs on (others may wait on the same job: its id is the
         * candidate's hash) */
        cJSON_Delete(out);
        *result = cJSON_CreateObject();
    } else {
        *result = detailed(t, id, st, out, &tool_err);
    }
    if (!*result)
        return snprintf(msg, size, "out of memory"), INTERNAL_ERROR;
    return 0;
}

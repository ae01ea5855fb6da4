/* tool_prompt.c - the generator's part of the tool table (api.h): task,
 * a task's definition, and prompt, the generator's prompt for it, for an
 * agent that writes the kernel with its own model and hands it back
 * through verify. */
#include "generator/gen.h"
#include "verify/verify.h"
#include "api/api.h"
#include "kb/kb_int.h"

#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

#define BUDGET_MIN 1000
#define BUDGET_MAX 200000
#define FEEDBACK_MAX 65536
#define PARENT_MAX 1048576
#define DEVICE_SLOT "generator/device"
#define DEVICE_INFO_TIMEOUT_S 60

/* The task's name, as both tools take it. */
#define TASK_PROPERTY \
    "\"task\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64," \
    "\"description\":\"the task's name: a folder of the task library such " \
    "as gelu, softmax, layernorm, reduce_sum, transpose, gemm_f32 or " \
    "gemm_bf16\"}"

static const char task_input[] =
    "{\"type\":\"object\",\"properties\":{" TASK_PROPERTY "},"
    "\"required\":[\"task\"],\"additionalProperties\":false}";

#define EXPRS "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"
#define VALUE_OR_NULL "{\"type\":[\"number\",\"null\"]}"

static const char task_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"level\":{\"type\":\"integer\"},"
    "\"ops\":" EXPRS ","
    "\"dtype\":{\"type\":\"string\",\"description\":\"the type the tolerance "
        "is for\"},"
    "\"kernels\":" EXPRS ","
    "\"signature\":{\"type\":\"string\",\"description\":\"each kernel's "
        "extern \\\"C\\\" __global__ declaration, one a line: every kernel of "
        "the task takes this parameter list\"},"
    "\"params\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{"
        "\"name\":{\"type\":\"string\"},"
        "\"type\":{\"type\":\"string\",\"enum\":[\"f32\",\"bf16\",\"f16\","
            "\"i32\",\"u32\",\"f64\"]},"
        "\"role\":{\"type\":\"string\",\"enum\":[\"input\",\"output\","
            "\"input and output\",\"scratch\",\"dimension\",\"scalar\"]},"
        "\"size\":{\"type\":\"string\",\"description\":\"a buffer's element "
            "count, an expression of the dims\"},"
        "\"value\":{\"type\":\"string\",\"description\":\"a dimension's or "
            "scalar's value, an expression\"},"
        "\"at_target\":" VALUE_OR_NULL ","
        "\"dists\":" EXPRS "},"
        "\"required\":[\"name\",\"type\",\"role\",\"at_target\",\"dists\"],"
        "\"additionalProperties\":false}},"
    "\"target_shape\":{\"type\":\"object\",\"description\":\"the timed shape; "
        "the others (sizes off every tile, tiny ones) are kept back\","
        "\"properties\":{\"name\":{\"type\":\"string\"},\"dims\":{\"type\":"
        "\"object\",\"additionalProperties\":{\"type\":\"number\"}}},"
        "\"required\":[\"name\",\"dims\"],\"additionalProperties\":false},"
    "\"tolerance\":{\"type\":\"object\",\"description\":\"|out - ref| <= atol "
        "+ rtol*|ref|\",\"properties\":{"
        "\"dtype\":{\"type\":\"string\"},\"atol\":{\"type\":\"string\"},"
        "\"rtol\":{\"type\":\"string\"},\"atol_at_target\":" VALUE_OR_NULL ","
        "\"rtol_at_target\":" VALUE_OR_NULL "},"
        "\"required\":[\"dtype\",\"atol\",\"rtol\",\"atol_at_target\","
        "\"rtol_at_target\"],\"additionalProperties\":false},"
    "\"launch\":{\"type\":\"array\",\"description\":\"the default launches, "
        "run in order; '// kb-launch:' lines in the source replace them\","
        "\"items\":{\"type\":\"object\",\"properties\":{"
        "\"kernel\":{\"type\":\"string\"},\"grid\":" EXPRS ",\"block\":" EXPRS ","
        "\"shared\":{\"type\":\"string\",\"description\":\"dynamic shared "
            "memory in bytes, an expression\"}},"
        "\"required\":[\"kernel\",\"grid\",\"block\",\"shared\"],"
        "\"additionalProperties\":false}},"
    "\"baseline\":{\"type\":\"string\",\"description\":\"reference, or a "
        "vendor library: cublas_sgemm, cublas_bf16\"},"
    "\"roofline\":{\"type\":\"object\",\"properties\":{"
        "\"bytes\":{\"type\":\"string\"},\"flops\":{\"type\":\"string\"},"
        "\"unit\":{\"type\":\"string\"},\"bytes_at_target\":" VALUE_OR_NULL ","
        "\"flops_at_target\":" VALUE_OR_NULL "},"
        "\"required\":[\"bytes\",\"flops\",\"unit\",\"bytes_at_target\","
        "\"flops_at_target\"],\"additionalProperties\":false},"
    "\"reference\":{\"type\":\"string\",\"description\":\"reference.cu: the "
        "plain kernel a candidate is checked against\"}},"
    "\"required\":[\"name\",\"description\",\"level\",\"ops\",\"dtype\","
        "\"kernels\",\"signature\",\"params\",\"target_shape\",\"tolerance\","
        "\"launch\",\"baseline\",\"roofline\",\"reference\"],"
    "\"additionalProperties\":false}";

static const char prompt_input[] =
    "{\"type\":\"object\",\"properties\":{" TASK_PROPERTY ","
    "\"budget_tokens\":{\"type\":\"integer\",\"minimum\":" STR(BUDGET_MIN)
        ",\"maximum\":" STR(BUDGET_MAX) ",\"description\":\"the whole prompt "
        "within about this many tokens (3 bytes each): retrieved passages are "
        "cut first, whole; the task, its reference kernel and the output "
        "contract never. So the least budget that works depends on the task "
        "(about 1500 tokens for gelu, 3000 for attention_causal): a smaller "
        "one is an error that names the task's size. Over MCP the default is "
        STR(KB_TOOL_BUDGET_DEFAULT) "\"},"
    "\"feedback\":{\"type\":\"string\",\"maxLength\":" STR(FEEDBACK_MAX) ","
        "\"description\":\"the last attempts' verdicts (verify's reasons, "
        "compile logs, timings), carried in their own section\"},"
    "\"parent\":{\"type\":\"string\",\"maxLength\":" STR(PARENT_MAX) ","
        "\"description\":\"a kernel to refine, carried in its own section\"}},"
    "\"required\":[\"task\"],\"additionalProperties\":false}";

static const char prompt_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"system\":{\"type\":\"string\",\"description\":\"the system prompt\"},"
    "\"user\":{\"type\":\"string\",\"description\":\"the user message: the "
        "hardware profile, the task, the reference kernel, the retrieved "
        "context, the last attempts, a kernel to refine, the output contract\"},"
    "\"tokens\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"the "
        "estimated size of system and user (3 bytes a token)\"},"
    "\"hash\":{\"type\":\"string\",\"description\":\"SHA-256 of system, a "
        "NUL, user: the same KB and inputs give the same hash\"},"
    "\"cites\":{\"type\":\"array\",\"description\":\"the passages in the "
        "prompt, in its order [1], [2], ...\",\"items\":{\"type\":\"object\","
        "\"properties\":{"
        "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1},"
        "\"kind\":{\"type\":\"string\",\"enum\":[\"text\",\"code\",\"table\","
            "\"paper\",\"skill\"]},"
        "\"source\":{\"type\":\"string\"},\"title\":{\"type\":\"string\"},"
        "\"heading\":{\"type\":\"string\",\"description\":\"the heading "
            "path, joined by ' > '\"},"
        "\"url\":{\"type\":\"string\",\"description\":\"a deep link\"},"
        "\"skill\":{\"type\":\"string\",\"description\":\"the skill's name "
            "for kind skill, else empty\"}},"
        "\"required\":[\"chunk_id\",\"kind\",\"source\",\"title\",\"heading\","
        "\"url\",\"skill\"],\"additionalProperties\":false}},"
    "\"chosen\":{\"type\":\"object\",\"description\":\"when the server's "
        "relevance stage is its LLM (KB_RERANK=llm): it chose the doc passages "
        "from a larger pool, as kb generate's rounds do\",\"properties\":{"
        "\"model\":{\"type\":\"string\"},\"cached\":{\"type\":\"boolean\"},"
        "\"pool\":{\"type\":\"integer\",\"minimum\":0},"
        "\"ordered\":{\"type\":\"integer\",\"minimum\":0},"
        "\"fallback\":{\"type\":[\"string\",\"null\"],\"description\":"
            "\"why kb's own picks were kept; null when the LLM chose\"}},"
        "\"required\":[\"model\",\"cached\",\"pool\",\"ordered\",\"fallback\"],"
        "\"additionalProperties\":false}},"
    "\"required\":[\"system\",\"user\",\"tokens\",\"hash\",\"cites\"],"
    "\"additionalProperties\":false}";

/* 1 when name could be a task's folder: [a-z0-9_-], no path. An agent
 * picks a task, not a folder on this machine. */
static int task_name_ok(const char *name)
{
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-'))
            return 0;
    return *name != '\0';
}

static const char *task_arg(const char *tool, const cJSON *args, kb_err *err)
{
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, "task"));
    if (t && task_name_ok(t))
        return t;
    /* a name that cannot be a task's is no task: not found, as an unknown
     * name is (its schema holds no pattern to say so beforehand) */
    kb_err_set(err, KB_ERR_NOTFOUND, "%s: no task '%.64s': a task's name is "
               "lower-case letters, digits, '_' and '-', such as gelu", tool, t ? t : "");
    return NULL;
}

/* The device profile parked with a store: asked of kb-verify once. */
typedef struct {
    cJSON *device;   /* NULL: unknown (no kb-verify, no GPU) */
} device_cache;

static void device_cache_free(void *p)
{
    device_cache *d = p;
    if (d)
        cJSON_Delete(d->device);
    free(d);
}

static const cJSON *store_device(kb_tool_ctx *ctx, kb_err *err)
{
    device_cache *d = kb_store_slot_get(ctx->store, DEVICE_SLOT);
    if (d)
        return d->device;
    if (!(d = calloc(1, sizeof *d)))
        return NULL;
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = ctx->config ? ctx->config->verify : NULL;
    vo.timeout_s = DEVICE_INFO_TIMEOUT_S;
    kb_verifier *v = NULL;
    kb_err quiet;   /* no GPU here is an unknown device, not a failure */
    kb_err_clear(&quiet);
    if (kb_verifier_open(&vo, &v, &quiet) == KB_OK &&
        kb_verifier_device_info(v, &d->device, &quiet) != KB_OK)
        kb_log_info("prompt: %s: the device is unknown", quiet.msg);
    kb_verifier_free(v);
    if (kb_store_slot_set(ctx->store, DEVICE_SLOT, d, device_cache_free, err) != KB_OK)
        return NULL;
    return d->device;
}

static kb_rc tool_task(kb_tool_ctx *ctx, const cJSON *args, cJSON **out, kb_err *err)
{
    const char *task = task_arg("task", args, err);
    if (!task)
        return err->rc;
    return kb_gen_task_json(ctx->config, NULL, task, out, err);
}

static kb_rc tool_prompt(kb_tool_ctx *ctx, const cJSON *args, cJSON **out, kb_err *err)
{
    const char *task = task_arg("prompt", args, err);
    if (!task)
        return err->rc;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(args, "budget_tokens");
    kb_gen_prompt_opts o = {
        .store = ctx->store, .config = ctx->config, .task = task,
        .budget_tokens = cJSON_IsNumber(b) ? (long)b->valuedouble : ctx->budget_tokens,
        .feedback = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, "feedback")),
        .parent = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, "parent")),
        .choose = kb_gen_can_choose(ctx->config),   /* as kb generate's rounds do */
    };
    kb_err_clear(err);
    o.device = store_device(ctx, err);
    if (err->rc != KB_OK)
        return err->rc;
    kb_gen_prompt p;
    kb_rc rc = kb_gen_prompt_build(&o, &p, err);
    if (rc == KB_OK)
        rc = kb_gen_prompt_json(&p, out, err);
    kb_gen_prompt_release(&p);
    return rc;
}

static const kb_tool tools[] = {
    { "task",
      "Describe one of kb's kernel tasks: what the kernel computes, the "
      "extern \"C\" __global__ signature every kernel of it takes, each "
      "parameter's role (input, output, dimension, ...) with its size as an "
      "expression and at the target shape, the target shape (the one timed; "
      "the other shapes are kept back, so handle every size), the tolerance, "
      "the default launch, the baseline and roofline, and the reference "
      "kernel's source. Use it before you write a kernel for verify; an "
      "unknown task is an error that says where it looked.",
      task_input, task_output, 1, tool_task, 0, KB_TOOL_MCP | KB_TOOL_REST },
    { "prompt",
      "Assemble kb's generator prompt for a task: the GPU's hardware "
      "profile, the task, its reference kernel, the context retrieved for it "
      "from the knowledge base (the team's verified skills first, exemplar "
      "kernels, documentation passages, each with its deep link), the last "
      "attempts' verdicts when you pass feedback, a kernel to refine when "
      "you pass parent, and the output contract. Use it to write a kernel "
      "with your own model, then check it with verify. Returns system and "
      "user text, the estimated tokens (within budget_tokens), the prompt's "
      "hash and the passages cited.",
      prompt_input, prompt_output, 1, tool_prompt, 0, KB_TOOL_MCP | KB_TOOL_REST },
};

const kb_tool *kb_api_prompt_tools(size_t *n)
{
    *n = sizeof tools / sizeof tools[0];
    return tools;
}

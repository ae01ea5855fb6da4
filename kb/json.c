/* json.c - the one helper kb builds JSON with (kb/kb.h, "json"): cJSON's
 * adders made sticky, so a run of them is checked once. */
#include "kb/kb.h"

void kb_json_put_item(cJSON *o, const char *key, cJSON *item, int *ok)
{
    if (*ok && !item)
        item = cJSON_CreateNull();
    if (!*ok || !item || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        *ok = 0;
    }
}

void kb_json_put_str(cJSON *o, const char *key, const char *s, int *ok)
{
    if (*ok)
        kb_json_put_item(o, key, s ? cJSON_CreateString(s) : cJSON_CreateNull(), ok);
}

void kb_json_put_num(cJSON *o, const char *key, double x, int *ok)
{
    if (*ok)
        kb_json_put_item(o, key, cJSON_CreateNumber(x), ok);
}

void kb_json_put_bool(cJSON *o, const char *key, int b, int *ok)
{
    if (*ok)
        kb_json_put_item(o, key, cJSON_CreateBool(b), ok);
}

void kb_json_put_null(cJSON *o, const char *key, int *ok)
{
    if (*ok)
        kb_json_put_item(o, key, cJSON_CreateNull(), ok);
}

cJSON *kb_json_put_obj(cJSON *o, const char *key, int *ok)
{
    cJSON *x = *ok ? cJSON_CreateObject() : NULL;
    kb_json_put_item(o, key, x, ok);
    return *ok ? x : NULL;
}

cJSON *kb_json_put_arr(cJSON *o, const char *key, int *ok)
{
    cJSON *x = *ok ? cJSON_CreateArray() : NULL;
    kb_json_put_item(o, key, x, ok);
    return *ok ? x : NULL;
}

cJSON *kb_json_push_obj(cJSON *a, int *ok)
{
    cJSON *x = *ok ? cJSON_CreateObject() : NULL;
    if (!*ok || !x || !cJSON_AddItemToArray(a, x)) {
        cJSON_Delete(x);
        *ok = 0;
        return NULL;
    }
    return x;
}

void kb_json_push_str(cJSON *a, const char *s, int *ok)
{
    cJSON *x = *ok ? (s ? cJSON_CreateString(s) : cJSON_CreateNull()) : NULL;
    if (!*ok || !x || !cJSON_AddItemToArray(a, x)) {
        cJSON_Delete(x);
        *ok = 0;
    }
}

/* tensormap.c - the TMA tensor maps a candidate asks for (kb-tensormap
 * lines): checked against the task's buffers on every shape, then encoded
 * on the host over the candidate's buffers of each shape. */
#include "verify/kb-verify/verify_int.h"

#include <string.h>

/* A map's dims and box on shape s (box clamped only so that the
 * conversion cannot overflow: the driver refuses sides over 256). Returns
 * the elements the map spans, or -1 with err set. */
static double map_extent(const kbv_ctx *v, const kb_tensormap *m, const kb_shape *s,
                         cuuint64_t dims[], cuuint32_t box[], kb_err *err)
{
    double elems = 1;
    for (int d = 0; d < m->rank; d++) {
        double x, b;
        if (kb_task_eval(v->task, s, m->dims[d], &x, err) ||
            kb_task_eval(v->task, s, m->box[d], &b, err))
            return -1;
        dims[d] = x < 1 ? 0 : (cuuint64_t)x;
        box[d] = b < 1 ? 0 : b > 1024 ? 1024 : (cuuint32_t)b;
        elems *= (double)dims[d];
    }
    return elems;
}

/* A map (over parameter p) that reaches past its buffer on some shape:
 * a map is a window onto memory, and one larger than its buffer would
 * read whatever lies next to it. Returns 0 or -1 (verdict set). */
static int check_extent(kbv_ctx *v, const kb_tensormap *m, int p)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t si = 0; si < v->task->nshapes; si++) {
        const kb_shape *s = &v->task->shapes[si];
        cuuint64_t dims[KB_TMAP_MAX_RANK];
        cuuint32_t box[KB_TMAP_MAX_RANK];
        double have, elems = map_extent(v, m, s, dims, box, &err);
        if (elems < 0) {
            kbv_set_verdict(v, "refused", "kb-tensormap over '%s': %s", m->buffer,
                            err.msg);
            return -1;
        }
        if (kb_task_eval(v->task, s, v->task->params[p].size, &have, &err) == KB_OK &&
            elems > have) {
            kbv_set_verdict(v, "refused", "kb-tensormap over '%s' spans %.0f elements "
                            "on shape '%s'; the buffer holds %.0f", m->buffer, elems,
                            s->name, have);
            return -1;
        }
    }
    return 0;
}

int kbv_check_maps(kbv_ctx *v)
{
    for (size_t i = 0; i < v->hdr.nmaps; i++) {
        const kb_tensormap *m = &v->hdr.maps[i];
        int p = kbv_param_index(v->task, m->buffer);
        if (p < 0 || !kbv_is_buffer(&v->task->params[p])) {
            kbv_set_verdict(v, "refused", "kb-tensormap: the task has no buffer '%s'",
                            m->buffer);
            return -1;
        }
        if (check_extent(v, m, p) != 0)
            return -1;
    }
    return 0;
}

/* One map encoded into *out over base (packed, so each dimension's stride
 * is the product of those inside it), reported into mo. */
static CUresult encode_one(kbv_ctx *v, const kb_tensormap *m, const kb_shape *s,
                           kb_dtype t, void *base, CUtensorMap *out, cJSON *mo)
{
    static const CUtensorMapDataType types[] = {
        [KB_DT_F32] = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        [KB_DT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        [KB_DT_F16] = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        [KB_DT_I32] = CU_TENSOR_MAP_DATA_TYPE_INT32,
        [KB_DT_U32] = CU_TENSOR_MAP_DATA_TYPE_UINT32,
        [KB_DT_F64] = CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    };
    static const CUtensorMapSwizzle swizzles[] = {
        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
        CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B,
    };
    cuuint64_t dims[KB_TMAP_MAX_RANK], strides[KB_TMAP_MAX_RANK];
    cuuint32_t box[KB_TMAP_MAX_RANK], estr[KB_TMAP_MAX_RANK];
    map_extent(v, m, s, dims, box, NULL);   /* kbv_check_maps evaluated it */
    cJSON *dj = cJSON_AddArrayToObject(mo, "dims");
    cJSON *bj = cJSON_AddArrayToObject(mo, "box");
    size_t stride = kb_dtype_size(t);
    for (int d = 0; d < m->rank; d++) {
        estr[d] = 1;
        stride *= dims[d];
        strides[d] = stride;   /* of dimension d + 1: the buffer is packed */
        cJSON_AddItemToArray(dj, cJSON_CreateNumber((double)dims[d]));
        cJSON_AddItemToArray(bj, cJSON_CreateNumber(box[d]));
    }
    memset(out, 0, sizeof *out);
    return cuTensorMapEncodeTiled(
        out, types[t], (cuuint32_t)m->rank, base, dims, strides, box, estr,
        CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzles[m->swizzle == 128 ? 3 : m->swizzle / 32],
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* None reaches past its buffer (kbv_check_maps saw to that). One the
 * driver refuses (TMA wants 16-byte aligned strides: a row of 999 bf16
 * cannot be mapped) is passed as zeros and reported: the candidate must
 * not use it on that shape. */
void kbv_encode_maps(kbv_ctx *v, const kb_shape *s, cJSON *out)
{
    for (size_t i = 0; i < v->hdr.nmaps; i++) {
        const kb_tensormap *m = &v->hdr.maps[i];
        int p = kbv_param_index(v->task, m->buffer);
        cJSON *mo = cJSON_CreateObject();
        if (out)
            cJSON_AddItemToArray(out, mo);
        cJSON_AddStringToObject(mo, "shape", s->name);
        cJSON_AddStringToObject(mo, "buffer", m->buffer);
        CUresult r = encode_one(v, m, s, v->task->params[p].dtype,
                                (void *)v->ps[p].cand_arg, &v->maps[i], mo);
        cJSON_AddBoolToObject(mo, "encoded", r == CUDA_SUCCESS);
        if (r) {
            memset(&v->maps[i], 0, sizeof v->maps[i]);
            cJSON_AddStringToObject(mo, "error", kbv_cu_name(r));
        }
        if (!out)   /* encoded again over another input set: not reported */
            cJSON_Delete(mo);
    }
}

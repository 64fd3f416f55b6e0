/* Inference of the key-value cache family. */
#include "ops/kv_cache/kv_cache.h"

/* qkv [B, 3C], k_cache and v_cache [B, T, C] alike, positions [B] i32 -> y [B, C] */
ge2_status ge2_infer_ATTENTION_CACHED(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 1));
    GE2_TRY(ge2_infer_need_float(node, &in[0], "qkv"));
    GE2_TRY(ge2_infer_need_ndim(node, &in[0], 2));
    GE2_TRY(ge2_infer_need_ndim(node, &in[1], 3));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[2]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[1], &in[2]));
    const int64_t b = in[0].shape.dim[0], c = in[1].shape.dim[2], heads = ge2_attention_cached_heads(node);
    if (in[0].shape.dim[1] != 3 * c || in[1].shape.dim[0] != b)
        return ge2_error(GE2_ERR_SHAPE, "ge2_attention_cached: qkv %s is %s and the caches %s; expected qkv [B, 3C] "
                         "for caches [B, T, C]", in[0].name, GE2_SHAPE_STR(in[0].shape), GE2_SHAPE_STR(in[1].shape));
    if (heads < 1 || c % heads != 0)
        return ge2_error(GE2_ERR_SHAPE, "ge2_attention_cached: %lld heads do not divide the %lld channels of %s",
                         (long long)heads, (long long)c, in[1].name);
    if (in[3].dtype != GE2_I32 || in[3].shape.ndim != 1 || in[3].shape.dim[0] != b)
        return ge2_error(GE2_ERR_SHAPE, "ge2_attention_cached: positions %s is %s %s, expected i32 [%lld]", in[3].name,
                         ge2_dtype_name(in[3].dtype), GE2_SHAPE_STR(in[3].shape), (long long)b);
    out[0] = (ge2_desc){in[0].dtype, ge2_shape2(b, c), NULL};
    return GE2_OK;
}

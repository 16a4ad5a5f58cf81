/* See raw_dtype.c. */
#pragma once
#include <chutney/chutney.h>
#ifdef __cplusplus
extern "C" {
#endif
ctn_status raw_tensor_create(int32_t dtype, uint32_t ndim, const int64_t *shape, const void *data, ctn_tensor **out);
ctn_status raw_input(ctn_graph *g, const char *name, int32_t dtype, uint32_t ndim, const int64_t *shape, ctn_node *out);
ctn_status raw_scalar(ctn_graph *g, int32_t dtype, double value, ctn_node *out);
ctn_status raw_cast(ctn_graph *g, ctn_node a, int32_t dtype, ctn_node *out);
size_t raw_dtype_size(int32_t dtype);
const char *raw_dtype_name(int32_t dtype);
ctn_status raw_node_info(ctn_graph *g, ctn_node n, int32_t *out_dtype, uint32_t *out_ndim, int64_t *out_shape);
#ifdef __cplusplus
}
#endif

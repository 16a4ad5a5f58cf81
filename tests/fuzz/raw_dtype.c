/* C shims that pass any int32_t as a ctn_dtype, as a C caller (or another language) can. In C++
 * an out-of-range value of the enum is undefined behaviour in the caller already (UBSan's enum
 * check), so the fuzz target and the reliability test call the C API through these. In C the
 * enum is just its compatible integer type. */
#include <chutney/chutney.h>

#include "raw_dtype.h"

ctn_status raw_tensor_create(int32_t dtype, uint32_t ndim, const int64_t *shape, const void *data, ctn_tensor **out) {
  return ctn_tensor_create((ctn_dtype)dtype, ndim, shape, data, out);
}
ctn_status raw_input(ctn_graph *g, const char *name, int32_t dtype, uint32_t ndim, const int64_t *shape, ctn_node *out) {
  return ctn_input(g, name, (ctn_dtype)dtype, ndim, shape, out);
}
ctn_status raw_scalar(ctn_graph *g, int32_t dtype, double value, ctn_node *out) {
  return ctn_scalar(g, (ctn_dtype)dtype, value, out);
}
ctn_status raw_cast(ctn_graph *g, ctn_node a, int32_t dtype, ctn_node *out) {
  return ctn_cast(g, a, (ctn_dtype)dtype, out);
}
size_t raw_dtype_size(int32_t dtype) { return ctn_dtype_size((ctn_dtype)dtype); }
const char *raw_dtype_name(int32_t dtype) { return ctn_dtype_name((ctn_dtype)dtype); }
ctn_status raw_node_info(ctn_graph *g, ctn_node n, int32_t *out_dtype, uint32_t *out_ndim, int64_t *out_shape) {
  ctn_dtype d = CTN_F32;
  ctn_status s = ctn_node_info(g, n, &d, out_ndim, out_shape);
  if (out_dtype) *out_dtype = (int32_t)d;
  return s;
}

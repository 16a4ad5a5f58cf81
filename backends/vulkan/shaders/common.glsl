// Shared by every chutney compute shader. Compiled with -DT=float or -DT=double (and -DUSE_F64
// for the latter); word shaders (gather, cast) do not use T.
#extension GL_EXT_control_flow_attributes : enable

// Push constants (48 bytes, under the 128 bytes every device offers): the element offset of each
// binding inside its descriptor range (the range starts at an aligned offset), then per-dispatch
// values: base = first global index of this dispatch, count = items in it.
layout(push_constant) uniform PC {
  uint off[8];
  uint base;
  uint count;
  uint e2;
  uint e3;
} pc;

layout(local_size_x_id = 0, local_size_y_id = 1) in;

// Linear workgroup index of a 2-D grid (x is capped at 65535 groups).
uint group_linear() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint invocation_linear() {
  return group_linear() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}

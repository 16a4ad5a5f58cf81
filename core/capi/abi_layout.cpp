// Compiles the layout pins of every public struct (abi_layout.h) into each libchutney build, so
// a change that moves a field fails the build whether or not tests are built. No code.
#include <chutney/backend.h>
#include <chutney/checkpoint.h>
#include <chutney/collective.h>
#include <chutney/chutney.h>
#include <chutney/data.h>
#include <chutney/dlpack.h>
#include <chutney/nn.h>
#include <chutney/onnx.h>
#include <chutney/oplib.h>
#include <chutney/cuda.h>
#include <chutney/opencl.h>
#include <chutney/vulkan.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>
#include <chutney/types.h>
#include <chutney/version.h>

#include "capi/abi_layout.h"

/* Every public header, compiled as C11 with -Wall -Wextra -pedantic -Werror, and the ABI v1
 * layout pinned: a change that moves a field of a frozen struct fails this build.
 *
 * Offsets are written in terms of P (pointer size) so the pins hold on the 64-bit and 32-bit
 * (armhf) targets alike; the LP64 block below spells the numbers out for the common case. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <chutney/backend.h>
#include <chutney/checkpoint.h>
#include <chutney/collective.h>
#include <chutney/chutney.h>
#include <chutney/data.h>
#include <chutney/desc.h>
#include <chutney/dlpack.h>
#include <chutney/nn.h>
#include <chutney/oplib.h>
#include <chutney/cuda.h>
#include <chutney/opencl.h>
#include <chutney/vulkan.h>
#include <chutney/onnx.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>
#include <chutney/types.h>
#include <chutney/version.h>

/* The pins themselves live in core/capi/abi_layout.h, compiled into every libchutney build. */
#include "../../core/capi/abi_layout.h"

/* CTN_STRUCT_HAS must see a slot only when it is entirely within struct_size. */
static int struct_has_works(void) {
  ctn_backend_desc d;
  memset(&d, 0, sizeof d);
  d.header.struct_size = (uint32_t)offsetof(ctn_backend_desc, synchronize);
  if (!CTN_STRUCT_HAS(ctn_backend_desc, &d.header, get_kernel)) return 0;
  if (CTN_STRUCT_HAS(ctn_backend_desc, &d.header, synchronize)) return 0;
  d.header.struct_size = (uint32_t)sizeof d;
  return CTN_STRUCT_HAS(ctn_backend_desc, &d.header, get_proc_address);
}

int main(void) {
  int failures = 0;
  uint32_t v = ctn_abi_version();
  if (v != CTN_ABI_VERSION) {
    fprintf(stderr, "ctn_abi_version() = 0x%x, header says 0x%x\n", (unsigned)v,
            (unsigned)CTN_ABI_VERSION);
    ++failures;
  }
  if (!struct_has_works()) {
    fprintf(stderr, "CTN_STRUCT_HAS gives wrong answers\n");
    ++failures;
  }
  if (strcmp(CTN_OP_MATMUL, "matmul") != 0 || strcmp(CTN_PLUGIN_ENTRY_SYMBOL, "ctn_plugin_query")) {
    fprintf(stderr, "op/entry names changed\n");
    ++failures;
  }
  if (failures == 0) printf("ABI %u.%u headers OK as C11\n", CTN_ABI_MAJOR, CTN_ABI_MINOR);
  return failures == 0 ? 0 : 1;
}

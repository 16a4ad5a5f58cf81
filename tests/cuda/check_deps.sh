#!/bin/sh
# Fails when the CUDA plugin has a DT_NEEDED entry on an NVIDIA library: the plugin must load on
# machines without a driver (libcuda), and cuBLAS/cuDNN are dlopen-ed at init.
readelf="$1"
plugin="$2"
needed=$("$readelf" -d "$plugin" | grep NEEDED) || { echo "readelf failed on $plugin"; exit 1; }
echo "$needed"
if echo "$needed" | grep -E 'libcuda\.|libcudart|libcublas|libcudnn|libnv'; then
  echo "FAIL: $plugin depends on an NVIDIA library at load time"
  exit 1
fi
# Only the entry point is exported.
exports=$("$readelf" --dyn-syms -W "$plugin" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}')
echo "exported: $exports"
[ "$exports" = "ctn_plugin_query" ] || { echo "FAIL: exports other than ctn_plugin_query"; exit 1; }
echo OK

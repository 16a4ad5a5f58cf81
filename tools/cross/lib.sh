# Sourced by test-cross.sh and package.sh: the board targets and how their build folders are set
# up. Not runnable on its own. Expects `repo_root` set and the working directory at it.
#
# A target is a Debian architecture with a cross file tools/cross/<target>.ini:
#   aarch64  Debian arm64 (ARMv8-A; Raspberry Pi 3/4/5, Zero 2 W on a 64-bit OS): core, cpu,
#            swish, CLI, and the OpenCL and Vulkan plugins against Debian's arm64 ocl-icd,
#            CLBlast and Vulkan loader (tools/cross/sysroot-aarch64.txt, unpacked by
#            tools/cross/sysroot.sh)
#   armhf    Debian armhf (ARMv7-A, VFPv3-D16, Thumb-2; Pi 2/3/4 on a 32-bit OS): core, cpu with
#            NEON chosen at run time, swish, CLI (zlib: tools/cross/sysroot-armhf.txt)

cross_target_setup() {
  target=$1
  case "$target" in
    aarch64)
      triplet=aarch64-linux-gnu
      qemu=qemu-aarch64
      backend_args=(-Dopencl=enabled -Dvulkan=enabled)
      ;;
    armhf)
      triplet=arm-linux-gnueabihf
      qemu=qemu-arm
      backend_args=(-Dopencl=disabled -Dvulkan=disabled)
      ;;
    *)
      echo "unknown target '$target' (aarch64, armhf)" >&2
      return 2
      ;;
  esac
  cross_file=tools/cross/$target.ini
  build_dir=${CROSS_BUILD_DIR:-build-$target}
  local tool
  for tool in "$triplet-g++" "$qemu"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "'$tool' not found: install the packages of tools/deps/cross-$target.txt" \
           "(bash tools/setup.sh deps does)" >&2
      return 1
    fi
  done
  # The cross files name the compilers plainly; Debian's ccache package puts same-named wrappers
  # in /usr/lib/ccache, so a machine with ccache caches cross builds too.
  if command -v ccache >/dev/null 2>&1 && [[ -d /usr/lib/ccache && ":$PATH:" != *":/usr/lib/ccache:"* ]]; then
    export PATH="/usr/lib/ccache:$PATH"
  fi
}

# Configures $build_dir (once; later runs only update options). No debug info: it doubles the
# compile time of the cross build, and the board package is stripped anyway. OpenBLAS, CUDA and
# the benchmarks are host-only.
cross_configure() {
  local args=(-Dwerror=true -Ddebug=false -Dopenblas=disabled -Dcuda=disabled -Dbench=false
              "${backend_args[@]}")
  # shellcheck disable=SC2206  # MESON_ARGS is deliberately word-split
  local extra=(${MESON_ARGS:-})
  # The target's libraries (zlib; OpenCL, CLBlast and Vulkan on aarch64) come from a sysroot of
  # unpacked Debian packages (tools/cross/sysroot.sh), described by a second machine file.
  local sysroot
  sysroot=$(bash tools/cross/sysroot.sh "$target" | tail -n 1)
  local files=(--cross-file "$cross_file" --cross-file "$sysroot/sysroot.ini")
  if [[ -f "$build_dir/meson-private/coredata.dat" ]] &&
     grep -qF "$sysroot/sysroot.ini" "$build_dir/meson-private/cmd_line.txt" 2>/dev/null; then
    if ! meson setup --reconfigure "$build_dir" "${args[@]}" "${extra[@]}"; then
      echo "$target: reconfigure failed, wiping $build_dir" >&2
      meson setup --wipe "$build_dir" "${files[@]}" "${args[@]}" "${extra[@]}"
    fi
  elif [[ -f "$build_dir/meson-private/coredata.dat" ]]; then
    echo "$target: $build_dir was configured without the sysroot's machine file; wiping it" >&2
    meson setup --wipe "$build_dir" "${files[@]}" "${args[@]}" "${extra[@]}"
  else
    meson setup "$build_dir" "${files[@]}" "${args[@]}" "${extra[@]}"
  fi
}

# Builds what gets installed (the board package) plus the test programs of the given suites and
# what they depend on; nothing else (the backends' own test programs need a device qemu lacks).
cross_build() {
  local targets
  mapfile -t targets < <(/usr/bin/python3 - "$build_dir" "$@" <<'EOF'
import json, os, subprocess, sys
bd, suites = os.path.realpath(sys.argv[1]), set(sys.argv[2:])
def introspect(what):
    return json.loads(subprocess.check_output(['meson', 'introspect', what, bd]))
targets = introspect('--targets')
files = {t['id']: t['filename'] for t in targets}
want = set()
for t in targets:
    if t['installed']:
        want.update(t['filename'])
for t in introspect('--tests'):
    if suites & {s.split(':')[-1] for s in t['suite']}:
        want.add(t['cmd'][0])
        for d in t['depends']:
            want.update(files.get(d, []))
for f in sorted(want):
    f = os.path.realpath(f)
    if f.startswith(bd + '/'):
        print(os.path.relpath(f, bd))
EOF
  )
  ninja -C "$build_dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"} "${targets[@]}"
}

#!/usr/bin/env bash
# Stage (cross): aarch64 build (core, cpu, swish, CLI, OpenCL and Vulkan plugins), unit and
# conformance suites under qemu as a Cortex-A53, the board package and its checks.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_cross_stage aarch64

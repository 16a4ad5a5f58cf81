#!/usr/bin/env bash
# Stage (cross): armhf (32-bit ARMv7) build (core, cpu with NEON chosen at run time, swish, CLI),
# unit, conformance and abi suites under qemu as a Cortex-A7 (and a Cortex-R5F without NEON), the
# board package and its checks.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_cross_stage armhf

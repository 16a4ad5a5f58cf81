// OK(expr): asserts (gtest ASSERT_EQ, so it returns from the calling test function) that a chutney
// C API call returned CTN_OK, and names the call, the status and ctn_last_error() when it did not.
// Shared by the suites that drive the C API directly (opencl, placement, unit).
#pragma once

#include <chutney/chutney.h>
#include <gtest/gtest.h>

#define OK(expr)                                                                                  \
  do {                                                                                            \
    ctn_status s_ = (expr);                                                                       \
    ASSERT_EQ(s_, CTN_OK) << #expr << ": " << ctn_status_name(s_) << " " << ctn_last_error();     \
  } while (0)

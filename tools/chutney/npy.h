// NumPy's .npy format (versions 1-3) and .npz archives (zip, stored or deflated), read and
// written by the CLI itself. dtypes: <f4 <f8 <i4 <i8 |u1 |b1 (the chutney dtypes).
#pragma once

#include "cli.h"

#include <string>
#include <utility>
#include <vector>

namespace ctn_cli {

// Throws Failure naming the file and what is wrong with it.
TensorPtr npy_read(const std::string &path);
TensorPtr npy_parse(const std::string &bytes, const std::string &what);
void npy_write(const std::string &path, const ctn_tensor *t);
// Every array of an .npz file, with its name (the member name without ".npy").
std::vector<std::pair<std::string, TensorPtr>> npz_read(const std::string &path);

}  // namespace ctn_cli

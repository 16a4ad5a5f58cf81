// A dependency-free SVG line chart of a training run: train loss (left axis) and test accuracy
// (right axis) per epoch.
#pragma once

#include <string>
#include <vector>

namespace ctn_cli {

struct PlotPoint {
  int epoch;
  double train_loss;
  double test_accuracy;
};

// The SVG document as text.
std::string plot_svg(const std::string &title, const std::vector<PlotPoint> &points);

// Writes plot_svg(...) to `path`; throws Failure when the file cannot be written.
void write_plot(const std::string &path, const std::string &title,
                const std::vector<PlotPoint> &points);

}  // namespace ctn_cli

#include "plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "cli.h"

namespace ctn_cli {
namespace {

std::string xml_escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string plot_svg(const std::string &title, const std::vector<PlotPoint> &points) {
  constexpr double W = 720, H = 420, L = 70, R = 70, T = 50, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  int e0 = points.empty() ? 1 : points.front().epoch;
  int e1 = points.empty() ? 1 : points.back().epoch;
  if (e1 <= e0) e1 = e0 + 1;  // one point still gets a usable x axis
  double lmax = 0.0;
  double amin = 1.0, amax = 0.0;
  for (const PlotPoint &p : points) {
    if (std::isfinite(p.train_loss)) lmax = std::max(lmax, p.train_loss);
    amin = std::min(amin, p.test_accuracy);
    amax = std::max(amax, p.test_accuracy);
  }
  if (lmax <= 0.0) lmax = 1.0;
  lmax *= 1.1;
  // Accuracy axis: tenths around the data, so a 0.90 -> 0.93 climb stays visible.
  double alo = std::floor(std::max(0.0, std::min(amin, amax) - 0.02) * 10.0) / 10.0;
  double ahi = std::min(1.0, std::ceil((amax + 0.02) * 10.0) / 10.0);
  if (ahi <= alo) ahi = alo + 0.1;

  auto x_of = [&](double e) { return L + pw * (e - e0) / (e1 - e0); };
  auto yl_of = [&](double v) { return T + ph * (1.0 - v / lmax); };
  auto ya_of = [&](double v) { return T + ph * (1.0 - (v - alo) / (ahi - alo)); };

  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
    << xml_escape(title) << "</text>\n";
  // Grid and axes.
  for (int i = 0; i <= 5; ++i) {
    double y = T + ph * i / 5.0;
    s << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << L + pw << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/>\n";
    s << "<text x=\"" << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" fill=\"#1f77b4\">"
      << fmt("%.3g", lmax * (1.0 - i / 5.0)) << "</text>\n";
    s << "<text x=\"" << L + pw + 6 << "\" y=\"" << y + 4 << "\" fill=\"#d62728\">"
      << fmt("%.3f", ahi - (ahi - alo) * i / 5.0) << "</text>\n";
  }
  int step = std::max(1, (e1 - e0) / 10);
  for (int e = e0; e <= e1; e += step) {
    double x = x_of(e);
    s << "<line x1=\"" << x << "\" y1=\"" << T + ph << "\" x2=\"" << x << "\" y2=\"" << T + ph + 5
      << "\" stroke=\"black\"/>\n<text x=\"" << x << "\" y=\"" << T + ph + 18
      << "\" text-anchor=\"middle\">" << e << "</text>\n";
  }
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">epoch</text>\n"
    << "<text transform=\"translate(18," << T + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\" "
       "fill=\"#1f77b4\">train loss</text>\n"
    << "<text transform=\"translate(" << W - 14 << "," << T + ph / 2
    << ") rotate(90)\" text-anchor=\"middle\" fill=\"#d62728\">test accuracy</text>\n";
  auto series = [&](const char *color, auto y_of, auto value) {
    std::ostringstream pts;
    for (const PlotPoint &p : points) {
      pts << fmt("%.1f", x_of(p.epoch)) << "," << fmt("%.1f", y_of(value(p))) << " ";
    }
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\""
      << pts.str() << "\"/>\n";
    for (const PlotPoint &p : points) {
      s << "<circle cx=\"" << fmt("%.1f", x_of(p.epoch)) << "\" cy=\""
        << fmt("%.1f", y_of(value(p))) << "\" r=\"3\" fill=\"" << color << "\"/>\n";
    }
  };
  series("#1f77b4", yl_of, [](const PlotPoint &p) {
    return std::isfinite(p.train_loss) ? p.train_loss : 0.0;
  });
  series("#d62728", ya_of, [](const PlotPoint &p) { return p.test_accuracy; });
  s << "</svg>\n";
  return s.str();
}

void write_plot(const std::string &path, const std::string &title,
                const std::vector<PlotPoint> &points) {
  std::string text = plot_svg(title, points);
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw Failure("cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw Failure("error while writing " + path);
}

}  // namespace ctn_cli

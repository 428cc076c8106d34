// berth tune's plot: output tok/s against a p99 latency, a point per measured candidate, as a
// self-contained SVG 1.1 document. Every coordinate is printed with one decimal and every label
// placed by a fixed rule, so the same report always gives the same bytes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

#include "core/untrusted_text.h"
#include "engine/output/bench_text.h"
#include "engine/output/tune_report.h"

namespace berth {
namespace {

using Verdict = TuneOutcome::Verdict;

// The page, in px: the plot's frame, then the legend and the notes under it.
constexpr double kWidth = 760, kLeft = 90, kRight = kWidth - 30, kTop = 70, kBottom = 390;
constexpr double kCharWidth = 7;  // of a 12 px sans-serif character, roughly (for label boxes)
constexpr size_t kMaxNotes = 12;  // lines of failed, infeasible and unrun candidates
constexpr size_t kMaxLabel = 32;  // bytes of a candidate's name shown beside its point

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Text for an SVG element or attribute: one line, controls shown as "\xNN" (XML 1.0 cannot
// carry them), the five XML specials escaped, and the two non-characters U+FFFE/U+FFFF
// replaced.
std::string Xml(std::string_view text) {
  std::string line = EscapeLine(text), out;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '"') {
      out += "&quot;";
    } else if (c == '\'') {
      out += "&#39;";
    } else if (line.compare(i, 2, "\xEF\xBF") == 0 && i + 2 < line.size() &&
               (line[i + 2] == '\xBE' || line[i + 2] == '\xBF')) {
      out += line[i + 2] == '\xBE' ? "\\uFFFE" : "\\uFFFF";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

// A name cut to kMaxLabel bytes on a character boundary, "..." when cut.
std::string ShortName(const std::string& name) {
  std::string_view cut = Utf8Prefix(name, kMaxLabel);
  return Xml(cut) + (cut.size() < name.size() ? "..." : "");
}

// The first line of a reason, at most 90 bytes of it, for a note.
std::string FirstLine(const std::string& why) {
  const std::string line = why.substr(0, why.find('\n'));
  return Xml(Excerpt(line, 90)) + (line.size() < why.size() && line.size() <= 90 ? "..." : "");
}

double Finite(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

// An axis from 0: a round step (1, 2 or 5 times a power of ten) giving about five ticks, and
// the top, a whole number of steps past the largest value.
struct Axis {
  double step = 1, top = 5;
  int ticks = 5;  // steps from 0 to top
  explicit Axis(double largest) {
    // Clamped, so that the steps below stay finite and few.
    largest = std::clamp(largest > 0 ? largest : 1, 1e-3, 1e15);
    const double raw = largest / 5;
    const double power = std::pow(10, std::floor(std::log10(raw)));
    const double f = raw / power;
    step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
    ticks = static_cast<int>(std::ceil(largest * 1.08 / step));
    top = step * ticks;
  }
  std::string Tick(double v) const {
    if (step >= 1) return FormatGrouped(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::ceil(-std::log10(step))), v);
    return buf;
  }
};

// Both axes, and where a value falls on the page.
struct Scale {
  Axis x, y;
  double X(double v) const { return kLeft + (kRight - kLeft) * v / x.top; }
  double Y(double v) const { return kBottom - (kBottom - kTop) * v / y.top; }
};

// The points' and the infeasible region's looks, on the plot and in the legend.
constexpr const char* kBestStyle =
    "r=\"8\" fill=\"#ff7f0e\" stroke=\"#000000\" stroke-width=\"1.5\"";
constexpr const char* kWithinStyle =
    "r=\"6\" fill=\"#1f77b4\" stroke=\"#1f77b4\" stroke-width=\"1.5\"";
constexpr const char* kMissedStyle =
    "r=\"6\" fill=\"#ffffff\" stroke=\"#7f7f7f\" stroke-width=\"1.5\"";
constexpr const char* kPastStyle = "fill=\"#d62728\" fill-opacity=\"0.1\"";

struct Box {
  double x0, y0, x1, y1;
  bool Overlaps(const Box& b) const { return x0 < b.x1 && b.x0 < x1 && y0 < b.y1 && b.y0 < y1; }
};

struct Point {
  const TuneOutcome* outcome;
  double x, y;  // px
  bool best, declared;
};

struct Label {
  Box box;
  bool ends;  // the text ends at the box's right (text-anchor="end")
};

// Where each point's label goes, in order of importance (the best, then the declared
// configuration, then by output tok/s, highest first): the first of eight places around the
// point that stays in the frame and clear of every point, of `taken` and of the labels placed
// before it.
// A point with no such place keeps no label (its name is in its tooltip and the table), except
// the best, whose label goes above and right of it, inside the frame.
std::vector<std::optional<Label>> PlaceLabels(const std::vector<Point>& points,
                                              const std::vector<std::string>& labels,
                                              std::vector<Box> taken) {
  std::vector<size_t> order(points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rank = [&](size_t i) {
    return std::make_tuple(!points[i].best, !points[i].declared, points[i].y, i);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });
  for (const auto& p : points) taken.push_back({p.x - 7, p.y - 7, p.x + 7, p.y + 7});
  std::vector<std::optional<Label>> placed(points.size());
  for (size_t i : order) {
    const double w = kCharWidth * static_cast<double>(labels[i].size()), x = points[i].x,
                 y = points[i].y;
    std::vector<Label> tries;
    for (double dy : {-6.0, 16.0, -20.0, 30.0}) {
      tries.push_back({{x + 9, y + dy - 11, x + 9 + w, y + dy + 3}, false});
      tries.push_back({{x - 9 - w, y + dy - 11, x - 9, y + dy + 3}, true});
    }
    auto fits = [&](const Label& t) {
      const Box& b = t.box;
      if (b.x0 < kLeft || b.x1 > kRight || b.y0 < kTop || b.y1 > kBottom) return false;
      return std::none_of(taken.begin(), taken.end(), [&](const Box& k) { return b.Overlaps(k); });
    };
    auto chosen = std::find_if(tries.begin(), tries.end(), fits);
    if (chosen != tries.end()) {
      placed[i] = *chosen;
    } else if (points[i].best) {
      Label t = tries[0];
      const double dx = std::min(0.0, kRight - t.box.x1), dy = std::max(0.0, kTop - t.box.y0);
      t.box = {t.box.x0 + dx, t.box.y0 + dy, t.box.x1 + dx, t.box.y1 + dy};
      placed[i] = t;
    }
    if (placed[i]) taken.push_back(placed[i]->box);
  }
  return placed;
}

// The frame: grid, ticks with their numbers, the axes' names with units.
void WriteFrame(const Scale& s, const char* x_name, std::ostream& out) {
  out << "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (int i = 1; i <= s.x.ticks; ++i)
    out << "<line x1=\"" << Num(s.X(i * s.x.step)) << "\" y1=\"" << Num(kTop) << "\" x2=\""
        << Num(s.X(i * s.x.step)) << "\" y2=\"" << Num(kBottom) << "\"/>\n";
  for (int i = 1; i <= s.y.ticks; ++i)
    out << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(s.Y(i * s.y.step)) << "\" x2=\""
        << Num(kRight) << "\" y2=\"" << Num(s.Y(i * s.y.step)) << "\"/>\n";
  out << "</g>\n<g fill=\"#333333\">\n";
  for (int i = 0; i <= s.x.ticks; ++i)
    out << "<text x=\"" << Num(s.X(i * s.x.step)) << "\" y=\"" << Num(kBottom + 18)
        << "\" text-anchor=\"middle\">" << s.x.Tick(i * s.x.step) << "</text>\n";
  for (int i = 0; i <= s.y.ticks; ++i)
    out << "<text x=\"" << Num(kLeft - 8) << "\" y=\"" << Num(s.Y(i * s.y.step) + 4)
        << "\" text-anchor=\"end\">" << s.y.Tick(i * s.y.step) << "</text>\n";
  const std::string mid_y = Num((kTop + kBottom) / 2);
  out << "<text x=\"" << Num((kLeft + kRight) / 2) << "\" y=\"" << Num(kBottom + 40)
      << "\" text-anchor=\"middle\">" << x_name << " (ms)</text>\n"
      << "<text x=\"24\" y=\"" << mid_y << "\" text-anchor=\"middle\" transform=\"rotate(-90 24 "
      << mid_y << ")\">output (tok/s)</text>\n"
      << "</g>\n"
      << "<rect x=\"" << Num(kLeft) << "\" y=\"" << Num(kTop) << "\" width=\""
      << Num(kRight - kLeft) << "\" height=\"" << Num(kBottom - kTop)
      << "\" fill=\"none\" stroke=\"#333333\"/>\n";
}

// The marks of the plot, each drawn at `x` on the legend's line `y`.
enum class Mark { kBest, kWithin, kMissed, kPast };

std::string MarkAt(Mark m, double x, double y) {
  const std::string at = "cx=\"" + Num(x + 6) + "\" cy=\"" + Num(y - 4) + "\" ";
  switch (m) {
    case Mark::kBest:
      return "<circle " + at + kBestStyle + "/>";
    case Mark::kWithin:
      return "<circle " + at + kWithinStyle + "/>";
    case Mark::kMissed:
      return "<circle " + at + kMissedStyle + "/>";
    case Mark::kPast:
      return "<rect x=\"" + Num(x) + "\" y=\"" + Num(y - 10) + "\" width=\"12\" height=\"12\" " +
             kPastStyle + "/>";
  }
  return "";
}

void WriteLegend(const std::vector<std::pair<Mark, const char*>>& legend, double y,
                 std::ostream& out) {
  double x = kLeft;
  for (const auto& [mark, words] : legend) {
    out << MarkAt(mark, x, y) << "\n<text x=\"" << Num(x + 18) << "\" y=\"" << Num(y) << "\">"
        << words << "</text>\n";
    x += 18 + kCharWidth * static_cast<double>(std::string_view(words).size()) + 24;
  }
}

}  // namespace

std::string TunePlotSvg(const TuneReport& r) {
  const TuneObjective& objective = r.spec.objective;
  // x: the latency the objective limits (TTFT before TPOT), TTFT p99 when it limits neither.
  const bool tpot = objective.ttft_p99_ms <= 0 && objective.tpot_p99_ms > 0;
  const char* x_name = tpot ? "TPOT p99" : "TTFT p99";
  const double limit = Finite(tpot ? objective.tpot_p99_ms : objective.ttft_p99_ms);
  auto latency = [&](const TuneFigures& f) { return Finite(tpot ? f.tpot_p99_ms : f.ttft_p99_ms); };
  auto measured = [](const TuneOutcome& o) { return o.verdict == Verdict::kMeasured && o.figures; };

  double x_largest = limit, y_largest = 0;
  for (const auto& o : r.outcomes)
    if (measured(o)) {
      x_largest = std::max(x_largest, latency(*o.figures));
      y_largest = std::max(y_largest, Finite(o.figures->output_tps));
    }
  const Scale scale{Axis(x_largest), Axis(y_largest)};

  std::vector<Point> points;
  std::vector<std::string> labels;
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    const TuneOutcome& o = r.outcomes[i];
    if (!measured(o)) continue;
    points.push_back({&o, scale.X(latency(*o.figures)), scale.Y(Finite(o.figures->output_tps)),
                      r.winner == i, i == 0 && r.spec.baseline});
    labels.push_back(ShortName(o.candidate.name) + (r.winner == i ? " (best)" : ""));
  }
  // The limit's words, at the top left of its line, are in no label's way.
  const std::string limit_words = std::string(x_name) + " limit " + FormatLatencyMs(limit);
  const double limit_x = scale.X(limit);
  std::vector<Box> reserved;
  if (limit > 0)
    reserved.push_back({limit_x - 4 - kCharWidth * static_cast<double>(limit_words.size()),
                        kTop + 3, limit_x, kTop + 17});
  const auto places = PlaceLabels(points, labels, reserved);
  const size_t unlabelled = std::count(places.begin(), places.end(), std::nullopt);

  // The notes: who is not on the plot and why, the limits the x axis cannot show, and the
  // points too close to others for a label.
  std::vector<std::string> notes;
  for (Verdict v : {Verdict::kFailed, Verdict::kInfeasible, Verdict::kNotRun})
    for (const auto& o : r.outcomes)
      if (o.verdict == v)
        notes.push_back(std::string(v == Verdict::kFailed       ? "failed: "
                                    : v == Verdict::kInfeasible ? "infeasible: "
                                                                : "not run: ") +
                        ShortName(o.candidate.name) +
                        (o.why.empty() ? "" : " (" + FirstLine(o.why) + ")"));
  if (notes.size() > kMaxNotes) {
    const size_t more = notes.size() - (kMaxNotes - 1);
    notes.resize(kMaxNotes - 1);
    notes.push_back("and " + std::to_string(more) + " more not on the plot (see the table)");
  }
  std::string off_axis;
  auto off = [&](const char* name, double v) {
    if (Finite(v) > 0)
      off_axis +=
          std::string(off_axis.empty() ? "" : ", ") + name + " \u2264 " + FormatLatencyMs(v);
  };
  if (!tpot) off("TPOT p99", objective.tpot_p99_ms);
  off("E2E p99", objective.e2e_p99_ms);
  if (!off_axis.empty())
    notes.push_back("limits not on this axis: " + off_axis +
                    " (a point that missed one is hollow)");
  if (unlabelled)
    notes.push_back(std::to_string(unlabelled) + " point" + (unlabelled == 1 ? "" : "s") +
                    " too close to others for a label: the name is in the point's tooltip and "
                    "the table");

  const double legend_y = kBottom + 62,
               height = legend_y + 16 + 18 * static_cast<double>(notes.size()) + 12;
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << Num(kWidth)
      << "\" height=\"" << Num(height) << "\" viewBox=\"0 0 " << Num(kWidth) << " " << Num(height)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  // Appended piecewise: g++ 12 warns falsely (-Wrestrict) of "x" + std::string&& at -O3.
  std::string title = "berth tune ";
  title.append(Xml(r.spec.service)).append(": ");
  title.append(r.model.empty() ? std::string("(model unknown)") : Xml(r.model));
  if (!r.commit.empty()) title.append("@").append(Xml(Utf8Prefix(r.commit, 12)));
  out << "<title>" << title << "</title>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text x=\"" << Num(kLeft) << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" << title
      << "</text>\n"
      << "<text x=\"" << Num(kLeft) << "\" y=\"48\" fill=\"#555555\">output tok/s against "
      << x_name << " at " << r.spec.load.concurrency << " stream"
      << (r.spec.load.concurrency == 1 ? "" : "s") << "; best: the highest "
      << (objective.maximize == TuneObjective::Metric::kGoodput ? "goodput" : "output tok/s")
      << (limit > 0 || !off_axis.empty() ? " within the limits" : "") << "</text>\n";
  WriteFrame(scale, x_name, out);

  // The limit on x: past it, infeasible.
  if (limit > 0)
    out << "<rect x=\"" << Num(limit_x) << "\" y=\"" << Num(kTop) << "\" width=\""
        << Num(kRight - limit_x) << "\" height=\"" << Num(kBottom - kTop) << "\" " << kPastStyle
        << "/>\n"
        << "<line x1=\"" << Num(limit_x) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(limit_x)
        << "\" y2=\"" << Num(kBottom) << "\" stroke=\"#d62728\" stroke-width=\"1.5\" "
        << "stroke-dasharray=\"6 4\"/>\n"
        << "<text x=\"" << Num(limit_x - 4) << "\" y=\"" << Num(kTop + 14)
        << "\" text-anchor=\"end\" fill=\"#d62728\">" << limit_words << "</text>\n";

  // The points, the best drawn last (on top), each with its figures as a tooltip.
  bool missed = false;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      if (p.best != (pass == 1)) continue;
      const TuneOutcome& o = *p.outcome;
      missed = missed || (!p.best && !o.meets_limits);
      out << "<circle cx=\"" << Num(p.x) << "\" cy=\"" << Num(p.y) << "\" "
          << (p.best           ? kBestStyle
              : o.meets_limits ? kWithinStyle
                               : kMissedStyle)
          << "><title>" << Xml(o.candidate.name) << ": " << FormatTps(Finite(o.figures->output_tps))
          << " output tok/s, " << x_name << " " << FormatLatencyMs(latency(*o.figures))
          << (o.meets_limits || o.missed.empty() ? "" : "; missed " + Xml(o.missed))
          << "</title></circle>\n";
      if (!places[i]) continue;
      const auto& [box, ends] = *places[i];
      out << "<text x=\"" << Num(ends ? box.x1 : box.x0) << "\" y=\"" << Num(box.y1 - 3) << "\""
          << (ends ? " text-anchor=\"end\"" : "") << (p.best ? " font-weight=\"bold\"" : "") << ">"
          << labels[i] << "</text>\n";
    }
  if (points.empty())
    out << "<text x=\"" << Num((kLeft + kRight) / 2) << "\" y=\"" << Num((kTop + kBottom) / 2)
        << "\" text-anchor=\"middle\" font-size=\"14\" fill=\"#7f7f7f\">no candidate was "
           "measured</text>\n";

  // The legend (the marks this plot shows), then the notes.
  std::vector<std::pair<Mark, const char*>> legend;
  if (std::any_of(points.begin(), points.end(), [](const Point& p) { return p.best; }))
    legend.push_back({Mark::kBest, "best"});
  legend.push_back(
      {Mark::kWithin, limit > 0 || !off_axis.empty() ? "within the limits" : "measured"});
  if (missed) legend.push_back({Mark::kMissed, "missed a limit"});
  if (limit > 0) legend.push_back({Mark::kPast, "past the limit"});
  WriteLegend(legend, legend_y, out);
  for (size_t i = 0; i < notes.size(); ++i)
    out << "<text x=\"" << Num(kLeft) << "\" y=\""
        << Num(legend_y + 24 + 18 * static_cast<double>(i)) << "\" fill=\"#555555\">" << notes[i]
        << "</text>\n";
  out << "</svg>\n";
  return out.str();
}

}  // namespace berth

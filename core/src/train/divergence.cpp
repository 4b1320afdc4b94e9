// No torch: train::Divergence (divergence.h), whether a run's losses blew up, and its
// messages.
#include "divergence.h"

#include <algorithm>
#include <cstdio>

#include "fp8wb/core/counted.h"

namespace fp8wb::train {

namespace {

std::string g6(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Divergence::Divergence(const RunConfig& c)
    : blow_up_steps_(std::min<int64_t>(kBlowUpSteps, c.steps)),
      swing_(c.model == ModelKind::Mlp && c.drift > 0 ? std::min(std::exp2(2 * c.drift), kMaxSwing)
                                                      : 1) {}

void Divergence::observe(double loss, bool with_ref, double ref_loss) {
  const double limit = std::max(10 * first_loss_, first_loss_ + 1) * swing_;
  last_loss_ = loss;
  last_limit_ = limit;
  if (with_ref) {
    last_ref_loss_ = ref_loss;
    const bool ref_over = !std::isfinite(ref_loss) || ref_loss > limit;
    ref_over_limit_ = ref_over && std::isfinite(first_loss_) ? ref_over_limit_ + 1 : 0;
  }
  if (!std::isfinite(loss) || (std::isfinite(first_loss_) && loss > limit)) {
    ++over_limit_;
  } else {
    over_limit_ = 0;
    if (!std::isfinite(first_loss_)) first_loss_ = loss;
  }
}

std::string Divergence::blow_up_message(int64_t step) const {
  return std::isfinite(last_loss_)
             ? "loss blew up: " + g6(last_loss_) + " at step " + std::to_string(step) + ", over " +
                   g6(last_limit_) + " (" + limit_basis() + ") for " + std::to_string(over_limit_) +
                   " consecutive steps" + reference_too()
             : "non-finite or blown-up loss for " + std::to_string(over_limit_) +
                   " consecutive steps (" + g6(last_loss_) + " at step " + std::to_string(step) +
                   ")" + reference_too();
}

std::string Divergence::end_message(int64_t last) const {
  return std::isfinite(last_loss_)
             ? "loss blew up at the end of the run: " + g6(last_loss_) + " at the last step, " +
                   std::to_string(last) + ", over " + g6(last_limit_) + " (" + limit_basis() +
                   ") for its last " + counted(over_limit_, "step")
             : "non-finite or blown-up loss at the end of the run: its last " +
                   counted(over_limit_, "step") + " (" + g6(last_loss_) + " at step " +
                   std::to_string(last) + ")" + reference_too();
}

std::string Divergence::limit_basis() const {
  return "10 x the first loss " + g6(first_loss_) +
         (swing_ == 1           ? std::string()
          : swing_ == kMaxSwing ? ", x 1e5 at most for drift: a loss past it is absurd"
                                : ", x 4^drift = " + g6(swing_) + " for drift");
}

std::string Divergence::reference_too() const {
  return ref_over_limit_ >= over_limit_
             ? "; the high-precision reference blew up too (" + g6(last_ref_loss_) +
                   " at that step): the settings diverge, not FP8 alone"
             : std::string();
}

}  // namespace fp8wb::train

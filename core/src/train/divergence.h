// defines: train::Divergence, whether a run's losses blew up and the words that say so
// (docs/numerics.md, "Divergence"); used by the step loop in trainer.cpp. No torch;
// internal to core.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "fp8wb/core/config/run_config.h"

namespace fp8wb::train {

// A blow-up: kBlowUpSteps consecutive steps (all of a shorter run) whose loss is
// non-finite or over max(10 x B, B + 1), B the run's first finite loss; for the MLP with
// drift the limit is widened by the swing drift gives the inputs' squares on its own,
// 4^drift, but by kMaxSwing at most: a loss past a million times the first is absurd
// whatever the drift (drift=30 reached 9e12 and finished).
class Divergence {
 public:
  // Consecutive steps over the limit that end a run as diverged.
  static constexpr int64_t kBlowUpSteps = 10;
  // The most the MLP's drift widens the limit by.
  static constexpr double kMaxSwing = 1e5;

  explicit Divergence(const RunConfig& c);

  // A step's loss, and the reference's where one trains (`with_ref`).
  void observe(double loss, bool with_ref, double ref_loss);
  // Whether the steps observed so far end the run as diverged.
  bool blew_up() const { return over_limit_ >= blow_up_steps_; }
  // Why, once blew_up(); `step` is the last step observed.
  std::string blow_up_message(int64_t step) const;
  // Whether the run ran out of steps while its loss was over the limit or not finite
  // (fewer than kBlowUpSteps steps of it): not a finished run, whose loss came back.
  bool over_at_end() const { return over_limit_ > 0; }
  // Why, where over_at_end(); `last` is the run's last step.
  std::string end_message(int64_t last) const;

 private:
  // How the limit was reached, for the messages.
  std::string limit_basis() const;
  // Where the high-precision reference blew up over the same steps, the settings (a
  // learning rate too high, say) diverge, not FP8 alone: said after the reason.
  std::string reference_too() const;

  int64_t blow_up_steps_;
  double swing_;
  double first_loss_ = std::nan("");
  int64_t over_limit_ = 0;
  double last_loss_ = std::nan(""), last_limit_ = std::nan("");  // of the last step observed
  int64_t ref_over_limit_ = 0;  // the reference's consecutive steps over the same limit
  double last_ref_loss_ = std::nan("");
};

}  // namespace fp8wb::train

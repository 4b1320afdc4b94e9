// defines: RunPanel's inline validation: every field the config refuses (or a number box
// holding text that is no value) marked in light red with the reason in its tooltip, the
// first named beside Start, which stays disabled; More fields' values taken where accepted.
#include "fp8wb/views/run_panel/run_panel.h"

#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPalette>
#include <QPushButton>
#include <QSpinBox>

#include "fp8wb/views/run_panel/engine_controller.h"
#include "run_panel/run_panel_fields.h"

namespace fp8wb {

using namespace detail;  // the field labels and number boxes (run_panel_fields.h)

void RunPanel::takeAdvanced(QHash<QWidget*, QString>& problems) {
  bool form_valid = true;
  try {
    validate_run_config(config());
  } catch (const std::exception&) {
    form_valid = false;
  }
  for (auto& [key, edit] : advanced_) {
    RunConfig c = config();
    const std::string before = run_config_json(c);
    try {
      apply_override(c, (key + QLatin1Char('=') + edit->text().trimmed()).toStdString());
    } catch (const std::exception& e) {
      problems.insert(edit, readable(e));
      continue;
    }
    if (run_config_json(c) == before) continue;  // the value taken already
    try {
      validate_run_config(c);
      base_ = c;
      form_valid = true;
    } catch (const std::exception& e) {
      // Refused with the rest of the form: this box's value is what does not fit. (A form
      // refused already names its own field; this value waits until that one is fixed.)
      if (form_valid || error_field(e) == key) problems.insert(edit, readable(e));
    }
  }
}

QWidget* RunPanel::fieldOf(const QString& key) const {
  for (QWidget* w : fields_) {
    if (w->objectName() == key) return w;
  }
  return key == QLatin1String("name") ? name_ : nullptr;
}

QString RunPanel::validationMessage() const {
  return message_;
}

void RunPanel::validate() {
  QHash<QWidget*, QString> problems;
  // Number boxes holding text that is no value within their bounds.
  for (const auto& [key, box] : numbers_) {
    if (!box_refused(box)) continue;
    const bool whole = qobject_cast<QSpinBox*>(box) != nullptr;
    problems.insert(box, tr("%1: must be %2 in %3, not %4")
                             .arg(field_label(key), whole ? tr("a whole number") : tr("a number"),
                                  box_bounds(box), box->text().trimmed()));
  }
  takeAdvanced(problems);
  // The config as a whole (a field may be refused for another: heads and d_model).
  try {
    validate_run_config(config());
  } catch (const std::exception& e) {
    QWidget* field = fieldOf(error_field(e));
    if (!field) field = error_;  // a field the form does not show (the memory estimate)
    if (!problems.contains(field)) problems.insert(field, readable(e));
  }
  // The first problem in the form's order is said beside Start; every one is marked.
  message_.clear();
  int n_marked = 0;  // fields marked in red; a problem of no field shown marks none
  for (QWidget* w : fields_) {
    if (!problems.contains(w)) continue;
    if (n_marked++ == 0) message_ = problems.value(w);
  }
  if (message_.isEmpty() && problems.contains(error_)) message_ = problems.value(error_);
  // The fields marked besides the one named.
  const int more = n_marked > 0 ? n_marked - 1 : 0;
  if (more == 1) message_ += tr(" (and 1 more field marked)");
  if (more > 1) message_ += tr(" (and %1 more fields marked)").arg(more);
  for (QWidget* w : fields_) {
    const bool bad = problems.contains(w);
    if (w->property("invalid").toBool() != bad || bad) {
      w->setProperty("invalid", bad);
      w->setToolTip(bad ? problems.value(w) + QLatin1Char('\n') + w->property("help").toString()
                        : w->property("help").toString());
      // Marked in light red (a palette, so that every style keeps its own frames).
      QPalette marked;
      if (bad) {
        marked = palette();
        for (QPalette::ColorRole role : {QPalette::Base, QPalette::Button})
          marked.setColor(role, QColor(0xff, 0xcd, 0xd2));
      }
      w->setPalette(marked);
    }
    // A refused field among More fields is shown, not left folded away.
    if (bad && !advanced_box_->isChecked() && advanced_box_->isAncestorOf(w))
      advanced_box_->setChecked(true);
  }
  problems_ = problems;
  error_->setText(message_);
  if (kept_) showKept();  // an opened run's settings as the form now holds them, or none
  updateStart(engine_->isRunning());
  showWhetherPreset();  // every edit comes here
}

}  // namespace fp8wb

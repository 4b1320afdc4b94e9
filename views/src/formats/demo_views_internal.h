// defines: what the Formats tab's demo views share (gradient_demo_view.cpp,
// outlier_demo_view.cpp, master_weights_demo_view.cpp, loss_scaling_demo_view.cpp): qs(),
// storage_color() (a storage format's colour, stochastic rounding's its own) and
// demo_slider() (a named horizontal slider with ticks below). Internal to views.
#pragma once

#include <QColor>
#include <QSlider>
#include <QString>
#include <string_view>

#include "fp8wb/core/formats/demos.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb::demo_detail {

inline QString qs(std::string_view s) {
  return QString::fromLatin1(s.data(), static_cast<int>(s.size()));
}

inline QColor storage_color(StorageFormat f, Rounding r) {
  if (r == Rounding::Stochastic) return QColor(0x94, 0x67, 0xbd);
  switch (f) {
    case StorageFormat::FP32: return QColor(0x33, 0x33, 0x33);
    case StorageFormat::BF16: return QColor(0xff, 0x7f, 0x0e);
    case StorageFormat::FP16: return QColor(0x2c, 0xa0, 0x2c);
    case StorageFormat::E4M3: return format_color(Format::E4M3FN);
    case StorageFormat::E5M2: return format_color(Format::E5M2);
  }
  return Qt::black;
}

inline QSlider* demo_slider(QWidget* parent, const char* name, int lo, int hi, int value) {
  auto* s = new QSlider(Qt::Horizontal, parent);
  s->setObjectName(QLatin1String(name));
  s->setRange(lo, hi);
  s->setValue(value);
  s->setTickPosition(QSlider::TicksBelow);
  return s;
}

}  // namespace fp8wb::demo_detail

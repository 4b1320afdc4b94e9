// defines: StatusLabel, elide_at_word(): the status bar's run label and its message,
// whole where they fit, else cut after a whole word with "…" (never "run stopped: s"), the
// whole text in the tooltip.
#pragma once

#include <QFontMetrics>
#include <QLabel>
#include <QString>

namespace fp8wb {

// `text` where it fits `width` px, else its longest beginning that ends with a whole word
// and fits with "…" after it (a trailing ",", ";" or ":" left out); where not even its
// first word fits, cut within it.
QString elide_at_word(const QFontMetrics& fm, const QString& text, int width);

// A label that takes at most half of the status bar (its text's width where less), drawing
// its text cut at a word (elide_at_word()); its tooltip has the whole text where it is cut,
// then the notes.
class StatusLabel : public QLabel {
  Q_OBJECT
 public:
  using QLabel::QLabel;
  // At most half its parent's width (the status bar's): the message beside it keeps room.
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  // The text as drawn now.
  QString shownText() const;
  // The tooltip: the whole text where it is cut, and the notes (setNotes()).
  QString fullToolTip() const;
  void setNotes(const QString& notes);

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;

 private:
  QString notes_;
};

}  // namespace fp8wb

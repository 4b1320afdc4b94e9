// defines: PresentationMode: the large look for a projector, applied to a whole main window
// in one place, and PresentationHook, for widgets whose look needs more than larger fonts.
//
// While active, every widget's font is scaled by factor() (through the window's font, and
// explicitly where a widget's own font or style sheet keeps it from following), every
// QCustomPlot's fonts (axis labels, tick labels, legends, titles, text items) and pens by
// the same factor, also for what a plot adds later (checked before each replot), item
// views' columns fit their contents, docks and tool bars are hidden, and the window stays
// within its screen's available area: the central widget scrolls where the current tab
// needs more room than the screen has (tabs not shown do not count). Leaving restores
// each of these as it was before: fonts, pens, column widths, splitters, docks, tool bars
// and the window's geometry.
#pragma once

#include <QByteArray>
#include <QFont>
#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QRect>
#include <QSize>
#include <QWidget>
#include <vector>

class QMainWindow;
class QCustomPlot;
class QHeaderView;
class QScrollArea;
class QTabWidget;
class QSplitter;

namespace fp8wb {

// Implemented by widgets that size something from their font once (a fixed width, a
// minimum height): PresentationMode calls it on entering (factor > 1) and leaving
// (factor 1), after the fonts have changed, for every widget of the window that has it,
// also those shown for the first time while it is active.
class PresentationHook {
 public:
  virtual ~PresentationHook() = default;
  virtual void presentationScaleChanged(double factor) = 0;
};

class PresentationMode : public QObject {
  Q_OBJECT
 public:
  // How much larger everything is while presenting: a 9 pt interface font (12 px at 96 dpi,
  // Qt's default) becomes 20.4 px, the least a projector's back row reads.
  static constexpr double kDefaultFactor = 1.7;

  explicit PresentationMode(QMainWindow* window, double factor = kDefaultFactor);
  ~PresentationMode() override;

  bool isActive() const { return active_; }
  double factor() const { return factor_; }
  void setActive(bool on);

  // Shows or hides a dock while presenting (the run panel while a run trains); leaving
  // restores its visibility from before, whatever was set here.
  void showDock(QWidget* dock, bool shown);

  // Resizes and moves a window so that its frame lies within its screen's available area
  // (as far as its minimum size allows).
  static void fitToScreen(QWidget* window);

  // Scales a plot's fonts and pens now (what it added since the last replot); a no-op
  // while not presenting. Called before each of its replots while active.
  void scalePlot(QCustomPlot* plot);

 Q_SIGNALS:
  void activeChanged(bool on);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  struct SavedFont {
    QPointer<QWidget> widget;
    QFont font;
    bool explicitly_set;  // the widget had a font of its own (Qt::WA_SetFont)
  };
  struct SavedHeader {
    QPointer<QHeaderView> header;
    QByteArray state;
    int view_minimum_width;
  };
  void enter();
  void leave();
  void adoptWidget(QWidget* w, bool new_widget);
  void adoptPlot(QCustomPlot* plot, bool new_widget);
  void adoptItemView(QWidget* w);
  void restorePlot(QCustomPlot* plot);
  void sizeTabPages(QTabWidget* tabs);
  void scheduleFit();

  QMainWindow* window_;
  double factor_;
  bool active_ = false;
  bool fit_pending_ = false;
  QRect geometry_;
  Qt::WindowStates window_state_;
  QByteArray state_;
  QFont window_font_;
  bool window_font_set_ = false;
  std::vector<SavedFont> fonts_;  // widgets given a scaled font of their own
  std::vector<SavedHeader> headers_;
  // Widgets made while presenting with no font of their own: those with a style sheet keep
  // the font they were made with, unless told to take their parent's again.
  std::vector<QPointer<QWidget>> new_widgets_;
  std::vector<std::pair<QPointer<QSplitter>, QList<int>>> splitters_;
  std::vector<std::pair<QPointer<QWidget>, bool>> bars_;  // docks and tool bars, visible
  std::vector<QPointer<QCustomPlot>> plots_;
  std::vector<QMetaObject::Connection> plot_connections_;
  std::vector<QPointer<QTabWidget>> tab_widgets_;
  std::vector<QMetaObject::Connection> tab_connections_;
  QPointer<QWidget> central_;             // the window's central widget, in
  QPointer<QScrollArea> central_scroll_;  // a scroll area while presenting
  QSize size_;  // the window's size on entering: it does not grow past it on its own
};

}  // namespace fp8wb

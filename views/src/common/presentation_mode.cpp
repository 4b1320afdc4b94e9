#include "fp8wb/views/common/presentation_mode.h"

#include <qcustomplot.h>

#include <QAbstractItemView>
#include <QApplication>
#include <QDockWidget>
#include <QHeaderView>
#include <QMainWindow>
#include <QMenu>
#include <QMetaProperty>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QTreeView>
#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace fp8wb {
namespace {

// Marks a widget PresentationMode has dealt with while active.
constexpr char kAdopted[] = "fp8wb_presentation_adopted";
// A plot element's value of a property before scaling, and the value it was given.
constexpr char kBasePrefix[] = "fp8wb_presentation_base_";
constexpr char kSetPrefix[] = "fp8wb_presentation_set_";
constexpr char kScatter[] = "scatterSize";
// A tab page's size policy before presenting.
constexpr char kPagePolicy[] = "fp8wb_presentation_page_policy";
// A menu given the window's scaled font while presenting (menus are windows of their own).
constexpr char kMenuScaled[] = "fp8wb_presentation_menu_scaled";

double font_size(const QFont& f) {
  return f.pointSizeF() > 0 ? f.pointSizeF() : f.pixelSize();
}

QFont scaled_font(QFont f, double factor) {
  if (f.pointSizeF() > 0) {
    f.setPointSizeF(f.pointSizeF() * factor);
  } else if (f.pixelSize() > 0) {
    f.setPixelSize(static_cast<int>(std::lround(f.pixelSize() * factor)));
  }
  return f;
}

// A font that keeps all of its properties, whatever its parent's font says.
QFont own_font(QFont f) {
  f.setResolveMask(QFont::AllPropertiesResolved);
  return f;
}

QPen scaled_pen(QPen p, double factor) {
  if (p.style() == Qt::NoPen) return p;
  p.setWidthF(p.widthF() > 0 ? p.widthF() * factor : factor);  // 0: a one-pixel pen
  return p;
}

// Every element drawn in a plot: axes, legends and their items, titles, plottables, items.
QList<QCPLayerable*> layerables(QCustomPlot* plot) {
  QList<QCPLayerable*> out;
  for (int i = 0; i < plot->layerCount(); ++i) out += plot->layer(i)->children();
  if (plot->legend && !out.contains(plot->legend)) out << plot->legend;
  return out;
}

struct Write {
  QObject* object;
  QByteArray property;
  QVariant value;
};

// Writes legends first: a legend's font is also set on its items, which come after.
void apply(std::vector<Write>& writes) {
  std::stable_partition(writes.begin(), writes.end(),
                        [](const Write& w) { return qobject_cast<QCPLegend*>(w.object); });
  for (const Write& w : writes) {
    if (w.property == kScatter) {
      auto* g = static_cast<QCPGraph*>(w.object);
      QCPScatterStyle s = g->scatterStyle();
      s.setSize(w.value.toDouble());
      g->setScatterStyle(s);
    } else {
      w.object->setProperty(w.property.constData(), w.value);
    }
  }
}

}  // namespace

PresentationMode::PresentationMode(QMainWindow* window, double factor)
    : QObject(window), window_(window), factor_(factor) {}

PresentationMode::~PresentationMode() {
  if (active_) qApp->removeEventFilter(this);
}

void PresentationMode::setActive(bool on) {
  if (on == active_) return;
  if (on) {
    enter();
  } else {
    leave();
  }
  Q_EMIT activeChanged(on);
}

void PresentationMode::enter() {
  geometry_ = window_->geometry();
  window_state_ = window_->windowState();
  state_ = window_->saveState();
  size_ = window_->size();
  // The central widget scrolls rather than push the window past the screen.
  if (QWidget* central = window_->centralWidget()) {
    central_ = window_->takeCentralWidget();
    central_scroll_ = new QScrollArea;
    central_scroll_->setFrameShape(QFrame::NoFrame);
    central_scroll_->setWidgetResizable(true);
    central_scroll_->setWidget(central);
    window_->setCentralWidget(central_scroll_);
  }
  QList<QWidget*> widgets = window_->findChildren<QWidget*>();
  // Each widget's font before anything changes: a parent's change reaches its children.
  std::unordered_map<QWidget*, std::pair<QFont, bool>> before;
  for (QWidget* w : widgets) before[w] = {w->font(), w->testAttribute(Qt::WA_SetFont)};
  for (QWidget* w : widgets) {
    auto* splitter = qobject_cast<QSplitter*>(w);
    if (!splitter) continue;
    // One never laid out yet (a tab not shown so far) has no sizes to go back to: all
    // zero, which would shrink its panes to their minimums when set.
    const QList<int> sizes = splitter->sizes();
    if (std::any_of(sizes.begin(), sizes.end(), [](int s) { return s > 0; }))
      splitters_.emplace_back(splitter, sizes);
  }
  window_font_ = window_->font();
  window_font_set_ = window_->testAttribute(Qt::WA_SetFont);
  active_ = true;

  // Docks and tool bars are for working, not for showing.
  for (QWidget* w : widgets) {
    if (w->parentWidget() != window_ ||
        !(qobject_cast<QDockWidget*>(w) || qobject_cast<QToolBar*>(w)))
      continue;
    bars_.emplace_back(w, !w->isHidden());
    w->hide();
  }

  // Most widgets follow the window's font; those with a font of their own, or one from a
  // style sheet, are given theirs scaled.
  window_->setFont(own_font(scaled_font(window_font_, factor_)));
  for (QWidget* w : widgets) {
    const auto& [font, explicitly_set] = before[w];
    if (auto* plot = qobject_cast<QCustomPlot*>(w)) {
      // A plot keeps its widget font: what it adds later starts from it, and is scaled
      // before its replot like the rest of its elements.
      fonts_.push_back({w, font, explicitly_set});
      w->setFont(own_font(font));
      adoptPlot(plot, false);
      if (auto* hook = dynamic_cast<PresentationHook*>(w)) hook->presentationScaleChanged(factor_);
      continue;
    }
    if (std::abs(font_size(w->font()) - font_size(font) * factor_) > 0.01) {
      fonts_.push_back({w, font, explicitly_set});
      w->setFont(own_font(scaled_font(font, factor_)));
    }
    adoptWidget(w, false);
  }
  // Only the tab shown asks for room: the others' minimum sizes are left out.
  for (QTabWidget* tabs : window_->findChildren<QTabWidget*>()) {
    tab_widgets_.emplace_back(tabs);
    tab_connections_.push_back(
        connect(tabs, &QTabWidget::currentChanged, this, [this, tabs] { sizeTabPages(tabs); }));
    sizeTabPages(tabs);
  }
  qApp->installEventFilter(this);
  scheduleFit();
}

void PresentationMode::adoptWidget(QWidget* w, bool new_widget) {
  w->setProperty(kAdopted, true);
  if (qobject_cast<QAbstractItemView*>(w)) adoptItemView(w);
  if (auto* hook = dynamic_cast<PresentationHook*>(w)) hook->presentationScaleChanged(factor_);
  if (new_widget) {
    if (auto* plot = qobject_cast<QCustomPlot*>(w)) {
      adoptPlot(plot, true);
    } else if (!w->testAttribute(Qt::WA_SetFont)) {
      new_widgets_.emplace_back(w);
    } else if (QWidget* parent = w->parentWidget();
               parent && w->font().resolveMask() & QFont::SizeResolved) {
      // A font of its own made from the scaled one it inherited (a copy with the weight
      // changed): its size is the parent's, so it follows the parent's from now on, and
      // takes the usual size back on leaving.
      if (std::abs(font_size(w->font()) - font_size(parent->font())) < 0.01) {
        QFont f = w->font();
        f.setResolveMask(f.resolveMask() & ~QFont::SizeResolved);
        w->setFont(f);
      }
    }
  }
}

void PresentationMode::adoptPlot(QCustomPlot* plot, bool new_widget) {
  plot->setProperty(kAdopted, true);
  if (new_widget) {
    // Made while presenting: its widget font came from the scaled window; its elements
    // are scaled here instead.
    fonts_.push_back({plot, plot->font(), plot->testAttribute(Qt::WA_SetFont)});
    if (!plot->testAttribute(Qt::WA_SetFont))
      plot->setFont(own_font(scaled_font(plot->font(), 1.0 / factor_)));
  }
  plots_.emplace_back(plot);
  plot_connections_.push_back(
      connect(plot, &QCustomPlot::beforeReplot, this, [this, plot] { scalePlot(plot); }));
  scalePlot(plot);
  plot->replot(QCustomPlot::rpQueuedReplot);
}

void PresentationMode::sizeTabPages(QTabWidget* tabs) {
  for (int i = 0; i < tabs->count(); ++i) {
    QWidget* page = tabs->widget(i);
    if (!page->property(kPagePolicy).isValid())
      page->setProperty(kPagePolicy, QVariant::fromValue(page->sizePolicy()));
    page->setSizePolicy(i == tabs->currentIndex()
                            ? page->property(kPagePolicy).value<QSizePolicy>()
                            : QSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored));
  }
}

void PresentationMode::adoptItemView(QWidget* w) {
  // Columns as wide as their contents at the larger font (values are not cut to "0.…").
  QHeaderView* header = nullptr;
  if (auto* table = qobject_cast<QTableView*>(w)) header = table->horizontalHeader();
  if (auto* tree = qobject_cast<QTreeView*>(w)) header = tree->header();
  if (!header || header->count() == 0) return;
  auto* view = static_cast<QAbstractItemView*>(w);
  headers_.push_back({header, header->saveState(), view->minimumWidth()});
  header->setStretchLastSection(false);
  header->resizeSections(QHeaderView::ResizeToContents);
  // Wide enough to show every column whole, up to half the window.
  int width =
      header->length() + 2 * view->frameWidth() + view->verticalScrollBar()->sizeHint().width();
  if (auto* table = qobject_cast<QTableView*>(w); table && table->verticalHeader()->isVisible())
    width += table->verticalHeader()->width();
  view->setMinimumWidth(std::max(view->minimumWidth(), std::min(width, window_->width() / 2)));
}

void PresentationMode::scalePlot(QCustomPlot* plot) {
  if (!active_ || !plot) return;
  std::vector<Write> writes;
  for (QCPLayerable* l : layerables(plot)) {
    if (qobject_cast<QCPGrid*>(l)) continue;  // grid lines stay fine
    const QMetaObject* mo = l->metaObject();
    for (int i = 0; i < mo->propertyCount(); ++i) {
      const QMetaProperty prop = mo->property(i);
      const int type = prop.metaType().id();
      if ((type != QMetaType::QFont && type != QMetaType::QPen) || !prop.isWritable()) continue;
      const QByteArray base_key = kBasePrefix + QByteArray(prop.name());
      const QByteArray set_key = kSetPrefix + QByteArray(prop.name());
      const QVariant current = prop.read(l);
      const QVariant set = l->property(set_key.constData());
      if (set.isValid() && set == current) continue;  // scaled already
      QVariant base = current;
      // A legend item made after its legend was scaled took the legend's scaled font.
      if (auto* item = qobject_cast<QCPAbstractLegendItem*>(l); item && type == QMetaType::QFont) {
        QCPLegend* legend = item->parentLegend();
        if (legend && legend->property(set_key.constData()) == current)
          base = legend->property(base_key.constData());
      }
      const QVariant target = type == QMetaType::QFont
                                  ? QVariant(scaled_font(base.value<QFont>(), factor_))
                                  : QVariant(scaled_pen(base.value<QPen>(), factor_));
      l->setProperty(base_key.constData(), base);
      l->setProperty(set_key.constData(), target);
      writes.push_back({l, prop.name(), target});
    }
    if (auto* g = qobject_cast<QCPGraph*>(l); g && !g->scatterStyle().isNone()) {
      const QByteArray base_key = kBasePrefix + QByteArray(kScatter);
      const QByteArray set_key = kSetPrefix + QByteArray(kScatter);
      const double current = g->scatterStyle().size();
      const QVariant set = g->property(set_key.constData());
      if (!set.isValid() || set.toDouble() != current) {
        g->setProperty(base_key.constData(), current);
        g->setProperty(set_key.constData(), current * factor_);
        writes.push_back({g, kScatter, current * factor_});
      }
    }
  }
  apply(writes);
}

void PresentationMode::restorePlot(QCustomPlot* plot) {
  std::vector<Write> writes;
  for (QCPLayerable* l : layerables(plot)) {
    for (const QByteArray& key : l->dynamicPropertyNames()) {
      if (!key.startsWith(kSetPrefix)) continue;
      const QByteArray name = key.mid(static_cast<int>(sizeof(kSetPrefix) - 1));
      const QByteArray base_key = kBasePrefix + name;
      const QVariant set = l->property(key.constData());
      const QVariant current = name == kScatter
                                   ? QVariant(static_cast<QCPGraph*>(l)->scatterStyle().size())
                                   : l->property(name.constData());
      // What the plot set anew while presenting is left as it is.
      if (current == set) writes.push_back({l, name, l->property(base_key.constData())});
      l->setProperty(key.constData(), QVariant());
      l->setProperty(base_key.constData(), QVariant());
    }
  }
  apply(writes);
  plot->replot(QCustomPlot::rpQueuedReplot);
}

void PresentationMode::leave() {
  qApp->removeEventFilter(this);
  active_ = false;
  for (QWidget* w : QApplication::allWidgets()) {
    if (!w->property(kMenuScaled).isValid()) continue;
    w->setProperty(kMenuScaled, QVariant());
    w->setFont(QFont());  // the application's again
  }
  for (const QMetaObject::Connection& c : plot_connections_) disconnect(c);
  plot_connections_.clear();
  for (const QPointer<QCustomPlot>& p : plots_) {
    if (p) restorePlot(p);
  }
  plots_.clear();
  // Children first, so that each gets back exactly the font it had.
  for (auto it = fonts_.rbegin(); it != fonts_.rend(); ++it) {
    if (it->widget) it->widget->setFont(it->explicitly_set ? it->font : QFont());
  }
  fonts_.clear();
  window_->setFont(window_font_set_ ? window_font_ : QFont());
  for (const QPointer<QWidget>& w : new_widgets_) {
    if (w && !w->testAttribute(Qt::WA_SetFont)) w->setFont(QFont());
  }
  new_widgets_.clear();
  for (QWidget* w : window_->findChildren<QWidget*>()) {
    if (!w->property(kAdopted).isValid()) continue;
    w->setProperty(kAdopted, QVariant());
    if (auto* hook = dynamic_cast<PresentationHook*>(w)) hook->presentationScaleChanged(1.0);
  }
  for (const QMetaObject::Connection& c : tab_connections_) disconnect(c);
  tab_connections_.clear();
  for (const QPointer<QTabWidget>& tabs : tab_widgets_) {
    if (!tabs) continue;
    for (int i = 0; i < tabs->count(); ++i) {
      QWidget* page = tabs->widget(i);
      if (!page->property(kPagePolicy).isValid()) continue;
      page->setSizePolicy(page->property(kPagePolicy).value<QSizePolicy>());
      page->setProperty(kPagePolicy, QVariant());
    }
  }
  tab_widgets_.clear();
  if (central_scroll_ && central_) {
    central_scroll_->takeWidget();
    window_->setCentralWidget(central_);  // deletes the scroll area
    central_->show();                     // at once: the docks' sizes below are shared out with it
  }
  central_scroll_ = nullptr;
  central_ = nullptr;
  for (const SavedHeader& h : headers_) {
    if (!h.header) continue;
    h.header->restoreState(h.state);
    if (auto* view = qobject_cast<QAbstractItemView*>(h.header->parentWidget()))
      view->setMinimumWidth(h.view_minimum_width);
  }
  headers_.clear();
  for (const auto& [bar, visible] : bars_) {
    if (bar) bar->setVisible(visible);
  }
  bars_.clear();
  window_->setWindowState(window_state_);
  if (!(window_state_ & (Qt::WindowMaximized | Qt::WindowFullScreen)))
    window_->setGeometry(geometry_);
  // The docks' and splitters' sizes once the layouts have taken the fonts back (a layout
  // that changes a minimum size asks its parent's again).
  for (int i = 0; i < 4; ++i) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  window_->restoreState(state_);
  for (const auto& [splitter, sizes] : splitters_) {
    if (splitter) splitter->setSizes(sizes);
  }
  splitters_.clear();
  // A minimum size the large fonts set that the layouts took back only now: the geometry
  // once more, as it was.
  if (!(window_state_ & (Qt::WindowMaximized | Qt::WindowFullScreen)) &&
      window_->geometry() != geometry_)
    window_->setGeometry(geometry_);
}

void PresentationMode::showDock(QWidget* dock, bool shown) {
  if (!active_ || !dock) return;
  size_ = window_->size();
  dock->setVisible(shown);
  scheduleFit();
}

bool PresentationMode::eventFilter(QObject* watched, QEvent* event) {
  // Menus (context menus, the menu bar's) are windows of their own, which take the
  // application's font, not the window's: given the window's scaled one before they lay
  // out their items (QMenu::popup() polishes first), and again if shown since.
  if (event->type() == QEvent::Polish || event->type() == QEvent::Show) {
    if (auto* menu = qobject_cast<QMenu*>(watched)) {
      QWidget* owner = menu->parentWidget();
      while (qobject_cast<QMenu*>(owner)) owner = owner->parentWidget();
      if (owner && owner->window() == window_ && menu->font() != window_->font()) {
        menu->setFont(window_->font());
        menu->setProperty(kMenuScaled, true);
      }
    }
  }
  // Widgets shown for the first time while presenting (a demo page built on first use,
  // a card added): fonts follow the window; plots, item views and hooks need a word.
  if (event->type() == QEvent::Show && watched->isWidgetType()) {
    auto* w = static_cast<QWidget*>(watched);
    if (!w->property(kAdopted).isValid() && w->window() == window_) {
      adoptWidget(w, true);
      for (QWidget* child : w->findChildren<QWidget*>()) {
        if (!child->property(kAdopted).isValid()) adoptWidget(child, true);
      }
    }
  }
  return QObject::eventFilter(watched, event);
}

void PresentationMode::scheduleFit() {
  // The window's minimum size follows its contents' once the layouts have run.
  QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  if (window_->size() != size_) window_->resize(size_);
  fitToScreen(window_);
  if (fit_pending_) return;
  fit_pending_ = true;
  QTimer::singleShot(0, this, [this] {
    fit_pending_ = false;
    if (!active_) return;
    if (window_->size() != size_) window_->resize(size_);
    fitToScreen(window_);
  });
}

void PresentationMode::fitToScreen(QWidget* window) {
  const QScreen* screen = window->screen();
  if (!screen) return;
  const QRect avail = screen->availableGeometry();
  const QSize frame_extra = window->frameGeometry().size() - window->size();
  const QSize most = avail.size() - frame_extra;
  if (window->width() > most.width() || window->height() > most.height())
    window->resize(window->size().boundedTo(most));
  const QRect frame = window->frameGeometry();
  QPoint to = frame.topLeft();
  if (frame.right() > avail.right()) to.rx() -= frame.right() - avail.right();
  if (frame.bottom() > avail.bottom()) to.ry() -= frame.bottom() - avail.bottom();
  to.setX(std::max(to.x(), avail.left()));
  to.setY(std::max(to.y(), avail.top()));
  if (to != frame.topLeft()) window->move(to);
}

}  // namespace fp8wb

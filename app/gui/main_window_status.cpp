// defines: MainWindow's status bar: the device and GEMM labels (buildStatusBar()), the
// message cut to the room left of the run label, failures (one message box) and notices.
#include <QEvent>
#include <QLabel>
#include <QMessageBox>
#include <QPainter>
#include <QStatusBar>
#include <QTimer>
#include <QToolTip>

#include <algorithm>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/views/common/training_run_button.h"
#include "main_window.h"
#include "status_label.h"

namespace fp8wb {

namespace {

// A label that gives up width down to none, its text cut with "..." (the whole of it in
// its tooltip): the status bar's GEMM line at 1280 px would otherwise run under the
// database label beside it.
class ElidedLabel : public QLabel {
 public:
  using QLabel::QLabel;
  QSize minimumSizeHint() const override { return {0, QLabel::minimumSizeHint().height()}; }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    const QRect r = contentsRect();
    p.setPen(palette().color(foregroundRole()));
    p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter,
               fontMetrics().elidedText(text(), Qt::ElideRight, r.width()));
  }
};

}  // namespace

QString elide_at_word(const QFontMetrics& fm, const QString& text, int width) {
  if (fm.horizontalAdvance(text) <= width) return text;
  const QString ellipsis(QChar(0x2026));
  for (qsizetype i = text.lastIndexOf(QLatin1Char(' ')); i > 0;
       i = text.lastIndexOf(QLatin1Char(' '), i - 1)) {
    QString head = text.left(i);
    while (!head.isEmpty() && QStringLiteral(" ,;:").contains(head.back())) head.chop(1);
    if (!head.isEmpty() && fm.horizontalAdvance(head + ellipsis) <= width) return head + ellipsis;
  }
  return fm.elidedText(text, Qt::ElideRight, width);
}

QSize StatusLabel::sizeHint() const {
  QSize s = QLabel::sizeHint();
  if (parentWidget() && parentWidget()->width() > 0)
    s.setWidth(std::min(s.width(), parentWidget()->width() / 2));
  return s;
}

QSize StatusLabel::minimumSizeHint() const {
  // Its width (at most half the bar) before the GEMM line beside it gives up any of its own:
  // that one is cut first.
  return sizeHint();
}

QString StatusLabel::shownText() const {
  return elide_at_word(fontMetrics(), text(), contentsRect().width());
}

QString StatusLabel::fullToolTip() const {
  QStringList parts;
  if (shownText() != text()) parts << text();
  if (!notes_.isEmpty()) parts << notes_;
  return parts.join(QStringLiteral("\n\n"));
}

void StatusLabel::setNotes(const QString& notes) {
  notes_ = notes;
}

bool StatusLabel::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) setToolTip(fullToolTip());  // as it is now
  return QLabel::event(e);
}

void StatusLabel::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setPen(palette().color(foregroundRole()));
  p.drawText(contentsRect(), Qt::AlignLeft | Qt::AlignVCenter, shownText());
}

// The device, the FP8 GEMMs, the run label and "Back to run N".
void MainWindow::buildStatusBar() {
  const BackendInfo b = probe_backend();
  auto* device = new QLabel(tr("Device: %1").arg(QString::fromStdString(b.device_name)), this);
  auto* gemm = new ElidedLabel(tr("FP8 GEMM: %1").arg(QString::fromStdString(b.fp8_gemm)), this);
  device->setObjectName(QStringLiteral("deviceLabel"));
  gemm->setObjectName(QStringLiteral("gemmLabel"));
  run_status_->setObjectName(QStringLiteral("runStatus"));
  gemm->setToolTip(
      tr("%1 (LibTorch %2)").arg(gemm->text(), QString::fromStdString(b.torch_version)));
  statusBar()->addWidget(device);
  statusBar()->addWidget(gemm, 1);
  statusBar()->addPermanentWidget(run_status_);
  // While another run is shown, the way back to the one training here.
  back_button_ = new TrainingRunButton(engine_, this);
  statusBar()->addPermanentWidget(back_button_);
  // QStatusBar hides its normal widgets only where they are visible when a message comes:
  // one said while the bar was hidden left them to show up under it later, two texts drawn
  // on top of each other. Here they are hidden while any message shows, and back after.
  connect(statusBar(), &QStatusBar::messageChanged, this, [device, gemm](const QString& m) {
    device->setVisible(m.isEmpty());
    gemm->setVisible(m.isEmpty());
  });
  // The permanent widgets grow and move ("run 1 opened; run 2 trains on", "Back to run
  // 2"): the message is cut again to the room they leave, never clipped under them.
  run_status_->installEventFilter(this);
  back_button_->installEventFilter(this);
  // The run label's width is at most half the bar's: asked again as the bar's changes.
  statusBar()->installEventFilter(this);
}

void MainWindow::sayInStatusBar(const QString& message) {
  said_ = message;
  said_shown_ = message;
  // The room left of the permanent label (the database, the run), as QStatusBar clips its
  // message there; before the window shows, its layout is not known: showEvent() says it
  // again.
  if (isVisible()) {
    int right = statusBar()->width();
    for (QWidget* w : {static_cast<QWidget*>(run_status_), back_button_})
      if (w->isVisible()) right = std::min(right, w->geometry().left());
    const int room = right - 24;
    if (room > 0) said_shown_ = elide_at_word(statusBar()->fontMetrics(), message, room);
  }
  statusBar()->setToolTip(said_shown_ != message ? message : QString());
  statusBar()->showMessage(said_shown_, 20000);
}

bool MainWindow::saying() const {
  const QString m = statusBar()->currentMessage();
  return !m.isEmpty() && m == said_shown_;
}

void MainWindow::noteFailure(const QString& message) {
  sayInStatusBar(message);
  failures_ << message;
  while (failures_.size() > 20) failures_.removeFirst();
}

void MainWindow::showFailure(const QString& message) {
  noteFailure(message);
  // One message, not one a failure. Modal to the window, so that nothing is clicked
  // behind it unseen, but shown, not exec()'d: a run, a sweep go on behind it.
  if (!failure_box_) {
    failure_box_ = new QMessageBox(QMessageBox::Warning, tr("FP8 Workbench"), QString(),
                                   QMessageBox::Close, this);
    failure_box_->setWindowModality(Qt::WindowModal);
    connect(failure_box_, &QMessageBox::finished, this, &MainWindow::recheckDatabase);
  }
  failure_box_->setText(message);
  failure_box_->show();
}

void MainWindow::clearFailureMessage() {
  if (!failures_.isEmpty() && saying() && said_ == failures_.last()) {
    statusBar()->clearMessage();
    statusBar()->setToolTip(QString());
  }
}

void MainWindow::showEvent(QShowEvent* e) {
  QMainWindow::showEvent(e);
  // A message shown before the window was (a --db that cannot be opened, said at start-up)
  // did not hide the status bar's labels, which were not visible yet: shown again now, it
  // does, instead of being drawn over them.
  if (saying()) {
    statusBar()->clearMessage();
    sayInStatusBar(said_);  // cut to the room it now has
  }
}

bool MainWindow::eventFilter(QObject* watched, QEvent* e) {
  if (watched == statusBar()) {
    if (e->type() == QEvent::Resize) run_status_->updateGeometry();
    return QMainWindow::eventFilter(watched, e);
  }
  switch (e->type()) {
    case QEvent::Move:
    case QEvent::Resize:
    case QEvent::Show:
    case QEvent::Hide:
      // After the status bar's layout has placed them all.
      if (!resay_pending_ && saying()) {
        resay_pending_ = true;
        QTimer::singleShot(0, this, [this] {
          resay_pending_ = false;
          if (saying()) sayInStatusBar(said_);
        });
      }
      break;
    default: break;
  }
  return QMainWindow::eventFilter(watched, e);
}

void MainWindow::resizeEvent(QResizeEvent* e) {
  QMainWindow::resizeEvent(e);
  if (saying()) sayInStatusBar(said_);  // cut to the room it now has
}

void MainWindow::showNotice(const QString& message) {
  // What is said without failing (GEMMs emulated, layers kept in high precision, a
  // sweep's end) goes to the status bar, the latest first, and stays in the run label's
  // tooltip.
  sayInStatusBar(message);
  notices_ << message;
  while (notices_.size() > 20) notices_.removeFirst();
  run_status_->setNotes(notices_.join(QLatin1Char('\n')));
}

QString MainWindow::statusText() const {
  QStringList parts;
  for (QLabel* l : statusBar()->findChildren<QLabel*>()) parts << l->text();
  return parts.join(QStringLiteral(" · "));
}

}  // namespace fp8wb

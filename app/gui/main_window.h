// defines: MainWindow: arranges the tabs, the menus and the status bar; the tabs do the
// work.
#pragma once

#include <QMainWindow>
#include <QStringList>

class QTabWidget;
class QAction;

namespace fp8wb {

class FormatsTab;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // remember_layout: restore and save geometry, tab and mode in QSettings (off for
  // screenshots and tests, which must not depend on a user's settings).
  explicit MainWindow(bool remember_layout = true, QWidget* parent = nullptr);

  QStringList tabNames() const;
  // Selects a tab by name, case-insensitively; false if there is none.
  bool selectTab(const QString& name);
  QString currentTabName() const;
  void setPresentationMode(bool on);
  bool presentationMode() const { return presentation_; }
  FormatsTab* formatsTab() const { return formats_; }
  QString statusText() const;

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildMenus();
  QTabWidget* tabs_;
  FormatsTab* formats_;
  QAction* presentation_action_ = nullptr;
  bool presentation_ = false;
  bool remember_layout_;
  int base_point_size_;
};

}  // namespace fp8wb

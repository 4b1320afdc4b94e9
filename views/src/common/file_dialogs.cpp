#include "fp8wb/views/common/file_dialogs.h"

#include <QFileDialog>
#include <QFileIconProvider>
#include <QFileInfo>
#include <QMessageBox>
#include <QMimeDatabase>

#include "fp8wb/views/common/run_database_guard.h"

namespace fp8wb {
namespace {

// Icons and types from a file's name: a folder, or the type its extension names.
class NameOnlyIcons : public QFileIconProvider {
 public:
  QIcon icon(const QFileInfo& info) const override {
    return QFileIconProvider::icon(info.isDir() ? QFileIconProvider::Folder
                                                : QFileIconProvider::File);
  }
  QString type(const QFileInfo& info) const override {
    if (info.isDir()) return QFileDialog::tr("Folder");
    const QMimeType t = QMimeDatabase().mimeTypeForFile(info, QMimeDatabase::MatchExtension);
    return t.isDefault() ? QFileDialog::tr("File") : t.comment();
  }
};

QString chosen(QFileDialog& d) {
  prepare_file_dialog(d);
  return d.exec() == QDialog::Accepted ? d.selectedFiles().value(0) : QString();
}

}  // namespace

void prepare_file_dialog(QFileDialog& dialog) {
  static NameOnlyIcons icons;
  dialog.setOption(QFileDialog::DontUseNativeDialog);
  dialog.setIconProvider(&icons);
}

QString open_file_name(QWidget* parent, const QString& caption, const QString& dir,
                       const QString& filter) {
  QFileDialog d(parent, caption, dir, filter);
  d.setFileMode(QFileDialog::ExistingFile);
  d.setAcceptMode(QFileDialog::AcceptOpen);
  return chosen(d);
}

QString save_file_name(QWidget* parent, const QString& caption, const QString& dir,
                       const QString& filter) {
  QFileDialog d(parent, caption, dir, filter);
  d.setFileMode(QFileDialog::AnyFile);
  d.setAcceptMode(QFileDialog::AcceptSave);
  // Qt's own question would come before the caller's refusal of the run database: asked
  // here, after that check, and only for a file the export may replace.
  d.setOption(QFileDialog::DontConfirmOverwrite);
  for (;;) {
    const QString path = chosen(d);
    if (path.isEmpty() || !QFileInfo::exists(path) || !open_run_database_file_of(path).isEmpty())
      return path;  // the run database: the caller refuses it, without a question first
    QMessageBox ask(QMessageBox::Question, caption,
                    QFileDialog::tr("%1 already exists.\nDo you want to replace it?")
                        .arg(QFileInfo(path).fileName()),
                    QMessageBox::Yes | QMessageBox::No, parent);
    ask.setObjectName(QStringLiteral("replace-file"));
    ask.setDefaultButton(QMessageBox::No);
    if (ask.exec() == QMessageBox::Yes) return path;
    // No: back to the dialog, to choose another name.
  }
}

QString existing_folder(QWidget* parent, const QString& caption, const QString& dir) {
  QFileDialog d(parent, caption, dir);
  d.setFileMode(QFileDialog::Directory);
  d.setOption(QFileDialog::ShowDirsOnly);
  return chosen(d);
}

}  // namespace fp8wb

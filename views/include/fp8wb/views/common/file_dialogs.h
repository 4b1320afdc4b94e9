// defines: prepare_file_dialog(), open_file_name(), save_file_name(), existing_folder():
// the file dialogs of the workbench, which tell a file's type by its name alone.
//
// Qt's own dialogs read the first bytes of files they list to tell their type. In the
// folder of the open run database that read is a second descriptor of the database file,
// and closing it ends every POSIX lock this process holds on the file, SQLite's too (such
// locks belong to the process, and any close of the file drops them). Another process
// that closes the database then finds itself alone, and removes the write-ahead log this
// one still writes to: the runs and sweeps written after that are lost.
#pragma once

#include <QString>

class QFileDialog;
class QWidget;

namespace fp8wb {

// Qt's widget dialog (not the platform's, which reads files alike) with file types and
// icons from names only.
void prepare_file_dialog(QFileDialog& dialog);

// As QFileDialog's static functions (empty where cancelled), through prepare_file_dialog().
QString open_file_name(QWidget* parent, const QString& caption, const QString& dir,
                       const QString& filter);
// save_file_name() asks whether to replace a file that exists only after the chosen path
// is known not to be the run database's (run_database_guard.h): that one comes back
// unasked, for the caller to refuse, never "replace?" first and a refusal after.
QString save_file_name(QWidget* parent, const QString& caption, const QString& dir,
                       const QString& filter);
QString existing_folder(QWidget* parent, const QString& caption, const QString& dir);

}  // namespace fp8wb

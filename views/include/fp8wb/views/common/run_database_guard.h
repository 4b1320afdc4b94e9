// defines: run_database_file_of(): whether a file chosen to be read is the open run
// database, or one of its SQLite files, by any path to it; set_open_run_database() and
// open_run_database_file_of(): the run databases this process has open, for every file
// it is about to write (an export written over the database would truncate it);
// output_refusal() and write_output_file(): the rule every file the GUI writes follows
// (screenshots, PNG/PDF/CSV exports), as the CLI's outputs do: never over an SQLite
// database (any, not only the open one) or an input, and all or nothing.
//
// Opening and closing a second descriptor of the run database (or of its -wal or -shm
// file) in the process that has it open drops every POSIX lock the process holds on that
// file, SQLite's too (see file_dialogs.h for what that loses). Files are compared by
// device and inode with stat(), which opens nothing: a symlink or a hard link to the
// database is the database.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

namespace fp8wb {

// The file of the run database at `database` (the database itself, its -wal, -shm or
// -journal file) that `chosen` is, or empty where it is none of them (or the database
// path is empty).
QString run_database_file_of(const QString& chosen, const QString& database);

// Records (or, with an empty path, forgets) the run database `owner` has open: each
// EngineController keeps its own up to date.
void set_open_run_database(const void* owner, const QString& path);
// run_database_file_of() against every run database this process has open: the file
// `chosen` is, or empty.
QString open_run_database_file_of(const QString& chosen);

// Why `path` must not be written, or empty: it is a file of a run database this process
// has open (compared by inode: nothing opened), any other SQLite database or one of its
// files (its first bytes read), or one of `inputs` (by any path to it).
QString output_refusal(const QString& path, const QStringList& inputs = {});
// Writes `bytes` to `path` all or nothing (write_file_atomically(): a temporary file in the
// same folder, renamed over `path`; a link to a regular file replaces that file) after
// output_refusal(). Returns an empty string, or a message naming the path and the problem.
QString write_output_file(const QString& path, const QByteArray& bytes,
                          const QStringList& inputs = {});

// The files a sharded checkpoint's index (a *.index.json naming its shards in
// "weight_map") would open: the shards' paths, next to the index. Empty for any other
// file, or an index that cannot be read (its reader says why).
QStringList checkpoint_shards(const QString& index);

}  // namespace fp8wb

// defines: open_store_reader(), open_store_reader_if_made(): the one way the views read
// the run store. Each read opens a read-only connection of its own
// (RunStore::open_read_only(): nothing created, migrated or marked), on a pool thread
// (a BackgroundJob's work): a read that waits on a database another process writes
// waits there, up to SQLite's busy timeout (core's), never on the GUI thread. Failures
// are StoreErrors naming the database's path and the problem, which the job hands to
// its owner's failed().
#pragma once

#include <memory>
#include <string>

namespace fp8wb {

class RunStore;

// The run database at `path`, read-only. Throws StoreError naming the path and the
// problem: none chosen (an empty path), no file there ("no run database at PATH"), a
// folder, a file that is another program's or damaged ("run database PATH: file is not
// a database (not an SQLite database, or its first page is damaged)"), a schema newer
// than this build reads.
std::unique_ptr<RunStore> open_store_reader(const std::string& path);

// The same, or null where nothing is at `path` yet: a database not made yet holds no
// runs and no sweeps (the lists read it as empty). Throws as open_store_reader() for
// anything else.
std::unique_ptr<RunStore> open_store_reader_if_made(const std::string& path);

}  // namespace fp8wb

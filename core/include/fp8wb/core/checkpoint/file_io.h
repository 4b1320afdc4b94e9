// defines: PathError, FileError, open_regular_file(), read_regular_file(), read_at(),
// write_file_atomically(), sqlite_database_at(), link_problem():
// how the workbench opens the files it reads (configs, checkpoints, shards) and writes
// the files it produces (exports, weights). A FIFO, a device or a folder given where a
// file is expected is refused with its kind named, never opened for a blocking read nor
// replaced. Plain C++, no torch, no Qt.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace fp8wb {

// An error about one file. what() is the whole message, as the CLI prints it; `path`,
// `offset` and `reason` are its parts, for a caller that says them in its own words (the
// GUI's status line names the file once, whatever the message's shape).
struct PathError : std::runtime_error {
  std::string path;     // the file the error is about ("" where the message names none)
  int64_t offset = -1;  // the byte of the file it is at; -1 where it is about the whole file
  std::string reason;   // what is wrong, without the path

  // A message with no parts known: the reason is the whole message.
  explicit PathError(const std::string& message) : std::runtime_error(message), reason(message) {}
  // "PATH: REASON".
  PathError(const std::string& path_, const std::string& reason_, int64_t offset_ = -1)
      : std::runtime_error(path_ + ": " + reason_), path(path_), offset(offset_), reason(reason_) {}
  // A message of another shape ("cannot open PATH: ...") with its parts.
  PathError(const std::string& message, const std::string& path_, const std::string& reason_,
            int64_t offset_)
      : std::runtime_error(message), path(path_), offset(offset_), reason(reason_) {}
};

// A file that cannot be opened, read or written as asked.
struct FileError : PathError {
  using PathError::PathError;
};

// An open file descriptor for an existing regular file (opened without blocking, so a
// FIFO cannot hang the caller, then checked with fstat). The caller closes it. Throws
// FileError naming the path and what it is ("a FIFO", "a folder", ...).
int open_regular_file(const std::string& path);

// The whole of a regular file; throws FileError when it is not one, cannot be read, or
// is larger than `max_bytes`.
std::string read_regular_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 30);

// Reads up to `n` bytes at `offset` of an open file with pread, in chunks of at most
// 64 MB; returns how many it read, fewer only where the file ends. A read error throws
// FileError naming `path`. (Reading through read() rather than a memory map: a file
// that shrinks under a reader ends a read early, where a mapped page past the new end
// would kill the process with SIGBUS.)
uint64_t read_at(int fd, uint64_t offset, void* out, uint64_t n, const std::string& path);

// Writes `path` all or nothing: `write` fills a temporary file beside it (PATH.XXXXXX.part),
// which is flushed to disk and renamed over `path`. A `path` that exists and is not a
// regular file (a device, a FIFO, a folder) is refused before anything is written; a
// symbolic link to a regular file replaces that file. On any failure (a full disk,
// `write` throwing) the temporary file is removed, `path` is left as it was, and the
// error is rethrown (FileError for the file's own errors).
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

// The SQLite database that writing `path` would destroy: `path` itself where it is a file
// that begins as every SQLite database does (through a link too), or the database whose
// -wal, -shm or -journal file it is (by its name, or the name a link resolves to). Empty
// where there is none. Reads the first 16 bytes of the file: a caller that has the file
// open as a database itself compares by inode first (an open and close of a second
// descriptor drops the process's POSIX locks on it).
std::string sqlite_database_at(const std::string& path);

// Why `path`, a symbolic link, leads to no file: "a loop of symbolic links", or "a symbolic
// link to TARGET, which is not there". Empty where `path` is no such link (a file, a
// folder, nothing at all): for messages that would otherwise say "no file at PATH".
std::string link_problem(const std::string& path);

}  // namespace fp8wb

#include "fp8wb/core/checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <streambuf>
#include <vector>

namespace fp8wb {
namespace {

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// An output buffer over a file descriptor that remembers the first write error.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd), buf_(size_t{1} << 16) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  int error() const { return error_; }
  bool flush_all() { return drain() && error_ == 0; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    size_t left = static_cast<size_t>(pptr() - pbase());
    while (left > 0 && error_ == 0) {
      const ssize_t w = ::write(fd_, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        break;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return error_ == 0;
  }
  int fd_;
  std::vector<char> buf_;
  int error_ = 0;
};

// A temporary file beside `target`, created exclusively (the umask applies as to any new
// file); removed by the destructor unless released.
class TempFile {
 public:
  explicit TempFile(const std::string& target) {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, ".%06x.part",
                    (rd() ^ counter++ ^ static_cast<unsigned>(getpid())) & 0xFFFFFFu);
      path_ = target + suffix;
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd_ >= 0 || errno != EEXIST) break;
    }
    if (fd_ < 0)
      throw FileError("cannot write " + target + ": " + errno_text(errno), target,
                      "cannot write: " + errno_text(errno), -1);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor; returns 0 or the error.
  int close() {
    const int r = ::close(fd_);
    fd_ = -1;
    return r == 0 ? 0 : errno;
  }
  void release() { released_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool released_ = false;
};

}  // namespace

int open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const std::string why = errno_text(errno);
    throw FileError("cannot open " + path + ": " + why, path, "cannot open: " + why, -1);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw FileError("cannot open " + path + ": " + errno_text(e), path,
                    "cannot open: " + errno_text(e), -1);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FileError(path + " is " + kind_of(st.st_mode) + ", not a regular file", path,
                    std::string("is ") + kind_of(st.st_mode) + ", not a regular file", -1);
  }
  // Reads from here on block as usual (O_NONBLOCK only kept open() from waiting).
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes) {
  const int fd = open_regular_file(path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      throw FileError("cannot read " + path + ": " + errno_text(e), path,
                      "cannot read: " + errno_text(e), -1);
    }
    if (r == 0) break;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      ::close(fd);
      throw FileError(path + " is larger than " + std::to_string(max_bytes) + " bytes", path,
                      "is larger than " + std::to_string(max_bytes) + " bytes", -1);
    }
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

uint64_t read_at(int fd, uint64_t offset, void* out, uint64_t n, const std::string& path) {
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  uint64_t done = 0;
  while (done < n) {
    const uint64_t want = std::min(kChunk, n - done);
    uint64_t at = 0;
    if (__builtin_add_overflow(offset, done, &at) || at > static_cast<uint64_t>(INT64_MAX))
      break;  // past any file's end
    const ssize_t r = ::pread(fd, static_cast<char*>(out) + done, static_cast<size_t>(want),
                              static_cast<off_t>(at));
    if (r < 0) {
      if (errno == EINTR) continue;
      const std::string why = errno_text(errno);
      throw FileError("cannot read " + path + " at byte " + std::to_string(at) + ": " + why, path,
                      "cannot read: " + why, static_cast<int64_t>(at));
    }
    if (r == 0) break;  // the end of the file
    done += static_cast<uint64_t>(r);
  }
  return done;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  if (path.empty()) throw FileError("cannot write a file without a name");
  std::string target = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw FileError("will not write " + path + ": it is " + kind_of(st.st_mode) +
                      ", not a regular file");
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      // Replace the file the link points to, and keep the link.
      char* real = ::realpath(path.c_str(), nullptr);
      if (!real) throw FileError("cannot resolve " + path + ": " + errno_text(errno));
      target = real;
      std::free(real);
    }
  } else if (errno != ENOENT) {
    throw FileError("cannot write " + path + ": " + errno_text(errno));
  }
  TempFile tmp(target);
  {
    FdBuf buf(tmp.fd());
    std::ostream out(&buf);
    write(out);  // an exception leaves through ~TempFile, which removes the file
    out.flush();
    if (!buf.flush_all() || !out)
      throw FileError("writing " + path +
                      " failed: " + errno_text(buf.error() ? buf.error() : EIO));
  }
  if (::fsync(tmp.fd()) != 0) throw FileError("writing " + path + " failed: " + errno_text(errno));
  if (const int e = tmp.close()) throw FileError("writing " + path + " failed: " + errno_text(e));
  if (::rename(tmp.path().c_str(), target.c_str()) != 0)
    throw FileError("cannot move " + tmp.path() + " to " + path + ": " + errno_text(errno));
  tmp.release();
}

namespace {

// A regular file (a link followed) that begins with SQLite's 16-byte header. Opened without
// blocking (a FIFO is no database and is never waited on).
bool is_sqlite_file(const std::string& p) {
  static const char kHeader[16] = "SQLite format 3";  // and its terminating zero
  int fd = -1;
  try {
    fd = open_regular_file(p);
  } catch (const FileError&) {
    return false;
  }
  char head[sizeof kHeader] = {};
  const uint64_t got = read_at(fd, 0, head, sizeof head, p);
  ::close(fd);
  return got == sizeof head && std::memcmp(head, kHeader, sizeof head) == 0;
}

std::string database_named_by(const std::string& p) {
  if (is_sqlite_file(p)) return p;
  for (const std::string suffix : {"-wal", "-shm", "-journal"}) {
    if (p.size() > suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string base = p.substr(0, p.size() - suffix.size());
      if (is_sqlite_file(base)) return base;
    }
  }
  return {};
}

}  // namespace

std::string sqlite_database_at(const std::string& path) {
  if (path.empty()) return {};
  try {
    if (std::string db = database_named_by(path); !db.empty()) return db;
    // A link named x.png to a database's -wal file: the name it resolves to tells.
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    if (!ec && real.string() != path) return database_named_by(real.string());
  } catch (const FileError&) {
  }
  return {};
}

std::string link_problem(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) == 0) return {};
  if (errno == ELOOP) return "a loop of symbolic links";
  if (errno != ENOENT) return {};
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return {};
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return "a symbolic link to nothing that is there";
  std::string t(target, static_cast<size_t>(n));
  if (t.size() > 200) t = t.substr(0, 200) + "…";
  return "a symbolic link to " + t + ", which is not there";
}

}  // namespace fp8wb

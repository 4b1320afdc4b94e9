// defines: DbLock: another connection holding a database's write lock (BEGIN EXCLUSIVE)
// for a while, from a thread of its own; lock_seconds(): how long the lock tests hold it
// (FP8WB_TEST_LOCK_S overrides their defaults).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace fp8wb::test {

// How long a test holds its lock: `fallback` seconds unless FP8WB_TEST_LOCK_S says.
inline double lock_seconds(double fallback) {
  const char* s = std::getenv("FP8WB_TEST_LOCK_S");
  return s && *s ? std::strtod(s, nullptr) : fallback;
}

class DbLock {
 public:
  // Takes the lock (waiting up to 60 s for it) before returning; holds it for `seconds`.
  DbLock(const std::string& path, double seconds) {
    thread_ = std::thread([this, path, seconds] {
      sqlite3* db = nullptr;
      if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        error_ = "cannot open " + path;
      } else {
        sqlite3_busy_timeout(db, 60000);
        char* err = nullptr;
        // The write lock, taken at once: no other connection writes meanwhile.
        if (sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, &err) != SQLITE_OK) {
          error_ = err ? err : "BEGIN EXCLUSIVE failed";
          sqlite3_free(err);
        } else {
          held_ = true;
          std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
          sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
        }
      }
      sqlite3_close(db);
      released_ = true;
    });
    while (!held_ && !released_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~DbLock() { thread_.join(); }
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

  bool held() const { return held_; }
  bool released() const { return released_; }
  const std::string& error() const { return error_; }

 private:
  std::atomic<bool> held_{false}, released_{false};
  std::string error_;
  std::thread thread_;
};

}  // namespace fp8wb::test

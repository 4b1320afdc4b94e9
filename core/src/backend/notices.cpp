#include "fp8wb/core/backend/notices.h"

#include <cstdio>
#include <mutex>
#include <set>

namespace fp8wb {
namespace {

std::mutex& notice_mutex() {
  static std::mutex m;
  return m;
}

NoticeSink& sink_slot() {
  static NoticeSink s;
  return s;
}

}  // namespace

void set_notice_sink(NoticeSink sink) {
  const std::lock_guard<std::mutex> lock(notice_mutex());
  sink_slot() = std::move(sink);
}

void notice(const std::string& message) {
  NoticeSink sink;
  {
    const std::lock_guard<std::mutex> lock(notice_mutex());
    sink = sink_slot();
  }
  if (sink) {
    sink(message);
  } else {
    std::fprintf(stderr, "fp8wb: %s\n", message.c_str());
  }
}

bool notice_once(const std::string& key, const std::string& message) {
  static std::set<std::string> given;
  {
    const std::lock_guard<std::mutex> lock(notice_mutex());
    if (!given.insert(key).second) return false;
  }
  notice(message);
  return true;
}

}  // namespace fp8wb

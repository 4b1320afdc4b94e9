// defines: NoticeSink, set_notice_sink(), notice(), notice_once(): messages the engine
// gives users without failing (a GEMM emulated where the GPU cannot run it, say). The
// CLI prints them, the GUI shows them in its status bar; by default they go to stderr.
#pragma once

#include <functional>
#include <string>

namespace fp8wb {

using NoticeSink = std::function<void(const std::string& message)>;

// Replaces the sink (nullptr: stderr). Thread-safe.
void set_notice_sink(NoticeSink sink);

void notice(const std::string& message);

// The message once per key for the life of the process (e.g. once per GEMM shape that a
// GPU cannot take); returns whether it was given now.
bool notice_once(const std::string& key, const std::string& message);

}  // namespace fp8wb

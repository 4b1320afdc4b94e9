// defines: binary_peak_kib(): a program's peak resident memory, run to its end with its
// output thrown away, as the kernel counts it for that process alone (ru_maxrss of the
// child, nothing of the test's own). For tests that bound what a command holds.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace fp8wb::test {

// Whether a peak says what the program itself holds: under AddressSanitizer freed blocks
// wait in quarantine and every block carries red zones, so bounds on it do not apply.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kPeakIsTheProgramsOwn = false;
#else
inline constexpr bool kPeakIsTheProgramsOwn = true;
#endif

// KiB; -1 where it did not end with status 0.
inline long binary_peak_kib(const std::string& binary, std::vector<std::string> args) {
  args.insert(args.begin(), binary);
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage use {};
  if (wait4(pid, &status, 0, &use) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  return use.ru_maxrss;
}

}  // namespace fp8wb::test

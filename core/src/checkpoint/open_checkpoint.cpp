// open_any_checkpoint(): which reader a checkpoint file goes to, by what the file holds
// (its first bytes), not by its name. A new checkpoint format is one more branch here and
// a reader of its own.
#include "fp8wb/core/checkpoint/open_checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"
#include "pt_reader.h"

namespace fp8wb {
namespace {

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first bytes of a file (fewer where it is shorter).
std::string first_bytes(const std::string& path, size_t n) {
  int fd = -1;
  try {
    fd = open_regular_file(path);  // a FIFO or a device is refused, not waited on
    std::string head(n, '\0');
    head.resize(static_cast<size_t>(read_at(fd, 0, head.data(), n, path)));
    ::close(fd);
    return head;
  } catch (const FileError& e) {
    if (fd >= 0) ::close(fd);
    throw CheckpointError(e);
  }
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A folder's checkpoint, as Hugging Face lays one out: model.safetensors, else its sharded
// index, else pytorch_model.bin, else the folder's only .safetensors file. Empty when the
// folder holds none of these (or several .safetensors files and no index naming them);
// `why` then says so, naming the subfolders (one level down) that hold one, if any.
std::string checkpoint_in_folder(const std::string& dir, std::string& why,
                                 bool look_in_subfolders = true) {
  for (const char* name :
       {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"}) {
    if (is_regular(dir + "/" + name)) return dir + "/" + name;
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (has_suffix(name, ".safetensors") && is_regular(it->path().string())) found.push_back(name);
    if (found.size() > 1) break;
  }
  if (ec) {
    why = "cannot list the folder " + dir + ": " + ec.message();
    return {};
  }
  if (found.size() == 1) return dir + "/" + found.front();
  if (found.empty() && look_in_subfolders) {
    // A folder of model folders (a models/ directory): the subfolders that hold one, named.
    why = models_in_subfolders(dir);
    if (!why.empty()) return {};
  }
  why = dir + " is a folder with " +
        (found.empty() ? std::string("no checkpoint in it")
                       : std::string("several .safetensors files and no index naming them")) +
        ": looked for model.safetensors, model.safetensors.index.json, pytorch_model.bin" +
        (found.empty() ? " or a single .safetensors file" : "") + "; give the file itself";
  return {};
}

}  // namespace

std::string models_in_subfolders(const std::string& dir) {
  std::vector<std::string> models;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code dec;
    if (!it->is_directory(dec)) continue;
    std::string inner;
    if (!checkpoint_in_folder(it->path().string(), inner, false).empty())
      models.push_back(it->path().filename().string());
  }
  if (models.empty()) return {};
  std::sort(models.begin(), models.end());
  constexpr size_t kNamed = 8;
  std::string names;
  for (size_t i = 0; i < models.size() && i < kNamed; ++i)
    names += (i ? ", " : "") + dir + "/" + models[i];
  if (models.size() > kNamed) names += " and " + std::to_string(models.size() - kNamed) + " more";
  return dir + " holds no checkpoint itself, but " +
         (models.size() == 1 ? std::string("this subfolder does: ")
                             : "these " + std::to_string(models.size()) + " subfolders do: ") +
         names + "; give one of them";
}

std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path) {
  // A Hugging Face folder: the checkpoint it holds (config.json beside it is not needed).
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string why;
    const std::string file = checkpoint_in_folder(path, why);
    if (file.empty()) throw CheckpointError(why);
    return open_any_checkpoint(file);
  }
  // A sharded set's index is JSON; its shards are safetensors files (safetensors.cpp).
  if (has_suffix(path, ".index.json")) return Checkpoint::open(path);
  const std::string head = first_bytes(path, 9);
  // A safetensors header: a little-endian length, then '{' (safetensors.cpp).
  if (head.size() == 9 && head[8] == '{') return Checkpoint::open(path);
  // torch.save's zip archive, whatever the file is called, or its legacy bare pickle
  // (refused by name): pt_reader.cpp. A file named .safetensors whose header length's low
  // byte is 0x80 (as pickle's first opcode) and that ends before its '{' is a safetensors
  // file cut short, said so by the safetensors reader (which names a real pickle too).
  const bool zip = head.compare(0, 4, "PK\x03\x04", 4) == 0;
  const bool pickle = !head.empty() && static_cast<unsigned char>(head[0]) == 0x80 &&
                      !has_suffix(path, ".safetensors");
  if (zip || pickle) return read_pt_checkpoint(path);
  const bool pt_name =
      has_suffix(path, ".pt") || has_suffix(path, ".pth") || has_suffix(path, ".bin");
  if (pt_name && head.size() < 8) {
    // Read as PyTorch by its name: too short for torch.save's archive (or a safetensors
    // file), said as such rather than as a truncated safetensors file.
    throw CheckpointError(path + " is not a PyTorch checkpoint: it is only " +
                          std::to_string(head.size()) + (head.size() == 1 ? " byte" : " bytes") +
                          " long, too short for the zip archive torch.save writes");
  }
  if (pt_name) {
    throw CheckpointError(path +
                          " is not a PyTorch checkpoint: it does not start like the zip "
                          "archive torch.save writes ('PK') nor like a safetensors file (a "
                          "header length followed by '{')");
  }
  // Everything else is read as safetensors, which says what the file is not.
  return Checkpoint::open(path);
}

}  // namespace fp8wb

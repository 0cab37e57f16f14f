// SPDX-License-Identifier: Apache-2.0
// The .bin / .txt weight directories through fdnn_model_load_weights. The input describes a
// directory: records of [selector byte][length, 2 bytes little-endian][content], the selector
// picking a tensor name of the tiny spec (or an undeclared one) and the extension; the files are
// written into a directory of this process's own, emptied before each input.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fusednn/fusednn.h"
#include "fuzz_checks.hpp"
#include "fuzz_input.hpp"
#include "fuzz_run_model.hpp"
#include "tiny_spec.hpp"

namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp folder, removed at exit.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = (fs::temp_directory_path() / "fusednn_fuzz_weights_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      fusednn_fuzz::broken_promise("mkdtemp", "cannot make a scratch directory");
    }
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  void clear() const {
    for (const auto& entry : fs::directory_iterator(path_)) fs::remove_all(entry.path());
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchDirectory directory;
  directory.clear();
  fusednn_fuzz::FuzzInput input(data, size);
  for (int files = 0; files < 16 && !input.empty(); ++files) {
    const uint8_t selector = input.byte();
    const fusednn_fuzz::TinyTensor& tensor =
        fusednn_fuzz::kTinyTensors[(selector & 0x0f) % fusednn_fuzz::kTinyTensorCount];
    const char* extension = (selector & 0x10) ? ".txt" : ".bin";
    const std::string content = input.bytes(input.u16());
    std::ofstream out(directory.path() / (std::string(tensor.name) + extension), std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }

  const fdnn_model_options options = fusednn_fuzz::small_options();
  fdnn_model* model = nullptr;
  const std::string spec = fusednn_fuzz::kTinySpec;
  if (fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model) != FDNN_STATUS_OK) {
    fusednn_fuzz::broken_promise("fdnn_model_create_from_spec", fdnn_last_error_message());
  }
  const fdnn_status loaded = fdnn_model_load_weights(model, directory.path().c_str());
  fusednn_fuzz::check_refusal(loaded, "fdnn_model_load_weights");
  if (loaded == FDNN_STATUS_OK) fusednn_fuzz::run_model(model);
  fdnn_model_destroy(model);
  return 0;
}

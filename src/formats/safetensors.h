// safetensors: memory-mapped, fully validated reading of single files and sharded checkpoints
// (model.safetensors.index.json), and writing (used by tests and tools). A truncated or corrupt
// file raises Error (kInvalidInput, naming the file and the problem); it never reads past the end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mmap.h"
#include "core/tensor.h"

namespace strata::formats {

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  // name -> view into the mapping (Device::kCpu, read-only data).
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint: a directory (model.safetensors, or the shards listed in
// model.safetensors.index.json, or every *.safetensors file) or a single .safetensors path, or
// tensors already in memory (a checkpoint built without files, e.g. by strata bench).
class WeightStore {
 public:
  static WeightStore open(const std::string& path);
  // Host tensors as they are: the store keeps views, so the caller keeps their memory alive as long
  // as the store and any model loaded from it (CPU models read quantized codes in place).
  static WeightStore from_tensors(std::map<std::string, Tensor> tensors,
                                  std::map<std::string, std::string> metadata = {});

  bool contains(std::string_view name) const;
  const Tensor& get(std::string_view name) const;  // kNotFound naming the tensor
  const Tensor* find(std::string_view name) const;  // nullptr when absent
  std::vector<std::string> names() const;           // sorted
  // The __metadata__ of the first file (e.g. {"format": "mlx"}), or what from_tensors was given.
  const std::map<std::string, std::string>& metadata() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Tensor, std::less<>> index_;
  std::map<std::string, std::string> metadata_;  // from_tensors only
};

// Writes tensors (any dtype, host memory) as one safetensors file, atomically.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace strata::formats

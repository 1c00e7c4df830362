// MappedFile: a read-only memory map of a whole file (RAII). Model weights are read through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws Error(kNotFound / kIo)
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Whole-file helpers; throw Error with the path on failure.
std::string read_file(const std::string& path);
void write_file_atomic(const std::string& path, std::string_view bytes);
bool file_exists(const std::string& path);

}  // namespace strata

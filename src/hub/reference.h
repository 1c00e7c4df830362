// Model references, as `--model` and `strata pull` take them: a local directory or .gguf file, or a
// Hugging Face repository `org/repo[@revision][:file-or-quant]`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace strata::hub {

// A repository on the hub, and what to take from it.
struct RepoRef {
  std::string repo;               // "org/name"
  std::string revision = "main";  // a branch, a tag or a commit hash
  // A file of the repository ("model-Q4_K_M.gguf", "sub/x.gguf") or a GGUF quantization tag
  // ("Q4_K_M", any case); "" picks the safetensors checkpoint, or the repo's only GGUF file.
  std::string selector;

  std::string to_string() const;  // org/name[@revision][:selector], revision shown unless "main"
};

struct Reference {
  enum class Kind { kLocal, kRepo };
  Kind kind = Kind::kLocal;
  std::string path;  // kLocal: the path as given
  RepoRef repo;      // kRepo
};

// `text` as a repository reference when it has that syntax: "org/name" (letters, digits, '.', '_',
// '-'; no "--" or ".." in a name, each part at most 96 characters), an optional "@revision" and an
// optional ":file-or-quant"; "hf.co/" or "huggingface.co/" may lead. nullopt otherwise.
std::optional<RepoRef> parse_repo_ref(std::string_view text);

// What `text` names: a path that exists is local (so a directory "org/name" in the working
// directory wins over the hub); else a repository reference when it has that syntax; else a local
// path (that loading will report missing).
Reference parse_reference(std::string_view text);

// The repository's folder name in the Hugging Face cache: "models--org--name".
std::string repo_folder_name(std::string_view repo);

// True for a full 40-digit commit hash (lower-case hex).
bool is_commit_hash(std::string_view revision);

}  // namespace strata::hub

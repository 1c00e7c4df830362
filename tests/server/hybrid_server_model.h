// A random-weight model the server tests serve through the real Qwen3 tokenizer.
#pragma once

#include <memory>

#include "../model/tiny_configs.h"
#include "formats/safetensors.h"
#include "model/synthetic.h"
#include "test_server.h"

namespace strata::test {

// A random-weight Qwen3.5 hybrid with Qwen3's vocabulary (the tokenizer the test server uses).
inline std::unique_ptr<model::Model> hybrid_with_qwen3_vocab(model::SyntheticCheckpoint& keep) {
  Json config = tiny_hybrid_config(false);
  config["text_config"]["vocab_size"] = qwen3_tokenizer().vocab_size();
  config["text_config"]["hidden_size"] = 64;
  keep = model::make_synthetic_checkpoint(config, {.bits = 4, .group_size = 32});
  return model::load_model(keep.config, formats::WeightStore::from_tensors(keep.tensors));
}

}  // namespace strata::test

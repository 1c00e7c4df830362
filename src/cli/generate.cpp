// strata generate: load a model and its tokenizer, run one prompt, stream the text to stdout (or
// print one JSON object with --json).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/json.h"
#include "runtime/engine.h"
#include "text/tokenizer.h"

namespace strata::cli {

int run_generate(const GenerateArgs& args) {
  auto tokenizer = text::Tokenizer::load(args.model);
  auto model = model::load_model(args.model, load_options(args.settings, args.quantize));

  runtime::GenerationRequest request;
  request.prompt = tokenizer->encode(args.prompt, /*add_special_tokens=*/true);
  if (request.prompt.empty()) {
    check(tokenizer->bos_id().has_value(), ErrorKind::kInvalidInput,
          "the prompt is empty and this tokenizer has no BOS token to start from");
    request.prompt.push_back(*tokenizer->bos_id());
  }
  request.max_tokens = args.max_tokens;
  request.sampling.temperature = args.temperature;
  request.sampling.top_p = args.top_p;
  request.sampling.top_k = args.top_k;
  request.sampling.min_p = args.min_p;
  request.sampling.repetition_penalty = args.repetition_penalty;
  request.sampling.seed = args.seed;
  runtime::normalize_greedy(request.sampling);
  runtime::check_sampling(request.sampling);
  if (!args.ignore_eos) {
    request.stop_ids = tokenizer->eos_ids();
    for (int32_t id : model->config().eos_token_ids)
      if (std::find(request.stop_ids.begin(), request.stop_ids.end(), id) == request.stop_ids.end())
        request.stop_ids.push_back(id);
  }

  runtime::Engine engine(std::move(model),
                         engine_options(args.settings, context_size(args.settings)));
  text::StreamingDetokenizer stream(*tokenizer);
  runtime::TokenCallback on_token;
  if (!args.json) {
    on_token = [&](int32_t id) {
      const std::string piece = stream.push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  const runtime::GenerationResult result = engine.generate(request, on_token);
  if (args.json) {
    Json out = {{"prompt_ids", request.prompt},
                {"ids", result.tokens},
                {"text", tokenizer->decode(result.tokens)},
                {"finish_reason", runtime::finish_reason_name(result.finish_reason)}};
    if (result.speculative.method != runtime::SpeculativeParams::Method::kOff)
      out["speculative"] = {{"method", runtime::speculative_method_name(result.speculative.method)},
                            {"drafted", result.speculative.drafted},
                            {"accepted", result.speculative.accepted}};
    std::cout << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    const std::string rest = stream.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    const double tps = result.decode_seconds > 0 ? static_cast<double>(result.tokens.size()) / result.decode_seconds : 0;
    std::fprintf(stderr, "[%zu prompt tokens in %.3f s, %zu generated at %.1f tok/s, finish: %s",
                 request.prompt.size(), result.prefill_seconds, result.tokens.size(), tps,
                 runtime::finish_reason_name(result.finish_reason));
    if (result.speculative.method != runtime::SpeculativeParams::Method::kOff)
      std::fprintf(stderr, ", %s drafts: %lld of %lld accepted", runtime::speculative_method_name(result.speculative.method),
                   static_cast<long long>(result.speculative.accepted), static_cast<long long>(result.speculative.drafted));
    std::fprintf(stderr, "]\n");
  }
  return 0;
}

}  // namespace strata::cli

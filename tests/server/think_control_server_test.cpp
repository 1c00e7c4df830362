// Think control through the server: the thinking budget (and its aliases), a loop escaped with the
// task's hint, the JSON hint, the retrieval router, the reasoning/content split when streaming,
// max_tokens counting only answer tokens, the "strata" extension, usage and the /metrics counters.
// The model is a ThinkingModel with the real Qwen3 tokenizer and chat template: it thinks its
// script and answers once it has been fed </think>, whether it wrote it or strata injected it.
#include <gtest/gtest.h>

#include "server/chat_thinking.h"
#include "test_server.h"
#include "thinking_model.h"

namespace strata {
namespace {

using test::chat_body;
using test::HttpResult;
using test::qwen3_tokenizer;
using test::read_stream;
using test::Streamed;
using test::TestServer;
using test::ThinkingModel;

const runtime::EngineOptions kEngine{.context_size = 4096, .prefill_chunk = 4096};

// Thinks "<think>\n" + `thinking`, then repeats `loop` (or closes itself), then answers `answer`.
std::unique_ptr<ThinkingModel> thinker(const std::string& thinking, const std::string& loop,
                                       const std::string& answer) {
  const text::Tokenizer& tok = qwen3_tokenizer();
  ThinkingModel::Script script;
  script.thinking = tok.encode("<think>\n" + thinking);
  script.loop = loop.empty() ? std::vector<int32_t>{} : tok.encode(loop);
  script.answer = tok.encode(answer);
  script.close_id = *tok.token_id("</think>");
  script.end_id = *tok.token_id("<|im_end|>");
  return std::make_unique<ThinkingModel>(tok.vocab_size(), std::move(script));
}

const std::string kProse =
    "First I add the numbers one by one, then I check each partial sum twice, slowly and with "
    "care, before I write anything down.";

Json chat(TestServer& s, const Json& body) {
  const HttpResult r = s.post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return Json::parse(r.body);
}

// The value of an unlabelled counter in /metrics.
int64_t counter(TestServer& s, const std::string& name) {
  const std::string text = s.get("/metrics").body;
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + name.size() + 2));
}

Json thinking_report(bool routed, bool budget_closed, bool loop_escaped, int64_t reasoning_tokens) {
  return {{"routed", routed},
          {"budget_closed", budget_closed},
          {"loop_escaped", loop_escaped},
          {"answer_loop_stopped", false},
          {"reasoning_tokens", reasoning_tokens}};
}

TEST(ServerThinkControl, BudgetClosesThinkingAndTheAnswerStartsWithTheHint) {
  TestServer s(thinker(kProse, "", "The total is 42."), {}, kEngine);
  for (const Json& budget : {Json{{"max_thinking_tokens", 10}}, Json{{"thinking_budget", 10}},
                             Json{{"reasoning", {{"max_tokens", 10}}}}}) {
    const Json j = chat(s, chat_body("Add up 3, 5 and 34.", budget));
    const Json& message = j["choices"][0]["message"];
    EXPECT_EQ(message["content"], "**Final Answer:**\n\nThe total is 42.") << budget;
    const std::string reasoning = message["reasoning_content"];
    EXPECT_FALSE(reasoning.empty());
    EXPECT_EQ(kProse.rfind(reasoning, 0), 0u) << reasoning;  // the start of the thinking, cut
    EXPECT_LT(reasoning.size(), kProse.size());
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    // <think> + 9 thinking tokens, then the injected </think>.
    EXPECT_EQ(j["strata"]["thinking"], thinking_report(false, true, false, 11));
    EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], 11);
  }
  EXPECT_EQ(counter(s, "strata_think_budget_closes_total"), 3);
  EXPECT_EQ(counter(s, "strata_think_loop_escapes_total"), 0);
  EXPECT_EQ(s.health()["think_control"]["budget_closes"], 3);

  // The budget is checked like any field.
  for (const Json& bad : {Json{{"max_thinking_tokens", "ten"}}, Json{{"thinking_budget", -1}},
                          Json{{"reasoning", {{"max_tokens", 1.5}}}}, Json{{"reasoning", 5}}}) {
    const HttpResult r = s.post("/v1/chat/completions", chat_body("Hi", bad));
    EXPECT_EQ(r.status, 400) << bad;
  }
}

TEST(ServerThinkControl, LoopInThinkingIsEscapedWithTheHint) {
  TestServer s(thinker("Let me see.", " Wait, let me re-check the sum.", "It is 42."), {}, kEngine);
  const Json j = chat(s, chat_body("What is 6 times 7?"));
  const Json& message = j["choices"][0]["message"];
  EXPECT_EQ(message["content"], "**Final Answer:**\n\nIt is 42.");
  EXPECT_NE(message["reasoning_content"].get<std::string>().find("Wait, let me re-check the sum."),
            std::string::npos);
  EXPECT_TRUE(j["strata"]["thinking"]["loop_escaped"].get<bool>());
  EXPECT_FALSE(j["strata"]["thinking"]["budget_closed"].get<bool>());
  EXPECT_EQ(counter(s, "strata_think_loop_escapes_total"), 1);
}

TEST(ServerThinkControl, AJsonTaskGetsTheJsonHint) {
  const std::string json = "{\"name\": \"Ann\", \"age\": 31}\n```";
  TestServer s(thinker(kProse, "", json), {}, kEngine);
  const Json j = chat(
      s, chat_body("Extract the name and age as JSON: Ann is 31.", {{"max_thinking_tokens", 8}}));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "**Final JSON:**\n\n```json\n" + json);
}

TEST(ServerThinkControl, ConfiguredHintsReplaceTheDefaults) {
  server::ServerOptions options;
  options.think_control = control::ThinkControlConfig::from_json(Json::parse(
      R"({"escape": {"close": "</think>\n\n", "default": {"task": "answer", "hint": "Answer:\n"}}})"));
  TestServer s(thinker(kProse, "", "42."), options, kEngine);
  const Json j = chat(s, chat_body("Add up 3, 5 and 34.", {{"max_thinking_tokens", 4}}));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Answer:\n42.");
}

TEST(ServerThinkControl, RouterTurnsThinkingOnForAShortQuestionOverALongSystemPrompt) {
  TestServer s(thinker("The code word is in the notes.", "", "\n\nBlue."), {}, kEngine);
  std::string notes;
  while (notes.size() < 3500) notes += "The archive holds many records about the old harbour. ";
  const Json messages = {{{"role", "system"}, {"content", notes}},
                         {{"role", "user"}, {"content", "What is the code word?"}}};
  Json j = chat(s, {{"messages", messages}});
  EXPECT_TRUE(j["strata"]["thinking"]["routed"].get<bool>());
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Blue.");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "The code word is in the notes.");
  EXPECT_EQ(counter(s, "strata_think_router_activations_total"), 1);

  // The request set thinking itself: the router stays out.
  j = chat(s, {{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", true}}}});
  EXPECT_FALSE(j["strata"]["thinking"]["routed"].get<bool>());
  // A short system prompt: no routing.
  Json short_messages = messages;
  short_messages[0]["content"] = "You keep notes.";
  j = chat(s, {{"messages", short_messages}});
  EXPECT_FALSE(j["strata"]["thinking"]["routed"].get<bool>());
  EXPECT_EQ(counter(s, "strata_think_router_activations_total"), 1);
  // Streaming shows it on the last chunk.
  const Streamed st =
      read_stream(s.post("/v1/chat/completions", {{"messages", messages}, {"stream", true}}));
  EXPECT_TRUE(st.strata["thinking"]["routed"].get<bool>());
}

TEST(ServerThinkControl, ThinkingOffOrIgnoreEosMeansNoControllerAndNoExtension) {
  TestServer s(thinker(kProse, "", "42."), {}, kEngine);
  const Json j = chat(s, chat_body("Add up 3, 5 and 34.",
                                   {{"max_thinking_tokens", 4},
                                    {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_FALSE(j.contains("strata"));
  // The template closed an empty think block; this model thinks anyway, and nothing cuts it.
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], kProse);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "42.");
  // ignore_eos asks for exactly max_tokens tokens: no controller either.
  const Json k =
      chat(s, chat_body("Add up 3, 5 and 34.",
                        {{"max_thinking_tokens", 4}, {"ignore_eos", true}, {"max_tokens", 60}}));
  EXPECT_FALSE(k.contains("strata"));
  EXPECT_EQ(k["choices"][0]["message"]["reasoning_content"], kProse);
  EXPECT_EQ(k["usage"]["completion_tokens"], 60);
}

TEST(ServerThinkControl, StreamingGivesTheSameSplitAsNonStreaming) {
  TestServer s(thinker(kProse, "", "The total is 42."), {}, kEngine);
  const Json body = chat_body("Add up 3, 5 and 34.", {{"max_thinking_tokens", 10}});
  const Json whole = chat(s, body);
  Json streaming = body;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};
  const Streamed st = read_stream(s.post("/v1/chat/completions", streaming));
  EXPECT_EQ(st.reasoning, whole["choices"][0]["message"]["reasoning_content"].get<std::string>());
  EXPECT_EQ(st.content, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(st.content, "**Final Answer:**\n\nThe total is 42.");
  EXPECT_EQ(st.finish_reason, "stop");
  EXPECT_EQ(st.strata, whole["strata"]);
  EXPECT_EQ(st.chunks.back()["usage"], whole["usage"]);
  for (const Json& chunk : st.chunks) EXPECT_EQ(chunk.dump().find("think>"), std::string::npos);
}

// A stop string that ends the text inside the thinking: the reasoning tokens reported (usage and
// the extension) are the tokens the answer kept, never the one or two the engine computed after
// the stop string before it heard of it.
TEST(ServerThinkControl, AStopStringInTheThinkingCountsOnlyTheKeptTokens) {
  TestServer s(thinker(kProse, "", "The total is 42."), {}, kEngine);
  for (int i = 0; i < 5; ++i) {
    const Json j = chat(s, chat_body("Add up 3, 5 and 34.", {{"max_thinking_tokens", 200}, {"stop", {"partial"}}}));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    const int64_t kept = j["usage"]["completion_tokens"];
    EXPECT_GT(kept, 0);
    EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], kept) << j.dump();
    EXPECT_EQ(j["strata"]["thinking"]["reasoning_tokens"], kept) << j.dump();
  }
}

TEST(ServerThinkControl, MaxTokensCountsOnlyAnswerTokens) {
  const std::string answer = "\n\nThe answer is forty-two, as computed above.";
  TestServer s(thinker(kProse, "", answer), {}, kEngine);
  const Json j =
      chat(s, chat_body("Add up 3, 5 and 34.", {{"max_tokens", 5}, {"max_thinking_tokens", 100}}));
  const Json& message = j["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], kProse);  // far more than 5 tokens of it
  const std::vector<int32_t> answer_ids = qwen3_tokenizer().encode(answer);
  const std::string first_five =
      qwen3_tokenizer().decode(std::span<const int32_t>(answer_ids.data(), 5));
  EXPECT_EQ(message["content"], first_five.substr(first_five.find_first_not_of('\n')));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const int64_t thinking =
      static_cast<int64_t>(qwen3_tokenizer().encode("<think>\n" + kProse).size());
  EXPECT_EQ(j["strata"]["thinking"], thinking_report(false, false, false, thinking + 1));
  EXPECT_EQ(j["usage"]["completion_tokens"], thinking + 1 + 5);
}

TEST(ServerThinkControl, TaskSignalsComeFromTheMessages) {
  server::ChatCompletionRequest r;
  r.response_format.type = "text";
  r.messages = server::OrderedJson::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "old question"},
      {"role": "assistant", "content": "old answer"},
      {"role": "user", "content": [{"type": "text", "text": "Give"}, {"type": "text", "text": "JSON"}]}])");
  const control::TaskSignals task = server::task_signals(r);
  EXPECT_EQ(task.response_format, "text");
  EXPECT_EQ(task.system_prompt, "Be brief.");
  EXPECT_EQ(task.last_user_message, "Give\nJSON");
  EXPECT_FALSE(server::thinking_set_by_request(r));
  r.reasoning_effort = "low";
  EXPECT_TRUE(server::thinking_set_by_request(r));
}

}  // namespace
}  // namespace strata

// strata bench end to end on the CPU, with the tiny shapes (the real ones take minutes there): the
// header, the table's columns and positive numbers, the --output copy, the bytes-per-token model
// against a count made here by hand, and clear errors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/mmap.h"
#include "test_util.h"

namespace strata {
namespace {

using test::CliResult;
using test::strata_cli;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line.substr(1));  // after the leading '|'
  std::string cell;
  while (std::getline(in, cell, '|')) out.push_back(trim(cell));
  return out;
}

// The markdown table: header cells, then one vector of cells per row.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table parse_table(const std::string& text) {
  std::stringstream in(text);
  std::string line;
  Table t;
  while (std::getline(in, line)) {
    if (line.rfind("| model |", 0) == 0) {
      t.header = cells(line);
      std::getline(in, line);  // |---|---|...
      while (std::getline(in, line) && line.rfind("|", 0) == 0) t.rows.push_back(cells(line));
      break;
    }
  }
  return t;
}

double number(const std::string& cell) {
  size_t used = 0;
  const double v = std::stod(cell, &used);
  EXPECT_EQ(used, cell.size()) << "not a plain number: '" << cell << "'";
  return v;
}

TEST(BenchCli, PrintsTheCommandDeviceAndOneRowPerShapeAndWidth) {
  const std::string out_file = test::scratch_dir("bench_cli") + "/bench.md";
  const CliResult r = strata_cli(
      "bench --device cpu --shape tiny-hybrid,tiny-moe --shape tiny-dense --bits 4 --bits 8 "
      "--quick --output " +
          out_file,
      /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("command: `strata bench --device cpu --shape tiny-hybrid,tiny-moe"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("device: "), std::string::npos);
  EXPECT_EQ(read_file(out_file), r.out);

  const Table t = parse_table(r.out);
  const std::vector<std::string> expected_header = {"model",
                                                    "bits",
                                                    "weights GiB",
                                                    "load s",
                                                    "prefill 16 tok/s",
                                                    "prefill 64 tok/s",
                                                    "TTFT 16 ms",
                                                    "decode @16 tok/s",
                                                    "GB read/token @16",
                                                    "% peak BW @16",
                                                    "decode @64 tok/s",
                                                    "GB read/token @64",
                                                    "% peak BW @64",
                                                    "GPU mem GiB (load / peak)"};
  ASSERT_EQ(t.header, expected_header) << r.out;
  ASSERT_EQ(t.rows.size(), 6u) << r.out;
  const char* models[] = {"tiny-hybrid", "tiny-hybrid", "tiny-moe",
                          "tiny-moe",    "tiny-dense",  "tiny-dense"};
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const std::vector<std::string>& row = t.rows[i];
    SCOPED_TRACE(row[0] + " " + row[1]);
    ASSERT_EQ(row.size(), expected_header.size());
    EXPECT_EQ(row[0], models[i]);
    EXPECT_EQ(row[1], i % 2 == 0 ? "4" : "8");
    for (size_t c : {2, 3, 4, 5, 6, 7, 8, 10, 11})
      EXPECT_GT(number(row[c]), 0.0) << expected_header[c];
    // The CPU reports neither a peak bandwidth nor its memory in use.
    EXPECT_EQ(row[9], "n/a");
    EXPECT_EQ(row[12], "n/a");
    EXPECT_EQ(row[13], "n/a");
  }
  // More context, more KV cache to read.
  EXPECT_GT(number(t.rows[5][11]), number(t.rows[5][8]));
  // 8-bit weights are larger than 4-bit ones.
  EXPECT_GT(number(t.rows[5][2]), number(t.rows[4][2]));
}

TEST(BenchCli, BytesPerDecodeTokenMatchACountByHand) {
  // The KV cache: BF16 by default (the synthetic checkpoints hold BF16 scales, so "auto" picks it),
  // or F32 when asked.
  for (const auto& [kv_option, kv_bytes] :
       {std::pair{"", 2}, std::pair{" --kv-cache-type f32", 4}}) {
    SCOPED_TRACE(kv_option);
    const CliResult r = strata_cli(
        std::string("bench --device cpu --shape tiny-dense --bits 8 --quick") + kv_option,
        /*merge_stderr=*/false);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const Table t = parse_table(r.out);
    ASSERT_EQ(t.rows.size(), 1u) << r.out;
    EXPECT_NE(r.out.find(kv_bytes == 2 ? "KV cache bf16" : "KV cache f32"), std::string::npos)
        << r.out;
    // tiny-dense: llama, vocab 1024, hidden 128, FFN 256, 2 layers, 4 query / 2 KV heads of 32,
    // untied. At 8 bits an R x C matrix occupies R·C bytes of codes plus F32 scales and biases per
    // 64 columns: 1.125·R·C. Per layer q, o 128x128; k, v 64x128; gate, up 256x128; down 128x256 =
    // 147456·1.125 bytes, and two F32 norms of 128. Then the final norm, the whole lm_head and one
    // embedding row.
    const double layer = 147456 * 1.125 + 2 * 128 * 4;
    const double weights = 2 * layer + 128 * 4 + 1024 * 128 * 1.125 + 128 * 1.125;
    // K and V: 2 layers x 2 x 64 values per token attended, plus the new token's write.
    const double kv = 2 * 2 * 64 * kv_bytes;
    // --quick decodes 8 tokens; the rate covers tokens 4..8, made by steps attending over prompt +
    // 3 … prompt + 7 tokens: prompt + 5 on average.
    for (const auto& [column, prompt] : {std::pair{8, 16}, std::pair{11, 64}}) {
      const double expected_gb = (weights + kv * (prompt + 5) + kv) / 1e9;
      EXPECT_NEAR(number(t.rows[0][column]), expected_gb, expected_gb * 0.005) << t.header[column];
    }
  }
}

TEST(BenchCli, LayersOverrideIsShownInTheModelColumn) {
  const CliResult r =
      strata_cli("bench --device cpu --shape tiny-hybrid --bits 4 --layers 2 --quick --decode 4",
                 /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Table t = parse_table(r.out);
  ASSERT_EQ(t.rows.size(), 1u) << r.out;
  EXPECT_EQ(t.rows[0][0], "tiny-hybrid (2 of 4 layers)");
}

// --prefix-session: a row per shape and width whose cells are times with the prompt tokens the
// prefix cache served: none cold, the system prompt's whole chunks warm from either tier and on
// every turn after the first (a 1,100-token system prompt: two chunks of 512).
TEST(BenchCli, PrefixSessionReportsColdAndWarmFirstTokens) {
  const CliResult r = strata_cli("bench --device cpu --shape tiny-hybrid,tiny-dense --bits 4 --prefix-session 1100",
                                 /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Table t = parse_table(r.out);
  ASSERT_EQ(t.header.size(), 12u) << r.out;
  EXPECT_EQ(t.header[3], "cold");
  EXPECT_EQ(t.header[6], "disk, after a restart");
  ASSERT_EQ(t.rows.size(), 2u) << r.out;
  for (const std::vector<std::string>& row : t.rows) {
    ASSERT_EQ(row.size(), 12u) << r.out;
    auto cached = [](const std::string& cell) {
      const size_t open = cell.find('('), close = cell.find(')');
      return std::stoll(cell.substr(open + 1, close - open - 1));
    };
    EXPECT_EQ(row[2], "1100");
    EXPECT_EQ(cached(row[3]), 0) << row[3];
    // The user's message begins after the system prompt: the warm runs resume there.
    for (size_t column : {4, 5, 6}) EXPECT_EQ(cached(row[column]), 1100) << row[column];
    EXPECT_EQ(row[5].find("not from host"), std::string::npos) << row[5];
    EXPECT_EQ(row[6].find("not from disk"), std::string::npos) << row[6];
    // Turn 1 runs cold; each later turn resumes where its new message begins (the last answer's
    // end, prefilled ahead), further each time.
    EXPECT_EQ(cached(row[7]), 0) << row[7];
    for (size_t turn = 8; turn < 12; ++turn) EXPECT_GT(cached(row[turn]), turn == 8 ? 1100 : cached(row[turn - 1])) << row[turn];
    EXPECT_GT(number(row[3].substr(0, row[3].find(' '))), 0.0);
  }
}

// --speculative: the forced-acceptance sweep (a plain row, then per drafter cost and acceptance)
// and the real drafters' table, each under the command and device, every run's tokens those of
// plain greedy decoding; drafts never right are never accepted, drafts always right nearly always.
TEST(BenchCli, SpeculativeSweepAndRealDraftersMatchPlainTokens) {
  const CliResult r = strata_cli(
      "bench --device cpu --speculative --shape tiny-hybrid --bits 4 --prompt 16 --decode 12 "
      "--acceptance 0,100 --draft-lengths 2 --draft-shape tiny-dense",
      /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const size_t real_at = r.out.find("## Real drafters");
  ASSERT_NE(real_at, std::string::npos) << r.out;
  for (const std::string& part : {r.out.substr(0, real_at), r.out.substr(real_at)}) {
    EXPECT_NE(part.find("command: `strata bench --device cpu --speculative"), std::string::npos) << part;
    EXPECT_NE(part.find("device: "), std::string::npos) << part;
    EXPECT_NE(part.find("settings: greedy, 12 tokens per request"), std::string::npos) << part;
  }

  const Table sweep = parse_table(r.out);
  ASSERT_EQ(sweep.header.size(), 13u) << r.out;
  EXPECT_EQ(sweep.header[2], "drafter cost");
  EXPECT_EQ(sweep.header[11], "predicted speedup");
  EXPECT_EQ(sweep.header[12], "tokens match");
  // plain, then free drafts and tiny-dense's cost, each at 0% and 100%, then free drafts adapting
  // (how many they draft depends on this machine's step times: only their tokens are checked).
  ASSERT_EQ(sweep.rows.size(), 7u) << r.out;
  EXPECT_EQ(sweep.rows[0][2], "plain");
  EXPECT_GT(number(sweep.rows[0][5]), 0.0);
  for (size_t i = 5; i < 7; ++i) {
    EXPECT_EQ(sweep.rows[i][3], "≤ 2 adaptive");
    EXPECT_EQ(sweep.rows[i][12], "yes");
  }
  for (size_t i = 1; i < 5; ++i) {
    const std::vector<std::string>& row = sweep.rows[i];
    SCOPED_TRACE(row[2] + " " + row[4]);
    ASSERT_EQ(row.size(), 13u) << r.out;
    EXPECT_EQ(row[2], i <= 2 ? "none (free drafts)" : "tiny-dense (random weights)");
    EXPECT_EQ(row[3], "2");
    EXPECT_EQ(row[12], "yes");
    for (size_t c : {5, 6, 9, 11}) EXPECT_GT(number(row[c]), 0.0) << sweep.header[c];
    EXPECT_EQ(number(row[10]) > 0.0, i > 2) << "draft ms/step: only a draft model costs time";
    const double accepted = std::stod(row[7]);
    if (row[4] == "0") {
      EXPECT_EQ(row[7], "0.00 (0.00)");
    } else {
      EXPECT_EQ(row[4], "100");
      // Two a step, less where the budget cuts the last one short.
      EXPECT_GT(accepted, 1.5);
      EXPECT_LE(accepted, 2.0);
    }
  }

  const Table real = parse_table(r.out.substr(real_at));
  ASSERT_EQ(real.header.size(), 13u) << r.out;
  EXPECT_EQ(real.header[2], "drafter");
  ASSERT_EQ(real.rows.size(), 2u) << r.out;  // length 2, then adapting
  for (const std::vector<std::string>& row : real.rows) {
    EXPECT_EQ(row[2], "n-gram");
    EXPECT_EQ(row[4], "16");
    EXPECT_EQ(row[6], "12");
    EXPECT_EQ(row[12], "yes");
  }
  EXPECT_EQ(real.rows[1][5], "≤ 2 adaptive");
}

TEST(BenchCli, RejectsUnknownShapesAndWidths) {
  const CliResult shape = strata_cli("bench --device cpu --shape qwen9 --quick");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_NE(shape.out.find("unknown shape 'qwen9'"), std::string::npos) << shape.out;
  EXPECT_NE(shape.out.find("qwen3.5-35b-a3b"), std::string::npos) << shape.out;
  EXPECT_EQ(shape.out.find("| model |"), std::string::npos)
      << "no table before the arguments are checked";
  const CliResult bits = strata_cli("bench --device cpu --shape tiny-dense --bits 3 --quick");
  EXPECT_EQ(bits.exit_code, 2) << bits.out;
  const CliResult decode = strata_cli("bench --device cpu --shape tiny-dense --decode 1");
  EXPECT_EQ(decode.exit_code, 2) << decode.out;
  const CliResult draft = strata_cli("bench --device cpu --speculative --shape tiny-dense --draft-shape qwen9");
  EXPECT_EQ(draft.exit_code, 1);
  EXPECT_NE(draft.out.find("unknown shape 'qwen9'"), std::string::npos) << draft.out;
  EXPECT_EQ(draft.out.find("| model |"), std::string::npos) << "no table before the arguments are checked";
  const CliResult acceptance = strata_cli("bench --device cpu --speculative --shape tiny-dense --acceptance 101");
  EXPECT_EQ(acceptance.exit_code, 2) << acceptance.out;
}

}  // namespace
}  // namespace strata

// libFuzzer target: any bytes as a GBNF grammar (the `grammar` request field), compiled into a byte
// grammar; one that compiles is started as an automaton (where left recursion or a repeat's empty
// matches the compiler let through would blow up) and walked over a few short texts. A
// malformed, oversized or left-recursive grammar must end in strata::Error, quickly; a crash, a
// hang, a sanitizer report or any other exception is a bug. An ambiguous grammar (counted repeats
// nested deep, alternatives that read the same text in ever more ways) must end in strata::Error
// too, once a walk or the start state is over the automaton's work budget.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "text/structured/automaton.h"
#include "text/structured/gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace st = strata::text::structured;
  try {
    const st::Grammar g = st::compile_gbnf(text);
    st::Automaton a(g);
    // The grammar's own first bytes, and texts that JSON-like and word grammars take.
    for (std::string_view probe : {text.substr(0, 8), std::string_view("{\"a\": 1}"),
                                   std::string_view("yes"), std::string_view("")}) {
      a.restart_budget();  // each walk an operation of its own, as each token is in a request
      const uint32_t s = a.walk(a.start(), probe);
      if (a.accepts(s)) a.finished(s);
    }
  } catch (const strata::Error&) {
  }
  return 0;
}

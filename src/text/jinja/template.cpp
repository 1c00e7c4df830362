// Template: the public face of the Jinja engine (see template.h). Parsing happens once in the
// constructor; each render builds a fresh scope chain (globals, then the context's variables)
// and runs a new Interpreter over the shared, immutable syntax tree.
#include "text/jinja/template.h"

#include "text/jinja/interpreter.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"

namespace strata::text::jinja {

struct Template::Impl {
  Options options;
  Body body;
};

Template::Template(std::string_view source, Options options) {
  auto impl = std::make_unique<Impl>();
  LexerOptions lexer_options{options.trim_blocks, options.lstrip_blocks};
  impl->body = parse(tokenize(source, lexer_options));
  impl->options = std::move(options);
  impl_ = std::move(impl);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

namespace {

template <typename J>
std::string render_json(const Body& body, const Options& options, const J& context) {
  if (!context.is_object() && !context.is_null()) {
    fail(ErrorKind::kInvalidInput, "template context must be a JSON object, not {}",
         context.type_name());
  }
  auto globals = std::make_shared<Scope>();
  add_globals(*globals);
  auto variables = std::make_shared<Scope>(globals);
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it)
      variables->set(it.key(), Value::from_json(it.value()));
  }
  Interpreter interp(options);
  return interp.render(body, variables);
}

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context) const {
  return render_json(impl_->body, impl_->options, context);
}

std::string Template::render(const Json& context) const {
  return render_json(impl_->body, impl_->options, context);
}

}  // namespace strata::text::jinja

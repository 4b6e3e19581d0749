// The Jinja engine (core/template) against Jinja2 as Hugging Face's apply_chat_template configures it:
// every reference conversation of every reference template renders byte for byte, and each feature
// behaves as Jinja2 documents it (expected strings were checked against Jinja2 3.1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/template/chat_template.hpp"
#include "core/template/globals.hpp"
#include "core/template/template.hpp"
#include "core/util/error.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

using jinja::Template;
using testing::HasSubstr;
using jinja::Value;

jinja::RenderOptions pinned_clock() { return {jinja::parse_time_pin("2026-11-30 12:00")}; }

std::string render(const std::string& source, const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, value] : variables.items()) values.emplace_back(name, Value::from_json(value));
  return Template(source).render(values, pinned_clock());
}

// The message of the strata::Error that rendering (or compiling) throws; empty when it succeeds.
std::string render_error(const std::string& source) {
  try {
    render(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::filesystem::path> reference_template_files() {
  std::vector<std::filesystem::path> files;
  const auto folder = test::reference_dir() / "templates";
  if (!std::filesystem::is_directory(folder)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().string().ends_with(".cases.json")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(TemplateReference, EveryCaseRendersExactlyAsJinja2) {
  const auto files = reference_template_files();
  ASSERT_FALSE(files.empty()) << "no reference templates under " << test::reference_dir() / "templates";
  for (const auto& file : files) {
    const auto reference = nlohmann::ordered_json::parse(std::ifstream(file));
    const Template chat_template(reference.at("template").get<std::string>());
    size_t passed = 0;
    const auto& cases = reference.at("cases");
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto request = jinja::chat_request_from_json(cases[i]);
      const std::string rendered = jinja::render_chat(chat_template, request, pinned_clock());
      EXPECT_EQ(rendered, cases[i].at("expected").get<std::string>()) << file.filename() << " case " << i;
      passed += rendered == cases[i].at("expected").get<std::string>();
    }
    std::cout << "[ reference ] " << file.filename().string() << ": " << passed << "/" << cases.size() << " cases\n";
  }
}

TEST(TemplateCommand, PrintsTheRenderingWithoutAddingANewline) {
  const auto files = reference_template_files();
  ASSERT_FALSE(files.empty()) << "no reference templates under " << test::reference_dir() / "templates";
  const auto folder = std::filesystem::temp_directory_path() / "strata-template-command";
  std::filesystem::create_directories(folder);
  const auto reference = nlohmann::ordered_json::parse(std::ifstream(files.front()));
  std::ofstream(folder / "chat.jinja") << reference["template"].get<std::string>();
  auto conversation = reference["cases"][0];
  const std::string expected = conversation["expected"];
  conversation.erase("expected");
  std::ofstream(folder / "case.json") << conversation.dump();
  const auto result = test::run_command(test::shell_quote(test::strata_executable().string()) + " template --template " +
                                        test::shell_quote((folder / "chat.jinja").string()) + " --input " +
                                        test::shell_quote((folder / "case.json").string()) + " --now '2026-11-30 12:00'");
  std::filesystem::remove_all(folder);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, expected);
}

TEST(TemplateWhitespace, TrimBlocksAndLstripBlocksApplyToBlockAndCommentTagsOnly) {
  EXPECT_EQ(render("  {% if true %}\n    line\n  {% endif %}\n  {{ 'var' }}\n  {# comment #}\nafter\n"), "    line\n  var\nafter");
}

TEST(TemplateWhitespace, MinusStripsAndPlusKeeps) {
  EXPECT_EQ(render("a   {%- if true -%}   b   {%- endif -%}   c"), "abc");
  EXPECT_EQ(render("a  {%+ if true %}b{% endif +%}\nx\n{{- '-' -}}\n  z"), "a  b\nx-z");
  EXPECT_EQ(render("  {#- c -#}  x"), "x");
}

TEST(TemplateWhitespace, RawBlocksAreNotInterpreted) {
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}\n  {%- raw -%}  x  {%- endraw %}\n"), "{{ not rendered }}x");
}

TEST(TemplateLoops, LoopVariables) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a','b') }}|{% endfor %}"),
            "1032TrueFalse32a|2121FalseFalse313b|3210FalseTrue32a|");
}

TEST(TemplateLoops, ElseFilterBreakContinueAndDicts) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}/{{ loop.length }},{% endfor %}"), "1/5,3/5,5/5,7/5,9/5,");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{{ d.values()|list }}",
                   {{"d", {{"b", 2}, {"a", 1}}}}),
            "b=2;a=1;ba[2, 1]");
}

TEST(TemplateScopes, LoopAssignmentsStayInsideButNamespacesCarryOut) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(2) %}{% set x = x + 10 %}{{ x }}{% endfor %}{{ x }}"
                   "{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}"),
            "111114");
  EXPECT_EQ(render("{% set x = 0 %}{% if true %}{% set x = 5 %}{% endif %}{{ x }}"), "5");
  EXPECT_NE(render_error("{% set x = 1 %}{% set x.a = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(TemplateAssignments, BlockSetTupleUnpackingAndWith) {
  EXPECT_EQ(render("{% set x %}  block {{ 1 + 1 }}  {% endset %}[{{ x }}]{% set y | trim %}  tr  {% endset %}[{{ y }}]"), "[  block 2  ][tr]");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = (3, 4) %}{{ c + d }}"), "127");
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
}

TEST(TemplateMacros, DefaultsKeywordsCallerAndFilterBlocks) {
  EXPECT_EQ(render("{% macro m(a, b=2, c='x') %}[{{ a }} {{ b }} {{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='y') }}"),
            "[1 2 x][1 3 x][1 2 y]");
  EXPECT_EQ(render("{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"), "<b>inner</b>");
  EXPECT_EQ(render("{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}"
                   "{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(render("{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3) }}"), "1(2, 3){}");
  EXPECT_EQ(render("{% filter upper %}hello {{ 'you' }}{% endfilter %}"), "HELLO YOU");
  // Macros see their defining scope while it lasts, and calls within it work at any depth...
  EXPECT_EQ(render("{% set p = '>' %}{% macro m(x) %}{{ p }}{{ x }}{% endmacro %}{% for i in [1, 2] %}{{ m(i) }}{% endfor %}"),
            ">1>2");
  // ...but a macro does not keep a finished scope alive (that reference cycle leaked every render).
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}x{% endmacro %}"
                           "{% set ns.f = m %}{% endfor %}{{ ns.f() }}"),
              HasSubstr("after the scope defining it ended"));
}

TEST(TemplateExpressions, SlicingArithmeticAndPythonPrinting) {
  EXPECT_EQ(render("{{ [1,2,3,4,5][::2] }} {{ 'hello'[::-1] }} {{ 'hello'[1:4] }} {{ [1,2,3][-2:] }} {{ [1,2,3][5:] }}"),
            "[1, 3, 5] olleh ell [2, 3] []");
  EXPECT_EQ(render("{{ 1/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 1e20 }} {{ 0.1+0.2 }} {{ 10/5 }} "
                   "{{ [1,'a',none,true,1.5] }} {{ {'a':(1,)} }}"),
            "0.5 3 -4 2 1024 1e+20 0.30000000000000004 2.0 [1, 'a', None, True, 1.5] {'a': (1,)}");
  EXPECT_EQ(render("{{ 2 ** 3 ** 2 }} {{ -3|abs }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 < 2 < 3 }} {{ 1 == 1.0 }}"),
            "64 3 a1NoneTrue abab [1, 2] True True");
  EXPECT_EQ(render("{{ 'a' if n > 5 else 'b' }}{{ 'x' if false }}|{{ true and 'x' }} {{ false or 'y' }} {{ 'z' not in ['a'] }}", {{"n", 7}}),
            "a|x y True");
  EXPECT_EQ(render("{{ '%s=%d' % ('a', 1) }} {{ '%.2f' % 1.5 }}"), "a=1 1.50");
  EXPECT_EQ(render("{{ \"tab\\there\" }} {{ 'uni\\u00e9\\x41' }} {{ \"a\" \"b\" }} {{ 'q\\'s' }}"), "tab\there uniéA ab q's");
}

TEST(TemplateExpressions, UndefinedIsEmptyAndFalsyUntilUsedWhereJinja2Fails) {
  const nlohmann::ordered_json vars = {{"d", {{"a", 1}}}};
  EXPECT_EQ(render("[{{ missing }}][{{ d.z }}][{{ d.z is defined }}][{{ missing|length }}][{% for x in missing %}x{% endfor %}]", vars),
            "[][][False][0][]");
  EXPECT_EQ(render("{{ none.x is defined }}"), "False");
  EXPECT_NE(render_error("{{ missing.x }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ missing + 1 }}").find("is undefined"), std::string::npos);
}

TEST(TemplateMethods, StringAndDictMethods) {
  EXPECT_EQ(render("{{ s.upper() }} {{ s.split() }} {{ s.split('o', 1) }} {{ s.rsplit('o', 1) }} {{ 'xxhixx'.strip('x') }} "
                   "{{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }} {{ s.replace('l', 'L') }} {{ s.find('W') }} {{ s.count('l') }} "
                   "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ '{} and {}'.format(1, 'b') }} {{ '-'.join(['a', 'b']) }}",
                   {{"s", "Hello World"}}),
            "HELLO WORLD ['Hello', 'World'] ['Hell', ' World'] ['Hello W', 'rld'] hi True True HeLLo WorLd 6 3 Hello World Hello 1 and b a-b");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d['a'] }}", {{"d", {{"a", 1}}}}),
            "1 None 5 ['a'] 1");
}

TEST(TemplateFilters, BuiltinFilters) {
  EXPECT_EQ(render("{{ ['b','A','c']|sort }} {{ [1,2,1,3]|unique|list }} {{ 'hello world'|title }} {{ \"a\\nb\\n\\nc\"|indent(2) }} "
                   "{{ 2.5|round }} {{ '4.7'|int }} {{ '<a>'|escape }} {{ {'b':1,'a':2}|dictsort }} {{ [1,2,3,4,5]|batch(2)|list }}"),
            "['A', 'b', 'c'] [1, 2, 3] Hello World a\n  b\n\n  c 2.0 4 &lt;a&gt; [('a', 2), ('b', 1)] [[1, 2], [3, 4], [5]]");
  EXPECT_EQ(render("{{ '  x '|trim }}|{{ [3,1,2]|first }}{{ [3,1,2]|last }}|{{ [3,1,2]|join(',') }}|{{ none|default('d') }}|"
                   "{{ missing|d('d') }}|{{ ''|default('d', true) }}|{{ 'abc'|length }}|{{ [1,2,3]|reverse|list }}|{{ 'hi you'|wordcount }}"),
            "x|32|3,1,2|None|d|d|3|[3, 2, 1]|2");
  const nlohmann::ordered_json messages = {{"m", {{{"role", "system"}}, {{"role", "user"}}, {{"role", "user"}}}}};
  EXPECT_EQ(render("{{ m|map(attribute='role')|join(',') }} {{ ['a','b']|map('upper')|list }} "
                   "{{ m|selectattr('role', 'equalto', 'user')|list|length }} {{ m|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} "
                   "{{ [1,2,3,4]|select('even')|list }} {{ [0,1,2]|select|list }} {{ [1,2,3]|reject('odd')|list }}",
                   messages),
            "system,user,user ['A', 'B'] 2 ['system'] [2, 4] [1, 2] [2]");
}

TEST(TemplateFilters, TojsonIsHuggingFacesJsonDumps) {
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1.0, none, 'é\"\\n']}|tojson }}"), "{\"b\": 1, \"a\": [1.0, null, \"é\\\"\\n\"]}");
  EXPECT_EQ(render("{{ {'a': [1, {}]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    {}\n  ]\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ 'é'|tojson(ensure_ascii=true) }}"), "{\"a\": 2, \"b\": 1} \"\\u00e9\"");
  EXPECT_NE(render_error("{{ missing|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(TemplateTests, IsTests) {
  EXPECT_EQ(render("{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ none is none }}{{ 's' is string }}{{ true is number }}"
                   "{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [1] is iterable }}{{ 's' is sequence }}{{ true is boolean }}"
                   "{{ false is false }}{{ missing is undefined }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 1 is ge 1 }}"
                   "{{ 1 is le 0 }}{{ 'a' is in 'abc' }}{{ 'ABC' is upper }}{{ 'upper' is filter }}{{ x is not defined }}"),
            "TrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrue");
}

TEST(TemplateGlobals, StrftimeNowRangeDictJoinerAndRaiseException) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y %H:%M %A') }}"), "30 Nov 2026 12:00 Monday");
  EXPECT_EQ(render("{{ range(2, 10, 3)|list }} {{ dict(a=1) }} {% set j = joiner('+') %}{% for x in range(3) %}{{ j() }}{{ x }}{% endfor %}"),
            "[2, 5, 8] {'a': 1} 0+1+2");
  EXPECT_EQ(render_error("\n\n{{ raise_exception('boom') }}"), "template line 3: boom");
}

TEST(TemplateErrors, NameTheLine) {
  EXPECT_EQ(render_error("line one\n{{ x | foo }}").rfind("template line 2: unknown filter 'foo'", 0), 0u);
  EXPECT_EQ(render_error("{% if true %}\n{% foo %}").rfind("template line 2: unknown tag 'foo'", 0), 0u);
  EXPECT_EQ(render_error("{% for x in y %}\nno end").rfind("template line 2: unexpected end of template", 0), 0u);
  EXPECT_EQ(render_error("{{ 'abc }}").rfind("template line 1: unterminated string", 0), 0u);
  EXPECT_EQ(render_error("\n{{ 'a' + 1 }}"), "template line 2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{% for x in 5 %}{% endfor %}"), "template line 1: 'int' object is not iterable");
  EXPECT_EQ(render_error("{% macro m() %}\n{{ raise_exception('inside') }}{% endmacro %}\n\n{{ m() }}"), "template line 2: inside");
  // An argument of the wrong type is an error of the render, not of the process (found by fuzzing).
  EXPECT_EQ(render_error("\n{{ 'a' | center(2.5) }}"), "template line 2: expected an integer, got 'float'");
  EXPECT_EQ(render_error("{{ 0b }}"), "template line 1: invalid integer literal (column 4)");
  EXPECT_EQ(render_error("{{ 99999999999999999999 }}"), "template line 1: integer literal out of the 64-bit range (column 4)");
  EXPECT_EQ(render("{{ 1e999 }}"), "inf");
  // Integers are 64-bit: overflow is an error, not undefined behaviour; powers by squaring stay quick.
  EXPECT_EQ(render_error("{{ 9223372036854775807 + 1 }}"), "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render_error("{{ -(-9223372036854775807 - 1) }}"), "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render_error("{{ 3 ** 41 }}"), "template line 1: integer overflow (integers are 64-bit here)");
  EXPECT_EQ(render("{{ 1 ** 1000000000000000000 }} {{ (-1) ** 999999999999 }} {{ 3 ** 39 }} {{ -7 % -1 }}"),
            "1 -1 4052555153018976267 0");
  EXPECT_EQ(render_error("{{ (1e300 * 1e300) | int }}"), "template line 1: cannot convert float infinity to integer");
  EXPECT_EQ(render_error("{{ 1e19 | int }}"), "template line 1: integer overflow (integers are 64-bit here)");
  // Results have a size limit, so a template cannot make the process allocate without bound.
  EXPECT_THAT(render_error("{{ 'ab' * 100000000 }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{{ range(9223372036854775807) | length }}"), HasSubstr("past the limit"));
  EXPECT_THAT(render_error("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
              HasSubstr("past the limit"));
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5) | list }}"),
            "[9223372036854775800, 9223372036854775805]");
  // Nesting is bounded, in the parser and in the evaluator (macro recursion included): no stack overflow.
  EXPECT_THAT(render_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
              HasSubstr("nested deeper than 200 levels"));
  EXPECT_THAT(render_error("{{ 1" + [] { std::string s; for (int i = 0; i < 300; ++i) s += " + 1"; return s; }() + " }}"),
              HasSubstr("nested deeper than 200 levels"));
  EXPECT_THAT(render_error("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"), HasSubstr("nested deeper than 200 levels"));
  EXPECT_EQ(render("{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) | length }}"), "32");
  // And so is the work of one render (10 million expressions by default).
  jinja::RenderOptions small_budget = pinned_clock();
  small_budget.max_evaluations = 1000;
  const Template loops("{% for i in range(50) %}{% for j in range(50) %}{% set x = j %}{% endfor %}{% endfor %}");
  EXPECT_THAT([&] { try { loops.render({}, small_budget); } catch (const Error& e) { return std::string(e.what()); } return std::string(); }(),
              HasSubstr("evaluated more than 1000 expressions"));
  EXPECT_EQ(loops.render({}, pinned_clock()), "");
  // A truncated UTF-8 sequence is one character for len() and for indexing alike.
  EXPECT_EQ(render("{{ s | length }}[{{ s[1] }}]", {{"s", std::string("\xe0" "ab")}}), "1[]");
}

}  // namespace
}  // namespace strata
